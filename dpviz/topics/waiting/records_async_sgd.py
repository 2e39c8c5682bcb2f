"""The record of a parameter-server run: every update the server applied, with its staleness τ.

Written by :func:`dpviz.topics.waiting.run_async_sgd.record_async`. Rank 0 is the server and holds θ; ranks
1..k are workers. In ``mode="async"`` a worker pulls θ, computes the gradient of its own
mini-batch there, and pushes it; the server applies every gradient the moment it arrives and
sends the worker the θ it has now. In ``mode="sync"`` the server waits for all k gradients,
applies their mean once, and sends the new θ to everyone. The model is the two-knob line model,
so every θ is a point of the (w, c) plane and every gradient an arrow in it.

Update t (0-based) turns ``theta_before[t]`` into ``theta_after[t]`` with ``grad[t]``, which was
computed at ``theta_pulled[t]``: the θ of ``staleness[t]`` updates earlier.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpviz.engine.paths import SHIPPED_DIR
from dpviz.engine.schema import Array, Kind, Meta, RankRecord, ran_on, register

MODES = ("async", "sync")
SHIPPED = {"async": "waiting_async_slow", "sync": "waiting_sync_slow"}

KIND = Kind(
    name="async_sgd",
    version=1,
    doc="A parameter server (rank 0) and k workers trained the line model, asynchronously (every gradient applied on "
        "arrival) or synchronously (the mean of k gradients per update); every update's worker, staleness τ, θ before, "
        "after and where its gradient was computed, loss and wall time.",
    arrays=(
        Array("worker", ("T",), "int64", "the worker (1..k) whose gradient made the update; 0 for a synchronous mean of all"),
        Array("staleness", ("T",), "int64", "τ: updates applied between the worker's pull and this update"),
        Array("theta_before", ("T", 2), "float32", "θ = (w, c) on the server before the update: θ_t"),
        Array("theta_pulled", ("T", 2), "float32", "θ the gradient was computed at: θ_(t−τ)"),
        Array("theta_after", ("T", 2), "float32", "θ after the update: θ_(t+1) = θ_t − η·grad"),
        Array("grad", ("T", 2), "float32", "the gradient applied (a mean of k for a synchronous update)"),
        Array("fresh_grad", ("T", 2), "float32",
              "the gradient the same mini-batch(es) give at θ_before: what the update would have used with no staleness"),
        Array("batch_loss", ("T",), "float32", "the loss of the gradient's mini-batch at θ_pulled"),
        Array("loss", ("T+1",), "float64", "the loss on the whole data set at θ_0 and after every update"),
        Array("wall", ("T+1",), "float64", "seconds since the start, by the server's clock, at θ_0 and after every update"),
        Array("batch_index", ("T", "B"), "int64", "data set rows of each update's mini-batch(es)"),
        Array("sequential_theta", ("T+1", 2), "float32",
              "plain SGD in one process on the same mini-batches in the same order, each gradient fresh "
              "(computed at the current θ): θ_0 and after every update", optional="for asynchronous runs"),
        Array("dropped_worker", ("D",), "int64", "workers of gradients thrown away for being staler than the bound"),
        Array("dropped_staleness", ("D",), "int64", "their staleness"),
        Array("worker_gradients", ("k",), "int64", "gradients each worker sent (applied or not)"),
        Array("worker_idle", ("k",), "float64", "seconds each worker spent waiting for the server's reply"),
        Array("worker_busy", ("k",), "float64", "seconds each worker spent computing (its delay included)"),
    ),
    meta=(
        Meta("mode", "str", "\"async\" or \"sync\""),
        Meta("k", "int", "workers (the server is one more process)"),
        Meta("updates", "int", "T, updates the server applied"),
        Meta("lr", "float", "learning rate η"),
        Meta("b", "int", "examples per worker per gradient"),
        Meta("delays", "list", "seconds each worker sleeps per gradient, standing in for its compute"),
        Meta("max_staleness", "int or null", "gradients with τ above this were dropped; null: none were"),
        Meta("seed", "int", "seeds the data and every mini-batch draw"),
        Meta("model", "str", "\"line\""),
        Meta("dataset_size", "int", "N, examples in the data set"),
        *ran_on("backend", "torch_version", "host", "cores", "date"),
    ),
)


@register
class AsyncRecord(RankRecord):
    """A parameter-server run; each declared array is an attribute."""

    KIND = KIND

    @property
    def processes(self) -> int:
        """k workers and the server."""
        return self.k + 1

    def describe(self) -> str:
        m = self.meta
        delays = "/".join(f"{d * 1e3:g}" for d in m["delays"])
        bound = "" if m["max_staleness"] is None else f", τ ≤ {m['max_staleness']}"
        return (
            f"{m['mode']} SGD through a parameter server, k={m['k']} workers, line model, b={m['b']}, lr={m['lr']:g}, "
            f"{m['updates']} updates, worker delays {delays} ms{bound}, {m['backend']}, {m['host']}, {m['cores']} cores, "
            f"{m['date'][:10]}"
        )

    def staleness_by_worker(self) -> dict[int, np.ndarray]:
        """{worker: the staleness of each of its applied gradients}."""
        return {w: self.staleness[self.worker == w] for w in range(1, self.k + 1)}

    def angles(self) -> np.ndarray:
        """(T,) degrees between the gradient applied and the fresh one of the same mini-batch (0 where τ = 0)."""
        g, f = self.grad.astype(np.float64), self.fresh_grad.astype(np.float64)
        norms = np.linalg.norm(g, axis=1) * np.linalg.norm(f, axis=1)
        cos = np.where(norms > 0, np.sum(g * f, axis=1) / np.where(norms > 0, norms, 1.0), 1.0)
        return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))

    def seconds_per_gradient(self) -> np.ndarray:
        """(k,) each worker's wall seconds per gradient sent: its compute plus its wait for the reply."""
        return (self.worker_busy + self.worker_idle) / np.maximum(self.worker_gradients, 1)

    def seconds_per_update(self) -> float:
        """Median wall-clock seconds between updates."""
        return float(np.median(np.diff(self.wall)))

    def equals_sequential(self) -> bool:
        """True if θ after every update has the exact bytes of plain SGD on the same batches (k = 1 must)."""
        if self.sequential_theta is None:
            return False
        return bool(np.array_equal(self.theta_after, self.sequential_theta[1:])
                    and np.array_equal(self.theta_before[0], self.sequential_theta[0]))

    def check(self) -> str:
        """Assert the bookkeeping every run must satisfy, and what k = 1 and sync imply; a one-line report."""
        t = self.updates
        assert np.array_equal(self.theta_before[1:], self.theta_after[:-1]), "an update did not start where the last ended"
        # θ_(t−τ) is the θ before update t−τ: the staleness points at the θ the gradient was really computed at
        index = np.arange(t) - self.staleness
        assert (index >= 0).all(), "a staleness points before the first update"
        states = np.concatenate([self.theta_before, self.theta_after[-1:]])
        assert np.array_equal(self.theta_pulled, states[index]), "θ_pulled is not θ_(t−τ)"
        fresh = self.staleness == 0
        assert np.array_equal(self.grad[fresh], self.fresh_grad[fresh]), "a fresh gradient differs from its batch's gradient"
        words = [f"{self.mode}, k={self.k}: {t} updates; θ_pulled is θ_(t−τ) for every one, and every τ = 0 gradient is "
                 f"bit for bit its mini-batch's gradient at θ_t"]
        if self.mode == "sync":
            assert (self.staleness == 0).all(), "a synchronous update used a stale gradient"
            words.append("every gradient fresh (τ = 0)")
        elif self.k == 1:
            assert (self.staleness == 0).all(), "a lone worker's gradient was stale"
            assert self.equals_sequential(), "k = 1 asynchronous SGD differs from plain SGD"
            words.append("τ = 0 throughout and θ bit-identical to plain SGD in one process at every update")
        else:
            words.append(f"staleness τ from {self.staleness.min()} to {self.staleness.max()} (mean {self.staleness.mean():.2f})")
        return "; ".join(words) + "."


def shipped_async(records_dir=SHIPPED_DIR) -> dict[str, AsyncRecord]:
    """The shipped pair {"async": ..., "sync": ...}: k = 3 workers, one of them slow, the same settings otherwise."""
    out = {}
    for mode, name in SHIPPED.items():
        path = Path(records_dir) / name
        if not path.with_suffix(".json").is_file():
            raise FileNotFoundError(
                f"path {str(path)!r}.json does not exist; record the shipped runs with `python -m dpviz.topics.waiting.run_figures`."
            )
        out[mode] = AsyncRecord.load(path)
    return out
