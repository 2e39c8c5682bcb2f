"""Gradient accumulation on real ranks: m micro-batches per update, summed, with one all-reduce or m of them.

    from dpviz.runs.accumulation import AccumConfig, record_accumulation
    runs = record_accumulation([AccumConfig(k=1, m=4, b=64), AccumConfig(k=2, m=2, b=32)])
    print(runs[0].check())

    python -m dpviz.runs.accumulation               # records the shipped slider runs again (about a minute)

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

import argparse
import contextlib
import hashlib
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from dpviz.checks import check_choice, check_int, check_real
from dpviz.data import teacher_data
from dpviz.records import rel_err
from dpviz.records.accumulation import (
    GRID, GRID_K, GRID_M, SYNCS, FIGURE_PLAN, AccumulationRun, grid_keys, grid_name,
)
from dpviz.records.paths import SHIPPED_DIR
from dpviz.runs import launch as launcher
from dpviz.runs import optim
from dpviz.runs.models import build_model, flat_grad, set_flat_grad
from dpviz.runs.where import where_it_ran

THREADS = 1  # intra-op threads per rank: the same in every configuration, so their times compare


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
        check_int("m", self.m, low=1, high=4096)
        check_int("b", self.b, low=1, high=self.dataset_size // self.k)
        if self.b % self.m:
            raise ValueError(f"b must split into m={self.m} equal micro-batches, so it must be a multiple of {self.m}; got b={self.b}.")
        check_choice("sync", self.sync, SYNCS)
        check_int("steps", self.steps, low=1, high=100_000)
        check_int("width", self.width, low=1, high=1 << 16)
        check_int("depth", self.depth, low=1, high=64)
        check_int("d_in", self.d_in, low=1, high=1 << 16)
        check_real("lr", self.lr, low=0, low_open=True)
        check_int("dataset_size", self.dataset_size, low=1)

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


def batch_rows(config: AccumConfig, step: int) -> torch.Tensor:
    """Data set rows of the update at ``step``: a seeded draw that depends on the seed and the step only.

    So every configuration with the same seed and global batch takes the same examples: rank r's
    micro-batch j is the (r·m + j)-th stretch of ``micro_batch`` rows.
    """
    gen = torch.Generator().manual_seed(config.seed * 100_003 + step)
    return torch.randperm(config.dataset_size, generator=gen)[: config.global_batch]


def make_model(config: AccumConfig) -> torch.nn.Module:
    return build_model("mlp", d_in=config.d_in, width=config.width, depth=config.depth, seed=config.seed)


def mse(pred, target):
    return torch.mean((pred - target) ** 2)


def digest(model) -> bytes:
    """SHA-1 (hex) of the parameters' exact bytes, in order."""
    h = hashlib.sha1()
    for p in model.parameters():
        h.update(memoryview(p.detach().contiguous().numpy()).cast("B"))
    return h.hexdigest().encode()


def saved_activation_bytes(model, x, y) -> int:
    """Bytes that one forward pass of (x, y) saves for its backward pass: each storage once, parameters left out.

    Counted with ``saved_tensors_hooks`` while the graph is built; the backward pass then runs (and
    frees them) so the model is left as it was, apart from ``.grad``, which the caller zeroes.
    """
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = mse(model(x), y)
    loss.backward()
    return int(sum(seen.values()))


