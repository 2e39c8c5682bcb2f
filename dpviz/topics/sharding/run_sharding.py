"""Shard everything: one MLP trained with Adam at ZeRO stages 0, 1, 2 and 3 (FSDP) in the same k gloo ranks.

    from dpviz.topics.sharding.run_sharding import record_sharding
    run = record_sharding(k=2)                      # about a second from a warm fork server
    print(run.check())                              # every stage's parameters equal plain data parallelism's

All four trainings start from the same model and see the same batches (the data-parallel sharding of
:mod:`dpviz.topics.ground_floor.run_training`), and every byte they send goes through dpviz's own ring,
:func:`~dpviz.topics.all_reduce.rank_collectives.ring_reduce_scatter` and :func:`~dpviz.topics.all_reduce.rank_collectives.ring_all_gather`,
which count it:

* stage 0, plain data parallelism: the ring all-reduces the gradient; every rank steps all P parameters;
* stage 1 (ZeRO-1): reduce-scatter the gradient; each rank steps its chunk with Adam's state for that chunk;
  all-gather the parameters;
* stage 2 (ZeRO-2): as stage 1, but each layer's gradient is reduce-scattered as its backward makes it and
  only this rank's chunk is kept;
* stage 3 (ZeRO-3, FSDP): the parameters are chunks at rest; each layer is all-gathered for its forward,
  freed, gathered again for its backward, freed; its gradient reduce-scattered.

Each rank counts the bytes of the tensors it holds at each phase (forward, backward, step) by category
(parameters, gradients, Adam's state, one layer's transient full tensors): :mod:`dpviz.topics.sharding.theory`
predicts every one of those counts. For the last step of each stage each rank also keeps a trace: every
gather, free, gradient made and reduce-scatter (and each phase's start), when it happened and the bytes it
held right after (:func:`dpviz.topics.sharding.theory.step_trace` is the model of that sequence). ``fsdp=True`` trains once more with torch's own FSDP2
(``torch.distributed.fsdp.fully_shard``) and ``torch.optim.Adam``, the oracle; its imports cost each rank
seconds.

The front is torch-free: the config is checked here, the ranks run :mod:`dpviz.topics.sharding.rank_sharding`.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass

import numpy as np

from dpviz.engine.checks import check_int, check_lr, check_timeout
from dpviz.topics.sharding.records import FIGURE_PLAN, ShardingRun
from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor.run_training import TrainConfig
from dpviz.engine.where import where_it_ran
from dpviz.topics.sharding import theory as layout

ELEMENT_BYTES = 4  # float32
STAGES = (0, 1, 2, 3)


def sharding_worker(rank: int, world_size: int, config: ShardingConfig) -> dict:
    """Runs in each rank: :func:`dpviz.topics.sharding.rank_sharding.sharding_worker`, imported there (with torch), not here."""
    from dpviz.topics.sharding.rank_sharding import sharding_worker

    return sharding_worker(rank, world_size, config)


@dataclass
class ShardingConfig:
    k: int = 2                 # ranks
    b: int = 8                 # examples per rank per step
    steps: int = 4             # Adam steps at each stage
    width: int = 31            # hidden units; with d_in = 15 the layers hold 496, 992 and 32 parameters, each a multiple of 16
    depth: int = 2             # hidden layers
    d_in: int = 15             # input features
    lr: float = 0.01           # Adam's learning rate
    seed: int = 0              # seeds the data, the model and every batch draw
    dataset_size: int = 512    # examples in the data set
    fsdp: bool = False         # also train with torch's fully_shard (FSDP2), the oracle: seconds of imports per rank
    stall_timeout: float = 60.0  # seconds a rank may go without progress

    def __post_init__(self):
        self.k = check_int("k", self.k, low=1, high=64)
        self.steps = check_int("steps", self.steps, low=1, high=1_000)
        check_lr("lr", self.lr)
        check_timeout("stall_timeout", self.stall_timeout)
        if not isinstance(self.fsdp, bool):
            raise TypeError(f"fsdp must be True or False; got {self.fsdp!r}.")
        self.train_config()  # checks b, width, depth, d_in, seed and dataset_size

    def train_config(self) -> TrainConfig:
        """The same run as a :class:`TrainConfig`, for its data, model and batch draws."""
        return TrainConfig(k=self.k, b=self.b, steps=self.steps, model="mlp", width=self.width, depth=self.depth,
                           d_in=self.d_in, optimizer="adam", lr=self.lr, seed=self.seed, dataset_size=self.dataset_size)

    def unit_sizes(self) -> tuple:
        """Each linear layer's parameter count, in order."""
        return layout.mlp_unit_sizes(self.d_in, self.width, self.depth)


