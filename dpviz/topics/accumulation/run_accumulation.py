"""Gradient accumulation on real ranks: m micro-batches per update, summed, with one all-reduce or m of them.

    from dpviz.topics.accumulation.run_accumulation import AccumConfig, record_accumulation
    runs = record_accumulation([AccumConfig(k=1, m=4, b=64), AccumConfig(k=2, m=2, b=32)])
    print(runs[0].check())

    python -m dpviz.topics.accumulation.run_accumulation               # records the shipped slider runs again (about a minute)

Each rank takes b examples per update and cuts them into m micro-batches of b/m. For each
micro-batch it runs the forward and backward pass, and the gradients add up; the update steps with

    g = (sum over ranks and micro-batches of the micro-batch mean gradients) / (k·m),

the mean gradient of all k·b examples. With ``sync="accumulate"`` a rank sums its m gradients in
``.grad`` (as ``loss.backward()`` does on its own) and all-reduces once per update, which is what
DDP does inside ``no_sync()``; with ``sync="every"`` it all-reduces each micro-batch's gradient as
soon as it has it. One process (k = 1) talks to nobody.

Several configurations run in one launch, one after another, so that the ranks start once. A
configuration with k = 1 runs in rank 0 while the other ranks wait at a barrier; every other one
uses all the launched ranks. Every rank gets one intra-op thread, so that times compare across
configurations.

Activation memory is counted, not sampled: before the timed steps, one micro-batch's forward pass
runs under ``torch.autograd.graph.saved_tensors_hooks``, and the bytes of every tensor autograd
saves for the backward pass are added up, each storage once and the parameters left out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from dpviz import course
from dpviz.engine.fronts import rank_side_names, record_shipped
from dpviz.engine.checks import MAX_DATASET, check_choice, check_int, check_lr, check_seed
from dpviz.topics.ground_floor.records import rel_err
from dpviz.topics.accumulation.records import (
    GRID, GRID_K, GRID_M, SYNCS, FIGURE_PLAN, AccumulationRun, grid_keys, grid_name,
)
from dpviz.engine.paths import SHIPPED_DIR
from dpviz.engine import launch as launcher
from dpviz.engine.where import where_it_ran

THREADS = 1  # intra-op threads per rank: the same in every configuration, so their times compare


def accumulation_worker(rank: int, world_size: int, configs: list) -> list:
    """Runs in each rank: :func:`dpviz.topics.accumulation.rank_accumulation.accumulation_worker`, imported there (with torch), not here."""
    from dpviz.topics.accumulation.rank_accumulation import accumulation_worker

    return accumulation_worker(rank, world_size, configs)


# the rank side's names this front offers (importing torch only when one is used)
__getattr__ = rank_side_names(__name__, "dpviz.topics.accumulation.rank_accumulation", (
    "batch_rows", "make_model", "mse", "digest", "saved_activation_bytes", "big_batch_grad",
))


@dataclass
class AccumConfig:
    k: int = 2                 # ranks that share each update (1: one process alone)
    m: int = 2                 # micro-batches per rank per update
    b: int = 1024              # examples per rank per update, cut into m micro-batches of b/m
    sync: str = "accumulate"   # "accumulate": one all-reduce per update (DDP's no_sync); "every": one per micro-batch
    steps: int = 6             # updates (optimizer steps); times are medians over all but the first
    width: int = 256           # hidden units per layer of the MLP
    depth: int = 2             # hidden layers
    d_in: int = 16             # input features
    lr: float = 0.05           # learning rate η (plain SGD)
    seed: int = 0              # seeds the data, the model and every batch draw
    dataset_size: int = 16384  # examples in the data set
    keep_grads: bool = True    # keep every rank's update gradient and the big-batch gradient in the record

    def __post_init__(self):
        check_int("k", self.k, low=1, high=1024)
        check_int("dataset_size", self.dataset_size, low=1, high=MAX_DATASET)
        check_int("m", self.m, low=1, high=4096)
        check_int("b", self.b, low=1, high=self.dataset_size // self.k)
        if self.b % self.m:
            raise ValueError(f"b must split into m={self.m} equal micro-batches, so it must be a multiple of {self.m}; got b={self.b}.")
        check_choice("sync", self.sync, SYNCS)
        check_int("steps", self.steps, low=1, high=100_000)
        check_int("width", self.width, low=1, high=1 << 16)
        check_int("depth", self.depth, low=1, high=64)
        check_int("d_in", self.d_in, low=1, high=1 << 16)
        check_lr("lr", self.lr)
        check_seed("seed", self.seed)

    @property
    def micro_batch(self) -> int:
        """Examples per micro-batch."""
        return self.b // self.m

    @property
    def global_batch(self) -> int:
        """Examples per update, over all ranks."""
        return self.k * self.b


def micro_batches_of(global_batch: int, m: int) -> int:
    """Examples per micro-batch when ``global_batch`` examples are cut into m; raises if they do not split."""
    m = check_int("m", m, low=1)
    global_batch = check_int("global_batch", global_batch, low=1)
    if global_batch % m:
        raise ValueError(f"global_batch must split into m={m} equal micro-batches, so it must be a multiple of {m}; got {global_batch}.")
    return global_batch // m


def assemble(config: AccumConfig, results: list, launched: int, backend: str) -> AccumulationRun:
    """Stack the ranks' results for one configuration into an :class:`AccumulationRun`, with the big-batch check."""
    shares = {step: grad for r in results for step, grad in r["big_share"].items()}  # the ranks took turns
    big = np.stack([shares[step] for step in range(config.steps)])  # each update's examples in one backward pass
    results = results[: config.k]
    grads = np.stack([r["grad"] for r in results], axis=1)  # (steps, k, P)
    arrays = {
        name: np.stack([r[name] for r in results], axis=1)
        for name in ("t_micro", "t_comm", "t_step", "loss", "allreduce_calls", "allreduce_bytes", "param_digest")
    }
    arrays["big_rel_err"] = rel_err(grads, big[:, None, :], axis=2)
    if config.keep_grads:
        arrays["reduced_grad"], arrays["big_grad"] = grads, big
        arrays["batch_index"] = results[0]["batch_index"]
    meta = {name: value for name, value in asdict(config).items() if name != "keep_grads"}
    meta.update(
        micro_batch=config.micro_batch,
        global_batch=config.global_batch,
        model="mlp",
        optimizer="sgd",
        n_params=int(results[0]["n_params"]),
        activation_bytes=int(results[0]["activation_bytes"]),
        launched_ranks=launched,
        **where_it_ran(AccumulationRun, backend=backend, device="cpu", threads_per_rank=int(results[0]["threads"])),
    )
    return AccumulationRun(meta, arrays)


