"""The record of a grid of real data-parallel training runs over k, learning-rate multiplier and warm-up.

Written by :mod:`dpviz.topics.bigger_batch.run_lr_sweep`; read with numpy alone. Every run of a grid trains the same
model from the same starting θ on the same stream of examples: rank r of a k-rank run takes, at
step t, the small batch number k·t + r of that stream, so a run on k ranks sees in one step the k
batches that a run on one rank sees in k steps. Each run sees the same number of examples, so k
ranks take k times fewer steps. R is the number of runs, T the most steps any run took, P the
model's parameter count. Entries past a run's last step are NaN; after a divergence, the loss
is inf.

    from dpviz.topics.bigger_batch.records import LrGrid
    grid = LrGrid.shipped("line")                 # the grid shipped with dpviz, for the sliders
    i = grid.index(k=4, multiplier=4, warmup=0)   # which row holds that run
    grid.examples_seen(i), grid.loss[i]           # its loss curve against examples seen
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpviz.engine.checks import check_choice, check_int, check_real
from dpviz.engine.paths import SHIPPED_DIR
from dpviz.engine.plan import FigurePlan
from dpviz.engine.schema import Array, Kind, Meta, Record, ran_on, register
from dpviz.topics.bigger_batch import theory as lr_rules

MODELS = ("line", "mlp")

STOPPED = "after a run stopped (diverged, or fewer steps than the longest run), and where training diverged"  # when NaN or inf may appear in an array

KIND = Kind(
    name="lr_grid",
    version=1,
    doc="Real data-parallel SGD runs of one model over k, learning-rate multiplier and warm-up, each seeing the "
        "same examples in the same order: the loss on the whole data set after every step, the rate used, and "
        "how far one step of the run lands from k small steps of 1/k its rate taken from the same θ.",
    arrays=(
        Array("k", ("R",), "int64", "ranks of each run"),
        Array("multiplier", ("R",), "float64", "the run's target rate over the base rate η"),
        Array("warmup", ("R",), "int64", "warm-up steps: the rate ramps linearly up to the target over them (0: none)"),
        Array("steps", ("R",), "int64", "optimizer steps of each run: examples / (k·b)"),
        Array("lr", ("R", "T"), "float64", "the rate each step used, as the ranks applied it", nonfinite=STOPPED),
        Array("loss", ("R", "T+1"), "float32", "the loss on the whole data set before each step and after the last", nonfinite=STOPPED),
        Array("step_length", ("R", "T"), "float32", "|θ(t+1) − θ(t)|: how far each step moved the parameters", nonfinite=STOPPED),
        Array("step_gap", ("R", "T"), "float32",
              "|θ(t+1) − θ′|, θ′ being where k steps of rate lr/k on the k shards in turn, from θ(t), land (k > 1)", nonfinite=STOPPED),
        Array("travel", ("R", "T+1"), "float32", "|θ(t) − θ(0)|: how far the parameters are from where they started", nonfinite=STOPPED),
        Array("twin", ("R",), "int64",
              "the row of the run's twin: k = 1 at multiplier / k, no warm-up, which the linear rule says it imitates (-1: none)"),
        Array("twin_distance", ("R", "T+1"), "float32", "|θ(t) − θ_twin(k·t)|: the gap between the run and its twin after as many examples", nonfinite=STOPPED),
        Array("diverged_at", ("R",), "int64", "the first state whose loss was not finite or above diverge_factor × the first loss; the run stopped there (-1: never)"),
        Array("replicas_identical", ("R",), "bool", "every rank's parameters were bit-identical to rank 0's after every step"),
        Array("seconds", ("R",), "float64", "rank 0's wall time from its launch's first step to the run's last (a launch's runs train side by side), seconds"),
        Array("params", ("R", "T+1", "P"), "float32", "the parameters before each step and after the last",
              optional="for the line model only", nonfinite=STOPPED),
    ),
    meta=(
        Meta("model", "str", "\"line\" (two parameters) or \"mlp\""),
        Meta("width", "int", "hidden units per layer (mlp only)"),
        Meta("depth", "int", "hidden layers (mlp only)"),
        Meta("d_in", "int", "input features (mlp only)"),
        Meta("n_params", "int", "P, the model's parameter count"),
        Meta("optimizer", "str", "\"sgd\" (plain SGD, the rate set anew at every step)"),
        Meta("base_lr", "float", "η, the rate a run on one rank at batch b uses at multiplier 1"),
        Meta("b", "int", "examples per rank per step"),
        Meta("examples", "int", "examples every run sees in all"),
        Meta("ks", "list", "the k of the grid"),
        Meta("multipliers", "list", "the multipliers of the grid"),
        Meta("warmups", "list", "the warm-up lengths of the grid, steps"),
        Meta("warmup_multipliers", "list or null", "the multipliers run with every warm-up, the rest only without (null: all)"),
        Meta("seed", "int", "seeds the data, the model and the stream of batches"),
        Meta("dataset_size", "int", "N, examples in the data set (the loss is measured on all of them)"),
        Meta("diverge_factor", "float", "a run stops as diverged when its loss exceeds this many times its first loss"),
        *ran_on("backend", "device", "threads_per_rank", "torch_version", "host", "platform", "cores", "date"),
    ),
)


def shipped_name(model: str) -> str:
    return f"lr_{check_choice('model', model, MODELS)}"


@register
class LrGrid(Record):
    """One model's grid of runs; each array of :data:`KIND` is an attribute, one row per run."""

    KIND = KIND

    @classmethod
    def shipped(cls, model: str, records_dir=SHIPPED_DIR) -> "LrGrid":
        """The grid shipped with dpviz for ``model`` ("line" or "mlp"); ``python -m dpviz.topics.bigger_batch.run_lr_sweep`` records it again."""
        path = Path(records_dir) / shipped_name(model)
        if not path.with_suffix(".json").is_file():
            raise FileNotFoundError(
                f"path {str(path.with_suffix('.json'))!r} does not exist; record the grids with "
                f"`python -m dpviz.topics.bigger_batch.run_lr_sweep --out {records_dir}`."
            )
        return cls.load(path)

    @property
    def model_short(self) -> str:
        return "line model" if self.meta["model"] == "line" else "MLP"

    @property
    def model_words(self) -> str:
        m = self.meta
        return "line model" if m["model"] == "line" else f"MLP {m['depth']}×{m['width']} ({m['n_params']:,} parameters)"

    def describe(self) -> str:
        """One line naming the grid, from its metadata: what a figure made from it should say."""
        m = self.meta
        mults = ", ".join(f"{v:.3g}" for v in m["multipliers"])
        return (
            f"{self.model_words}, k={','.join(map(str, m['ks']))} at b={m['b']} per rank, {m['optimizer']}, "
            f"η={m['base_lr']:g} × {{{mults}}}, warm-up {{{', '.join(map(str, m['warmups']))}}} steps{self._warmed_words()}, "
            f"{m['examples']:,} examples per run, {m['backend']} on {m['device']}, {m['threads_per_rank']} thread(s) per rank, "
            f"{m['host']}, {m['cores']} cores, {m['date'][:10]}"
        )

    def _warmed_words(self) -> str:
        warmed = self.meta["warmup_multipliers"]
        return "" if warmed is None else " at ×" + ", ×".join(f"{v:.3g}" for v in warmed)

    # --- finding runs ---

    def index(self, *, k: int, multiplier: float, warmup: int = 0) -> int:
        """The row of the run with ``k`` ranks, ``multiplier`` (matched to 1e-9) and ``warmup``; one sentence if absent."""
        k = check_int("k", k, low=1)
        multiplier = check_real("multiplier", multiplier, low=0, low_open=True)
        warmup = check_int("warmup", warmup, low=0)
        rows = np.flatnonzero((self.k == k) & np.isclose(self.multiplier, multiplier, rtol=1e-9, atol=0) & (self.warmup == warmup))
        if rows.size != 1:
            raise ValueError(
                f"k, multiplier and warmup must name a run of this grid (k in {self.meta['ks']}, multiplier in "
                f"{[round(v, 4) for v in self.meta['multipliers']]}, warmup in {self.meta['warmups']}); "
                f"got k={k}, multiplier={multiplier:g}, warmup={warmup}."
            )
        return int(rows[0])

    def rule_index(self, *, k: int, rule: str, warmup: int = 0) -> int:
        """The row of the run with ``k`` ranks whose multiplier is what ``rule`` ("x1", "sqrt", "linear") gives."""
        return self.index(k=k, multiplier=lr_rules.multiplier(rule, k), warmup=warmup)

    def examples_seen(self, row: int) -> np.ndarray:
        """(steps + 1,): examples the run has seen at each recorded state, 0 first."""
        return np.arange(self.steps[row] + 1) * self.k[row] * self.meta["b"]

    def curve(self, row: int) -> np.ndarray:
        """(steps + 1,): the run's loss at each state (inf after a divergence)."""
        return self.loss[row, : self.steps[row] + 1].astype(np.float64)

    def final_loss(self, row: int) -> float:
        return float(self.curve(row)[-1])

    def diverged(self, row: int) -> bool:
        return bool(self.diverged_at[row] >= 0)

    def examples_to_reach(self, row: int, target: float) -> float:
        """Examples the run needed for its loss to first reach ``target`` (inf if it never did)."""
        return lr_rules.examples_to_reach(self.examples_seen(row), self.curve(row), target)

    def examples_ratio(self, *, k: int, rule: str, warmup: int = 0, fraction: float = 0.125) -> float:
        """How many times the examples of k = 1 at η the k-rank run under ``rule`` needed to reach the same loss.

        The target is the loss the k = 1 run at η (multiplier 1, no warm-up) had after ``fraction`` of
        its examples. The linear rule's claim is a ratio of 1; a run at multiplier m needs about k / m.
        """
        fraction = check_real("fraction", fraction, low=0, low_open=True, high=1)
        ref = self.index(k=1, multiplier=1.0)
        target = float(self.curve(ref)[int(round(fraction * self.steps[ref]))])
        run = self.rule_index(k=k, rule=rule, warmup=warmup)
        return self.examples_to_reach(run, target) / self.examples_to_reach(ref, target)

    def relative_gap(self, row: int) -> np.ndarray:
        """(steps,): step_gap / step_length, the linear rule's error as a fraction of the step (NaN for k = 1)."""
        n = self.steps[row]
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.step_gap[row, :n].astype(np.float64) / self.step_length[row, :n]

    def twin_gap(self, row: int) -> np.ndarray:
        """(steps + 1,): twin_distance over how far the twin had travelled by then (NaN without a twin)."""
        twin = int(self.twin[row])
        n = self.steps[row] + 1
        if twin < 0:
            return np.full(n, np.nan)
        travel = self.travel[twin, :: self.k[row]][:n].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.twin_distance[row, :n] / travel

    def rule_words(self, row: int) -> str:
        """The run's multiplier as a rule when it is one ("×k", "×√k", "×1"), else "×m"; k = 1 has only "×1"."""
        k, m = int(self.k[row]), float(self.multiplier[row])
        for rule in ("linear", "sqrt", "x1") if k > 1 else ("x1",):
            if np.isclose(m, lr_rules.multiplier(rule, k), rtol=1e-9, atol=0):
                return lr_rules.RULE_LABELS[rule]
        return f"×{m:.3g}"

    def label(self, row: int, *, warmup: bool = True) -> str:
        """A legend entry for the run, from the record: k, the rule, the rate and the warm-up."""
        k, m, w = int(self.k[row]), float(self.multiplier[row]), int(self.warmup[row])
        rate = self.meta["base_lr"] * m
        rule = self.rule_words(row)
        text = f"k={k}, η={rate:.3g}" if k == 1 else f"k={k}, {rule} (η={rate:.3g})"
        if warmup and w:
            text += f", warm-up {w}"
        return text

    def small_step_rate(self, row: int) -> float:
        """lr / k at the run's target rate: the rate of each of the k small steps the linear rule replaces."""
        return float(self.meta["base_lr"] * self.multiplier[row] / self.k[row])

    def median_relative_gap(self, row: int) -> float:
        """The median over the run's steps of :meth:`relative_gap` (before any divergence); NaN for k = 1."""
        gaps = self.relative_gap(row)
        if self.diverged(row):
            gaps = gaps[: max(int(self.diverged_at[row]) - 1, 0)]
        gaps = gaps[np.isfinite(gaps)]
        return float(np.median(gaps)) if gaps.size else float("nan")

    # --- the claims checked on the recorded data ---

    def check(self) -> str:
        """Assert what holds for every grid and return a one-line report."""
        assert self.replicas_identical.all(), f"replicas differed in runs {np.flatnonzero(~self.replicas_identical).tolist()}"
        for row in range(len(self.k)):
            n = self.steps[row]
            assert self.steps[row] * self.k[row] * self.meta["b"] == self.meta["examples"], f"run {row} saw other examples"
            expected = lr_rules.warmup_schedule(self.meta["base_lr"] * self.multiplier[row], int(n), int(self.warmup[row]))
            stop = self.diverged_at[row] if self.diverged(row) else n
            assert np.allclose(self.lr[row, :stop], expected[:stop], rtol=1e-12, atol=0), f"run {row} used other rates"
        return (f"{len(self.k)} runs of the {self.model_words}: every rank's parameters bit-identical to rank 0's after "
                f"every step of every run, and every run stepped at the rate its rule and warm-up set.")


# --- the grids behind figures/lr_*.png (recorded by ./run, saved in figures/records) ---

# What the figures draw and the chapter's claims assert: the rules' multipliers at k = 4, the rates in between for
# the gap against the rate, and warm-ups only where they matter (×64, ×128), so that ./run records it in under a
# minute. Quick: as many examples as the full grid (the claims checked need them), fewer warm-ups.
_FIGURE_GRID = dict(ks=(1, 4), multipliers=(1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0), warmups=(0, 3, 30),
                    warmup_multipliers=(64.0, 128.0))
FIGURE_PLAN = FigurePlan(
    name="bigger_batch",
    settings={f"lr_{model}": dict(_FIGURE_GRID, model=model) for model in MODELS},  # dpviz.topics.bigger_batch.run_lr_sweep.record_lr_grid
    quick={f"lr_{model}": dict(warmups=(0, 3)) for model in MODELS},
)