def assemble(config: ShardingConfig, results: list[dict], backend: str) -> ShardingRun:
    k, units = config.k, config.unit_sizes()
    params = []
    for stage in STAGES:
        held = [r["stages"][stage]["held"] for r in results]   # (steps+1, n) each: full padded, or the rank's shard
        if stage < 3:
            params.append(np.stack([layout.unpad(row, units, k) for row in held[0]]))
        else:
            params.append(np.stack([layout.from_shards([h[i] for h in held], units, k) for i in range(config.steps + 1)]))

    def per_stage(name, dtype):
        return np.array([[r["stages"][stage][name] for r in results] for stage in STAGES], dtype=dtype)

    arrays = {
        "stage": np.array(STAGES, dtype=np.int64),
        "unit_size": np.array(units, dtype=np.int64),
        "params": np.stack(params).astype(np.float32),
        "param_digest": per_stage("digest", "S40").transpose(0, 2, 1).copy(),
        "loss": per_stage("loss", np.float32).transpose(0, 2, 1).copy(),
        "memory": per_stage("memory", np.int64),
        "rs_bytes": per_stage("rs_bytes", np.int64).transpose(0, 2, 1).copy(),
        "ag_bytes": per_stage("ag_bytes", np.int64).transpose(0, 2, 1).copy(),
        "step_seconds": per_stage("seconds", np.float64).transpose(0, 2, 1).copy(),
    }
    arrays.update(trace_arrays(results))
    if config.fsdp:
        arrays["params_fsdp"] = results[0]["fsdp"].astype(np.float32)
    meta = dict(
        k=k, b=config.b, steps=config.steps, width=config.width, depth=config.depth, d_in=config.d_in,
        n_params=int(sum(units)), element_bytes=ELEMENT_BYTES, lr=config.lr, seed=config.seed,
        dataset_size=config.dataset_size,
        collectives="stage 0: the hand-written ring's reduce-scatter then all-gather of the gradient; stages 1 and 2: "
                    "its reduce-scatter of the gradient, all-gather of the parameters; stage 3: its all-gather of each "
                    "layer before the forward and again before the backward, reduce-scatter of each layer's gradient",
        **where_it_ran(ShardingRun, backend=backend, threads_per_rank=results[0]["threads"]),
    )
    return ShardingRun(meta, arrays)


def trace_arrays(results: list[dict]) -> dict:
    """The ranks' traces of one step per stage as the record's ``trace_*`` arrays, padded to the longest stage.

    Every rank runs the same code, so at each stage every rank's trace has the same events in the same order;
    a rank whose trace differs would make the padded arrays lie, so it is refused here.
    """
    traces = [[r["stages"][stage]["trace"] for r in results] for stage in STAGES]   # [stage][rank] -> events
    for stage, ranks in zip(STAGES, traces):
        what = [[(layer, action) for _, _, layer, action in events] for events in ranks]
        for rank, events in enumerate(what):
            if events != what[0]:
                raise RuntimeError(f"at ZeRO stage {stage} rank {rank} traced {len(events)} events and rank 0 "
                                   f"{len(what[0])}, or the same number in another order; every rank runs the same step.")
    steps = {r["stages"][stage]["trace_step"] for r in results for stage in STAGES}
    if len(steps) != 1:
        raise RuntimeError(f"the ranks traced different steps, {sorted(steps)}; each traces its last.")
    count = np.array([len(ranks[0]) for ranks in traces], np.int64)
    shape = (len(STAGES), len(results), int(count.max()))
    seconds, held = np.zeros(shape, np.float64), np.zeros(shape, np.int64)
    layer, action = np.full(shape, -1, np.int64), np.full(shape, -1, np.int64)
    for s, ranks in enumerate(traces):
        for r, events in enumerate(ranks):
            n = len(events)
            columns = list(zip(*events))
            seconds[s, r, :n], held[s, r, :n], layer[s, r, :n], action[s, r, :n] = columns
    return {"trace_step": np.array(steps.pop(), np.int64), "trace_count": count, "trace_seconds": seconds,
            "trace_bytes": held, "trace_layer": layer, "trace_action": action}


def record_sharding(config: ShardingConfig | None = None, **overrides) -> ShardingRun:
    """Launch k ranks, train at the four ZeRO stages, and return the :class:`ShardingRun` record.

    ``record_sharding(k=4, fsdp=True)``: keyword overrides build the config. With k above this machine's core
    count the launcher warns: the ranks take turns, and ``step_seconds`` include the waiting.
    """
    config = ShardingConfig(**{**(asdict(config) if config else {}), **overrides})
    results = launcher.launch(sharding_worker, config.k, args=(config,), backend="gloo", threads=1,
                              stall_timeout=config.stall_timeout,
                              total_steps=(5 if config.fsdp else 4) * config.steps)
    return assemble(config, results, "gloo")


def record_sharding_over_k(ks=(2, 4), **overrides) -> dict:
    """``{k: ShardingRun}`` for each k in ``ks`` (default 2 and 4), the rest of the config the same.

    Only the times need a core per rank: where k exceeds the cores, the launcher's warning says so once per k.
    """
    ks = tuple(ks)
    if not ks:
        raise ValueError("ks must name at least one k; got an empty sequence.")
    for i, k in enumerate(ks):
        check_int(f"ks[{i}]", k, low=1, high=64)
    configs = {k: ShardingConfig(**{**overrides, "k": k}) for k in ks}  # every config checked before any rank starts
    return {k: record_sharding(config) for k, config in configs.items()}


def record_sharding_plan(*, quick: bool = False, progress: bool = True) -> dict:
    """Record the runs the chapter's figures are drawn from (:data:`dpviz.topics.sharding.records.FIGURE_PLAN`): ``{stem: record}``.

    Two launches, k = 2 (with torch's fully_shard) and k = 4; ``quick`` changes nothing (they take seconds).
    """
    records = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 4 ranks on fewer cores: nothing drawn from these runs is a time
        for stem, settings in FIGURE_PLAN.settings_for(quick=quick).items():
            if progress:
                print(f"recording the sharding chapter: {stem}", flush=True)
            records[stem] = record_sharding(**settings)
    return records
