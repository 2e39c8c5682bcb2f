"""A cheaper sync: compression, local SGD, two levels: the library code of the notebook ``cheaper_sync``.

* ``claims``: A cheaper sync: what the chapter prints about compression, local SGD and a two-level all-reduce (numpy
  only).
* ``deck``: Self-check cards for a cheaper sync: fewer bytes (fp16, PowerSGD), fewer syncs (local SGD), two levels of
  links.
* ``figures``: A cheaper sync's figures: compression's bytes, error and loss; local SGD's loss and drift; two
  levels' bytes per link; each method's modeled speedup beside the ring's, over this machine's measured times; each
  method's speedup measured here, against a one-rank run of the same workload.
* ``plots``: A cheaper sync, drawn: bytes and gradient error per comm hook, loss per hook and per H, drift between
  averages, bytes per link in two levels, and the modeled speedup of each method beside the ring's.
* ``rank_compression``: The rank side of :mod:`dpviz.topics.cheaper_sync.run_compression`: DDP with a compressing
  comm hook, mode by mode, in torch.
* ``rank_hierarchical``: The rank side of :mod:`dpviz.topics.cheaper_sync.run_hierarchical`: a two-level all-reduce
  over subgroups, in torch.
* ``rank_local_sgd``: The rank side of :mod:`dpviz.topics.cheaper_sync.run_local_sgd`: plain data parallelism, local
  SGD by hand, and torch's ``PeriodicModelAverager``, each from θ0 on the same batches, in torch.
* ``records_compression``: The record of a compression run: the same training under DDP's plain all-reduce, fp16 and
  PowerSGD hooks.
* ``records_hierarchical``: The record of a two-level all-reduce: the same inputs summed by dist.all_reduce, in two
  levels, and by a flat ring.
* ``records_local_sgd``: The record of a local-SGD run: plain data parallelism beside local SGD at several H, and
  torch's averager.
* ``run_compression``: Send fewer bytes: DDP communication hooks that compress the gradient, on real ranks, bytes
  counted.
* ``run_hierarchical``: Sync in two levels: a hierarchical all-reduce over subgroups, on real ranks, bytes per link
  counted.
* ``run_local_sgd``: Sync less often: local SGD, H local steps and then one average of the parameters, on real
  ranks.
* ``theory``: Three ways to shrink T_comm in S = T_compute / (T_compute/k + T_comm), priced with the α-β model
  (numpy only).
* ``widget``: The chapter's sliders: each cheaper sync's knob (PowerSGD's r, local SGD's H, the group size g) and the
  link.
"""
