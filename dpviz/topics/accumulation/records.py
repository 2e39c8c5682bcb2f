"""The record of a gradient-accumulation run, and the claims of the notes checked on it.

Written by :func:`dpviz.topics.accumulation.run_accumulation.record_accumulation`; read with numpy alone.

Each of k ranks takes b examples per update and splits them into m micro-batches of b/m. It runs
them forward and backward one after another, adding up their gradients, and the update uses
(sum of the k·m micro-batch gradients) / (k·m), the mean gradient of all k·b examples. The ranks
meet in ``dist.all_reduce`` in one of two patterns (the ``sync`` metadata field):

* ``"accumulate"``: after the last micro-batch only, once per update (what DDP's ``no_sync`` does);
* ``"every"``: after each micro-batch, m times per update.

With k = 1 there is nobody to talk to and no all-reduce at all. P is the model's parameter count,
B the examples of one update (k·b). The shipped records for the sliders are loaded by
:func:`accumulation_grid`; ``python -m dpviz.topics.accumulation.run_accumulation`` records them again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpviz.engine.checks import check_choice, check_int
from dpviz.engine.paths import SHIPPED_DIR
from dpviz.engine.plan import FigurePlan
from dpviz.topics.ground_floor.records import rel_err
from dpviz.engine.schema import Array, Kind, Meta, RankRecord, ran_on, register
from dpviz.engine.tolerance import GRAD_TOLERANCE

SYNCS = ("accumulate", "every")
SYNC_WORDS = {"accumulate": "accumulate, then one all-reduce", "every": "an all-reduce after every micro-batch"}
BYTES_PER_FLOAT = 4

KIND = Kind(
    name="accumulation",
    version=1,
    doc="k ranks each ran m micro-batches per update, summing their gradients, and all-reduced once per update "
        "(accumulate) or after every micro-batch (every); each micro-batch's compute and sync time, the all-reduce "
        "calls and bytes, the bytes held for backward, and the update's distance from the big-batch gradient.",
    arrays=(
        Array("t_micro", ("steps", "k", "m"), "float64", "seconds of forward + backward of each micro-batch, per rank"),
        Array("t_comm", ("steps", "k", "m"), "float64",
              "seconds inside all_reduce right after each micro-batch, per rank (0 where none was called)"),
        Array("t_step", ("steps", "k"), "float64", "seconds for the whole update, per rank (compute, sync, optimizer step)"),
        Array("allreduce_calls", ("steps", "k"), "int64", "all_reduce calls per update, counted in each rank"),
        Array("allreduce_bytes", ("steps", "k"), "int64", "bytes each rank handed to all_reduce per update"),
        Array("big_rel_err", ("steps", "k"), "float64",
              "the largest relative difference, max abs(g − g_big) / max abs(g_big), between the gradient each rank stepped with and the big-batch gradient"),
        Array("param_digest", ("steps+1", "k"), "bytes", "a hash (SHA-1 hex) of every replica's parameter bytes"),
        Array("loss", ("steps", "k"), "float32", "each rank's mean loss over its micro-batches"),
        Array("batch_index", ("steps", "B"), "int64",
              "data set rows of each update's examples: rank 0's micro-batches first, in order",
              optional="when recorded with keep_grads=True"),
        Array("reduced_grad", ("steps", "k", "P"), "float32", "the gradient each rank stepped with",
              optional="when recorded with keep_grads=True (live runs; too large to ship)"),
        Array("big_grad", ("steps", "P"), "float32",
              "the gradient of all B examples in one backward pass, computed again in the launching process",
              optional="when recorded with keep_grads=True"),
    ),
    meta=(
        Meta("k", "int", "ranks sharing each update (1: one process alone)"),
        Meta("m", "int", "micro-batches per rank per update"),
        Meta("b", "int", "examples per rank per update"),
        Meta("micro_batch", "int", "examples per micro-batch, b / m"),
        Meta("global_batch", "int", "examples per update, k·b"),
        Meta("sync", "str", "\"accumulate\" (one all-reduce per update) or \"every\" (one per micro-batch)"),
        Meta("steps", "int", "updates (optimizer steps)"),
        Meta("model", "str", "\"mlp\""),
        Meta("width", "int", "hidden units per layer"),
        Meta("depth", "int", "hidden layers"),
        Meta("d_in", "int", "input features"),
        Meta("n_params", "int", "P, the model's parameter count"),
        Meta("optimizer", "str", "\"sgd\""),
        Meta("lr", "float", "learning rate η"),
        Meta("seed", "int", "seeds the data, the model and every batch draw"),
        Meta("dataset_size", "int", "N, examples in the data set"),
        Meta("activation_bytes", "int",
             "bytes of the tensors one micro-batch's forward pass saves for backward, parameters excluded"),
        Meta("launched_ranks", "int", "processes in the launch; with k = 1 the others waited at a barrier"),
        *ran_on("backend", "device", "threads_per_rank", "torch_version", "host", "platform", "cores", "date"),
    ),
)


@register
class AccumulationRun(RankRecord):
    """One recorded accumulation run; ``meta`` says how it was made, each array of :data:`KIND` is an attribute."""

    KIND = KIND

    def who(self) -> str:
        """Who computed the update, in words: "one process" or "k=2 ranks"."""
        return "one process" if self.k == 1 else f"k={self.k} ranks"

    def how(self) -> str:
        """How the update was computed, in words, e.g. "m=4 micro-batches of 8, accumulate, then one all-reduce"."""
        m, mb = self.m, self.meta["micro_batch"]
        micro = f"one batch of {mb}" if m == 1 else f"m={m} micro-batches of {mb}"
        if self.k == 1:
            return micro + (", summed" if m > 1 else "")
        return f"{micro}, {SYNC_WORDS[self.sync]}" if m > 1 else f"{micro}, one all-reduce"

    def describe(self) -> str:
        """One line naming the run, from its metadata: what a figure made from it should say."""
        m = self.meta
        return f"{self.who()}, {self.how()} ({m['global_batch']} examples per update), {m['steps']} steps, {self.setting()}"

    def setting(self) -> str:
        """What runs recorded together share: model, optimizer, backend, threads, host, cores and date."""
        m = self.meta
        return (
            f"MLP {m['depth']}×{m['width']} ({m['n_params']:,} parameters), {m['optimizer']}, lr={m['lr']:g}, "
            f"{m['backend']} on {m['device']}, {m['threads_per_rank']} thread(s) per rank, "
            f"{m['host']}, {m['cores']} cores, {m['date'][:10]}"
        )

    # --- what one update cost: medians over the steps after the first (which pays for first calls) ---

    def _steady(self, array, warmup: int) -> np.ndarray:
        warmup = check_int("warmup", warmup, low=0, high=self.steps - 1)
        return np.asarray(array, dtype=float)[warmup:]

    def micro_seconds(self, *, warmup: int = 1) -> np.ndarray:
        """(m,) seconds of each micro-batch's compute in a typical update: the median over steps and ranks."""
        return np.median(self._steady(self.t_micro, warmup), axis=(0, 1))

    def comm_seconds(self, *, warmup: int = 1) -> np.ndarray:
        """(m,) seconds inside all_reduce after each micro-batch in a typical update (0 where none was called)."""
        return np.median(self._steady(self.t_comm, warmup), axis=(0, 1))

    def compute_per_update(self, *, warmup: int = 1) -> float:
        """Seconds of compute in one update: the median over steps and ranks of the micro-batches' sum."""
        return float(np.median(self._steady(self.t_micro, warmup).sum(axis=2)))

    def comm_per_update(self, *, warmup: int = 1) -> float:
        """Seconds inside all_reduce in one update: the median over steps and ranks of their sum (0 for k = 1)."""
        return float(np.median(self._steady(self.t_comm, warmup).sum(axis=2)))

    def update_seconds(self, *, warmup: int = 1) -> float:
        """Seconds for one whole update (compute, sync, optimizer step): the median over steps and ranks."""
        return float(np.median(self._steady(self.t_step, warmup)))

    @property
    def calls_per_update(self) -> int:
        """All-reduce calls per update; the same in every step and rank (checked)."""
        return _constant(self.allreduce_calls, "allreduce_calls")

    @property
    def bytes_per_update(self) -> int:
        """Bytes each rank handed to all_reduce per update; the same in every step and rank (checked)."""
        return _constant(self.allreduce_bytes, "allreduce_bytes")

    @property
    def grad_bytes(self) -> int:
        """Bytes of one gradient (or one copy of the parameters): P float32 numbers."""
        return int(self.meta["n_params"]) * BYTES_PER_FLOAT

    def expected_calls(self) -> int:
        """All-reduce calls per update the pattern asks for: 0 alone, 1 when accumulating, m for every."""
        if self.k == 1:
            return 0
        return self.m if self.sync == "every" else 1

    # --- the notes' claims, checked on the recorded data ---

    def replicas_identical(self) -> np.ndarray:
        """Per recorded state (steps + 1), True where every replica's parameter bytes agree."""
        return (self.param_digest == self.param_digest[:, :1]).all(axis=1)

    def check(self, tol: float = GRAD_TOLERANCE) -> str:
        """Assert the claims that hold for this run and return a one-sentence report of them."""
        err = float(self.big_rel_err.max())
        assert err <= tol, f"{self.describe()}: the update differs from the big-batch gradient by {err:.2e} > {tol:g}"
        if self.reduced_grad is not None and self.big_grad is not None:
            again = float(rel_err(self.reduced_grad, self.big_grad[:, None, :]))
            assert again <= tol, f"the stored gradients differ from the big-batch gradient by {again:.2e} > {tol:g}"
        calls, expected = self.calls_per_update, self.expected_calls()
        assert calls == expected, f"{calls} all-reduce calls per update; the {self.sync!r} pattern makes {expected}"
        assert self.bytes_per_update == calls * self.grad_bytes, "all-reduced bytes are not calls × gradient bytes"
        words = [f"the update matched the big-batch gradient of {self.meta['global_batch']} examples to within {tol:g} "
                 f"at all {self.steps} steps"]
        if self.k > 1:
            assert self.replicas_identical().all(), f"replicas differ at states {np.flatnonzero(~self.replicas_identical())}"
            words.append(f"all {self.k} replicas stayed bit-identical")
        words.append(f"{calls} all-reduce call{'s' if calls != 1 else ''} per update")
        return "; ".join(words) + "."


