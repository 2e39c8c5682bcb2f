"""The record of a straggler sweep: one process group, a delay injected into one rank's compute, setting by setting.

Written by :func:`dpviz.topics.waiting.run_straggler.record_straggler`. For each setting s (a delay d and the
rank that sleeps it) the k ranks ran ``steps`` synchronous training steps, and each rank wrote
down three moments of every step on its own clock, in seconds after a barrier that all ranks
left together: when it began computing, when it entered the all-reduce, when the all-reduce
returned. Everything the chapter shows is derived from those three.

    from dpviz.topics.waiting.records_straggler import StragglerRecord
    sweep = StragglerRecord.load("figures/records/waiting_straggler")
    sweep.measured_wait()      # per setting: how long the other ranks waited inside the all-reduce
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpviz.engine.checks import check_int, check_real
from dpviz.engine.paths import SHIPPED_DIR
from dpviz.engine.schema import Array, Kind, Meta, RankRecord, ran_on, register

SHIPPED_KS = (2, 3, 4)
WAIT_TOLERANCE = (0.005, 0.30)  # seconds, fraction: a measured wait counts as d within 5 ms + 30 % of d (chosen)

KIND = Kind(
    name="straggler",
    version=1,
    doc="k ranks trained in lockstep while one rank slept an injected delay d inside its compute, for "
        "several (d, rank) settings; when every rank began each step, entered the all-reduce and left it.",
    arrays=(
        Array("delay", ("S",), "float64", "the delay asked for in each setting, seconds"),
        Array("slow_rank", ("S",), "int64", "the rank that slept the delay in each setting"),
        Array("t_begin", ("S", "steps", "k"), "float64", "when each rank began the step's compute, seconds after the barrier"),
        Array("t_enter", ("S", "steps", "k"), "float64",
              "when each rank entered the all-reduce (compute and any delay done), seconds after the barrier"),
        Array("t_exit", ("S", "steps", "k"), "float64", "when the all-reduce returned on each rank, seconds after the barrier"),
        Array("slept", ("S", "steps", "k"), "float64", "seconds each rank actually slept in the step (0 for the others)"),
    ),
    meta=(
        Meta("k", "int", "ranks"),
        Meta("steps", "int", "steps recorded per setting"),
        Meta("warmup", "int", "the first steps of each setting left out of medians (first-call costs)"),
        Meta("model", "str", "the model trained (\"mlp\")"),
        Meta("width", "int", "hidden units per layer"),
        Meta("depth", "int", "hidden layers"),
        Meta("n_params", "int", "P, the model's parameter count"),
        Meta("b", "int", "examples per rank per step"),
        Meta("lr", "float", "learning rate η of the SGD steps"),
        Meta("seed", "int", "seeds the data and the model"),
        *ran_on("backend", "threads_per_rank", "torch_version", "host", "cores", "date"),
    ),
)


@register
class StragglerRecord(RankRecord):
    """A straggler sweep; each declared array is an attribute, and the waits are derived from them."""

    KIND = KIND

    def describe(self) -> str:
        m = self.meta
        delays = sorted(set(np.round(self.delay * 1e3, 3).tolist()))
        return (
            f"straggler sweep, k={m['k']}, d={','.join(f'{d:g}' for d in delays)} ms, {len(self.delay)} settings × "
            f"{m['steps']} steps, MLP {m['depth']}×{m['width']} ({m['n_params']:,} parameters), b={m['b']}, "
            f"{m['backend']}, {m['threads_per_rank']} thread(s) per rank, {m['host']}, {m['cores']} cores, {m['date'][:10]}"
        )

    # --- derived times, (S, steps, k) ---

    @property
    def t_compute(self) -> np.ndarray:
        """Seconds from the start of the step's compute to entering the all-reduce (the delay included)."""
        return self.t_enter - self.t_begin

    @property
    def t_comm(self) -> np.ndarray:
        """Seconds inside the all-reduce, waiting for the last rank included."""
        return self.t_exit - self.t_enter

    @property
    def wait(self) -> np.ndarray:
        """Seconds each rank sat inside the all-reduce before the last rank entered it (by the ranks' clocks)."""
        return self.t_enter.max(axis=2, keepdims=True) - self.t_enter

    @property
    def t_step(self) -> np.ndarray:
        """Seconds from the start of the compute to leaving the all-reduce."""
        return self.t_exit - self.t_begin

    def setting(self, delay: float, slow_rank: int) -> int:
        """The index of the setting with this delay (seconds) and slow rank; one sentence if there is none."""
        delay = check_real("delay", delay, low=0.0)
        slow_rank = check_int("slow_rank", slow_rank, low=0, high=self.k - 1)
        hits = np.flatnonzero(np.isclose(self.delay, delay, rtol=0, atol=1e-9) & (self.slow_rank == slow_rank))
        if len(hits) == 0:
            raise ValueError(
                f"delay and slow_rank must be a recorded setting; delays {sorted(set(self.delay.tolist()))} s, "
                f"slow ranks {sorted(set(self.slow_rank.tolist()))}; got delay={delay:g}, slow_rank={slow_rank}."
            )
        return int(hits[0])

    def _kept(self, array: np.ndarray) -> np.ndarray:
        return array[:, int(self.meta["warmup"]):]

    def measured_wait(self, *, clock: bool = False) -> np.ndarray:
        """(S,) the median wait of the ranks that did not sleep, over the kept steps.

        By default without comparing clocks: a rank's time inside the all-reduce minus the slow
        rank's, which is the pure transfer, since the slow rank arrives last. ``clock=True`` takes
        the difference of the moments the ranks entered instead (:attr:`wait`).
        """
        others = np.arange(self.k)[None, :] != self.slow_rank[:, None]  # (S, k)
        if clock:
            per_step = self._kept(self.wait)
        else:
            slow = np.take_along_axis(self.t_comm, self.slow_rank[:, None, None], axis=2)
            per_step = self._kept(self.t_comm - slow)
        out = np.empty(len(self.delay))
        for s in range(len(self.delay)):
            out[s] = np.median(per_step[s][:, others[s]]) if others[s].any() else 0.0
        return out

    def median_step(self) -> np.ndarray:
        """(S,) the median step time over the kept steps and all ranks."""
        return np.median(self._kept(self.t_step).reshape(len(self.delay), -1), axis=1)

    def median_compute(self) -> float:
        """The median compute time of a rank that did not sleep, over every setting's kept steps."""
        others = np.arange(self.k)[None, None, :] != self.slow_rank[:, None, None]
        values = self._kept(self.t_compute)[np.broadcast_to(others, self.t_compute.shape)[:, int(self.meta["warmup"]):]]
        return float(np.median(values))

    def median_transfer(self) -> float:
        """The median time the slow rank spent inside the all-reduce: the transfer, nobody left to wait for."""
        slow = np.take_along_axis(self.t_comm, self.slow_rank[:, None, None], axis=2)
        return float(np.median(self._kept(slow)))

    def wait_tolerance(self) -> np.ndarray:
        """(S,) how far a measured wait may be from the delay: 5 ms + 30 % of it."""
        absolute, relative = WAIT_TOLERANCE
        return absolute + relative * self.delay

    def check(self) -> str:
        """Report how long the ranks that did not sleep waited against the delay; a one-line report.

        Reported, never asserted: a busy machine, or more ranks than cores taking turns on the CPU, moves
        the waits, and :func:`dpviz.topics.waiting.claims.straggler_waits` says what the record shows and why.
        """
        wait, tol = self.measured_wait(), self.wait_tolerance()
        close = np.abs(wait - self.delay) <= tol
        words = ", ".join(f"d={d * 1e3:g} ms: {w * 1e3:.1f} ms" for d, w in sorted(set(zip(self.delay.tolist(), wait.tolist()))))
        shared = f" ranks on {self.meta['cores']} cores (they share cores)" if self.oversubscribed else ""
        share = "every one" if close.all() else f"{int(close.sum())}"
        return (f"k={self.k}{shared}: in {share} of {len(self.delay)} settings the ranks that did not sleep waited d "
                f"within 5 ms + 30 % ({words}).")


def shipped_name(k: int) -> str:
    return f"waiting_straggler_k{k}"


def shipped_straggler(records_dir=SHIPPED_DIR) -> dict[int, StragglerRecord]:
    """The shipped straggler sweeps, keyed by k (2, 3, 4): every delay with every rank as the slow one."""
    out = {}
    for k in SHIPPED_KS:
        path = Path(records_dir) / shipped_name(k)
        if not path.with_suffix(".json").is_file():
            raise FileNotFoundError(
                f"path {str(path)!r}.json does not exist; record the shipped runs with `python -m dpviz.topics.waiting.run_figures`."
            )
        out[k] = StragglerRecord.load(path)
    return out
