"""Gradient accumulation: the library code of the notebook ``gradient_accumulation``.

* ``claims``: Gradient accumulation: what the chapter's figures rest on, asserted on their records (numpy only).
* ``deck``: Self-check cards for gradient accumulation: m micro-batches in a row give the big-batch gradient, and cost
  time.
* ``figures``: Gradient accumulation's figures: the same update three ways, sync every micro-batch or once, memory
  against m.
* ``plots``: The chapter's pictures: time bars of one update, all-reduce time against m, memory against micro-batch
  size.
* ``rank_accumulation``: The rank side of :mod:`dpviz.topics.accumulation.run_accumulation`: every configuration's
  micro-batches, syncs and steps, in torch.
* ``records``: The record of a gradient-accumulation run, and the claims of the notes checked on it.
* ``run_accumulation``: Gradient accumulation on real ranks: m micro-batches per update, summed, with one all-reduce
  or m of them.
* ``theory``: The chapter's time bars: one update, segment by segment, measured from a record or modeled.
* ``widget``: The chapter's sliders: move k (ranks) and m (micro-batches per rank) over accumulation runs recorded
  for real.
"""
