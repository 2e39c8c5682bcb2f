"""Sharding everything (ZeRO stages 0 to 3, FSDP): what one rank holds at each phase of a step, what it sends, and the time.

A model is trained here as its layers, each one *unit*: the layer's parameters laid end to end in one flat
vector, padded with zeros to a multiple of k so that it cuts into k equal chunks (as FSDP's flat parameters
do). Rank r owns chunk ``(r + 1) mod k`` of every unit, the chunk the hand-written ring's reduce-scatter
leaves complete on it (:func:`dpviz.topics.all_reduce.rank_collectives.owned_chunk`). With ``n`` the padded parameter count,
``n / k`` a rank's shard and ``n_max`` the largest unit, one float32 rank with Adam holds, in bytes:

    stage            params   grads    optimizer   layer (forward, backward)   sends per step
    0 plain          4 n      4 n      8 n         0, 0                         2 (k-1)/k · 4n  (all-reduce)
    1 Adam sharded   4 n      4 n      8 n/k       0, 0                         2 (k-1)/k · 4n  (reduce-scatter g, all-gather θ)
    2 + gradients    4 n      4 n/k    8 n/k       0, 4 n_max                   2 (k-1)/k · 4n  (the same two)
    3 + parameters   4 n/k    4 n/k    8 n/k       4 n_max, 8 n_max             3 (k-1)/k · 4n  (all-gather θ twice, reduce-scatter g)

"layer" is what exists only around one layer's forward or backward: at stage 2 the layer's full gradient
until its reduce-scatter; at stage 3 the layer's gathered parameters (forward), and those gathered again
with the layer's full gradient (backward). In float32 with Adam (4 bytes each for θ and g, 8 for m and v) the first
three columns add up to 16P, 8P + 8P/k, 4P + 12P/k and 16P/k
(:func:`dpviz.topics.splitting.theory_memory.bytes_per_rank`) whenever every layer divides by k. These are the ZeRO paper's stages counted in float32; the paper's own totals are for
mixed precision (2 + 2 + 12 bytes a parameter): 16P, 4P + 12P/k, 2P + 14P/k and 16P/k.
Activations, autograd's temporaries and the ring's two receive buffers are not counted.

    bytes_held(unit_sizes=(496, 992, 32), k=4, zero_stage=3)   # (3 phases, 4 categories) of bytes
    step_trace((496, 992, 32), k=4, zero_stage=3)               # the events of one step, and the bytes after each
    t_comm_zero(4, 6080, alpha=1e-5, beta=1e9, zero_stage=3, layers=3)

numpy only.
"""

from __future__ import annotations

import hashlib

import numpy as np

from dpviz.engine.checks import check_choice, check_int, check_real
from dpviz.topics.ground_floor import costmodel
from dpviz.topics.ground_floor.links import PRESETS
from dpviz.topics.splitting.theory_memory import ZERO_STAGES