def _run_one(rank: int, config: AccumConfig, x_all, y_all, step_offset: int) -> dict:
    """One configuration in one rank: config.steps timed updates. Returns numpy arrays and plain values."""
    k, m, mb = config.k, config.m, config.micro_batch
    talk = k > 1
    model = make_model(config)
    params = list(model.parameters())
    opt = optim.SGD(params, lr=config.lr)
    n_params = sum(p.numel() for p in params)
    grad_bytes = n_params * 4

    # Untimed: count what a micro-batch's forward pass keeps for backward; it also warms up the kernels
    # (and the all-reduce's connections), so the first timed step pays less for first calls.
    rows = batch_rows(config, 0)[rank * config.b: rank * config.b + mb]
    activation_bytes = saved_activation_bytes(model, x_all[rows], y_all[rows])
    model.zero_grad(set_to_none=False)
    if talk:
        warm = torch.zeros(n_params)
        dist.all_reduce(warm)

    steps = config.steps
    t_micro, t_comm = np.zeros((steps, m)), np.zeros((steps, m))
    t_step, losses = np.zeros(steps), np.zeros(steps, np.float32)
    calls, sent = np.zeros(steps, np.int64), np.zeros(steps, np.int64)
    grads = np.zeros((steps, n_params), np.float32)  # the update's gradient, for the big-batch check
    history = np.zeros((steps + 1, n_params), np.float32) if rank == 0 else None  # for the big-batch gradient
    digests = []

    for step in range(steps):
        digests.append(digest(model))
        if history is not None:
            history[step] = torch.nn.utils.parameters_to_vector(params).detach().numpy()
        mine = batch_rows(config, step)[rank * config.b: (rank + 1) * config.b]
        micro = [(x_all[mine[j * mb:(j + 1) * mb]], y_all[mine[j * mb:(j + 1) * mb]]) for j in range(m)]
        total = torch.zeros(n_params) if config.sync == "every" else None
        if talk:
            dist.barrier()  # the ranks start each update together, so their timelines line up
        start = time.perf_counter()
        model.zero_grad(set_to_none=False)
        loss_sum = 0.0
        for j, (x, y) in enumerate(micro):
            t0 = time.perf_counter()
            loss = mse(model(x), y)
            loss.backward()  # adds this micro-batch's gradient to .grad
            if config.sync == "every":
                g = flat_grad(model)
                model.zero_grad(set_to_none=False)
            t1 = time.perf_counter()
            t_micro[step, j] = t1 - t0
            if config.sync == "every":
                if talk:
                    dist.all_reduce(g)
                    calls[step] += 1
                    sent[step] += grad_bytes
                    t_comm[step, j] = time.perf_counter() - t1
                total += g
            loss_sum += loss.item()
        if config.sync == "accumulate":
            total = flat_grad(model)
            if talk:
                t1 = time.perf_counter()
                dist.all_reduce(total)
                calls[step] += 1
                sent[step] += grad_bytes
                t_comm[step, m - 1] += time.perf_counter() - t1
        g = total / (k * m)
        set_flat_grad(model, g)
        opt.step()
        t_step[step] = time.perf_counter() - start
        losses[step] = loss_sum / m
        grads[step] = g.numpy()
        launcher.report_progress(step_offset + step)
    digests.append(digest(model))
    if history is not None:
        history[steps] = torch.nn.utils.parameters_to_vector(params).detach().numpy()

    out = {
        "t_micro": t_micro, "t_comm": t_comm, "t_step": t_step, "loss": losses,
        "allreduce_calls": calls, "allreduce_bytes": sent, "param_digest": np.array(digests, dtype="S40"),
        "activation_bytes": activation_bytes, "n_params": n_params, "grad": grads, "history": history,
    }
    return out


def accumulation_worker(rank: int, world_size: int, configs: list) -> list:
    """What one rank does: every configuration in turn (those with k = 1 in rank 0 only). Returns numpy data."""
    if dist.get_backend() == "nccl":
        raise ValueError("backend must be gloo: these runs time CPU processes.")
    threads = torch.get_num_threads()
    results, offset, done = [], 0, -1
    data = {}
    for config in configs:
        _barrier(done)  # nobody starts a configuration before everyone has finished the last one
        if config.k == 1 and rank > 0:
            results.append(None)
            done = offset + config.steps - 1  # where rank 0 is heading while this rank waits
        else:
            key = (config.dataset_size, config.d_in, config.seed)
            if key not in data:
                data[key] = tuple(map(torch.from_numpy, teacher_data(config.dataset_size, config.d_in, seed=config.seed)))
            result = _run_one(rank, config, *data[key], offset)
            result["threads"] = threads
            results.append(result)
            done = offset + config.steps - 1
        offset += config.steps
    return results


