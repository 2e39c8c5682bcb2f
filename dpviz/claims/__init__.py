"""Claims: what a chapter, a figure's title or ``./run`` says of recorded runs, checked on them (numpy only).

A claim is a function of records (and theory) that returns the sentence a chapter prints, so that what a
chapter says is what was found in the data in front of it. Two kinds:

* **Correctness** (the same bits on every rank, a gradient within float rounding of the big batch's, the
  bytes a ring sends): asserted. A claim that does not hold raises ``AssertionError`` with a message naming
  the numbers that contradict it; never a bare ``assert``.
* **Measured times** (shrinks, grows, faster, waits): described. The function compares the numbers and
  returns what they show, and when they do not show the lesson (more ranks than cores, a busy machine, a
  message too small) it says so and why, instead of raising. Where a chapter's workload was chosen so that
  the lesson must show with a core per rank (accumulation slower than ranks, a slowdown at the ground
  floor), that one result is asserted, and only under that condition. A figure's title is built from
  such a finding, so it states only what was verified on the data drawn.

``tests/test_truth.py`` keeps measured numbers out of the chapters' markdown; ``tests/test_rerecorded.py``
records the figure set again on one core and runs every claim on it.

One module per chapter, named by topic:

* :mod:`dpviz.claims.ground_floor`  the first real runs: the ranks' average is the combined batch's gradient; S measured; probing each knob; a 0/1 loss
* :mod:`dpviz.claims.one_step`      a small step lowers the loss, the arrow is −η ∇θL, too large an η diverges
* :mod:`dpviz.claims.mini_batch`    the batch gradient is the mean of its examples'; a biased grab points away
* :mod:`dpviz.claims.average_of_averages` equal groups average to the big batch; unequal ones need weights
* :mod:`dpviz.claims.one_group_per_device` with the sync the replicas stay identical, without it they part
* :mod:`dpviz.claims.all_reduce`    the same bits on every rank; the ring's bytes against a parameter server's
* :mod:`dpviz.claims.whole_picture` every step of the walkthrough on one run (``verify_summary``); a biased shard against a biased batch; the derivation's figure records
* :mod:`dpviz.claims.sync_costs`    the speedup model's and the all-reduce chapter's: s01's title from what the runs show, S(2) and its cause, slower links peel away sooner, the limits, the ring's bytes, published systems' fits
* :mod:`dpviz.claims.bigger_batch`  the learning-rate rules and warm-up, on the grids of runs (``lr_claims``)
* :mod:`dpviz.claims.accumulation`  accumulation equals the big batch; memory falls with the micro-batch
* :mod:`dpviz.claims.waiting`       stragglers, overlap and asynchronous SGD
* :mod:`dpviz.claims.splitting`     pipeline stages (where they wait, two stages against one device), the tensor-parallel layer and ZeRO-1
* :mod:`dpviz.claims.question_bank` the edge-case cards, on the cost model and on a run with unequal batches

A module's functions check what its chapter's cells print, on the records the chapter made or loaded.
Where the chapter has published figures, ``figure_claims(records)`` also checks the records they are
drawn from (``{stem: record}`` of the chapter's figure plan) and returns the lines ``./run`` prints.
A record's own ``check()`` (in :mod:`dpviz.records`) asserts what holds of every record of its kind;
the claims call it and add what the chapter says beyond that.
"""
