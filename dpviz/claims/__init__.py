"""Claims: what a chapter, a figure's title or ``./run`` says of recorded runs, asserted on them (numpy only).

A claim is a function of records (and theory). It asserts what is said and returns the sentence it
verified, so that what a chapter prints is what was checked on the data in front of it; a claim that
does not hold raises ``AssertionError`` naming the numbers that contradict it. One module per chapter,
named by topic:

* :mod:`dpviz.claims.ground_floor`  the first real run: the ranks' average is the combined batch's gradient
* :mod:`dpviz.claims.one_step`      a small step lowers the loss, the arrow is −η ∇θL, too large an η diverges
* :mod:`dpviz.claims.mini_batch`    the batch gradient is the mean of its examples'; a biased grab points away
* :mod:`dpviz.claims.average_of_averages` equal groups average to the big batch; unequal ones need weights
* :mod:`dpviz.claims.one_group_per_device` with the sync the replicas stay identical, without it they part
* :mod:`dpviz.claims.all_reduce`    the same bits on every rank; the ring's bytes against a parameter server's
* :mod:`dpviz.claims.whole_picture` every step of the walkthrough on one run (``verify_summary``); a biased shard against a biased batch; the derivation's figure records
* :mod:`dpviz.claims.sync_costs`    the speedup model's figure titles (compute shrinks as 1/k, the sync does not, slower links peel away sooner); its limits; the ring's bytes
* :mod:`dpviz.claims.bigger_batch`  the learning-rate rules and warm-up, on the grids of runs (``lr_claims``)
* :mod:`dpviz.claims.accumulation`  accumulation equals the big batch; memory falls with the micro-batch
* :mod:`dpviz.claims.waiting`       stragglers, overlap and asynchronous SGD
* :mod:`dpviz.claims.splitting`     pipeline stages, the tensor-parallel layer and ZeRO-1
* :mod:`dpviz.claims.question_bank` the edge-case cards, on the cost model and on a run with unequal batches

A module's functions check what its chapter's cells print, on the records the chapter made or loaded.
Where the chapter has published figures, ``figure_claims(records)`` also checks the records they are
drawn from (``{stem: record}`` of the chapter's figure plan) and returns the lines ``./run`` prints.
A record's own ``check()`` (in :mod:`dpviz.records`) asserts what holds of every record of its kind;
the claims call it and add what the chapter says beyond that.
"""
