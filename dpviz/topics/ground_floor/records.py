"""The record of a data-parallel training run, and the claims of the notes checked on it.

Written by the rank workers of :mod:`dpviz.topics.ground_floor.run_training`; read with numpy alone.
P is the number of parameters, B the examples in one global batch, N the data set's size.
"""

from __future__ import annotations

import hashlib

import numpy as np

from dpviz.engine.schema import Array, Kind, Meta, Record, ran_on, register
from dpviz.engine.tolerance import GRAD_TOLERANCE, rounding_scale

DIVERGED = "where training diverged"  # when NaN or inf may appear in an array

KIND = Kind(
    name="run",
    version=2,
    doc="k ranks trained one model for a few steps, all-reducing their gradients; every rank's gradients, "
        "parameters, losses and step times, and the big-batch gradient computed again in one process.",
    arrays=(
        Array("local_grad", ("steps", "k", "P"), "float32", "each rank's mean gradient over its own shard", nonfinite=DIVERGED),
        Array("reduced_grad", ("steps", "k", "P"), "float32",
              "the gradient each rank stepped with, as it received it (its own gradient if the all-reduce was off)", nonfinite=DIVERGED),
        Array("big_grad", ("steps", "P"), "float32", "the gradient of the whole global batch, computed again in one process", nonfinite=DIVERGED),
        Array("params", ("steps+1", "k", "P"), "float32", "every replica's parameters before each step and after the last",
              optional="when P <= 20,000", nonfinite=DIVERGED),
        Array("param_digest", ("steps+1", "k"), "bytes", "a hash (SHA-1 hex) of every replica's parameter bytes"),
        Array("loss", ("steps", "k"), "float32", "each rank's loss on its shard", nonfinite=DIVERGED),
        Array("big_loss", ("steps",), "float32", "the loss on the whole global batch", nonfinite=DIVERGED),
        Array("t_compute", ("steps", "k"), "float64", "seconds of forward + backward, per rank"),
        Array("t_comm", ("steps", "k"), "float64", "seconds inside the all-reduce, per rank"),
        Array("loop_seconds", ("k",), "float64", "each rank's wall time for the whole loop, seconds"),
        Array("shard_sizes", ("k",), "int64", "examples per rank per step"),
        Array("batch_index", ("steps", "B"), "int64", "data set rows of each global batch, rank 0's shard first"),
        Array("example_rank", ("B",), "int64", "the rank that took each position of a batch"),
        Array("example_grad", ("steps", "B", "P"), "float32", "per-example gradients", optional="for the line model only", nonfinite=DIVERGED),
        Array("x", ("N", "d"), "float32", "the data set's inputs, generated from the seed"),
        Array("y", ("N", 1), "float32", "the data set's targets"),
    ),
    meta=(
        Meta("k", "int", "ranks (devices)"),
        Meta("b", "int", "examples per rank per step (the local batch)"),
        Meta("shard_sizes", "list", "examples per rank per step, one entry per rank"),
        Meta("global_batch", "int or null", "examples per step in all, when the run was asked for by global batch"),
        Meta("steps", "int", "optimizer steps"),
        Meta("model", "str", "\"line\" (two parameters) or \"mlp\""),
        Meta("width", "int", "hidden units per layer (mlp only)"),
        Meta("depth", "int", "hidden layers (mlp only)"),
        Meta("d_in", "int", "input features (mlp only)"),
        Meta("n_params", "int", "P, the model's parameter count"),
        Meta("optimizer", "str", "\"sgd\", \"momentum\" or \"adam\""),
        Meta("lr", "float", "learning rate η"),
        Meta("seed", "int", "seeds the data, the model and every batch draw"),
        Meta("dataset_size", "int", "N, examples in the data set"),
        Meta("all_reduce", "bool", "false: each rank stepped on its own gradient"),
        Meta("mean", "str", "\"plain\" (1/k Σ g_i) or \"weighted\" (Σ b_i g_i / Σ b_i)"),
        Meta("sampling", "str", "\"random\"; \"biased\" (every example of one kind); \"by_kind\" (rank r takes kind r % 2 only)"),
        *ran_on("backend", "device", "threads_per_rank", "torch_version", "host", "platform", "cores", "date"),
    ),
)