def _constant(values, name: str) -> int:
    values = np.asarray(values)
    if values.size == 0 or not (values == values.flat[0]).all():
        raise ValueError(f"{name} must be the same in every step and rank to give one number per update; got {np.unique(values)}.")
    return int(values.flat[0])


def same_update(a: AccumulationRun, b: AccumulationRun, *, step: int = 0) -> float:
    """max relative error between the gradients two runs stepped with at ``step``, from the same parameters.

    Both runs must keep their gradients (``keep_grads=True``) and start ``step`` from bit-identical
    parameters (checked on the digests), so any difference is the order the sums ran in.
    """
    for name, run in (("a", a), ("b", b)):
        if not isinstance(run, AccumulationRun):
            raise TypeError(f"{name} must be an AccumulationRun; got {type(run).__name__}.")
        if run.reduced_grad is None:
            raise ValueError(f"{name} must be recorded with keep_grads=True to compare its gradients; it holds none.")
    step = check_int("step", step, low=0, high=min(a.steps, b.steps) - 1)
    if a.param_digest[step, 0] != b.param_digest[step, 0]:
        raise ValueError(f"step must be one the two runs start from identical parameters; at step {step} they differ.")
    if a.batch_index is None or not np.array_equal(a.batch_index[step], b.batch_index[step]):
        raise ValueError(f"a and b must take the same examples at step {step} to compute the same update.")
    return float(rel_err(a.reduced_grad[step, 0], b.reduced_grad[step, 0]))


