"""Theory, numpy only: what the notes derive, beside the records it is compared with.

* :mod:`dpviz.theory.costmodel`  T_comm (the notes' formula, the ring, halving-doubling), speedup, fits of α and β
* :mod:`dpviz.theory.timing`     timelines and speedup curves, measured (from records) and modeled
* :mod:`dpviz.theory.landscape`  the line model's loss and gradient in closed form, gradient descent (Step 1)
* :mod:`dpviz.theory.links`      link presets (α, β) with their sources
"""
