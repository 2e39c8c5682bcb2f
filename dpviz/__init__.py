"""dpviz: data-parallel training derived one step at a time, drawn from real torch.distributed runs.

The pieces, one module per concept:

* :mod:`dpviz.runs.launch`      start k ranks of a process group (spawn, free port, timeout, teardown)
* :mod:`dpviz.runs.training`    what one rank does in a step, and :func:`record_run` to record a run
* :mod:`dpviz.records.run`      :class:`Run`, the record of a run, and the claims checked on it
* :mod:`dpviz.runs.collectives` the ring all-reduce and the parameter server, written by hand
* :mod:`dpviz.runs.bench`       measured all-reduce time over k and message size
* :mod:`dpviz.theory.costmodel`   T_comm, speedup, efficiency, learning-rate rules, fits (numpy only)
* :mod:`dpviz.plots`       one module per figure family; :mod:`dpviz.widgets` the sliders
* :mod:`dpviz.teaching.quiz`        self-check cards
"""

__version__ = "0.1.0"