PHASES = ("forward", "backward", "step")
CATEGORIES = ("params", "grads", "optimizer", "layer")
STAGE_NAMES = {0: "plain data parallelism", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3 (FSDP)"}
ADAM_COPIES = 2  # m and v, each the size of what the rank updates
RING_PASSES = {0: 2, 1: 2, 2: 2, 3: 3}  # ring phases over the whole model per step: each sends (k-1)/k of it
# What a rank's trace of one step records (dpviz.topics.sharding.rank_sharding.Meter.mark), in the order of the codes:
TRACE_ACTIONS = (
    "begin",           # the step starts
    "forward",         # the forward pass starts
    "backward",        # the backward pass starts
    "step",            # Adam's step starts
    "end",             # the step ends (after the stage's last collective)
    "gather",          # a layer's full parameters are allocated and their all-gather starts (ZeRO-3)
    "gathered",        # that all-gather is done: the layer computes with them
    "free",            # the gathered parameters are let go
    "grad",            # a layer's full gradient is allocated, for its backward to fill (ZeRO-2, ZeRO-3)
    "reduce-scatter",  # its reduce-scatter starts
    "reduced",         # it is done: the rank keeps its chunk, the full gradient is let go
)
NO_LAYER = -1  # the layer of an event that concerns no one layer (begin, forward, backward, step, end)


def owned_chunk(rank: int, k: int) -> int:
    """The chunk of each unit that ``rank`` owns: ``(rank + 1) mod k``, as :func:`dpviz.topics.all_reduce.rank_collectives.owned_chunk`."""
    return (rank + 1) % k


def padded_sizes(unit_sizes, k: int) -> np.ndarray:
    """Each unit's parameter count rounded up to a multiple of k: what it occupies, so that it splits evenly."""
    k = check_int("k", k, low=1)
    sizes = np.asarray([check_int("unit_sizes", int(n), low=1) for n in unit_sizes], dtype=np.int64)
    return -(-sizes // k) * k


def bytes_held(unit_sizes, k: int, *, zero_stage: int, element_bytes: int = 4) -> np.ndarray:
    """(phases, categories): the bytes one rank holds at the peak of each phase, by the table in the module doc.

    ``unit_sizes``: each layer's parameter count, in order; ``k`` ranks; float32 Adam by default.
    """
    stage = check_choice("zero_stage", zero_stage, ZERO_STAGES)
    element_bytes = check_int("element_bytes", element_bytes, low=1)
    padded = padded_sizes(unit_sizes, k)
    n, shard, largest = int(padded.sum()), int(padded.sum()) // k, int(padded.max())
    params = shard if stage >= 3 else n
    grads = shard if stage >= 2 else n
    state = ADAM_COPIES * (shard if stage >= 1 else n)
    layer = {0: (0, 0), 1: (0, 0), 2: (0, largest), 3: (largest, 2 * largest)}[stage]
    table = np.zeros((len(PHASES), len(CATEGORIES)), np.int64)
    table[:, :3] = (params, grads, state)
    table[0, 3], table[1, 3] = layer
    return table * element_bytes


def step_trace(unit_sizes, k: int, *, zero_stage: int, element_bytes: int = 4) -> tuple:
    """The events of one training step at ``zero_stage`` as the ranks trace them, and the bytes held after each.

    Returns ``(layers, actions, held)``, three int64 vectors of one length: the layer of each event
    (:data:`NO_LAYER` for none), its code in :data:`TRACE_ACTIONS`, and the bytes one rank holds right after
    it, every category of :func:`bytes_held` together. At rest a rank holds ``bytes_held(...)[-1].sum()``;
    ZeRO-3 gathers layer 0, 1, ... for the forward and frees each after its use, then, from the last layer
    back, gathers each again, allocates its full gradient, frees the parameters and reduce-scatters the
    gradient; ZeRO-2 makes and reduce-scatters each layer's gradient the same way, its parameters held whole.
    """
    stage = check_choice("zero_stage", zero_stage, ZERO_STAGES)
    element_bytes = check_int("element_bytes", element_bytes, low=1)
    padded = padded_sizes(unit_sizes, k) * element_bytes
    rest = int(bytes_held(unit_sizes, k, zero_stage=stage, element_bytes=element_bytes)[-1].sum())
    events = [(NO_LAYER, "begin", rest), (NO_LAYER, "forward", rest)]
    if stage == 3:
        for i, n in enumerate(padded.tolist()):
            events += [(i, "gather", rest + n), (i, "gathered", rest + n), (i, "free", rest)]
    events.append((NO_LAYER, "backward", rest))
    if stage >= 2:
        for i in reversed(range(len(padded))):
            n = int(padded[i])
            gathered = n if stage == 3 else 0
            if stage == 3:
                events += [(i, "gather", rest + n), (i, "gathered", rest + n)]
            events += [(i, "grad", rest + gathered + n)]
            if stage == 3:
                events += [(i, "free", rest + n)]
            events += [(i, "reduce-scatter", rest + n), (i, "reduced", rest)]
    events += [(NO_LAYER, "step", rest), (NO_LAYER, "end", rest)]
    layers, actions, held = zip(*events)
    return (np.array(layers, np.int64), np.array([TRACE_ACTIONS.index(a) for a in actions], np.int64),
            np.array(held, np.int64))


def bytes_sent(unit_sizes, k: int, *, zero_stage: int, element_bytes: int = 4) -> dict:
    """Bytes one rank sends per step: ``{"reduce_scatter": ..., "all_gather": ...}``, each ring pass (k-1)/k of the model."""
    stage = check_choice("zero_stage", zero_stage, ZERO_STAGES)
    element_bytes = check_int("element_bytes", element_bytes, low=1)
    one_pass = int(padded_sizes(unit_sizes, k).sum()) // k * (k - 1) * element_bytes
    return {"reduce_scatter": one_pass, "all_gather": (RING_PASSES[stage] - 1) * one_pass}


def t_comm_zero(k, M, alpha, beta, *, zero_stage: int, layers: int = 1):
    """Seconds of ring communication in one step of ZeRO stage ``zero_stage``, by the cost model's α-β terms.

    Stages 0 to 2 send what one ring all-reduce sends, ``2 (k-1)/k · M / β`` (stage 0 all-reduces the gradient;
    stages 1 and 2 reduce-scatter it and all-gather the updated parameters); stage 3 gathers the parameters a
    second time, for the backward pass: ``3 (k-1)/k · M / β``, 1.5 times as much. Each pass is one ring per
    layer, so ``(k-1)`` latencies α per layer and pass; stage 0 all-reduces the whole gradient at once.
    """
    stage = check_choice("zero_stage", zero_stage, ZERO_STAGES)
    passes = RING_PASSES[stage]
    rings = rings_per_step(stage, layers)
    # t_comm_notes(k, M, 0, β) is one pass's bytes term, (k-1)/k · M / β; α is added per ring step
    bandwidth = passes * costmodel.t_comm_notes(k, M, 0.0, beta)
    latency = check_real("alpha", alpha, low=0) * rings * (np.asarray(k, dtype=float) - 1)
    total = latency + bandwidth
    return float(total) if np.ndim(total) == 0 else total


def rings_per_step(zero_stage: int, layers: int = 1) -> int:
    """Ring collectives one rank calls per step: plain data parallelism reduce-scatters and all-gathers the whole
    gradient (2); ZeRO-1 and ZeRO-2 one reduce-scatter and one all-gather per layer (2 per layer); ZeRO-3 two
    all-gathers and one reduce-scatter per layer (3 per layer)."""
    stage = check_choice("zero_stage", zero_stage, ZERO_STAGES)
    layers = check_int("layers", layers, low=1)
    return RING_PASSES[stage] * (1 if stage == 0 else layers)


def t_comm_zero_on_links(k, M, *, zero_stage: int, layers: int = 1) -> dict:
    """:func:`t_comm_zero` on each preset link of :mod:`dpviz.topics.ground_floor.links`: ``{link name: seconds}``."""
    return {name: t_comm_zero(k, M, link.alpha, link.beta, zero_stage=zero_stage, layers=layers)
            for name, link in PRESETS.items()}


# --- where each parameter lives: the padded layout, in numpy ------------------------------------------------


def pad(params: np.ndarray, unit_sizes, k: int) -> np.ndarray:
    """The flat parameters (P,) laid out unit by unit, each padded with zeros to a multiple of k: (n,)."""
    padded = padded_sizes(unit_sizes, k)
    out = np.zeros(int(padded.sum()), dtype=params.dtype)
    src, dst = 0, 0
    for size, room in zip(unit_sizes, padded):
        out[dst:dst + size] = params[src:src + size]
        src, dst = src + size, dst + int(room)
    return out


def unpad(padded_params: np.ndarray, unit_sizes, k: int) -> np.ndarray:
    """The inverse of :func:`pad`: the P real parameters, padding dropped."""
    rooms = padded_sizes(unit_sizes, k)
    starts = np.concatenate([[0], np.cumsum(rooms)[:-1]])
    return np.concatenate([padded_params[s:s + n] for s, n in zip(starts, unit_sizes)])


def shard_of(padded_params: np.ndarray, unit_sizes, k: int, rank: int) -> np.ndarray:
    """What ``rank`` holds of the padded parameters under ZeRO-3: its owned chunk of every unit, in unit order."""
    rooms = padded_sizes(unit_sizes, k)
    starts = np.concatenate([[0], np.cumsum(rooms)[:-1]])
    chunk = owned_chunk(rank, k)
    return np.concatenate([padded_params[s + chunk * (n // k): s + (chunk + 1) * (n // k)] for s, n in zip(starts, rooms)])


def from_shards(shards, unit_sizes, k: int) -> np.ndarray:
    """The P parameters put back together from the k ranks' ZeRO-3 shards (``shards[r]`` is rank r's)."""
    rooms = padded_sizes(unit_sizes, k)
    out = np.zeros(int(rooms.sum()), dtype=np.asarray(shards[0]).dtype)
    starts = np.concatenate([[0], np.cumsum(rooms)[:-1]])
    for rank, shard in enumerate(shards):
        chunk, at = owned_chunk(rank, k), 0
        for s, n in zip(starts, rooms):
            c = int(n) // k
            out[s + chunk * c: s + (chunk + 1) * c] = shard[at:at + c]
            at += c
    return unpad(out, unit_sizes, k)


def digest(values: np.ndarray) -> bytes:
    """SHA-1 of the exact bytes of a float32 vector, as hex: the same as the ranks' digest of the tensor they hold."""
    return hashlib.sha1(memoryview(np.ascontiguousarray(values, dtype=np.float32)).cast("B")).hexdigest().encode()


def ring_ratio(zero_stage: int) -> float:
    """Bytes sent per step at ``zero_stage`` over plain data parallelism's: 1 for stages 0 to 2, 1.5 for stage 3."""
    stage = check_choice("zero_stage", zero_stage, ZERO_STAGES)
    return RING_PASSES[stage] / RING_PASSES[0]


def mlp_unit_sizes(d_in: int, width: int, depth: int) -> tuple:
    """Parameter counts of :class:`dpviz.topics.ground_floor.rank_models.MLP`'s linear layers, in order: weight plus bias each."""
    sizes, d = [], d_in
    for _ in range(depth):
        sizes.append(d * width + width)
        d = width
    sizes.append(d + 1)
    return tuple(sizes)

