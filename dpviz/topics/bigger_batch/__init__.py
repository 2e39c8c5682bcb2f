"""A bigger batch wants a bigger step: the library code of the notebook ``bigger_batch_bigger_step``.

* ``claims``: A bigger batch wants a bigger step: the chapter's claims, asserted on the learning-rate grids (numpy
  only).
* ``deck``: Chapter 09, a bigger batch wants a bigger step: the linear and square-root rules, warm-up, and
  divergence.
* ``figures``: A bigger batch wants a bigger step: loss curves by learning-rate rule, the linear rule's one step,
  warm-up.
* ``plots``: Chapter 09: a bigger batch wants a bigger step, drawn from recorded grids of runs
  (:class:`~dpviz.topics.bigger_batch.records.LrGrid`).
* ``rank_lr_sweep``: The rank side of :mod:`dpviz.topics.bigger_batch.run_lr_sweep`: k ranks train every
  (multiplier, warm-up) run of a grid, in torch.
* ``records``: The record of a grid of real data-parallel training runs over k, learning-rate multiplier and warm-
  up.
* ``run_lr_sweep``: Real data-parallel training over k, learning-rate rule and warm-up: the runs behind chapter 09.
* ``theory``: Learning-rate rules for a batch k times larger, linear warm-up, and the line model's curvature limit.
* ``widget``: Chapter 09's sliders: k, the learning-rate rule (×1, ×√k, ×k or a free multiplier) and the warm-up.
"""