def record_accumulation(configs, *, progress: bool = False) -> list[AccumulationRun]:
    """Record each configuration (an :class:`AccumConfig` or a dict of its fields); returns their records in order.

    Configurations with the same k > 1 share one launch, and those with k = 1 run in rank 0 of the
    first launch (or of their own, with one rank, if there is no other).
    """
    # each checked again (a field of a config may have been set since it was made), before any rank starts
    configs = [AccumConfig(**(asdict(c) if isinstance(c, AccumConfig) else c)) for c in _as_list(configs)]
    if not configs:
        raise ValueError("configs must hold at least one AccumConfig; got none.")
    worlds = sorted({c.k for c in configs if c.k > 1}) or [1]
    plans = {world: [c for c in configs if c.k == world] for world in worlds}
    plans[worlds[0]] = [c for c in configs if c.k in (1, worlds[0])]
    runs = {}
    for world, plan in plans.items():
        backend = launcher.resolve_backend("gloo", world)
        # more ranks than cores: the runs that use them say so (AccumulationRun.oversubscribed)
        with launcher.sharing_cores_said_elsewhere():
            results = launcher.launch(
                accumulation_worker, world, args=(plan,), backend=backend, threads=THREADS,
                total_steps=sum(c.steps for c in plan), progress=progress,
            )
        for i, config in enumerate(plan):
            runs[id(config)] = assemble(config, [r[i] for r in results], world, backend)
    return [runs[id(c)] for c in configs]


def _as_list(configs) -> list:
    if isinstance(configs, (AccumConfig, dict)):
        return [configs]
    return list(configs)


# --- the records behind the chapter's figures (./run) and the shipped slider runs ---

def figure_configs(*, quick: bool = False) -> dict[str, AccumConfig]:
    """The runs behind the figures, by record stem (:data:`dpviz.topics.accumulation.records.FIGURE_PLAN`)."""
    return {stem: AccumConfig(**settings) for stem, settings in FIGURE_PLAN.settings_for(quick=quick).items()}


def record_accumulation_plan(*, quick: bool = False, progress: bool = False) -> dict[str, AccumulationRun]:
    """Fresh runs for the chapter's figures, keyed by record stem (what ``./run`` saves in figures/records)."""
    configs = figure_configs(quick=quick)
    return dict(zip(configs, record_accumulation(list(configs.values()), progress=progress)))


def grid_configs(*, steps: int = GRID["steps"]) -> dict[tuple, AccumConfig]:
    """The shipped slider runs, keyed by (k, m, sync): micro-batches of GRID's size, k·m of them per update."""
    base = {name: value for name, value in GRID.items() if name not in ("micro_batch", "steps")}
    return {
        (k, m, sync): AccumConfig(k=k, m=m, b=GRID["micro_batch"] * m, sync=sync, steps=steps, keep_grads=False, **base)
        for k, m, sync in grid_keys()
    }


def regenerate(out_dir=SHIPPED_DIR, *, progress: bool = True) -> list[Path]:
    """Record the shipped slider runs afresh and save them under ``out_dir``; returns the stems written."""
    configs = grid_configs()
    runs = record_accumulation(list(configs.values()), progress=progress)
    written = []
    for key, run in zip(configs, runs):
        run.check()
        written.append(run.save(Path(out_dir) / grid_name(*key)))
    return written


def main(argv=None) -> None:
    record_shipped("python -m dpviz.topics.accumulation.run_accumulation",
                   f"Record the accumulation runs the sliders of {course.ref('accumulation')} browse "
                   f"(k in {GRID_K}, m in {GRID_M}).", regenerate, argv)


if __name__ == "__main__":
    main()
