"""Checkers for chapter "when a replica fails"'s exercises.

    print(check_young_daly_interval(young_daly_interval))  # against theory.young_daly_interval (numpy only)
    print(check_survivor_average(survivor_average))        # on 3 real gloo ranks, one of them dead

``young_daly_interval(delta, mtbf)`` is called with plain numbers, one case at a time, in a fresh process
(:func:`dpviz.engine.verdict.run_cases`), and compared with the chapter's theory to float rounding.

``survivor_average(model_grads, group)`` runs inside the two survivors of 3 real gloo ranks, rank
:data:`DEAD` having died before the all-reduce; ``group`` is the survivors' process
group. The real answer (``dist.all_reduce`` over that group, divided by its size, and the gradient of the
survivors' examples in one batch) comes from a launch of its own that runs no reader's code, kept after the first
(:mod:`dpviz.exercises.rank_failures`). The time limits are :mod:`dpviz.exercises.ranked`'s: a call may run
``CALL_LIMIT`` seconds, and the launch ends after ``stall_timeout`` seconds without progress, which is what a
collective over the whole world, dead rank included, runs into. This module imports torch only inside the
checker, when ranks are about to start.
"""

from __future__ import annotations

import math

import dpviz.engine.verdict as v
from dpviz.engine.checks import check_real
import dpviz.exercises.ranked as ranked
from dpviz.topics.when_a_replica_fails import theory

K = 3  # ranks launched; one of them is dead, so the survivors' group has 2 and the old k is 3
DEAD = 1  # the rank that died (the checker tells the ranks): the survivors 0 and 2 are not a prefix of the old ranks
YOUNG_DALY_CASES = ((60.0, 86_400.0), (10.0, 3_600.0), (0.5, 200.0), (300.0, 4.0e5), (2.0, 2.0), (1.0, 0.5))


def check_young_daly_interval(young_daly_interval) -> v.Verdict:
    """``young_daly_interval(delta, mtbf)``: Young's interval √(2 δ M) in seconds; against the chapter's theory."""
    name = v.require_function("check_young_daly_interval", young_daly_interval)
    cases = [v.Case((d, m), theory.young_daly_interval(d, m), f"for δ = {d:g} s and MTBF = {m:g} s")
             for d, m in YOUNG_DALY_CASES]
    mistakes = [
        (lambda d, m: math.sqrt(d * m),
         "That is √(δ·MTBF), without the factor 2: a failure throws away half an interval on average, τ/2, so the "
         "redone work per second is τ/(2·MTBF), and its balance with δ/τ gives √(2·δ·MTBF)."),
        (lambda d, m: math.sqrt(d * m / 2),
         "The 2 belongs under the root beside δ·MTBF, not under it: √(2·δ·MTBF). Setting δ/τ² = 1/(2·MTBF) gives "
         "τ² = 2·δ·MTBF."),
        (lambda d, m: 2 * d * m,
         "That is τ², not τ: take the square root of 2·δ·MTBF (a unit check says so: seconds² is not seconds)."),
        (lambda d, m: math.sqrt(2 * d / m) if m else math.inf,
         "δ and the MTBF both multiply: a dearer save and rarer failures each make the interval longer, √(2·δ·MTBF)."),
        (lambda d, m: math.sqrt(2 * m / d) if d else math.inf,
         "δ and the MTBF both multiply: a dearer save should make the interval longer, not shorter, √(2·δ·MTBF)."),
        (lambda d, m: math.sqrt(2 * d * m) - d,
         "Young's interval is √(2·δ·MTBF) with nothing taken off; subtracting δ is a step toward Daly's refinement, "
         "which this exercise does not ask for."),
    ]
    return v.run_cases(name, young_daly_interval, cases, mistakes=mistakes, returns="a number of seconds",
                       success=f"it equals Young's interval √(2·δ·MTBF) in all {len(cases)} cases, from a save of "
                               "half a second to one of five minutes")


def check_survivor_average(survivor_average, *, stall_timeout: float = ranked.STALL_TIMEOUT) -> v.Verdict:
    """``survivor_average(model_grads, group)`` on the 2 survivors of 3 real ranks, against dist.all_reduce over the
    survivors' group divided by its size.

    Each survivor's call may run ``CALL_LIMIT`` seconds (10, at most 2/3 of ``stall_timeout``); the launch ends after
    ``stall_timeout`` seconds (15) without progress. The gradient tensors must change in place.
    """
    name = v.require_function("check_survivor_average", survivor_average)
    stall_timeout = check_real("stall_timeout", stall_timeout, low=0, low_open=True)
    if v.is_stub(survivor_average):
        return v.not_attempted(name)
    source = v.source_of(survivor_average)
    if source is None:
        return v.failed(name, "its source text could not be read, and the ranks need it to run it",
                        rule="Define it with def in a notebook cell or a .py file, then check it again.")

    import dpviz.exercises.rank_failures as ranks  # torch: only now that ranks will run
    from dpviz.engine.launch import launch, sharing_cores_said_elsewhere
    from dpviz.engine.supervise import RankError, RankTimeout
    from dpviz.engine.rank import UnreadableResult

    call_limit = min(ranked.CALL_LIMIT, stall_timeout * 2 / 3)
    reference = _reference()
    try:
        with sharing_cores_said_elsewhere():  # nothing here is timed
            results = launch(ranks.exercise_worker, K, args=(DEAD, name, source, call_limit), backend="gloo", threads=1,
                             stall_timeout=stall_timeout, untrusted=True)
    except RankTimeout as e:
        observed = e.observed or {}
        if any(state in ("stopped", "memory") for state in observed.values()):
            return ranked._hang("survivor_average", name, K, None, stall_timeout, observed)
        return v.failed(name, f"the survivors got stuck inside {name} (no progress for {stall_timeout:g} s)",
                        _WORLD_HINT)
    except UnreadableResult:  # the rank's code wrote something other than data as its result: refused unread
        results = [None] * K
    except RankError as e:
        if _lost_peer(str(e)):  # the collective's gloo connections reached for the dead rank and ended the process
            return v.failed(name, f"rank {e.rank}'s collective could not reach the dead rank {DEAD} and its process "
                            "ended with gloo's error", _WORLD_HINT)
        return ranked._rank_died(name, e)
    survivors = ranks.survivors(K, DEAD)
    per_rank = {r: {**results[r], **reference[r]} for r in survivors if isinstance(results[r], dict)}
    if len(per_rank) != len(survivors):
        return v.failed(name, "what the ranks sent back after running it could not be read",
                        rule="A function checked on ranks must return, leaving the rank's own code as it was.")
    return judge_survivor_average(name, per_rank)


