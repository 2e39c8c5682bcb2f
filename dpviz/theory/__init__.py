"""Theory, numpy only: what the notes derive, beside the records it is compared with.

* :mod:`dpviz.theory.costmodel`  T_comm (the notes' formula, the ring, halving-doubling), speedup, fits of α and β
* :mod:`dpviz.theory.timing`     timelines and speedup curves, measured (from records) and modeled
* :mod:`dpviz.theory.landscape`  the line model's loss and gradient in closed form, gradient descent (Step 1)
* :mod:`dpviz.theory.links`      link presets (α, β) with their sources
* :mod:`dpviz.theory.pipeline`   pipeline stages: the bubble (p−1)/(m+p−1), each stage's order of passes, modeled timelines
* :mod:`dpviz.theory.tensor_parallel`  bytes each rank sends for a linear layer split by columns or rows, and for data parallelism
* :mod:`dpviz.theory.memory`     bytes one rank holds for parameters, gradients and optimizer state, plain and sharded (ZeRO)
* :mod:`dpviz.theory.lr_rules`   learning-rate rules (×1, ×√k, ×k), linear warm-up, the line model's curvature limit
* :mod:`dpviz.theory.waiting`    the straggler's step, the bounds of overlap, asynchronous staleness and update rates
"""
