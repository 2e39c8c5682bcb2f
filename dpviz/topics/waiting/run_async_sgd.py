"""Asynchronous SGD through a real parameter server, and synchronous SGD through the same server to compare.

    from dpviz.topics.waiting.run_async_sgd import record_async
    run = record_async(k=3, updates=60, delays=(0.004, 0.004, 0.02))   # worker 3 is five times slower
    print(run.check())
    run.staleness                        # τ of every update

Rank 0 is the server; ranks 1..k are workers. They talk with point-to-point messages over gloo:

* a worker sends ``[g_w, g_c, batch loss, version pulled, gradient number]`` (float64) to rank 0;
* the server takes whichever message arrives first (``dist.recv`` with no source), and replies to
  that worker with ``[w, c, version, stop]``, the θ it holds now.

In ``mode="async"`` the server applies each gradient the moment it arrives, θ ← θ − η·g, so a
gradient computed at version v and applied as update t is τ = t − v updates stale. In
``mode="sync"`` it collects one gradient from every worker, applies their mean once, and answers
everyone: every worker then waits for the slowest. The server keeps θ in a
:class:`~dpviz.topics.ground_floor.rank_models.LineModel` and steps it with :class:`~dpviz.topics.ground_floor.rank_optim.SGD`, the
arithmetic of plain SGD, so one worker alone (k = 1) reproduces plain SGD bit for bit.

A worker's compute on the line model takes microseconds; each sleeps ``delays[i]`` seconds per
gradient to stand in for real work, and a larger delay makes a slow worker.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dpviz.engine.fronts import rank_side_names
from dpviz.engine.checks import MAX_DATASET, check_choice, check_int, check_lr, check_real, check_seed
from dpviz.engine.data import line_data
from dpviz.topics.waiting.records_async_sgd import MODES, AsyncRecord
from dpviz.engine import launch as launcher
from dpviz.engine.where import where_it_ran
from dpviz.topics.waiting.theory import line_loss

SERVER = 0
MAX_DELAY = 10.0  # seconds per gradient


def async_worker(rank: int, world_size: int, config: AsyncConfig) -> dict:
    """Runs in each rank: :func:`dpviz.topics.waiting.rank_async_sgd.async_worker`, imported there (with torch), not here."""
    from dpviz.topics.waiting.rank_async_sgd import async_worker

    return async_worker(rank, world_size, config)


# the rank side's names this front offers (importing torch only when one is used)
__getattr__ = rank_side_names(__name__, "dpviz.topics.waiting.rank_async_sgd", (
    "batch_rows", "update_batches", "mse", "batch_grads", "plain_sgd",
))


@dataclass
class AsyncConfig:
    k: int = 3                        # workers; the server is one more process
    mode: str = "async"               # "async": apply on arrival; "sync": the mean of all k per update
    updates: int = 60                 # T, updates the server applies
    lr: float = 0.05                  # learning rate η
    b: int = 8                        # examples per worker per gradient
    delays: tuple | None = None       # seconds each worker sleeps per gradient; None: 2 ms each
    max_staleness: int | None = None  # drop gradients staler than this (None: apply them all)
    seed: int = 0                     # seeds the data and every mini-batch draw
    dataset_size: int = 512           # N

    def __post_init__(self):
        check_int("k", self.k, low=1, high=63)
        check_choice("mode", self.mode, MODES)
        check_int("updates", self.updates, low=1, high=100_000)
        check_lr("lr", self.lr)
        check_int("dataset_size", self.dataset_size, low=1, high=MAX_DATASET)
        check_int("b", self.b, low=1, high=self.dataset_size)
        if self.delays is None:
            self.delays = (0.002,) * self.k
        self.delays = tuple(float(check_real("delays entries", d, low=0.0, high=MAX_DELAY)) for d in self.delays)
        if len(self.delays) != self.k:
            raise ValueError(f"delays must list one delay per worker (k={self.k} entries); got {len(self.delays)}.")
        if self.max_staleness is not None:
            check_int("max_staleness", self.max_staleness, low=0, high=self.updates)
            if self.mode == "sync":
                raise ValueError("max_staleness applies to mode='async' only; synchronous gradients are never stale.")
        check_seed("seed", self.seed)


def record_async(config: AsyncConfig | None = None, *, progress: bool = False, **overrides) -> AsyncRecord:
    """Launch the server and ``config.k`` workers, run, and return the :class:`AsyncRecord`.

    ``record_async(k=3, mode="sync", delays=(0.004, 0.004, 0.02))`` builds the config for you.
    """
    config = make_config(config, **overrides)
    results = launcher.launch(async_worker, config.k + 1, args=(config,), backend="gloo", threads=1,
                              total_steps=config.updates, progress=progress)
    return assemble(config, results)


def make_config(config: AsyncConfig | None = None, **overrides) -> AsyncConfig:
    return AsyncConfig(**{**(asdict(config) if config else {}), **overrides})


def assemble(config: AsyncConfig, results: list[dict]) -> AsyncRecord:
    """The record from the server's and the workers' results (the server's hold plain SGD and the fresh gradients)."""
    server, workers = results[SERVER], results[1:]
    states = server["states"]
    t = config.updates
    staleness = server["staleness"]
    x, y = line_data(config.dataset_size, seed=config.seed)
    batches = server["batch_index"]  # the rows behind each update, the server's record of them
    arrays = {
        "worker": server["worker"], "staleness": staleness,
        "theta_before": states[:t], "theta_pulled": states[np.arange(t) - staleness], "theta_after": states[1:],
        "grad": server["grad"], "batch_loss": server["batch_loss"],
        "fresh_grad": server["fresh_grad"],
        "loss": line_loss(x, y, states).astype(np.float64), "wall": server["wall"], "batch_index": batches.astype(np.int64),
        "dropped_worker": server["dropped_worker"], "dropped_staleness": server["dropped_staleness"],
        "worker_gradients": np.array([w["gradients"] for w in workers], dtype=np.int64),
        "worker_idle": np.array([w["idle"] for w in workers]),
        "worker_busy": np.array([w["busy"] for w in workers]),
    }
    if config.mode == "async":
        arrays["sequential_theta"] = server["sequential_theta"]
    meta = dict(
        mode=config.mode, k=config.k, updates=t, lr=config.lr, b=config.b, delays=list(config.delays),
        max_staleness=config.max_staleness, seed=config.seed, model="line", dataset_size=config.dataset_size,
        **where_it_ran(AsyncRecord, backend="gloo"),
    )
    return AsyncRecord(meta, arrays)
