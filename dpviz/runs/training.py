"""A real data-parallel training run, recorded step by step.

From Python (a notebook or a script)::

    from dpviz.runs.training import TrainConfig, record_run
    run = record_run(TrainConfig(k=4, b=8, steps=5))
    print(run.check())

Across machines with torchrun (rank 0 writes the record)::

    torchrun --nnodes 2 --nproc-per-node 4 --rdzv-endpoint HOST:29500 \\
        -m dpviz.runs.training --b 8 --steps 5 --out runs/cluster

Each rank holds an identical copy of the model, takes its own random slice of
each global batch, computes its local mean gradient, all-reduces it, and steps
its own optimizer. The gradient of the whole global batch is computed again,
independently, in the launching process, so the claim of Step 3 can be checked.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.distributed as dist

from dpviz.runs import launch as launcher
from dpviz.runs import optim
from dpviz.checks import check_choice, check_int, check_real
from dpviz.data import line_data, line_kind, teacher_data
from dpviz.runs.models import MODELS, build_model, flat_grad, set_flat_grad
from dpviz.runs.where import where_it_ran
from dpviz.records.run import KIND as RUN_KIND, Run
from dpviz.records.schema import MAX_ARRAY_BYTES

OPTIMIZERS = ("sgd", "momentum", "adam")
MEANS = ("plain", "weighted")
SAMPLINGS = ("random", "biased", "by_kind")
FULL_PARAMS_LIMIT = 20_000  # parameters; above this only digests of each replica are kept
MAX_WIDTH, MAX_DEPTH = 65_536, 64  # the largest MLP a config accepts: hidden units per layer, hidden layers


@dataclass
class TrainConfig:
    k: int = 4                       # ranks (devices)
    b: int = 8                       # examples per rank per step (the local batch)
    steps: int = 5                   # optimizer steps
    model: str = "line"              # "line" (two parameters) or "mlp"
    width: int = 64                  # hidden units per layer (mlp only)
    depth: int = 2                   # hidden layers (mlp only)
    d_in: int = 16                   # input features (mlp only)
    optimizer: str = "sgd"           # "sgd", "momentum" (0.9) or "adam"
    lr: float = 0.1                  # learning rate η
    seed: int = 0                    # seeds the data, the model and every batch draw
    dataset_size: int = 512          # examples in the data set
    all_reduce: bool = True          # False: each rank steps on its own gradient (drift)
    shard_sizes: tuple | None = None  # examples per rank, for unequal shards; None means b each
    mean: str = "plain"              # "plain" (1/k Σ g_i) or "weighted" (Σ b_i g_i / Σ b_i)
    sampling: str = "random"         # "random"; "biased": every example of one kind only (x >= 0); "by_kind":
                                     # rank r takes examples of kind r % 2 only (line model for both)
    backend: str = "auto"            # "auto", "gloo" or "nccl"
    stall_timeout: float = 60.0      # seconds a rank may go without finishing a step (start-up: 120 s)
    global_batch: int | None = None  # examples per step in all; if set, b = global_batch / k (must split evenly)
    threads: int | None = None       # intra-op threads per rank; None: the cores shared evenly (1 for timing studies)

    def __post_init__(self):
        check_int("k", self.k, low=1, high=1024)
        check_int("dataset_size", self.dataset_size, low=1)
        if self.k > self.dataset_size:
            raise ValueError(f"k must be an integer from 1 to {self.dataset_size} (dataset_size: every rank needs an "
                             f"example); got {self.k}.")
        check_int("width", self.width, low=1, high=MAX_WIDTH)
        check_int("depth", self.depth, low=1, high=MAX_DEPTH)
        check_int("d_in", self.d_in, low=1, high=MAX_WIDTH)
        check_int("seed", self.seed, low=0, high=2**63 - 1)
        if self.global_batch is not None:
            self.b = split_batch(self.global_batch, self.k)
        check_int("steps", self.steps, low=1, high=100_000)
        check_choice("model", self.model, MODELS)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("mean", self.mean, MEANS)
        check_choice("sampling", self.sampling, SAMPLINGS)
        if self.sampling != "random" and self.model != "line":
            raise ValueError(f"sampling={self.sampling!r} needs model='line', whose examples have kinds; got model={self.model!r}.")
        check_choice("backend", self.backend, launcher.BACKENDS)
        check_real("lr", self.lr, low=0, low_open=True)
        check_real("stall_timeout", self.stall_timeout, low=0, low_open=True)
        check_int("dataset_size", self.dataset_size, low=1)
        if self.threads is not None:
            check_int("threads", self.threads, low=1, high=4096)
        if self.shard_sizes is None:
            check_int("b", self.b, low=1, high=self.dataset_size // self.k)
        else:
            self.shard_sizes = tuple(self.shard_sizes)
            if len(self.shard_sizes) != self.k:
                raise ValueError(f"shard_sizes must list one size per rank (k={self.k} entries); got {len(self.shard_sizes)}.")
            for size in self.shard_sizes:
                check_int("shard_sizes entries", size, low=1, high=self.dataset_size)
            if sum(self.shard_sizes) > self.dataset_size:
                raise ValueError(f"shard_sizes must add up to at most dataset_size={self.dataset_size}; got {sum(self.shard_sizes)}.")

        need = self.record_bytes()
        if need > MAX_ARRAY_BYTES:
            per_step = need / self.steps
            raise ValueError(f"steps must be at most {int(MAX_ARRAY_BYTES // per_step):,} for this model and k: the run "
                             f"would record about {need / 2**30:.1f} GiB (every rank's gradients at every step, "
                             f"{self.n_params():,} parameters), more than the {MAX_ARRAY_BYTES / 2**30:g} GiB a record "
                             f"may hold; got steps={self.steps:,}.")

    def n_params(self) -> int:
        """P, the parameters of the model this config builds (dpviz.runs.models), counted without building it."""
        if self.model == "line":
            return 2
        hidden = self.d_in * self.width + self.width + (self.depth - 1) * (self.width * self.width + self.width)
        return hidden + self.width + 1

    def record_bytes(self) -> int:
        """About how many bytes the run's record holds (what every rank also keeps until the end), before it starts."""
        P, B, steps, k = self.n_params(), sum(self.sizes), self.steps, self.k
        floats = 2 * steps * k * P + steps * P + (steps + 1) * k * P * (P <= FULL_PARAMS_LIMIT)
        floats += steps * B * P * (self.model == "line") + self.dataset_size * (self.d_in + 1)
        return 4 * floats + 8 * steps * (2 * k + B)

    @property
    def sizes(self) -> tuple:
        """Examples per rank per step."""
        return self.shard_sizes if self.shard_sizes is not None else (self.b,) * self.k


