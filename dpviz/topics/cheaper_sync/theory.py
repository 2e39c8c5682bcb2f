"""Three ways to shrink T_comm in S = T_compute / (T_compute/k + T_comm), priced with the α-β model (numpy only).

* **Send fewer bytes.** fp16 compression all-reduces M/2 bytes instead of M. PowerSGD (Vogels et al. 2019)
  replaces each n×m gradient matrix by two factors, P (n×r) and Q (m×r), and all-reduces those:
  :func:`powersgd_elements` counts what it sends exactly as torch's ``powerSGD_hook`` decides it (a matrix is
  compressed only where ``(n₁ + n₂)·r·min_compression_rate < n₁·n₂`` for an n₁×n₂ matrix; vectors and small matrices go as they are),
  and it sends them in three all-reduces, one more latency term each (:func:`t_comm_powersgd`).
* **Sync less often.** Local SGD takes H local steps, then averages the parameters once: one all-reduce of M
  bytes per H steps, so T_comm per step is the ring's divided by H (:func:`t_comm_local_sgd`).
* **Sync in two levels.** k = G·g ranks in G groups of g on fast links, the groups joined by a slow one:
  reduce-scatter inside each group, all-reduce each 1/g of the gradient across the groups, all-gather inside
  (:func:`t_comm_two_level`). A flat ring over all k crosses the slow link at every one of its steps, and a ring
  is as fast as its slowest hop (:func:`t_comm_flat`).

:func:`link_bytes_two_level` and :func:`link_bytes_ring` give, element for element, the bytes each rank sends
to each other rank, as the hand-written rings cut their chunks (``tensor_split``: the first ``n % g`` chunks one
element longer); the records' counts are checked against them.
"""

from __future__ import annotations

import numpy as np

from dpviz.engine.checks import check_int, check_real
from dpviz.topics.ground_floor import costmodel
from dpviz.topics.ground_floor.links import PRESETS, Link

ELEMENT_BYTES = 4          # float32
FP16_RATIO = 0.5           # bytes sent by fp16 compression per byte of float32 gradient
POWERSGD_ALLREDUCES = 3    # uncompressed tensors, then the Ps, then the Qs: three all-reduces per step
INNER, OUTER = "NVLink", "10 Gb Ethernet"  # the default two levels: fast inside a group, slow between groups


