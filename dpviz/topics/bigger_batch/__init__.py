"""A bigger batch wants a bigger step: the library code of the notebook ``bigger_batch_bigger_step``.

* ``claims``: A bigger batch wants a bigger step: the chapter's claims, asserted on the learning-rate grids (numpy
  only).
* ``deck``: Self-check cards for "a bigger batch wants a bigger step": the linear and square-root rules, warm-up, and
  divergence.
* ``figures``: A bigger batch wants a bigger step: loss curves by learning-rate rule, the linear rule's one step,
  warm-up.
* ``plots``: A bigger batch wants a bigger step, drawn from recorded grids of runs
  (:class:`~dpviz.topics.bigger_batch.records.LrGrid`).
* ``rank_lr_sweep``: The rank side of :mod:`dpviz.topics.bigger_batch.run_lr_sweep`: k ranks train every
  (multiplier, warm-up) run of a grid, in torch.
* ``records``: The record of a grid of real data-parallel training runs over k, learning-rate multiplier and warm-
  up.
* ``run_lr_sweep``: Real data-parallel training over k, learning-rate rule and warm-up: the runs behind the chapter.
* ``theory``: Learning-rate rules for a batch k times larger, linear warm-up, and the line model's curvature limit.
* ``widget``: The chapter's sliders: k, the learning-rate rule (×1, ×√k, ×k or a free multiplier) and the warm-up.
"""