def split_batch(global_batch: int, k: int) -> int:
    """The local batch b when ``global_batch`` examples are shared by k ranks; raises if it does not split."""
    k = check_int("k", k, low=1)
    global_batch = check_int("global_batch", global_batch, low=1)
    if global_batch % k:
        raise ValueError(
            f"global_batch must be a multiple of k={k} to split into equal shards; got {global_batch} "
            "(pass shard_sizes for unequal shards)."
        )
    return global_batch // k


def load_data(config: TrainConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The run's data set as float32 tensors x (N, d_in), y (N, 1)."""
    if config.model == "line":
        x, y = line_data(config.dataset_size, seed=config.seed)
    else:
        x, y = teacher_data(config.dataset_size, config.d_in, seed=config.seed)
    return torch.from_numpy(x), torch.from_numpy(y)


def batch_indices(config: TrainConfig, step: int) -> torch.Tensor:
    """Rows of the data set in the global batch of ``step``: a seeded random draw, the same in every rank.

    Rank 0's shard comes first, then rank 1's, and so on. With ``sampling="by_kind"`` each shard
    is drawn from one kind of example only (rank r: kind r % 2), so every shard is biased while
    their union, half of each kind for k = 2, is a fair batch.
    """
    gen = torch.Generator().manual_seed(config.seed * 100_003 + step)
    order = torch.randperm(config.dataset_size, generator=gen)
    if config.sampling == "by_kind":
        x, _ = line_data(config.dataset_size, seed=config.seed)
        kinds = torch.from_numpy(line_kind(x))[order]
        pools = {kind: order[kinds == kind] for kind in (0, 1)}  # each kind's rows, in the random order
        taken, shards = {0: 0, 1: 0}, []
        for rank, size in enumerate(config.sizes):
            kind = rank % 2
            if taken[kind] + size > len(pools[kind]):
                raise ValueError(f"shards of kind {kind} need {taken[kind] + size} examples of that kind; the data set has {len(pools[kind])}.")
            shards.append(pools[kind][taken[kind]:taken[kind] + size])
            taken[kind] += size
        return torch.cat(shards)
    if config.sampling == "biased":
        x, _ = line_data(config.dataset_size, seed=config.seed)
        order = order[torch.from_numpy(line_kind(x))[order] == 1]
        if len(order) < sum(config.sizes):
            raise ValueError(f"a biased batch of {sum(config.sizes)} examples needs that many of one kind; the data set has {len(order)}.")
    return order[: sum(config.sizes)]


def make_model(config: TrainConfig) -> torch.nn.Module:
    return build_model(config.model, d_in=config.d_in, width=config.width, depth=config.depth, seed=config.seed)


def make_optimizer(config: TrainConfig, params):
    """The run's optimizer, from :mod:`dpviz.runs.optim` (torch.optim's arithmetic, without its start-up cost)."""
    if config.optimizer == "sgd":
        return optim.SGD(params, lr=config.lr)
    if config.optimizer == "momentum":
        return optim.SGD(params, lr=config.lr, momentum=0.9)
    return optim.Adam(params, lr=config.lr)


def mse(pred, target):
    return torch.mean((pred - target) ** 2)


def digest(tensors) -> bytes:
    """A fingerprint of the exact bits of some tensors, taken in order: SHA-1 as hex (the fastest stdlib hash here).

    Fed parameter by parameter, it equals the digest of their flattened concatenation, without making one.
    """
    h = hashlib.sha1()
    for t in tensors:
        h.update(memoryview(t.detach().cpu().contiguous().numpy()).cast("B"))
    return h.hexdigest().encode()


def per_example_grads(model, x, y) -> torch.Tensor:
    """One gradient per example, (n, P): the grey arrows of Step 2.

    One forward pass, then one autograd call per example's loss. (torch.func.vmap
    would do it in one call, but its first use costs each rank seconds of imports.)
    """
    params = list(model.parameters())
    losses = (model(x) - y).pow(2).reshape(-1)  # each example's squared error: its own loss
    rows = []
    for i in range(len(losses)):
        grads = torch.autograd.grad(losses[i], params, retain_graph=i + 1 < len(losses))
        rows.append(torch.cat([g.reshape(-1) for g in grads]))
    return torch.stack(rows)


def train_worker(rank: int, world_size: int, config: TrainConfig) -> dict:
    """What one rank does: take its shard, compute its gradient, all-reduce, step, record. Returns numpy arrays."""
    device = torch.device(f"cuda:{torch.cuda.current_device()}") if dist.get_backend() == "nccl" else torch.device("cpu")
    x_all, y_all = load_data(config)
    model = make_model(config).to(device)
    optimizer = make_optimizer(config, model.parameters())
    sizes = config.sizes
    start = sum(sizes[:rank])
    total = sum(sizes)
    n_params = sum(p.numel() for p in model.parameters())
    keep_full = n_params <= FULL_PARAMS_LIMIT or rank == 0  # rank 0's history feeds the big-batch check

    # Allocated and written once before the loop: the first write to a fresh page is a page fault
    # (about 0.5 ms per 280 kB gradient here), which would otherwise land inside every recorded step.
    # So recording a step costs a copy per array and one hash: the loop stays a plain loop.
    local_grads = np.zeros((config.steps, n_params), np.float32)
    reduced_grads = np.zeros((config.steps, n_params), np.float32)
    params = np.zeros((config.steps + 1, n_params), np.float32) if keep_full else None
    for buffer in (local_grads, reduced_grads, params):
        if buffer is not None:
            buffer.fill(0)
    losses, t_compute, t_comm = np.empty(config.steps, np.float32), np.empty(config.steps), np.empty(config.steps)
    digests, example_grads = [], []

    def snapshot(i):
        digests.append(digest(model.parameters()))
        if keep_full:
            torch.cat([p.detach().reshape(-1) for p in model.parameters()], out=torch.from_numpy(params[i]))

    loop_start = time.perf_counter()
    for step in range(config.steps):
        snapshot(step)
        rows = batch_indices(config, step)[start:start + sizes[rank]]
        x, y = x_all[rows].to(device), y_all[rows].to(device)

        t0 = time.perf_counter()
        model.zero_grad(set_to_none=False)
        loss = mse(model(x), y)
        loss.backward()
        g = flat_grad(model)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t1 = time.perf_counter()

        local_grads[step] = g.cpu().numpy()
        if config.all_reduce:
            if config.mean == "weighted":
                g = g * sizes[rank]  # Σ b_i g_i is the sum of every example's gradient
            dist.all_reduce(g)
            g /= total if config.mean == "weighted" else world_size
        if device.type == "cuda":
            torch.cuda.synchronize()
        t2 = time.perf_counter()

        set_flat_grad(model, g)
        optimizer.step()
        reduced_grads[step] = g.cpu().numpy()
        losses[step] = loss.item()
        t_compute[step], t_comm[step] = t1 - t0, t2 - t1
        if config.model == "line":
            example_grads.append(per_example_grads(model_at(params[step], config), x.cpu(), y.cpu()).numpy())
        launcher.report_progress(step)
    snapshot(config.steps)
    loop_seconds = time.perf_counter() - loop_start

    out = {
        "local_grad": local_grads,
        "reduced_grad": reduced_grads,
        "loss": losses,
        "t_compute": t_compute,
        "t_comm": t_comm,
        "param_digest": np.array(digests, dtype="S40"),
        "loop_seconds": loop_seconds,
        "threads": torch.get_num_threads(),
        "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
    }
    if keep_full:
        out["params"] = params
    if example_grads:
        out["example_grad"] = np.stack(example_grads)
    return out


def model_at(flat: np.ndarray, config: TrainConfig) -> torch.nn.Module:
    """A fresh copy of the model holding the parameter vector ``flat``."""
    model = make_model(config)
    torch.nn.utils.vector_to_parameters(torch.from_numpy(np.asarray(flat, dtype=np.float32)), model.parameters())
    return model


def big_batch(config: TrainConfig, flat: np.ndarray, x: torch.Tensor, y: torch.Tensor) -> tuple[np.ndarray, float]:
    """Gradient and loss of a whole global batch (x, y) at parameters ``flat``, in this process."""
    model = model_at(flat, config)
    loss = mse(model(x), y)
    loss.backward()
    return flat_grad(model).numpy().copy(), loss.item()


def assemble(config: TrainConfig, results: list[dict], backend: str) -> Run:
    """Stack the ranks' results into one :class:`Run`, adding the independent big-batch gradient."""
    k = config.k
    arrays = {
        name: np.stack([r[name] for r in results], axis=1)
        for name in ("local_grad", "reduced_grad", "loss", "t_compute", "t_comm", "param_digest")
    }
    if all("params" in r for r in results):
        arrays["params"] = np.stack([r["params"] for r in results], axis=1)
    x_all, y_all = load_data(config)
    batches = [batch_indices(config, step) for step in range(config.steps)]
    big = [big_batch(config, results[0]["params"][step], x_all[rows], y_all[rows]) for step, rows in enumerate(batches)]
    arrays["big_grad"] = np.stack([g for g, _ in big])
    arrays["big_loss"] = np.array([loss for _, loss in big], dtype=np.float32)
    arrays["loop_seconds"] = np.array([r["loop_seconds"] for r in results])
    arrays["shard_sizes"] = np.array(config.sizes)
    arrays["batch_index"] = np.stack([rows.numpy() for rows in batches])
    arrays["example_rank"] = np.repeat(np.arange(k), config.sizes)
    if "example_grad" in results[0]:
        arrays["example_grad"] = np.concatenate([r["example_grad"] for r in results], axis=1)
    arrays["x"], arrays["y"] = x_all.numpy(), y_all.numpy()

    meta = {f.name: getattr(config, f.name) for f in RUN_KIND.meta if hasattr(config, f.name)}
    meta.update(
        shard_sizes=list(config.sizes),
        n_params=int(arrays["local_grad"].shape[-1]),
        **where_it_ran(RUN_KIND, backend=backend, device=results[0]["device"], threads_per_rank=results[0]["threads"]),
    )
    return Run(meta, arrays)


def record_run(config: TrainConfig | None = None, *, progress: bool = False, **overrides) -> Run:
    """Launch ``config.k`` ranks, train, and return the recorded :class:`Run`.

    Keyword overrides build the config for you: ``record_run(k=2, b=16, optimizer="adam")``.
    """
    config = TrainConfig(**{**(asdict(config) if config else {}), **overrides})
    backend = launcher.resolve_backend(config.backend, config.k)
    results = launcher.launch(
        train_worker,
        config.k,
        args=(config,),
        backend=backend,
        stall_timeout=config.stall_timeout,
        threads=config.threads,
        total_steps=config.steps,
        progress=progress,
    )
    return assemble(config, results, backend)


def main(argv=None) -> None:
    """Entry point under torchrun: every rank trains; rank 0 gathers and writes the record."""
    parser = argparse.ArgumentParser(prog="python -m dpviz.runs.training", description="Record a data-parallel run under torchrun.")
    for name, default in asdict(TrainConfig()).items():
        if name in ("k", "shard_sizes", "backend", "all_reduce", "global_batch", "threads", "stall_timeout"):
            continue
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    parser.add_argument("--no-all-reduce", action="store_true", help="each rank steps on its own gradient")
    parser.add_argument("--out", required=True, help="record path stem (writes OUT.npz and OUT.json)")
    args = vars(parser.parse_args(argv))
    out = args.pop("out")
    args["all_reduce"] = not args.pop("no_all_reduce")

    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    backend = "nccl" if torch.cuda.is_available() and torch.cuda.device_count() > local_rank else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend)
    try:
        config = TrainConfig(k=world_size, backend=backend, **args)
        result = train_worker(rank, world_size, config)
        gathered = [None] * world_size if rank == 0 else None
        dist.gather_object(result, gathered, dst=0)
        is_main = rank == 0
        if is_main:
            run = assemble(config, gathered, backend)
            path = run.save(out)
            print(f"wrote {path}.npz and {path}.json; {run.check()}", file=sys.stderr)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
