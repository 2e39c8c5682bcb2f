"""A mini-batch: the library code of the notebook ``mini_batch``.

* ``claims``: A mini-batch: the chapter's claims on its two one-rank runs, a random grab and a biased one (numpy
  only).
* ``deck``: Self-check cards for a mini-batch: why its gradient is a mean, drawn at random, and a vector.
* ``figures``: Step 2's figure: per-example gradients and their mean, a random grab beside a biased one.
* ``plots``: Step 2: a mini-batch gradient is the mean of per-example gradients.
* ``widget``: Step 2 with a slider for the batch size b (and a random/biased toggle).
"""
