"""One folder per chapter, in the order of :mod:`dpviz.course`.

A topic holds one chapter's library code, its files named by role: ``run_<kind>`` (the torch-free front of a
kind of run: its config, checked in the caller, and its record assembled with numpy), ``rank_<kind>`` (what runs
inside the ranks: the only torch), ``records`` (its record kinds and figure plan), ``theory``, ``claims``,
``plots``, ``figures``, ``widget`` and ``deck``. A topic imports the engine and earlier topics only
(``tests/test_layers.py``).
"""
