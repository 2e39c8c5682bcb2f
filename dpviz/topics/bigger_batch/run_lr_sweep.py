"""Real data-parallel training over k, learning-rate rule and warm-up: the runs behind the chapter.

    from dpviz.topics.bigger_batch.run_lr_sweep import record_lr_grid
    grid = record_lr_grid(model="line", ks=(1, 4), multipliers=(1, 4), warmups=(0,))
    print(grid.check())

    python -m dpviz.topics.bigger_batch.run_lr_sweep                # records the shipped grids again (about a minute)
    python -m dpviz.topics.bigger_batch.run_lr_sweep --out my_runs  # or somewhere else; LrGrid.shipped("line", "my_runs")

One launch per k: its k ranks train every (multiplier, warm-up) run of the grid side by side, each
from the same starting θ, with plain SGD whose rate follows the warm-up schedule, all-reducing
their gradients at every step (one all-reduce a step carries every run still training). Every run
sees ``examples`` examples from one seeded stream of batches of b: rank r takes batch k·t + r at
step t. Along the way each run records

* the loss on the whole data set before every step (every rank computes it, so all of them
  agree, to the bit, on when a run has diverged and stops);
* the linear rule's error, measured where it happens: rank 0 also takes, from the same θ, the
  k small steps of rate lr/k on the k shards one after another, and records how far from the
  real step they land (``step_gap``);
* the distance to the run's twin, the run on one rank at rate lr/k that the linear rule says it
  imitates, after as many examples. The k = 1 launch goes first and hands its trajectories on.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from dpviz import course
from dpviz.engine.fronts import rank_side_names, record_shipped
from dpviz.engine.checks import MAX_DATASET, MAX_LR, check_choice, check_int, check_lr, check_real, check_seed, check_timeout
from dpviz.topics.bigger_batch.records import FIGURE_PLAN, MODELS, LrGrid, shipped_name
from dpviz.engine.paths import SHIPPED_DIR
from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor.model_sizes import count_params
from dpviz.engine.where import where_it_ran


SQRT2 = math.sqrt(2.0)
KS = (1, 2, 4)
MULTIPLIERS = (1.0, SQRT2, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)  # ×1, ×√2, and powers of two up to far too much
WARMUPS = (0, 3, 10, 30)
DIVERGE_FACTOR = 1e4
MAX_STEPS = 100_000  # optimizer steps of one run


def lr_worker(rank: int, world_size: int, config: LrGridConfig, runs: list, twins: dict, keep: set, diverge_factor: float) -> list[dict]:
    """Runs in each rank: :func:`dpviz.topics.bigger_batch.rank_lr_sweep.lr_worker`, imported there (with torch), not here."""
    from dpviz.topics.bigger_batch.rank_lr_sweep import lr_worker

    return lr_worker(rank, world_size, config, runs, twins, keep, diverge_factor)


# the rank side's names this front offers (importing torch only when one is used)
__getattr__ = rank_side_names(__name__, "dpviz.topics.bigger_batch.rank_lr_sweep", (
    "stream_rows", "load_data", "make_model", "mse", "flat", "distance", "small_steps",
))


@dataclass
class LrGridConfig:
    model: str = "line"                 # "line" (two parameters) or "mlp"
    ks: tuple = KS                      # ranks, one launch each
    multipliers: tuple = MULTIPLIERS    # target rate / base_lr, one run each (per k and warm-up)
    warmups: tuple = WARMUPS            # warm-up lengths, steps
    warmup_multipliers: tuple | None = None  # the multipliers run with every warm-up (the rest only without); None: all
    b: int = 8                          # examples per rank per step
    examples: int = 3200                # examples each run sees: k ranks take examples / (k·b) steps
    base_lr: float = 0.01               # η, the rate at multiplier 1
    width: int = 64                     # hidden units per layer (mlp only)
    depth: int = 2                      # hidden layers (mlp only)
    d_in: int = 16                      # input features (mlp only)
    dataset_size: int = 512             # examples in the data set; the loss is measured on all of them
    seed: int = 0                       # seeds the data, the model and the stream of batches
    backend: str = "auto"               # "auto", "gloo" or "nccl"
    threads: int = 1                    # intra-op threads per rank (1: runs on different k compare fairly)
    stall_timeout: float = 120.0        # seconds a rank may go without finishing a step

    def __post_init__(self):
        check_choice("model", self.model, MODELS)
        self.ks = tuple(check_int("ks entries", k, low=1, high=64) for k in _nonempty("ks", self.ks))
        self.base_lr = check_lr("base_lr", self.base_lr)
        self.multipliers = tuple(check_real("multipliers entries", m, low=0, low_open=True, high=MAX_LR / self.base_lr)
                                 for m in _nonempty("multipliers", self.multipliers))
        self.warmups = tuple(check_int("warmups entries", w, low=0) for w in _nonempty("warmups", self.warmups))
        if 0 not in self.warmups:
            raise ValueError(f"warmups must include 0 (every multiplier runs without warm-up); got {self.warmups}.")
        if self.warmup_multipliers is not None:
            self.warmup_multipliers = tuple(float(m) for m in self.warmup_multipliers)
            for m in self.warmup_multipliers:
                if not any(math.isclose(m, v, rel_tol=1e-9) for v in self.multipliers):
                    raise ValueError(f"warmup_multipliers entries must be among the multipliers {self.multipliers}; got {m:g}.")
        for name in ("ks", "multipliers", "warmups"):
            values = getattr(self, name)
            if len(set(values)) != len(values):
                raise ValueError(f"{name} must not repeat a value; got {values}.")
        self.dataset_size = check_int("dataset_size", self.dataset_size, low=1, high=MAX_DATASET)
        self.b = check_int("b", self.b, low=1, high=self.dataset_size)
        # the shortest k takes examples / (k·b) steps, at most MAX_STEPS of them
        self.examples = check_int("examples", self.examples, low=1, high=MAX_STEPS * min(self.ks) * self.b)
        self.seed = check_seed("seed", self.seed)
        self.threads = check_int("threads", self.threads, low=1, high=4096)
        self.stall_timeout = check_timeout("stall_timeout", self.stall_timeout)
        check_choice("backend", self.backend, launcher.BACKENDS)
        for k in self.ks:
            if k * self.b > self.dataset_size:
                raise ValueError(f"b must be at most dataset_size / k = {self.dataset_size // k} for k={k}; got b={self.b}.")
            if self.examples % (k * self.b):
                raise ValueError(f"examples must be a multiple of k·b = {k * self.b} (k={k}, b={self.b}); got {self.examples}.")
        shortest = self.steps(max(self.ks))
        for w in self.warmups:
            if w > shortest:
                raise ValueError(
                    f"warmups entries must be at most {shortest}, the steps of the shortest run (k={max(self.ks)}); got {w}."
                )

    def steps(self, k: int) -> int:
        """Optimizer steps of a run on k ranks."""
        return self.examples // (k * self.b)

    def runs(self, k: int) -> list[tuple[float, int]]:
        """The (multiplier, warm-up) of every run on k ranks, in the grid's order."""
        return [(m, w) for m in self.multipliers for w in self.warmups if w == 0 or self.warmed(m)]

    def warmed(self, multiplier: float) -> bool:
        """Whether ``multiplier`` is run with every warm-up, or only without."""
        return self.warmup_multipliers is None or any(math.isclose(multiplier, m, rel_tol=1e-9) for m in self.warmup_multipliers)

    def twin_multiplier(self, k: int, multiplier: float) -> float | None:
        """The k = 1 multiplier the linear rule pairs with (k, multiplier), if the grid has it."""
        if k == 1 or 1 not in self.ks:
            return None
        for m in self.multipliers:
            if math.isclose(m * k, multiplier, rel_tol=1e-9):
                return m
        return None


