"""Chapters being built, before they take their place in :mod:`dpviz.course` (a folder under ``dpviz/topics/``
must be a chapter of the course, which ``tests/test_layers.py`` checks). When a chapter here is complete, its
folder moves to ``dpviz/topics/`` and its line goes into ``COURSE``.

* ``when_a_replica_fails``: a killed rank, checkpoint and restart, the Young/Daly interval, carrying on with
  fewer ranks and regrowing, DiLoCo.
"""
