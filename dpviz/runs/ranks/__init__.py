"""The rank side of each run module: workers and their torch helpers, imported in the ranks only.

Each ``dpviz.runs.ranks.<name>`` belongs to the torch-free front ``dpviz.runs.<name>``, which holds the
config (checked in the caller's process), the ``record_*`` function and the record's assembly in numpy.
The front's worker is a two-line top-level function that imports the rank side's worker inside its body,
so it pickles by reference and the import happens in the rank. A chapter's kernel never imports these
modules, and so never imports torch for a run.

The imports go one way, front to rank side: a module here never imports its front (the config classes
in its annotations are the front's, named only), and what both need sits in a torch-free module of its
own (:mod:`dpviz.runs.model_sizes`, :mod:`dpviz.runs.buckets`).
"""
