"""dpviz: data-parallel training derived one step at a time, drawn from real torch.distributed runs.

One folder per chapter over a small engine::

    dpviz/course.py          the chapters in order: the only place a chapter's number is decided
    dpviz/engine/            what every chapter stands on: launching ranks, the record schema, the slider base,
                             figure layout and style, the sandbox for student code, the self-check cards
    dpviz/topics/<topic>/    one chapter's code, files named by role: run_<kind> (torch-free front),
                             rank_<kind> (what runs in the ranks: the only torch), records, theory, claims,
                             plots, figures, widget, deck
    dpviz/records/           data only: the runs shipped for the sliders and the figures' records

Each chapter's data flow is the same three steps: ranks run (torch) -> records (numpy) -> pictures
(matplotlib), with the theory and the claims beside the records. A topic imports the engine and earlier
topics only; torch is imported only by rank files, matplotlib only by drawing files
(``tests/test_layers.py`` checks all three rules).

Above them, the course-level modules: :mod:`dpviz.regenerate` and :mod:`dpviz.cli` (``./run`` and
``python -m dpviz``), :mod:`dpviz.recipes` (which recorder makes which figure plan's records),
:mod:`dpviz.exercises` (the chapters' "your turn" checkers), :mod:`dpviz.grading` (nbgrader) and
:mod:`dpviz.docs` (the record reference in ``docs/records.md``).
"""

__version__ = "0.2.0"
