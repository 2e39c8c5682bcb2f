"""What one rank must hold in memory to train: parameters, gradients and optimizer state, with and without sharding.

Under plain data parallelism every rank holds all ``P`` parameters, all ``P`` gradients and the
optimizer's state for all of them: none for SGD, one copy for momentum (the velocity), two for
Adam (the running means of g and g²). In float32 that is ``4 P (1 + 1 + c)`` bytes per rank, the
same for any k: adding replicas never makes one replica smaller.

ZeRO shards that memory over the k ranks of the data-parallel group:

    stage   parameters   gradients   optimizer state
    0       P            P           c P              plain data parallelism
    1       P            P           c P / k          each rank updates its own 1/k of the parameters
    2       P            P / k       c P / k          ... and keeps only the gradients of its 1/k
    3       P / k        P / k       c P / k          ... and holds only its 1/k of the parameters

Stage 1 is what the chapter runs for real; chapter "shard everything" runs all four
(:mod:`dpviz.topics.sharding.run_sharding`, measured per phase beside :func:`dpviz.topics.sharding.theory.bytes_held`). Sizes that do not
divide by k round up: the largest shard is what a rank must find room for.

    bytes_per_rank(1_000_000, k=4, zero_stage=1)     # {"params": 4e6, "grads": 4e6, "optimizer": 2e6, "total": 1e7}

numpy only.
"""

from __future__ import annotations

import math

from dpviz.engine.checks import check_choice, check_int, check_real

STATE_COPIES = {"sgd": 0, "momentum": 1, "adam": 2}  # optimizer state, in copies of the parameters
ZERO_STAGES = (0, 1, 2, 3)
PARTS = ("params", "grads", "optimizer")


def bytes_per_rank(n_params: int, k: int = 1, *, zero_stage: int = 0, optimizer: str = "adam",
                   element_bytes: int = 4) -> dict:
    """Bytes one rank holds for parameters, gradients and optimizer state, and their total.

    ``n_params`` parameters, ``k`` data-parallel ranks, ZeRO stage 0 (plain data parallelism) to
    3, ``element_bytes`` per value (4 for float32).
    """
    n_params = check_int("n_params", n_params, low=1)
    k = check_int("k", k, low=1)
    stage = check_choice("zero_stage", zero_stage, ZERO_STAGES)
    copies = STATE_COPIES[check_choice("optimizer", optimizer, tuple(STATE_COPIES))]
    element_bytes = check_int("element_bytes", element_bytes, low=1)
    shard = math.ceil(n_params / k)
    counts = {
        "params": shard if stage >= 3 else n_params,
        "grads": shard if stage >= 2 else n_params,
        "optimizer": copies * (shard if stage >= 1 else n_params),
    }
    out = {part: counts[part] * element_bytes for part in PARTS}
    out["total"] = sum(out.values())
    return out


def bytes_per_parameter(k: int = 1, *, zero_stage: int = 0, optimizer: str = "adam", element_bytes: int = 4) -> float:
    """Bytes per model parameter that one rank holds, as k grows large compared with rounding: ``total / P``."""
    k = check_int("k", k, low=1)
    stage = check_choice("zero_stage", zero_stage, ZERO_STAGES)
    copies = STATE_COPIES[check_choice("optimizer", optimizer, tuple(STATE_COPIES))]
    element_bytes = check_int("element_bytes", element_bytes, low=1)
    params = 1 / k if stage >= 3 else 1
    grads = 1 / k if stage >= 2 else 1
    state = copies / k if stage >= 1 else copies
    return (params + grads + state) * element_bytes


def fits(n_params: int, memory_bytes: float, k: int = 1, **options) -> bool:
    """Whether parameters, gradients and optimizer state fit in ``memory_bytes`` on each rank (activations aside)."""
    memory_bytes = check_real("memory_bytes", memory_bytes, low=0, low_open=True)
    return bytes_per_rank(n_params, k, **options)["total"] <= memory_bytes


def smallest_k(n_params: int, memory_bytes: float, *, k_max: int = 1 << 20, **options) -> int | None:
    """The fewest ranks with which the model's training state fits on each one; None if no k up to ``k_max`` does.

    Under plain data parallelism (``zero_stage=0``) k does not matter: it is 1 or None.
    """
    k_max = check_int("k_max", k_max, low=1)
    if fits(n_params, memory_bytes, 1, **options):
        return 1
    if not fits(n_params, memory_bytes, k_max, **options):
        return None
    lo, hi = 1, k_max  # fits(hi) holds and fits(lo) does not; the total only falls as k grows
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(n_params, memory_bytes, mid, **options) else (mid, hi)
    return hi


# --- mixed precision: the ZeRO paper's accounting -----------------------------------------------------------
# Mixed-precision Adam keeps fp16 parameters (2 bytes) and fp16 gradients (2 bytes) for the forward and
# backward passes, and for the update an fp32 copy of the parameters plus Adam's fp32 m and v (4 + 4 + 4 = 12
# bytes, K = 12 in the paper). Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
# Parameter Models" (SC 2020), Figure 1: Ψ = 7.5 B parameters on N_d = 64 GPUs hold 120 GB, 31.4 GB, 16.6 GB
# and 1.9 GB per device at stages 0 to 3.
MIXED_PRECISION = {"params": 2, "grads": 2, "optimizer": 12}  # bytes per parameter, by part
FP32_ADAM = {"params": 4, "grads": 4, "optimizer": 8}         # what dpviz's real runs hold


def bytes_per_rank_by_part(n_params: int, k: int = 1, *, zero_stage: int = 0, part_bytes: dict = FP32_ADAM) -> dict:
    """Bytes one rank holds for each part, ``part_bytes[part]`` bytes per parameter, sharded as ZeRO's stage says.

    ``part_bytes=MIXED_PRECISION`` gives the ZeRO paper's 2 + 2 + 12; the default, float32 Adam, equals
    :func:`bytes_per_rank` with ``optimizer="adam"``. Shards round up, as in :func:`bytes_per_rank`.
    """
    n_params = check_int("n_params", n_params, low=1)
    k = check_int("k", k, low=1)
    stage = check_choice("zero_stage", zero_stage, ZERO_STAGES)
    if set(part_bytes) != set(PARTS):
        raise ValueError(f"part_bytes must give bytes per parameter for exactly {', '.join(PARTS)}; got {sorted(part_bytes)}.")
    for part in PARTS:
        check_real(f"part_bytes[{part!r}]", part_bytes[part], low=0)
    shard = math.ceil(n_params / k)
    sharded_from = {"optimizer": 1, "grads": 2, "params": 3}  # the stage from which each part is cut into k
    out = {part: (shard if stage >= sharded_from[part] else n_params) * part_bytes[part] for part in PARTS}
    out["total"] = sum(out.values())
    return out


def zero_paper_gb(n_params: float = 7.5e9, k: int = 64) -> dict:
    """GB (10⁹ bytes) per device at each ZeRO stage under mixed-precision Adam: the ZeRO paper's Figure 1.

    ``zero_paper_gb()`` gives ``{0: 120.0, 1: 31.40625, 2: 16.640625, 3: 1.875}``, which the paper prints as
    120, 31.4, 16.6 and 1.9 GB.
    """
    if isinstance(n_params, float) and n_params.is_integer():
        n_params = int(n_params)  # 7.5e9 is a whole number of parameters
    n = check_int("n_params", n_params, low=1)
    return {stage: bytes_per_rank_by_part(n, k, zero_stage=stage, part_bytes=MIXED_PRECISION)["total"] / 1e9
            for stage in ZERO_STAGES}
