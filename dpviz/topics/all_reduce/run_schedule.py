"""Record who sends which chunk to whom in a real hand-written all-reduce (the Step 5 schedule).

    from dpviz.topics.all_reduce.run_schedule import record_schedule
    ring = record_schedule(4, 8)                            # k = 4 ranks, an 8-element float32 tensor
    star = record_schedule(4, 8, impl="parameter_server")
    ring.equal, ring.bytes_sent, ring.entries[0]

k real ranks run :func:`dpviz.topics.all_reduce.rank_collectives.ring_all_reduce` (or
:func:`~dpviz.topics.all_reduce.rank_collectives.parameter_server_all_reduce`) on a tensor, each rank
writing down its own transfers; the same tensor then goes through
``dist.all_reduce`` inside the same rank and the two results are compared. The
ranks' notes are merged into one plain dict that the Step 5 figures draw.

The tensor holds small whole numbers stored as float32: any order of adding them
gives the same bits, so "equal" can mean bit-for-bit, even though the ring adds
in a different order from gloo's own all-reduce.
"""

from __future__ import annotations

import numpy as np

from dpviz.engine.checks import check_choice, check_int, check_seed, check_timeout
from dpviz.topics.all_reduce.records import Schedule
from dpviz.engine.launch import launch
from dpviz.engine.where import where_it_ran

IMPLS = ("ring", "parameter_server")


def schedules_worker(rank: int, world_size: int, n_elements: int, impls: tuple, seed: int=0) -> list[dict]:
    """Runs in each rank: :func:`dpviz.topics.all_reduce.rank_schedule.schedules_worker`, imported there (with torch), not here."""
    from dpviz.topics.all_reduce.rank_schedule import schedules_worker

    return schedules_worker(rank, world_size, n_elements, impls, seed)


def record_schedule(k: int, n_elements: int, *, impl: str = "ring", stall_timeout: float = 60, seed: int = 0) -> Schedule:
    """Launch k ranks, all-reduce an ``n_elements`` float32 tensor with ``impl``, and return the merged schedule.

    The :class:`~dpviz.topics.all_reduce.records.Schedule` record holds every transfer (phase, step,
    src, dst, chunk, bytes), the bytes each rank sent and received, each rank's tensor before
    and after the hand-written all-reduce and after ``dist.all_reduce`` of the same input,
    and whether the two agree bit for bit.
    """
    check_choice("impl", impl, IMPLS)
    return record_schedules(k, n_elements, impls=(impl,), stall_timeout=stall_timeout, seed=seed)[0]


def record_schedules(k: int, n_elements: int, *, impls=IMPLS, stall_timeout: float = 60, seed: int = 0) -> list[Schedule]:
    """Like :func:`record_schedule` for each of ``impls``, all in one launch of k ranks (process start paid once)."""
    k = check_int("k", k, low=1, high=64)
    n_elements = check_int("n_elements", n_elements, low=1, high=1 << 24)
    impls = tuple(check_choice("impls entries", impl, IMPLS) for impl in impls)
    if not impls:
        raise ValueError(f"impls must name at least one of {', '.join(map(repr, IMPLS))}; got an empty list.")
    stall_timeout = check_timeout("stall_timeout", stall_timeout)
    seed = check_seed("seed", seed)
    per_rank = launch(schedules_worker, k, args=(n_elements, impls, seed), backend="gloo", stall_timeout=stall_timeout)
    return [_merge(k, n_elements, impl, seed, [results[i] for results in per_rank]) for i, impl in enumerate(impls)]


def _merge(k: int, n_elements: int, impl: str, seed: int, results: list[dict]) -> Schedule:
    """The ranks' notes of one hand-written all-reduce, merged into one Schedule record."""

    order = {phase: i for i, phase in enumerate(results[0]["phases"])}
    entries = sorted((e for r in results for e in r["entries"]), key=lambda e: (order[e["phase"]], e["step"], e["src"], e["dst"]))
    received = np.zeros(k, dtype=np.int64)
    for e in entries:
        received[e["dst"]] += e["bytes"]
    stack = {name: np.stack([r[name] for r in results]) for name in ("input", "result", "all_reduce")}
    element_bytes = stack["input"].itemsize
    if impl == "ring":
        chunk_sizes = [len(c) for c in np.array_split(np.arange(n_elements), k)]  # torch.tensor_split's sizes
    else:
        chunk_sizes = [n_elements]
    meta = {
        "impl": impl,
        "k": k,
        "n_elements": n_elements,
        "element_bytes": int(element_bytes),
        "message_bytes": int(n_elements * element_bytes),
        "phases": list(results[0]["phases"]),
        "equal": bool(np.array_equal(stack["result"], stack["all_reduce"])),
        "max_abs_diff": float(np.abs(stack["result"] - stack["all_reduce"]).max()),
        "seed": seed,
        **where_it_ran(Schedule, backend=results[0]["backend"]),
    }
    return Schedule.from_entries(
        entries, meta,
        bytes_sent=np.array([r["bytes_sent"] for r in results], dtype=np.int64),
        bytes_received=received,
        chunk_sizes=np.array(chunk_sizes, dtype=np.int64),
        inputs=stack["input"],
        results=stack["result"],
        all_reduce=stack["all_reduce"],
    )