# --- the records shipped for the sliders ---

GRID_K = (1, 2, 4)  # ranks
GRID_M = (1, 2, 4, 8)  # micro-batches per rank; k = 1 also runs k·m of them, the same work on one process
GRID = dict(micro_batch=512, steps=6, width=256, depth=2, d_in=16, lr=0.05, seed=0, dataset_size=16384)


def grid_name(k: int, m: int, sync: str) -> str:
    return f"accumulation_k{k}_m{m}" + ("" if k == 1 else f"_{sync}")


def grid_keys() -> list[tuple[int, int, str]]:
    """Every (k, m, sync) of the shipped grid: both patterns for k > 1, and one process for every k·m."""
    keys = [(k, m, sync) for k in GRID_K if k > 1 for m in GRID_M for sync in SYNCS]
    singles = sorted({k * m for k in GRID_K for m in GRID_M})
    return [(1, m, "accumulate") for m in singles] + keys


def accumulation_grid(records_dir=SHIPPED_DIR) -> dict[tuple[int, int, str], AccumulationRun]:
    """The shipped accumulation runs, keyed by (k, m, sync); one process (k = 1) is keyed with sync "accumulate"."""
    out = {}
    for key in grid_keys():
        path = Path(records_dir) / grid_name(*key)
        if not path.with_suffix(".json").is_file():
            raise FileNotFoundError(
                f"path {str(path)!r}.json does not exist; record the shipped accumulation runs with "
                f"`python -m dpviz.topics.accumulation.run_accumulation --out {records_dir}`."
            )
        out[key] = AccumulationRun.load(path)
    return out


def grid_run(grid: dict, k: int, m: int, sync: str = "accumulate") -> AccumulationRun:
    """The run of ``grid`` for (k, m, sync); one process for k = 1, whatever ``sync`` says."""
    check_choice("sync", sync, SYNCS)
    key = (k, m, "accumulate" if k == 1 else sync)
    if key not in grid:
        raise ValueError(f"k and m must be among the recorded values ({sorted({key[:2] for key in grid})}); got k={k}, m={m}.")
    return grid[key]


