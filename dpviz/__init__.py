"""dpviz: data-parallel training derived one step at a time, drawn from real torch.distributed runs.

Three layers, and the theory beside the records::

    ranks run (torch)        ->  records (numpy)        ->  pictures (matplotlib)
    dpviz.runs                   dpviz.records              dpviz.plots, dpviz.widgets, dpviz.figures
                                 dpviz.theory (numpy)

* :mod:`dpviz.runs`      the torch side: the launcher, rank workers (training, benchmark, schedules, each
                         chapter's experiments), models, optimizers, hand-written collectives. The only writers
                         of records.
* :mod:`dpviz.records`   one module per record kind, each declaring its arrays and metadata once; ``load``,
                         ``provenance``, the shipped runs. numpy only.
* :mod:`dpviz.theory`    the cost model, timelines, the line model's loss landscape, link presets. numpy only.
* :mod:`dpviz.plots`     ``plot_*(data, *, ax=None) -> Axes``: draw records and theory outputs, compute nothing new.
* :mod:`dpviz.widgets`   one figure class per slider panel (artists built once, ``update(**values)``), with controls.
* :mod:`dpviz.figures`   one ``figure_<name>`` function per published figure, for the chapters and the CLI.
* :mod:`dpviz.teaching`  self-check cards and the question bank.
* :mod:`dpviz.exercises` the chapters' "your turn" exercises: ``check_<name>(fn)`` against recorded runs, the
                         theory, or real ranks (the three collective ones, through :mod:`dpviz.runs.exercises`).
* :mod:`dpviz.regenerate`, :mod:`dpviz.cli`  the main job (``./run``) and ``python -m dpviz``.
* :mod:`dpviz.checks`, :mod:`dpviz.data`    argument checks and the seeded data sets, used by every layer.

Plots, widgets, figures, records, theory and teaching never import torch or :mod:`dpviz.runs`
(``tests/test_layers.py`` checks it, and that no import cycle exists).
"""

__version__ = "0.2.0"
