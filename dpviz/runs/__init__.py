"""The torch side: ranks that run, and the only writers of records.

* :mod:`dpviz.runs.launch`        start k ranks of a process group; errors and stalls named by rank
* :mod:`dpviz.runs.training`      the data-parallel rank worker, ``record_run``, the torchrun entry point
* :mod:`dpviz.runs.models`        the line model and the MLP
* :mod:`dpviz.runs.optim`         SGD, momentum and Adam written out, bit-identical to torch.optim
* :mod:`dpviz.runs.collectives`   the ring all-reduce and a parameter server, by hand
* :mod:`dpviz.runs.bench`         the all-reduce benchmark worker and sweep
* :mod:`dpviz.runs.schedule`      recording a hand-written all-reduce's transfers
* :mod:`dpviz.runs.shipped`       recording again the runs shipped for the sliders
* :mod:`dpviz.runs.figure_inputs` recording every run behind the published figures
"""