_WORLD_HINT = (f"A collective without group= runs over the whole world, which still counts the dead rank {DEAD}, "
               "and it never comes: pass group=group to dist.all_reduce.")

# gloo's words when a collective meets a peer that has gone: a broken pair, or a mesh it could not connect
LOST_PEER = ("Connection closed by peer", "Connection reset", "connectFullMesh failed")


def _lost_peer(error: str) -> bool:
    return any(words in error for words in LOST_PEER)


_REFERENCE: list = []  # the survivors' real answers (rank_failures.reference_worker), computed once per process


def _reference() -> list:
    if not _REFERENCE:
        import dpviz.exercises.rank_failures as ranks
        from dpviz.engine.launch import launch, sharing_cores_said_elsewhere

        with sharing_cores_said_elsewhere():
            _REFERENCE.append(launch(ranks.reference_worker, K, args=(DEAD,), backend="gloo", threads=1))
    return _REFERENCE[0]


def judge_survivor_average(name: str, per_rank: dict) -> v.Verdict:
    """The verdict from each survivor's result (what its tensors hold, merged with the reference's answers)."""
    ordered = [per_rank[r] for r in sorted(per_rank)]
    for rank, res in sorted(per_rank.items()):  # gloo's words when a peer of the collective has gone
        if _lost_peer(res.get("error", "")):
            return v.failed(name, f"on rank {rank} its collective failed with gloo's \"Connection closed by peer\": "
                            f"it waited for the dead rank {DEAD}, whose process had ended", _WORLD_HINT)
    known = ranked._outcome(name, ordered, lambda r, res: "")
    if known:
        return _renumbered(known, sorted(per_rank))
    alive = len(per_rank)
    for rank, res in sorted(per_rank.items()):
        for t, (got, expected) in enumerate(zip(res["got"], res["expected"])):
            if got.shape != expected.shape:
                return v.failed(name, f"on rank {rank}, gradient tensor {t} came back with shape "
                                f"{v.shape_words(got.shape)}; expected {v.shape_words(expected.shape)}",
                                rule="Average each tensor as it is, in place.")
            first = v.first_mismatch(got, expected)
            if first is None:
                continue
            return v.failed(name, f"on rank {rank}, element {v.index_words(first)} of gradient tensor {t} is "
                            f"{v.num(got[first])}, "
                            f"{v.against(got[first], expected[first], f', the mean over the {alive} survivors')}",
                            _survivor_hint(res, t, alive))
    if not all(v.close(e, b, rtol=1e-4) for res in ordered for e, b in zip(res["expected"], res["big"])):
        raise RuntimeError("the survivors' all-reduce / 2 differs from their big batch's gradient: the check is "
                           "broken.")
    return v.passed(name, f"on the {alive} survivors of {K} real ranks every gradient tensor equals dist.all_reduce's "
                    f"sum over the survivors' group divided by {alive}, which is the gradient of their "
                    f"{ordered[0]['examples']} examples in one batch to within float rounding")


def _renumbered(verdict: v.Verdict, ranks: list[int]) -> v.Verdict:
    """ranked._outcome names ranks by their place in the list it is given; say the survivors' own rank numbers."""
    text = str(verdict)
    for place in sorted(range(len(ranks)), reverse=True):
        text = text.replace(f"on rank {place}", f"on rank {ranks[place]}")
    return v.Verdict(text, verdict.status)


def _survivor_hint(res, t, alive) -> str:
    got, expected, local = res["got"][t], res["expected"][t], res["local"][t]
    r = v.ratio(got, expected)
    old_k = alive + 1
    returned = res.get("returned")
    if returned is not None and all(a.shape == e.shape and v.close(a, e) for a, e in zip(returned, res["expected"])):
        return ("It returned new tensors that hold the survivors' mean, but the tensors in model_grads were not "
                "changed: average them in place (dist.all_reduce(grad, group=group), then grad /= the group's size).")
    if v.close(got, local):
        return "It is still this rank's own gradient: nothing was exchanged. All-reduce it over the survivors' group."
    if r is not None and abs(r - alive / old_k) < 1e-3:
        return (f"It is the survivors' sum divided by {old_k}, the old k: only {alive} ranks added into it now, so "
                "divide by dist.get_world_size(group), the survivors' count, not dist.get_world_size().")
    if r is not None and abs(r - alive) < 1e-3:
        return f"It is the sum over the {alive} survivors: divide by their count, dist.get_world_size(group)."
    if v.close(got, local / old_k) or v.close(got, local / alive):
        return "It is this rank's own gradient divided by a count: all-reduce it over the survivors' group first."
    if r is not None and abs(r - 1 / alive) < 1e-3:
        return "It is the mean divided by the survivors' count once more: divide only once."
    return ""