@register
class Run(Record):
    """One recorded run; ``meta`` says how it was made, and each array of :data:`KIND` is an attribute."""

    KIND = KIND

    def describe(self) -> str:
        """One line naming the run, from its metadata: what a figure made from it should say."""
        m = self.meta
        sizes = m["shard_sizes"]
        b = sizes[0] if len(set(sizes)) == 1 else "+".join(map(str, sizes))
        model = "line model" if m["model"] == "line" else f"MLP {m['depth']}×{m['width']} ({m['n_params']:,} parameters)"
        return (
            f"k={m['k']}, b={b}, {model}, {m['optimizer']}, lr={m['lr']:g}, {m['steps']} steps, "
            f"{m['backend']} on {m['device']}, {m['threads_per_rank']} thread(s) per rank, "
            f"{m['host']}, {m['cores']} cores, {m['date'][:10]}"
        )

    # --- the notes' claims, checked on the recorded data ---

    def big_batch_rel_err(self) -> np.ndarray:
        """Per step, max |reduced − big| / max |big| over ranks and parameters."""
        return rel_err(self.reduced_grad, self.big_grad[:, None, :], axis=(1, 2))

    def rounding_rel_err(self) -> np.ndarray:
        """Per step, max |reduced − big| relative to the largest gradient summed to make them (each rank's local
        gradient, each example's where recorded, and the big-batch gradient itself): what float32 rounding is a
        fraction of (:mod:`dpviz.engine.tolerance`), however much those gradients cancel in their mean."""
        diff = np.abs(self.reduced_grad.astype(np.float64) - self.big_grad[:, None, :]).max(axis=(1, 2))
        terms = [self.local_grad] + ([self.example_grad] if self.example_grad is not None else [])
        return diff / rounding_scale(self.big_grad, *terms, axis=1)

    def received_identical(self) -> np.ndarray:
        """Per step, True where every rank received bit-identical copies of the reduced gradient."""
        return (self.reduced_grad == self.reduced_grad[:, :1, :]).all(axis=(1, 2))

    def replicas_identical(self) -> np.ndarray:
        """Per recorded state (steps + 1), True where every replica's parameter bytes agree, read from their
        digests (which :meth:`check` compares with the parameters, where the record keeps them)."""
        return (self.param_digest == self.param_digest[:, :1]).all(axis=1)

    def digest_mismatches(self) -> list:
        """``(state, rank)`` where the stored ``param_digest`` is not the digest of the stored ``params`` (none when
        the record keeps only digests). Records made before SHA-1 hold 32-digit BLAKE2b digests, checked as such."""
        if self.params is None:
            return []
        wrong, known = [], {}
        for state, rank in np.ndindex(*self.param_digest.shape):
            row = np.ascontiguousarray(self.params[state, rank])
            key = (row.tobytes(), len(self.param_digest[state, rank]))
            if key not in known:
                known[key] = param_digest(row, len(self.param_digest[state, rank]))
            if known[key] != self.param_digest[state, rank]:
                wrong.append((state, rank))
        return wrong

    def check(self, tol: float = GRAD_TOLERANCE) -> str:
        """Assert the claims that hold for this run's settings and return a one-paragraph report.

        Each claim is read from the arrays it is about: the digests are compared with the parameters they stand
        for (where the record keeps them), and with the all-reduce the ranks' losses must average (weighted by
        their shards) to the big-batch loss, as the gradients must, so that a record whose parameters or losses
        were changed after the run fails here.
        """
        lines = []
        wrong = self.digest_mismatches()
        assert not wrong, (f"the stored parameter digests are not the digests of the stored parameters at "
                           f"{len(wrong)} (state, rank) pair{'s' if len(wrong) > 1 else ''}, the first {wrong[0]}")
        if self.meta["all_reduce"]:
            assert self.received_identical().all(), "ranks received different reduced gradients"
            assert self.replicas_identical().all(), f"replicas differ at states {np.flatnonzero(~self.replicas_identical())}"
            lines.append(f"every rank received bit-identical reduced gradients at all {self.steps} steps")
            lines.append(f"all {self.k} replicas held bit-identical parameters after every step")
            if self.meta["mean"] == "weighted" or len(set(self.meta["shard_sizes"])) == 1:
                err = self.big_batch_rel_err().max()
                of = "(max relative error)"
                if err > tol:  # a big-batch gradient much smaller than the gradients summed to make it: see tolerance
                    err, of = self.rounding_rel_err().max(), "of the largest gradient summed"
                assert err <= tol, f"reduced gradient differs from the big-batch gradient by {err:.2e} {of} > {tol:g}"
                sizes = np.asarray(self.meta["shard_sizes"], dtype=np.float64)
                mean_loss = (self.loss.astype(np.float64) * sizes).sum(axis=1) / sizes.sum()
                loss_err = rel_err(mean_loss, self.big_loss)
                assert loss_err <= tol, (f"the ranks' losses, averaged over their shards, differ from the big-batch loss "
                                         f"by {loss_err:.2e} > {tol:g}")
                lines.append(f"the reduced gradient matched the big-batch gradient to {err:.1e} {of}")
        return "; ".join(lines) + "."


def param_digest(row: np.ndarray, length: int = 40) -> bytes:
    """The digest the ranks record of one replica's parameters: SHA-1 of their float32 bytes, as hex (40 digits);
    ``length=32``: the BLAKE2b (16-byte) digest of records made before SHA-1."""
    data = memoryview(np.ascontiguousarray(row, dtype=np.float32)).cast("B")
    h = hashlib.blake2b(data, digest_size=16) if length == 32 else hashlib.sha1(data)
    return h.hexdigest().encode()


def rel_err(a, b, axis=None) -> np.ndarray | float:
    """max |a − b| / max |b| (over ``axis``; everything by default): the comparison every chapter uses.

    A zero reference counts as scale 1, so two zero vectors compare as 0.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    a, b = np.broadcast_arrays(a, b)
    diff = np.abs(a - b).max(axis=axis)
    scale = np.abs(b).max(axis=axis)
    out = diff / np.where(scale > 0, scale, 1.0)
    return float(out) if np.ndim(out) == 0 else out
