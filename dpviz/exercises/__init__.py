"""The chapters' "your turn" exercises and their checkers.

Each chapter from one training step to when a replica fails ends with one to three small functions for the
reader to write, each one something the chapter has just derived. ``check_<name>(fn)`` runs the
reader's function against the real thing and answers in one or two sentences: what passed, or the
first step, rank or element that is wrong with the value expected there. A stub that still raises
``NotImplementedError`` gets "not attempted yet", the same text every time, so the chapters pass
nbval with their stubs in place.

    from dpviz.exercises import check_sgd_step
    print(check_sgd_step(sgd_step))

====================  ==========================================  ====================================================
chapter               the reader writes                           checked against
====================  ==========================================  ====================================================
one_step              ``sgd_step(theta, grad, eta)``              the line model's descent path
mini_batch            ``mean_gradient(example_grads)``            a recorded run's whole-batch gradient
average_of_averages   ``weighted_mean(group_grads, group_sizes)`` the same, from groups of unequal size
one_group_per_device  ``average_gradients(model_grads, k)``       3 real ranks: ``dist.all_reduce`` / k, the big batch
all_reduce            ``reduce_scatter_step(chunks, rank, k, s)`` 3 real ranks: the library's ring, ``dist.all_reduce``
speedup_model         ``t_comm_ring(k, M, alpha, beta)``,         :mod:`dpviz.topics.ground_floor.costmodel`
                      ``speedup(t_compute, k, t_comm)``
measuring             ``bus_bandwidth(M, seconds, k)``            :mod:`dpviz.topics.ground_floor.costmodel`
whole_picture         ``data_parallel_step(theta, rank_grads, η)`` a recorded run on 4 real ranks
bigger_batch          ``lr_for_k(lr_base, k, rule)``,             :mod:`dpviz.topics.bigger_batch.theory`
                      ``warmup_lr(lr, step, warmup)``
accumulation          ``accumulated_gradient(micro_grads)``       a recorded run's whole-batch gradient
waiting               ``wait_times(compute)``,                    :mod:`dpviz.topics.waiting.theory`
                      ``staleness(t_grad)``
splitting             ``bubble(p, m)``,                           :mod:`dpviz.topics.splitting.theory_pipeline`;
                      ``gather_columns(y_block, world_size)``     3 real ranks: ``dist.all_gather``, the unsplit X W
sharding              ``owned_shard(layer, rank, k)``,            :mod:`dpviz.topics.sharding.theory`
                      ``step_bytes(k, M, zero_stage)``
cheaper_sync          ``powersgd_bytes(rows, cols, r)``,          :mod:`dpviz.topics.cheaper_sync.theory`
                      ``slow_link_bytes(k, g, M)``
when_a_replica_fails  ``young_daly_interval(delta, mtbf)``,       :mod:`dpviz.topics.when_a_replica_fails.theory`;
                      ``survivor_average(model_grads, group)``    2 survivors of 3 real ranks: ``dist.all_reduce`` over
                                                                  their group / its size, their big batch
====================  ==========================================  ====================================================

Every checker returns a :class:`~dpviz.engine.verdict.Verdict`, a ``str`` with ``.passed``, whatever the
reader's function does: a loop that never ends, an exit (``os._exit``, ``sys.exit``), any ``BaseException``, a fork,
a thread left running, megabytes printed or returned, NaN, the wrong type or shape each get a sentence of at most a
few hundred characters, and nothing the function started is left running.

The reader's function never runs where the answer is. A checker without ranks sends the function's source
and one call's arguments at a time to a fresh process (:class:`dpviz.engine.sandbox.FreshProcess`), where it
finds ``np`` and ``math`` and nothing else, and judges what comes back here; the collective checkers take
the real answers from ranks of their own. A function that uses a variable from around it (a closure) gets a
verdict saying to define it with ``def``, using only its arguments, ``np`` and ``math``. Grading re-runs every
check outside the student's kernel (:mod:`dpviz.exercises.regrade`).

The time limits: a checker without ranks gives all its calls together
:data:`~dpviz.engine.sandbox.TIME_LIMIT` seconds (5); on ranks one call may run
:data:`~dpviz.exercises.ranked.CALL_LIMIT` seconds (10) and the launch ends after ``stall_timeout`` (15) without
progress (see :mod:`dpviz.engine.sandbox` and :mod:`dpviz.exercises.ranked`).
The reference solutions are not in this package, which a student imports: they are in the
checkout's ``instructor/solutions.py``, which :mod:`dpviz.grading` writes into nbgrader's source
version of the chapters (for grading) and the tests hold to these checkers; the exercises' words
and stubs are in :mod:`dpviz.exercises.catalogue`. Importing this package loads numpy only: torch is imported when a
collective checker starts its ranks (see :mod:`dpviz.exercises.ranked` for how a notebook's
function gets there).
"""

from dpviz.exercises.formulas import (
    check_bubble,
    check_bus_bandwidth,
    check_lr_for_k,
    check_powersgd_bytes,
    check_slow_link_bytes,
    check_speedup,
    check_staleness,
    check_t_comm_ring,
    check_wait_times,
    check_warmup_lr,
)
from dpviz.exercises.gradients import (
    check_accumulated_gradient,
    check_data_parallel_step,
    check_mean_gradient,
    check_sgd_step,
    check_weighted_mean,
)
from dpviz.exercises.failures import check_survivor_average, check_young_daly_interval
from dpviz.exercises.ranked import check_average_gradients, check_gather_columns, check_reduce_scatter_step
from dpviz.exercises.sharding import check_owned_shard, check_step_bytes
from dpviz.engine.verdict import Verdict

__all__ = [
    "Verdict",
    "check_accumulated_gradient",
    "check_average_gradients",
    "check_bubble",
    "check_bus_bandwidth",
    "check_data_parallel_step",
    "check_gather_columns",
    "check_lr_for_k",
    "check_mean_gradient",
    "check_owned_shard",
    "check_powersgd_bytes",
    "check_reduce_scatter_step",
    "check_sgd_step",
    "check_slow_link_bytes",
    "check_speedup",
    "check_staleness",
    "check_step_bytes",
    "check_survivor_average",
    "check_t_comm_ring",
    "check_wait_times",
    "check_warmup_lr",
    "check_weighted_mean",
    "check_young_daly_interval",
]
