"""The record of one linear layer split over k ranks, by columns and by rows, forward and backward.

Written by :func:`dpviz.topics.splitting.run_tensor_parallel.record_tensor_split`; drawn by
:mod:`dpviz.topics.splitting.plots_tensor_parallel`. The layer is ``Y = X W`` with X (B, d_in) and W (d_in, d_out),
and the gradient arriving from above is ``dY`` (B, d_out). Split index 0 is the column split
(W = [W_1 ... W_k]), 1 the row split; pass index 0 is the forward pass, 1 the backward.
"""

from __future__ import annotations

import numpy as np

from dpviz.topics.ground_floor.records import rel_err
from dpviz.engine.schema import Array, Kind, Meta, Record, ran_on, register
from dpviz.engine.tolerance import GRAD_TOLERANCE
from dpviz.topics.splitting import theory_tensor_parallel as theory

SPLITS = theory.SPLITS
PASSES = ("forward", "backward")

KIND = Kind(
    name="tensor_split",
    version=1,
    doc="k ranks computed one linear layer Y = X W with W split by columns and then by rows, exchanging "
        "outputs (forward) and input gradients (backward) with a hand-written ring; what every rank ended "
        "with, the bytes it sent, and the unsplit layer's results.",
    arrays=(
        Array("x", ("B", "d_in"), "float32", "the layer's input X"),
        Array("w", ("d_in", "d_out"), "float32", "the whole weight W"),
        Array("dy", ("B", "d_out"), "float32", "the gradient of the loss with respect to Y, the same on every rank"),
        Array("y", ("B", "d_out"), "float32", "X W computed unsplit, in one process"),
        Array("dx", ("B", "d_in"), "float32", "dY Wᵀ computed unsplit (autograd)"),
        Array("dw", ("d_in", "d_out"), "float32", "Xᵀ dY computed unsplit (autograd)"),
        Array("y_split", (2, "k", "B", "d_out"), "float32", "each rank's Y after the exchange, per split"),
        Array("dx_split", (2, "k", "B", "d_in"), "float32", "each rank's dX after the exchange, per split"),
        Array("dw_split", (2, "d_in", "d_out"), "float32", "the ranks' blocks of dW put together, per split"),
        Array("block", (2, "k"), "int64", "which block of W each rank held, per split"),
        Array("local_y", (2, "k"), "int64", "values of Y each rank computed before the exchange, per split"),
        Array("bytes_sent", (2, 2, "k"), "int64", "bytes each rank sent, per split and pass"),
        Array("same_as_dist", (2, 2), "bool",
              "per split and pass, every rank's ring result equals dist.all_gather / dist.all_reduce bit for bit"),
    ),
    meta=(
        Meta("k", "int", "ranks"),
        Meta("batch", "int", "B, rows of X"),
        Meta("d_in", "int", "input features"),
        Meta("d_out", "int", "output features"),
        Meta("n_params", "int", "d_in · d_out, the weight's size"),
        Meta("exchanges", "dict", "the collective each split uses, forward and backward"),
        Meta("seed", "int", "seeds X, W and dY"),
        *ran_on("backend", "torch_version", "host", "cores", "date"),
    ),
)


@register
class TensorSplit(Record):
    """One recorded tensor-parallel layer; each array of :data:`KIND` is an attribute."""

    KIND = KIND

    def describe(self) -> str:
        m = self.meta
        return (
            f"linear layer {m['d_in']}→{m['d_out']} on a batch of {m['batch']}, split over k={m['k']} ranks by columns "
            f"and by rows, {m['backend']}, {m['host']}, {m['cores']} cores, {m['date'][:10]}"
        )

    def rel_errs(self) -> dict:
        """``{(split, name): max relative error}`` of Y, dX and dW against the unsplit layer, over ranks."""
        out = {}
        for i, split in enumerate(SPLITS):
            out[(split, "y")] = rel_err(self.y_split[i], self.y[None])
            out[(split, "dx")] = rel_err(self.dx_split[i], self.dx[None])
            out[(split, "dw")] = rel_err(self.dw_split[i], self.dw)
        return out

    def modeled_bytes(self) -> dict:
        """``{split: {"forward": bytes, "backward": bytes}}`` per rank, from :func:`theory.exchange_bytes`."""
        m = self.meta
        return {s: theory.exchange_bytes(m["batch"], m["d_in"], m["d_out"], m["k"], s) for s in SPLITS}

    def check(self, tol: float = GRAD_TOLERANCE) -> str:
        """Assert every rank's Y, dX and dW equal the unsplit layer's to rounding and the bytes match the ring's count."""
        errs = self.rel_errs()
        worst = max(errs.values())
        assert worst <= tol, f"a split differs from the unsplit layer: {max(errs, key=errs.get)} by {worst:.2e} > {tol:g}"
        identical = (self.y_split == self.y_split[:, :1]).all() and (self.dx_split == self.dx_split[:, :1]).all()
        assert identical, "ranks ended with different Y or dX"
        assert self.same_as_dist.all(), "a hand-written exchange differs from torch.distributed's"
        modeled = self.modeled_bytes()
        for i, split in enumerate(SPLITS):
            for j, name in enumerate(PASSES):
                assert (self.bytes_sent[i, j] == modeled[split][name]).all(), (split, name, self.bytes_sent[i, j])
        return (
            f"both splits over k={self.k}: every rank's Y, dX and dW equal the unsplit layer's to {worst:.1e} "
            f"(max relative error); the ring's bytes per rank are the counts of the formula."
        )