def _shapes(shapes) -> list[tuple[int, int]]:
    """Each parameter as the hook sees it, a matrix (rows, cols) = (shape[0], numel / shape[0]); a vector is (rows, 1)."""
    out = []
    for shape in shapes:
        shape = tuple(int(s) for s in np.atleast_1d(shape))
        if not shape or min(shape) < 1:
            raise ValueError(f"shapes must list parameter shapes with every size >= 1; got {shape}.")
        rows = shape[0]
        out.append((rows, int(np.prod(shape)) // rows))
    return out


def powersgd_elements(shapes, rank: int, *, min_compression_rate: float = 2.0) -> dict:
    """Elements PowerSGD all-reduces per step for parameters of these ``shapes``, as torch's hook decides.

    Returns ``{"uncompressed": ..., "p": ..., "q": ..., "total": ..., "before": ...}`` in elements, ``before``
    being the uncompressed gradient's size. A matrix of n₁ rows and n₂ columns is compressed at rank
    r' = min(n₁, n₂, rank) where ``(n₁ + n₂)·r'·min_compression_rate < n₁·n₂``; then it sends n₁·r' (P) and
    n₂·r' (Q) instead of n₁·n₂.
    """
    rank = check_int("rank", rank, low=1)
    min_compression_rate = check_real("min_compression_rate", min_compression_rate, low=0.0)
    counts = {"uncompressed": 0, "p": 0, "q": 0, "before": 0}
    for rows, cols in _shapes(shapes):
        r = min(rows, cols, rank)
        counts["before"] += rows * cols
        if (rows + cols) * r * min_compression_rate < rows * cols:
            counts["p"] += rows * r
            counts["q"] += cols * r
        else:
            counts["uncompressed"] += rows * cols
    counts["total"] = counts["uncompressed"] + counts["p"] + counts["q"]
    return counts


def t_comm_fp16(k, M, alpha, beta):
    """Seconds of a ring all-reduce of the gradient cast to fp16: M/2 bytes instead of M."""
    return costmodel.t_comm_ring(k, np.multiply(M, FP16_RATIO), alpha, beta)


def t_comm_powersgd(k, shapes, rank: int, alpha, beta, *, min_compression_rate: float = 2.0,
                    element_bytes: int = ELEMENT_BYTES):
    """Seconds of one PowerSGD step's sync: three ring all-reduces (uncompressed tensors, Ps, Qs).

    The compute it adds (two matrix products and two orthogonalisations per matrix) is left out: this prices
    the wire alone.
    """
    element_bytes = check_int("element_bytes", element_bytes, low=1)
    sent = powersgd_elements(shapes, rank, min_compression_rate=min_compression_rate)
    return sum(costmodel.t_comm_ring(k, sent[part] * element_bytes, alpha, beta) for part in ("uncompressed", "p", "q"))


def t_comm_local_sgd(k, M, alpha, beta, H):
    """Seconds of sync per step in local SGD: one ring all-reduce of the M bytes of parameters every H steps."""
    H = check_int("H", H, low=1) if np.ndim(H) == 0 else costmodel._checked("H", H, check_int, low=1)
    return costmodel._out(np.divide(costmodel.t_comm_ring(k, M, alpha, beta), H))


def _groups(k: int, group_size: int) -> tuple[int, int]:
    k = check_int("k", k, low=1)
    group_size = check_int("group_size", group_size, low=1, high=k)
    if k % group_size:
        raise ValueError(f"group_size must divide k={k} into equal groups; got {group_size}.")
    return k, group_size


def t_comm_two_level(k: int, group_size: int, M, *, inner: Link = PRESETS[INNER], outer: Link = PRESETS[OUTER]):
    """Seconds of the two-level all-reduce: k ranks in k/g groups of g = ``group_size`` on ``inner`` links,
    groups joined by ``outer`` links.

    Reduce-scatter in the group, (g−1)·α_in + (g−1)/g·M/β_in; a ring all-reduce of each rank's M/g bytes
    across the G = k/g groups, 2(G−1)·α_out + 2(G−1)/G·(M/g)/β_out; all-gather in the group, as the first.
    g = k is one flat ring on the inner links; g = 1 one flat ring on the outer ones.
    """
    k, g = _groups(k, group_size)
    G = k // g
    M = costmodel._nonneg("M", M)
    inside = 2 * ((g - 1) * inner.alpha + (g - 1) / g * np.asarray(M, float) / inner.beta)
    between = 2 * (G - 1) * outer.alpha + 2 * (G - 1) / G * (np.asarray(M, float) / g) / outer.beta
    return costmodel._out(inside + between)


def t_comm_flat(k: int, group_size: int, M, *, inner: Link = PRESETS[INNER], outer: Link = PRESETS[OUTER]):
    """Seconds of one flat ring over all k ranks when groups of ``group_size`` share fast links: with more than
    one group the ring crosses the slow ``outer`` link, and every step waits for its slowest hop."""
    k, g = _groups(k, group_size)
    link = inner if g == k else outer
    return costmodel.t_comm_ring(k, M, link.alpha, link.beta)


def _split(n: int, parts: int) -> np.ndarray:
    """Sizes of ``torch.tensor_split(range(n), parts)``: the first n % parts one longer."""
    return np.array([len(c) for c in np.array_split(np.arange(n), parts)], dtype=np.int64)


def link_bytes_ring(members, n: int, *, element_bytes: int = ELEMENT_BYTES, k: int | None = None) -> np.ndarray:
    """(k, k) bytes rank src sends to rank dst in one ring all-reduce of ``n`` elements over ``members``, in order.

    The member at position i sends to the next one every chunk but one in each phase: every chunk but
    (i + 1) mod g in the reduce-scatter, every chunk but (i + 2) mod g in the all-gather.
    """
    members = [int(m) for m in members]
    k = max(members) + 1 if k is None else k
    out = np.zeros((k, k), np.int64)
    g = len(members)
    if g < 2:
        return out
    sizes = _split(n, g)
    for i, src in enumerate(members):
        out[src, members[(i + 1) % g]] += (2 * n - sizes[(i + 1) % g] - sizes[(i + 2) % g]) * element_bytes
    return out


def link_bytes_two_level(k: int, group_size: int, n: int, *, element_bytes: int = ELEMENT_BYTES) -> np.ndarray:
    """(k, k) bytes each rank sends to each other in the two-level all-reduce of ``n`` elements.

    Groups are blocks of ``group_size`` consecutive ranks; the rank at position i of its group owns chunk
    (i + 1) mod g after the group's reduce-scatter and all-reduces it with the ranks at position i of the
    other groups.
    """
    k, g = _groups(k, group_size)
    n = check_int("n", n, low=0)
    G = k // g
    out = np.zeros((k, k), np.int64)
    chunks = _split(n, g)
    for group in range(G):
        out += link_bytes_ring(range(group * g, (group + 1) * g), n, element_bytes=element_bytes, k=k)
    for i in range(g):
        out += link_bytes_ring([i + group * g for group in range(G)], int(chunks[(i + 1) % g]),
                               element_bytes=element_bytes, k=k)
    return out


def same_group(k: int, group_size: int) -> np.ndarray:
    """(k, k) True where src and dst are in the same group (blocks of ``group_size`` consecutive ranks)."""
    k, g = _groups(k, group_size)
    group = np.arange(k) // g
    return group[:, None] == group[None, :]


def priced(t_compute: float, k: int, M: float, *, link: Link, shapes=None, ranks=(1, 2, 4), periods=(1, 2, 4, 8),
           group_sizes=None, inner: Link = PRESETS[INNER]) -> list[dict]:
    """Each method's modeled T_comm and S beside the plain ring's, on one ``link`` (the slow one for two levels).

    One row per method and knob: ``{"method", "knob", "t_comm", "speedup"}``; the knob is r for PowerSGD (needs
    ``shapes``, the parameters' shapes), H for local SGD and g for two levels (``inner`` inside a group,
    ``link`` between; default every divisor of k). The plain ring's row comes first.
    """
    t_compute = check_real("t_compute", t_compute, low=0.0)
    rows = [("ring", None, costmodel.t_comm_ring(k, M, link.alpha, link.beta)),
            ("fp16", None, t_comm_fp16(k, M, link.alpha, link.beta))]
    if shapes is not None:
        rows += [("powersgd", r, t_comm_powersgd(k, shapes, r, link.alpha, link.beta)) for r in ranks]
    rows += [("local_sgd", H, t_comm_local_sgd(k, M, link.alpha, link.beta, H)) for H in periods]
    sizes = group_sizes if group_sizes is not None else [g for g in range(1, k + 1) if k % g == 0]
    rows += [("two_level", g, t_comm_two_level(k, g, M, inner=inner, outer=link)) for g in sizes]
    return [{"method": m, "knob": knob, "t_comm": float(t), "speedup": float(costmodel.speedup(t_compute, k, t))}
            for m, knob, t in rows]
