"""One training step: the library code of the notebook ``one_step``.

* ``claims``: One training step: the chapter's three claims, asserted on the line model and all its data (numpy
  only).
* ``deck``: Self-check cards for one training step: forward, loss, backward, update, and what η does.
* ``figures``: Step 1's figure: the loss along one knob of the line model, the red dot, the arrow and a few steps.
* ``landscape``: The loss landscape of the line model, and gradient descent on one machine (Step 1).
* ``plots``: Step 1: one training step on one machine, as the loss along one knob.
* ``widget``: Step 1 with a slider for the step size η.
"""