# --- the runs behind the chapter's figures in figures/ (recorded by ./run, saved in figures/records) ---

FIGURE_MICRO = GRID["micro_batch"]  # examples per micro-batch in the sync and memory figures
FIGURE_MEMORY_BATCH = 2 * FIGURE_MICRO  # examples per update in the memory figure
FIGURE_MEMORY_M = (1, 2, 4, 8, 16)  # ... cut into this many micro-batches
FIGURE_SYNC_M = (1, 2, 4, 8)  # micro-batches per rank of the k = 2 runs, both patterns
# The timeline figure times one process against k ranks, so its micro-batches are large: one of 4096 examples
# takes about 25 ms of compute on one core of the 2-core machine the figures were first made on, several times
# one all-reduce of the 282 kB gradient with the wake-up it waits for (3-5 ms there; see figure_set.py). With
# micro-batches of 512 the all-reduce cost as much as the compute a second rank saved, and one process
# accumulating was timed as fast as two ranks. Both panels take the same TIMELINE_BATCH examples per update.
TIMELINE_MICRO = 4096  # examples per micro-batch at m = k = 2
TIMELINE_BATCH = 2 * TIMELINE_MICRO  # examples per update, in every timeline run
TIMELINE_K = (2, 4)  # m = k of the two panels


def figure_stem(k: int, m: int, *, b: int | None = None, sync: str = "accumulate") -> str:
    """The record stem of a sync or memory figure run: one process by its update size b, k ranks by their pattern."""
    return f"accumulation_one_b{b}_m{m}" if k == 1 else f"accumulation_k{k}_m{m}_{sync}"


def timeline_stem(k: int, m: int) -> str:
    """The record stem of a timeline run (TIMELINE_BATCH examples per update): one process with m micro-batches,
    or k ranks with one batch each."""
    return f"accumulation_timeline_one_m{m}" if k == 1 else f"accumulation_timeline_k{k}"


def figure_plan() -> dict[str, dict]:
    """Every figure run by stem, as AccumConfig settings (k, m, b, sync): what ./run records for the accumulation
    chapter."""
    plan = {}
    for m in FIGURE_MEMORY_M:  # one process, the same examples per update in ever smaller micro-batches
        plan[figure_stem(1, m, b=FIGURE_MEMORY_BATCH)] = dict(k=1, m=m, b=FIGURE_MEMORY_BATCH, sync="accumulate")
    for m in FIGURE_SYNC_M:
        for sync in SYNCS:
            plan[figure_stem(2, m, sync=sync)] = dict(k=2, m=m, b=FIGURE_MICRO * m, sync=sync)
    for m in (1, *TIMELINE_K):  # one process on the examples that k = m ranks share, and in one pass
        plan[timeline_stem(1, m)] = dict(k=1, m=m, b=TIMELINE_BATCH, sync="accumulate")
    for k in TIMELINE_K:
        plan[timeline_stem(k, 1)] = dict(k=k, m=1, b=TIMELINE_BATCH // k, sync="accumulate")
    return plan


_BASE = {name: value for name, value in GRID.items() if name != "micro_batch"}  # the model and data of every run
FIGURE_PLAN = FigurePlan(
    name="accumulation",
    settings={stem: dict(settings, **_BASE, keep_grads=False) for stem, settings in figure_plan().items()},
    quick={stem: dict(steps=3) for stem in figure_plan()},
)
FIGURE_STEMS = FIGURE_PLAN.stems


def figure_selection(records: dict) -> dict:
    """The figure records by the part they play: the timelines (per panel: one process accumulating m, k = m
    ranks, one process in one pass), both sync patterns, the memory sweep."""
    def run(k, m, b=None, sync="accumulate"):
        return records[figure_stem(k, m, b=b, sync=sync)]

    one_pass = records[timeline_stem(1, 1)]
    return dict(
        timelines=tuple((records[timeline_stem(1, k)], records[timeline_stem(k, 1)], one_pass) for k in TIMELINE_K),
        every=[run(2, m, sync="every") for m in FIGURE_SYNC_M],
        accumulate=[run(2, m) for m in FIGURE_SYNC_M],
        memory=[run(1, m, FIGURE_MEMORY_BATCH) for m in FIGURE_MEMORY_M],
    )


def figure_records(folder=None) -> dict[str, AccumulationRun]:
    """The records behind the accumulation chapter's figures, by stem, from ``folder`` (default: figures/records)."""
    return FIGURE_PLAN.load(folder)