def _nonempty(name, values) -> tuple:
    values = tuple(values) if not isinstance(values, (str, bytes)) else None
    if not values:
        raise ValueError(f"{name} must list at least one value; got {values!r}.")
    return values


def record_lr_grid(config: LrGridConfig | None = None, *, progress: bool = False, **overrides) -> LrGrid:
    """Launch one process group per k and train every run of the grid; return the :class:`LrGrid`.

    Keyword overrides build the config: ``record_lr_grid(model="mlp", ks=(1, 4), warmups=(0, 10))``.
    """
    config = LrGridConfig(**{**(asdict(config) if config else {}), **overrides})
    # k = 1 goes first: its un-warmed runs are the twins of the others, so it keeps their trajectories.
    partners = {config.twin_multiplier(k, m) for k in config.ks for m in config.multipliers} - {None}
    histories = {}  # multiplier -> the k = 1 run's parameters at every state
    rows, results, devices = [], {}, set()
    for k in sorted(config.ks):
        runs = config.runs(k)
        steps = config.steps(k)
        twins, keep = {}, set()
        for position, (multiplier, warmup) in enumerate(runs):
            partner = config.twin_multiplier(k, multiplier)
            if partner is not None:
                twins[position] = histories[partner][::k][: steps + 1]
            if config.model == "line" or (k == 1 and warmup == 0 and multiplier in partners):
                keep.add(position)
        with launcher.sharing_cores_said_elsewhere():  # nothing here is timed
            results[k] = launcher.launch(
                lr_worker, k, args=(config, runs, twins, keep, DIVERGE_FACTOR), backend=launcher.resolve_backend(config.backend, k),
                threads=config.threads, stall_timeout=config.stall_timeout, total_steps=steps * len(runs),
                progress=progress,
            )
        for position, (multiplier, warmup) in enumerate(runs):
            mine = results[k][0][position]
            devices.add(mine["device"])
            if k == 1 and warmup == 0 and "params" in mine:
                histories[multiplier] = mine["params"]
            rows.append((k, position, multiplier, warmup))
    return assemble(config, rows, results, sorted(devices))


