"""Tensor parallelism in bytes: what splitting one linear layer over k ranks makes them exchange.

A linear layer computes ``Y = X W`` with X (batch, d_in) and W (d_in, d_out). Split over k ranks:

* by columns, ``W = [W_1 ... W_k]``: rank i computes ``Y_i = X W_i``, a (batch, d_out/k) block of
  Y. An **all-gather** puts the blocks side by side on every rank. On the way back, each rank's
  ``dY_i W_iᵀ`` is only a part of dX, so the parts are summed by an **all-reduce**.
* by rows, W stacked from row blocks ``W_i`` and X cut into the matching column blocks ``X_i``:
  rank i computes ``X_i W_i``, a (batch, d_out) *partial sum* of Y, and an **all-reduce** adds
  them. On the way back, rank i's ``dY W_iᵀ`` is its own block of dX; an **all-gather** joins them.

In a ring, an all-gather of n bytes makes each rank send ``(k-1)/k · n`` and an all-reduce twice
that. The bytes scale with the *activations* (batch × width), and they are paid at every split
layer, forward and backward, every step. Data parallelism instead all-reduces the *gradient*,
``2(k-1)/k · 4P`` bytes per rank, once per step.

    exchange_bytes(batch=8, d_in=8, d_out=8, k=2, split="column")   # {"forward": 128, "backward": 256}

numpy only.
"""

from __future__ import annotations

from dpviz.engine.checks import check_choice, check_int
from dpviz.topics.ground_floor.costmodel import bandwidth_fraction

SPLITS = ("column", "row")
EXCHANGES = {  # (forward, backward) collective of each split
    "column": ("all-gather", "all-reduce"),
    "row": ("all-reduce", "all-gather"),
}


def check_split(d_in: int, d_out: int, k: int, split: str) -> tuple[int, int, int, str]:
    """Check that ``split`` cuts the layer into k equal blocks; return the checked values."""
    k = check_int("k", k, low=1)
    d_in, d_out = check_int("d_in", d_in, low=1), check_int("d_out", d_out, low=1)
    split = check_choice("split", split, SPLITS)
    name, size = ("d_out", d_out) if split == "column" else ("d_in", d_in)
    if size % k:
        raise ValueError(
            f"{name} must be a multiple of k={k} for a {split} split into {k} equal blocks; got {name}={size}."
        )
    return d_in, d_out, k, split


def ring_bytes(collective: str, n_bytes: int, k: int) -> float:
    """Bytes each rank sends in a ring ``"all-gather"`` or ``"all-reduce"`` of a result of ``n_bytes`` bytes."""
    check_choice("collective", collective, ("all-gather", "all-reduce", "reduce-scatter"))
    share = bandwidth_fraction(check_int("k", k, low=1))
    n_bytes = check_int("n_bytes", n_bytes, low=0)
    return (2 if collective == "all-reduce" else 1) * share * n_bytes


def exchange_bytes(batch: int, d_in: int, d_out: int, k: int, split: str, *, element_bytes: int = 4) -> dict:
    """Bytes each rank sends for one split linear layer: ``{"forward": ..., "backward": ...}``.

    Forward exchanges Y (batch × d_out values), backward exchanges dX (batch × d_in values),
    with the collectives of :data:`EXCHANGES`.
    """
    batch = check_int("batch", batch, low=1)
    d_in, d_out, k, split = check_split(d_in, d_out, k, split)
    element_bytes = check_int("element_bytes", element_bytes, low=1)
    forward, backward = EXCHANGES[split]
    return {
        "forward": ring_bytes(forward, batch * d_out * element_bytes, k),
        "backward": ring_bytes(backward, batch * d_in * element_bytes, k),
    }


def data_parallel_bytes(n_params: int, k: int, *, element_bytes: int = 4) -> float:
    """Bytes each rank sends to ring-all-reduce the gradient of ``n_params`` parameters: once per step."""
    n_params = check_int("n_params", n_params, low=1)
    return ring_bytes("all-reduce", n_params * check_int("element_bytes", element_bytes, low=1), k)
