"""The all-reduce: one result, the same bits on every rank; the ring's even load against a server's hot spot (numpy only).

    from dpviz.topics.all_reduce.claims import received_the_big_batch_gradient, ring_against_server, replicas_by_optimizer
    print(received_the_big_batch_gradient(run))
    print(ring_against_server(ring, server))
    print("\n".join(replicas_by_optimizer(drift_runs())))
"""

from __future__ import annotations

import numpy as np

from dpviz.topics.ground_floor.records import Run
from dpviz.topics.all_reduce.records import Schedule
from dpviz.engine.tolerance import GRAD_TOLERANCE, tolerance_words



def received_the_big_batch_gradient(run: Run) -> str:
    """At every step all ranks received the same bits, equal to the big-batch gradient to rounding; no drift."""
    same = run.received_identical()
    assert same.all(), f"the ranks received different gradients at steps {np.flatnonzero(~same).tolist()}"
    err = run.big_batch_rel_err()
    assert err.max() <= GRAD_TOLERANCE, f"the all-reduced gradient is not the big-batch gradient: relative errors {err} > {tolerance_words()}"
    replicas = run.replicas_identical()
    assert replicas.all(), f"the replicas are not bit-identical at states {np.flatnonzero(~replicas).tolist()}"
    return (f"At all {run.steps} steps the {run.k} ranks received bit-identical gradients, equal to the "
            f"big-batch gradient within {tolerance_words()} (relative), and the replicas stayed bit-identical.")


def ring_against_server(ring: Schedule, server: Schedule) -> str:
    """Each ring rank sends and receives 2(k−1)/k·M; the server's rank 0 (k−1)·M, the others M; both equal
    ``dist.all_reduce`` bit for bit. The two schedules must reduce the same M bytes on the same k ranks."""
    if (ring.k, ring.message_bytes) != (server.k, server.message_bytes):
        raise ValueError(f"ring and server must all-reduce the same M on the same k; got k={ring.k}, "
                         f"M={ring.message_bytes} and k={server.k}, M={server.message_bytes}.")
    k, M = ring.k, ring.message_bytes
    even = 2 * (k - 1) * M // k
    for name, counted in (("sent", ring.bytes_sent), ("received", ring.bytes_received)):
        assert (counted == 2 * (k - 1) / k * M).all(), \
            f"the ring's ranks {name} {counted.tolist()} bytes, not 2(k−1)/k·M = {even} each"
    hub = (int(server.bytes_sent[0]), int(server.bytes_received[0]))
    assert hub == ((k - 1) * M,) * 2, f"the server's rank 0 sent and received {hub} bytes, not (k−1)·M = {(k - 1) * M}"
    others = np.concatenate([server.bytes_sent[1:], server.bytes_received[1:]])
    assert (others == M).all(), f"the server's other ranks sent and received {others.tolist()} bytes, not M = {M}"
    for schedule in (ring, server):
        assert schedule.equal, f"the hand-written {schedule.impl} differs from dist.all_reduce"
    return (f"Ring: every rank sent and received {even} bytes. "
            f"Server: rank 0 received and sent {(k - 1) * M} bytes, the others {M}. "
            "Both equal dist.all_reduce bit for bit.")


def replicas_by_optimizer(drift: dict) -> list[str]:
    """With the all-reduce the replicas are bit-identical at every state, for every optimizer; without it, where
    they part, and, when Adam parts a step later than SGD, what its first step shows.

    ``drift`` maps (optimizer, all_reduce) to a Run, as :func:`dpviz.topics.one_group_per_device.shipped.drift_runs` returns.
    """
    lines, parted = [], {}
    for opt in dict.fromkeys(name for name, _ in drift):
        synced, alone = drift[(opt, True)], drift[(opt, False)]
        if not (synced.received_identical().all() and synced.replicas_identical().all()):
            raise AssertionError(f"{opt} with the all-reduce: the ranks received or held different bits "
                                 f"(replicas identical at {int(synced.replicas_identical().sum())} of "
                                 f"{synced.replicas_identical().size} states)")
        same = alone.replicas_identical()
        first = int(np.argmin(same)) if not same.all() else len(same)
        if not same[0] or first == len(same) or same[first:].any():
            raise AssertionError(f"{opt} without the all-reduce: the replicas do not start identical and part for good "
                                 f"(identical at states {np.flatnonzero(same).tolist()})")
        parted[opt] = first
        lines.append(f"{opt:8s}  with all-reduce: identical at all {len(same)} states;  "
                     f"without: identical up to state {first - 1}, apart from state {first} on")
    later = [opt for opt in parted if parted[opt] > min(parted.values())]
    for opt in later:
        alone = drift[(opt, False)]
        g0 = np.asarray(alone.local_grad[0])          # (k, P): each rank's own gradient at step 0
        signs_agree = bool((np.sign(g0) == np.sign(g0[0])).all())
        w, c = alone.params[1, 0, :2]
        lines.append(f"{opt} parts {parted[opt] - min(parted.values())} state(s) later than the others. At step 0 the "
                     f"ranks' gradients {'all have the same signs' if signs_agree else 'differ in sign'}, and after "
                     f"its first step every replica holds the same float32 values, w = {w:.7g} and c = {c:.7g}"
                     if (alone.params[1] == alone.params[1, 0]).all() else
                     f"{opt} parts {parted[opt] - min(parted.values())} state(s) later than the others.")
    return lines


def replicas_apart_after_the_sync(run: Run) -> dict:
    """The answer to the chapter's prediction: after the run's last synchronised step, how many of ranks 1 to k − 1 hold
    parameters that differ from rank 0's in any bit, and why (keywords of
    :meth:`dpviz.engine.predict.Prediction.answer`; :func:`received_the_big_batch_gradient` asserts it)."""
    digests = run.param_digest[-1]
    apart = int(sum(digests[r] != digests[0] for r in range(1, run.k)))
    received = run.received_identical()
    why = (f"At {int(received.sum())} of the {run.steps} steps all {run.k} ranks received the same bits from the "
           "all-reduce, which computes one result and hands out copies of it; from the same θ, with the same gradient "
           f"and the same η, every rank computes the same new θ (their parameters' SHA-1 matched at "
           f"{int(run.replicas_identical().sum())} of the {run.steps + 1} states)")
    return {"measured": apart, "said": f"{apart} of the {run.k - 1}", "why": why}