def assemble(config: LrGridConfig, rows: list, results: dict, devices: list) -> LrGrid:
    """Stack every run's arrays (rank 0's, with every rank's fingerprint compared) into one :class:`LrGrid`."""
    n_runs, t_max = len(rows), max(config.steps(k) for k in config.ks)
    n_params = count_params(config.model, d_in=config.d_in, width=config.width, depth=config.depth)

    def padded(width, dtype):
        return np.full((n_runs, width), np.nan, dtype)

    arrays = {
        "k": np.array([r[0] for r in rows], np.int64),
        "multiplier": np.array([r[2] for r in rows], np.float64),
        "warmup": np.array([r[3] for r in rows], np.int64),
        "steps": np.array([config.steps(r[0]) for r in rows], np.int64),
        "lr": padded(t_max, np.float64), "loss": padded(t_max + 1, np.float32),
        "step_length": padded(t_max, np.float32), "step_gap": padded(t_max, np.float32),
        "travel": padded(t_max + 1, np.float32), "twin_distance": padded(t_max + 1, np.float32),
        "twin": np.full(n_runs, -1, np.int64), "diverged_at": np.full(n_runs, -1, np.int64),
        "replicas_identical": np.zeros(n_runs, bool), "seconds": np.zeros(n_runs),
    }
    if config.model == "line":
        arrays["params"] = np.full((n_runs, t_max + 1, n_params), np.nan, np.float32)
    for i, (k, position, multiplier, warmup) in enumerate(rows):
        ranks = [per_rank[position] for per_rank in results[k]]
        mine, n = ranks[0], config.steps(k)
        for name in ("lr", "step_length", "step_gap"):
            arrays[name][i, :n] = mine[name]
        for name in ("loss", "travel", "twin_distance"):
            arrays[name][i, : n + 1] = mine[name]
        arrays["diverged_at"][i] = mine["diverged_at"]
        arrays["replicas_identical"][i] = len({r["digest"] for r in ranks}) == 1
        arrays["seconds"][i] = mine["seconds"]
        if "params" in arrays:
            arrays["params"][i, : len(mine["params"])] = mine["params"]
        partner = config.twin_multiplier(k, multiplier)
        if partner is not None:
            arrays["twin"][i] = next(j for j, r in enumerate(rows) if r[0] == 1 and r[2] == partner and r[3] == 0)
    meta = dict(
        model=config.model, width=config.width, depth=config.depth, d_in=config.d_in, n_params=int(n_params),
        optimizer="sgd", base_lr=config.base_lr, b=config.b, examples=config.examples, ks=sorted(config.ks),
        multipliers=list(config.multipliers), warmups=list(config.warmups),
        warmup_multipliers=None if config.warmup_multipliers is None else list(config.warmup_multipliers), seed=config.seed,
        dataset_size=config.dataset_size, diverge_factor=DIVERGE_FACTOR,
        **where_it_ran(LrGrid, backend=",".join(sorted({launcher.resolve_backend(config.backend, k) for k in config.ks})),
                       device=", ".join(devices), threads_per_rank=config.threads),
    )
    return LrGrid(meta, arrays)


# --- the grids shipped with dpviz, and the ones behind figures/ ---

SHIPPED = {  # model -> the settings of its shipped grid (the chapter's sliders browse them)
    "line": dict(model="line"),
    "mlp": dict(model="mlp"),
}


def record_bigger_batch_plan(*, quick: bool = False, progress: bool = True) -> dict:
    """Fresh grids for the figures, {stem: LrGrid}, as :data:`dpviz.topics.bigger_batch.records.FIGURE_PLAN` declares them.

    The grids are recorded side by side, each from a thread of its own: nothing in a grid is timed, and
    its k = 1 launch keeps one core busy, so two grids together fill two.
    """
    settings = FIGURE_PLAN.settings_for(quick=quick)
    with launcher.sharing_cores_said_elsewhere():  # the grids' own catch_warnings, entered from two threads, restore out of order
        with ThreadPoolExecutor(max_workers=len(settings)) as pool:
            grids = {stem: pool.submit(record_lr_grid, progress=False, **values) for stem, values in settings.items()}
            return {stem: grid.result() for stem, grid in grids.items()}


def regenerate(out_dir=SHIPPED_DIR, *, progress: bool = True) -> list[Path]:
    """Record the shipped grids afresh and save them under ``out_dir``; returns the record stems written."""
    written = []
    for model, settings in SHIPPED.items():
        grid = record_lr_grid(progress=progress, **settings)
        grid.check()
        written.append(grid.save(Path(out_dir) / shipped_name(model)))
    return written


def main(argv=None) -> None:
    record_shipped("python -m dpviz.topics.bigger_batch.run_lr_sweep",
                   f"Record the learning-rate grids that {course.ref('bigger_batch')}'s sliders browse.", regenerate, argv)


if __name__ == "__main__":
    main()
