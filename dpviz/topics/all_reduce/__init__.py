"""All-reduce: the library code of the notebook ``all_reduce``.

* ``claims``: The all-reduce: one result, the same bits on every rank; the ring's even load against a server's hot
  spot (numpy only).
* ``deck``: Self-check cards for all-reduce: its two phases, replicas in lockstep, and the notes' formula against the
  ring's.
* ``figures``: Step 5's figures: the all-reduce, the replicas with and without it, the ring against a parameter
  server.
* ``rank_collectives``: All-reduce written by hand from point-to-point sends and receives (Step 5).
* ``rank_schedule``: The rank side of :mod:`dpviz.topics.all_reduce.run_schedule`: a hand-written all-reduce that
  notes its transfers, beside ``dist.all_reduce``.
* ``records``: The record of a hand-written all-reduce's schedule: who sent which chunk to whom, and what it gave.
* ``run_schedule``: Record who sends which chunk to whom in a real hand-written all-reduce (the Step 5 schedule).
"""
