"""Waiting: stragglers, overlap, asynchronous SGD: the library code of the notebook ``waiting``.

* ``buckets``: Gradients grouped into buckets the way DDP does: last parameter first, a bucket closed once it is
  full.
* ``claims``: Waiting (stragglers, overlap, asynchronous SGD): what the chapter prints and its figures' titles say,
  from their records.
* ``deck``: Self-check cards for waiting: a straggler, the all-reduce overlapped with backward, and asynchronous SGD.
* ``figures``: Waiting's figures: a straggler's timeline, overlap against backward, stale arrows, sync against
  async.
* ``plan``: What the waiting chapter records: its figure plan and the settings its shipped runs share (numpy only).
* ``plots_async_sgd``: Asynchronous SGD in pictures: stale arrows on the line model's loss, loss curves, and the
  staleness itself.
* ``plots_overlap``: Overlap timelines: when each bucket's all-reduce ran against the backward pass, one row per way
  of syncing.
* ``plots_straggler``: The straggler's timeline: one row per rank, lavender compute, the injected delay, grey
  waiting, coral all-reduce.
* ``rank_async_sgd``: The rank side of :mod:`dpviz.topics.waiting.run_async_sgd`: the parameter server (rank 0) and
  its workers, in torch.
* ``rank_overlap``: The rank side of :mod:`dpviz.topics.waiting.run_overlap`: all-reduces started from backward
  hooks, mode by mode, in torch.
* ``rank_straggler``: The rank side of :mod:`dpviz.topics.waiting.run_straggler`: k ranks in lockstep, one of them
  sleeping d before the all-reduce.
* ``records_async_sgd``: The record of a parameter-server run: every update the server applied, with its staleness
  τ.
* ``records_overlap``: The record of an overlap run: the same training steps synced five ways, with every bucket's
  all-reduce timed.
* ``records_straggler``: The record of a straggler sweep: one process group, a delay injected into one rank's
  compute, setting by setting.
* ``run_async_sgd``: Asynchronous SGD through a real parameter server, and synchronous SGD through the same server
  to compare.
* ``run_figures``: The chapter's runs: the records behind its figures, and the longer runs shipped for its sliders.
* ``run_overlap``: Start the all-reduce before the backward pass ends: per parameter, in one buffer, in buckets, and
  as DDP does.
* ``run_straggler``: A straggler on purpose: one rank sleeps a delay d inside its compute, and everyone else waits
  for it.
* ``theory``: Waiting in data-parallel training, as formulas: the straggler, overlapping the sync with backward, and
  the staleness of asynchronous SGD. The chapter sets each beside a real run.
* ``widget``: The chapter's sliders: the straggler's delay d, which rank is slow, and k, over straggler sweeps
  recorded for real.
"""
