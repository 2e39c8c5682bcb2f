"""The record of a data-parallel training run, and the claims of the notes checked on it.

Written by the rank workers of :mod:`dpviz.runs.training`; read with numpy alone.
P is the number of parameters, B the examples in one global batch, N the data set's size.
"""

from __future__ import annotations

import numpy as np

from dpviz.records.schema import Array, Kind, Meta, Record, ran_on, register

KIND = Kind(
    name="run",
    version=2,
    doc="k ranks trained one model for a few steps, all-reducing their gradients; every rank's gradients, "
        "parameters, losses and step times, and the big-batch gradient computed again in one process.",
    arrays=(
        Array("local_grad", ("steps", "k", "P"), "float32", "each rank's mean gradient over its own shard"),
        Array("reduced_grad", ("steps", "k", "P"), "float32",
              "the gradient each rank stepped with, as it received it (its own gradient if the all-reduce was off)"),
        Array("big_grad", ("steps", "P"), "float32", "the gradient of the whole global batch, computed again in one process"),
        Array("params", ("steps+1", "k", "P"), "float32", "every replica's parameters before each step and after the last",
              optional="when P <= 20,000"),
        Array("param_digest", ("steps+1", "k"), "bytes", "a hash (SHA-1 hex) of every replica's parameter bytes"),
        Array("loss", ("steps", "k"), "float32", "each rank's loss on its shard"),
        Array("big_loss", ("steps",), "float32", "the loss on the whole global batch"),
        Array("t_compute", ("steps", "k"), "float64", "seconds of forward + backward, per rank"),
        Array("t_comm", ("steps", "k"), "float64", "seconds inside the all-reduce, per rank"),
        Array("loop_seconds", ("k",), "float64", "each rank's wall time for the whole loop, seconds"),
        Array("shard_sizes", ("k",), "int64", "examples per rank per step"),
        Array("batch_index", ("steps", "B"), "int64", "data set rows of each global batch, rank 0's shard first"),
        Array("example_rank", ("B",), "int64", "the rank that took each position of a batch"),
        Array("example_grad", ("steps", "B", "P"), "float32", "per-example gradients", optional="for the line model only"),
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

    def received_identical(self) -> np.ndarray:
        """Per step, True where every rank received bit-identical copies of the reduced gradient."""
        return (self.reduced_grad == self.reduced_grad[:, :1, :]).all(axis=(1, 2))

    def replicas_identical(self) -> np.ndarray:
        """Per recorded state (steps + 1), True where every replica's parameter bytes agree."""
        return (self.param_digest == self.param_digest[:, :1]).all(axis=1)

    def check(self, tol: float = 1e-5) -> str:
        """Assert the claims that hold for this run's settings and return a one-paragraph report."""
        lines = []
        if self.meta["all_reduce"]:
            assert self.received_identical().all(), "ranks received different reduced gradients"
            assert self.replicas_identical().all(), f"replicas differ at states {np.flatnonzero(~self.replicas_identical())}"
            lines.append(f"every rank received bit-identical reduced gradients at all {self.steps} steps")
            lines.append(f"all {self.k} replicas held bit-identical parameters after every step")
            if self.meta["mean"] == "weighted" or len(set(self.meta["shard_sizes"])) == 1:
                err = self.big_batch_rel_err().max()
                assert err <= tol, f"reduced gradient differs from the big-batch gradient by {err:.2e} > {tol:g}"
                lines.append(f"the reduced gradient matched the big-batch gradient to {err:.1e} (max relative error)")
        return "; ".join(lines) + "."


def verify_summary(run: Run, alone: Run | None = None, *, tol: float = 1e-5) -> list[str]:
    """Assert every claim of the walkthrough (Steps 1 to 6) on one recorded run; return them as lines.

    ``run`` is a line-model run with the all-reduce on and equal shards (its per-example
    gradients and parameters kept). ``alone``, if given, is its twin with the all-reduce off
    (same seed, k, b and steps; it may come from another machine, such as a shipped record),
    for the claim that the replicas drift without the sync.
    A claim that fails raises ``AssertionError`` naming it and the numbers behind it.
    """
    if not isinstance(run, Run):
        raise TypeError(f"run must be a Run record; got {type(run).__name__}.")
    m = run.meta
    if run.example_grad is None or run.params is None or not m["all_reduce"] or len(set(m["shard_sizes"])) > 1:
        raise ValueError("run must be a line-model run with the all-reduce on and equal shards (per-example "
                         f"gradients and parameters kept); got {run.describe()}, all_reduce={m['all_reduce']}.")
    k, b, steps = run.k, int(m["b"]), run.steps
    big = run.big_grad  # (steps, P), computed again in one process from all k·b examples

    def claim(ok, what: str, detail) -> None:
        if not bool(np.all(ok)):
            raise AssertionError(f"{what}: does not hold ({detail})")

    lines = []
    err = rel_err(run.example_grad.mean(axis=1), big, axis=1)
    claim(err <= tol, "each batch gradient is the mean of its examples' gradients", f"relative errors {err}")
    lines.append("each batch gradient is the mean of its examples' gradients (Step 2)")

    err = rel_err(run.local_grad.mean(axis=1), big, axis=1)
    claim(err <= tol, "the mean of the slice gradients is the big-batch gradient", f"relative errors {err}")
    lines.append(f"the mean of the slice gradients equals the big-batch gradient, relative error <= {tol:g} (Step 3)")

    distinct = [len(np.unique(run.batch_index[s])) for s in range(steps)]
    claim(np.array(distinct) == k * b, "the slices do not overlap", f"distinct rows per step {distinct}, k·b = {k * b}")
    counts = np.bincount(run.example_rank, minlength=k)
    claim(counts == b, f"every slice holds b = {b} examples", f"examples per rank {counts.tolist()}")
    different = [len({g.tobytes() for g in run.local_grad[s]}) for s in range(steps)]
    claim(np.array(different) == k, "the k slice gradients differ", f"distinct gradients per step {different}")
    lines.append(f"the {k} slices are disjoint, {b} examples each, with {k} different gradients (Step 4)")

    err = run.big_batch_rel_err()
    claim(err <= tol, "the all-reduced gradient is the big-batch gradient", f"relative errors {err}")
    claim(run.received_identical(), "every rank received the same bits", f"per step {run.received_identical()}")
    lines.append("all_reduce returned the big-batch gradient, and the same bits to every rank (Step 5)")

    if m["optimizer"] == "sgd":
        stepped = run.params[:-1] - m["lr"] * run.reduced_grad
        claim(np.allclose(run.params[1:], stepped, rtol=1e-6, atol=1e-7), "every rank stepped by θ ← θ − η ḡ",
              f"largest gap {np.abs(run.params[1:] - stepped).max():.2e}")
        lines.append("every rank stepped by θ ← θ − η ḡ (Step 1)")
    claim(run.replicas_identical(), "the replicas are bit-identical", f"per state {run.replicas_identical()}")
    lines.append(f"the {k} replicas were bit-identical at the start and after every one of the {steps} steps (Step 5)")

    if alone is not None:
        same = {name: alone.meta[name] == m[name] for name in ("k", "b", "steps", "seed", "optimizer", "lr", "model")}
        if alone.meta["all_reduce"] or not all(same.values()):
            raise ValueError("alone must be the twin of run with the all-reduce off (same k, b, steps, seed, "
                             f"optimizer, lr and model); got {alone.describe()}, all_reduce={alone.meta['all_reduce']}.")
        drift = alone.replicas_identical()
        claim(drift[0], "without the all-reduce the replicas start equal", f"per state {drift}")
        first = rel_err(alone.local_grad[0], run.local_grad[0])
        claim(first <= tol, "the twin's first gradients are the run's", f"relative error {first:.1e} at step 0")
        claim(~drift[1:], "without the all-reduce the replicas differ after every step", f"per state {drift}")
        lines.append(f"without the all-reduce the replicas started equal and differed after each of the {steps} steps")

    claim(run.t_comm > 0, "the sync took time on every rank at every step", f"t_comm {run.t_comm}")
    lines.append("the sync cost time on every rank at every step (Step 6)")
    return lines


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
