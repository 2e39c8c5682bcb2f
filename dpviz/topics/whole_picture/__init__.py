"""The whole picture: the library code of the notebook ``whole_picture``.

* ``claims``: The whole picture: every claim of the walkthrough (Steps 1 to 6), asserted on recorded runs (numpy
  only).
* ``deck``: Self-check cards for the whole picture: the walkthrough's quick self-check, and batch norm.
* ``figures``: The derivation's figures, Steps 1 to 5 and the one-picture summary, drawn from the records of its
  plan.
* ``plots_batchnorm``: Batch norm under data parallelism: the statistics each replica normalised with, and what that
  did to the gradient.
* ``plots_summary``: The one-picture summary of data-parallel training, drawn from one step of a real run.
* ``rank_batchnorm``: The rank side of :mod:`dpviz.topics.whole_picture.run_batchnorm`: each rank's gradient with
  its own batch statistics and with all-reduced ones, in torch.
* ``records``: The record of a data-parallel run through a batch-normalisation layer: per-shard statistics against
  shared ones.
* ``run_batchnorm``: Batch normalisation under data parallelism: per-shard statistics against all-reduced ones, on
  real ranks.
* ``run_figures``: Record, on this machine, the runs behind the derivation's figures (the torch side of ``./run``
  for them).
* ``widget``: The chapter's slider: the one-picture summary, walked step by step through a recorded run.
"""