def _barrier(step: int) -> None:
    """Wait for every rank, telling the launcher meanwhile that this rank is waiting, not stuck.

    While rank 0 runs a one-process configuration the others wait here; a blocking barrier would
    leave them silent for that long, and the launcher would take the silence for a hang.
    """
    work = dist.barrier(async_op=True)
    while not work.is_completed():
        launcher.report_progress(step)
        time.sleep(0.005)
    work.wait()


def big_batch_grad(config: AccumConfig, flat: np.ndarray, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """The gradient of all the update's examples (x, y) in one backward pass, at parameters ``flat``, here."""
    model = make_model(config)
    torch.nn.utils.vector_to_parameters(torch.from_numpy(np.asarray(flat, dtype=np.float32)), model.parameters())
    mse(model(x), y).backward()
    return flat_grad(model).numpy().copy()


@contextlib.contextmanager
def _threads(n: int):
    """Run a block with n intra-op threads in this process, then put the old number back."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def assemble(config: AccumConfig, results: list, launched: int, backend: str) -> AccumulationRun:
    """Stack the ranks' results for one configuration into an :class:`AccumulationRun`, adding the big-batch check."""
    results = results[: config.k]
    x_all, y_all = (torch.from_numpy(a) for a in teacher_data(config.dataset_size, config.d_in, seed=config.seed))
    rows = [batch_rows(config, step) for step in range(config.steps)]
    with _threads(THREADS):  # as in the ranks, so that one process on one batch gives the very same bits
        big = np.stack([big_batch_grad(config, results[0]["history"][s], x_all[r], y_all[r]) for s, r in enumerate(rows)])
    grads = np.stack([r["grad"] for r in results], axis=1)  # (steps, k, P)
    arrays = {
        name: np.stack([r[name] for r in results], axis=1)
        for name in ("t_micro", "t_comm", "t_step", "loss", "allreduce_calls", "allreduce_bytes", "param_digest")
    }
    arrays["big_rel_err"] = rel_err(grads, big[:, None, :], axis=2)
    if config.keep_grads:
        arrays["reduced_grad"], arrays["big_grad"] = grads, big
        arrays["batch_index"] = np.stack([r.numpy() for r in rows])
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
    configs = [c if isinstance(c, AccumConfig) else AccumConfig(**c) for c in _as_list(configs)]
    if not configs:
        raise ValueError("configs must hold at least one AccumConfig; got none.")
    worlds = sorted({c.k for c in configs if c.k > 1}) or [1]
    plans = {world: [c for c in configs if c.k == world] for world in worlds}
    plans[worlds[0]] = [c for c in configs if c.k in (1, worlds[0])]
    runs = {}
    for world, plan in plans.items():
        backend = launcher.resolve_backend("gloo", world)
        with warnings.catch_warnings():
            # more ranks than cores: the runs that use them say so (AccumulationRun.oversubscribed)
            warnings.filterwarnings("ignore", message=r"k=\d+ ranks share")
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
    """The runs behind the figures, by record stem (:data:`dpviz.records.accumulation.FIGURE_PLAN`)."""
    return {stem: AccumConfig(**settings) for stem, settings in FIGURE_PLAN.settings_for(quick=quick).items()}


def record_figure_records(*, quick: bool = False, progress: bool = False) -> dict[str, AccumulationRun]:
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
    parser = argparse.ArgumentParser(
        prog="python -m dpviz.runs.accumulation",
        description=f"Record the accumulation runs the sliders of chapter 10 browse (k in {GRID_K}, m in {GRID_M}).",
    )
    parser.add_argument("--out", default=str(SHIPPED_DIR), help="folder to write the records into")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    written = regenerate(args.out)
    print(f"wrote {len(written)} records to {args.out} in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
