"""Claims: what a chapter, a figure's title or ``./run`` says of recorded runs, asserted on them (numpy only).

A claim is a function of records (and theory). It asserts what is said and returns the sentence it
verified, so that what a chapter prints is what was checked on the data in front of it; a claim that
does not hold raises ``AssertionError`` naming the numbers that contradict it. One module per chapter,
named by topic:

* :mod:`dpviz.claims.whole_picture` every step of the walkthrough on one run (``verify_summary``); the derivation's figure records
* :mod:`dpviz.claims.sync_costs`    the speedup model's figure titles (compute shrinks as 1/k, the sync does not, slower links peel away sooner)
* :mod:`dpviz.claims.bigger_batch`  the learning-rate rules and warm-up, on the grids of runs (``lr_claims``)
* :mod:`dpviz.claims.accumulation`  accumulation equals the big batch; memory falls with the micro-batch
* :mod:`dpviz.claims.waiting`       stragglers, overlap and asynchronous SGD
* :mod:`dpviz.claims.splitting`     pipeline stages, the tensor-parallel layer and ZeRO-1

Each module's ``figure_claims(records)`` checks the records its chapter's published figures are drawn
from (``{stem: record}`` of the chapter's figure plan) and returns the lines ``./run`` prints.
A record's own ``check()`` (in :mod:`dpviz.records`) asserts what holds of every record of its kind;
the claims call it and add what the chapter says beyond that.
"""
