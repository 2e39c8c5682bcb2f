"""The ground floor: every symbol: the library code of the notebook ``ground_floor``.

* ``claims``: The ground floor: what the symbols chapter says of its first real runs, asserted on the records (numpy
  only).
* ``costmodel``: The alpha-beta cost model of one data-parallel step, and a fit of alpha, beta to measured times.
* ``deck``: Self-check cards for the ground floor: the symbols note's self-check, retold: what each symbol is and does.
* ``links``: α and β for three common interconnects, each from a cited source, to set beside this machine's measured
  ones.
* ``model_sizes``: The built-in models' names and sizes, without torch, so that a config can check its model in the
  caller's process.
* ``rank_models``: The two built-in models, in PyTorch's vocabulary.
* ``rank_optim``: SGD, SGD with momentum, and Adam, written out so each update rule can be read in a few lines.
* ``rank_probing``: The rank side of :mod:`dpviz.topics.ground_floor.run_probing`: one backward pass against probing
  every knob, in torch, in float64.
* ``rank_training``: The rank side of :mod:`dpviz.topics.ground_floor.run_training`: the data-parallel step each
  rank runs, in torch.
* ``records``: The record of a data-parallel training run, and the claims of the notes checked on it.
* ``run_probing``: What the gradient saves: one backward pass against probing every knob with its own forward pass.
* ``run_training``: A real data-parallel training run, recorded step by step.
* ``symbols``: The course's symbols, one meaning each: the table the ground floor prints and the README carries.
* ``timing``: The numbers behind the cost figures: step timelines, speedup curves and fitted all-reduce lines.
* ``widget``: The ground floor's slider: k and T_comm/T_compute on one step's time bars, the speedup curve and the
  speedup table.
"""
