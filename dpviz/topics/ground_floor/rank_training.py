"""The rank side of :mod:`dpviz.topics.ground_floor.run_training`: the data-parallel step each rank runs, in torch.

Each rank holds an identical copy of the model, takes its own random slice of each global batch,
computes its local mean gradient, all-reduces it, and steps its own optimizer. After the timed loop the
gradient of each whole global batch is computed again, from scratch on one fresh model in one process
(by rank 0, or shared out among identical replicas step by step), so the claim of Step 3 can be checked
against an independent computation.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine.data import line_data, line_kind, teacher_data
from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor import rank_optim as optim
from dpviz.topics.ground_floor.rank_models import build_model, flat_grad, set_flat_grad
from dpviz.topics.ground_floor.model_sizes import FULL_PARAMS_LIMIT

DEFERRED_DIGEST_BYTES = 64 << 20  # bytes per rank: up to this, a rank hashes its parameters after the loop


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
    """The run's optimizer, from :mod:`dpviz.topics.ground_floor.rank_optim` (torch.optim's arithmetic, without its start-up cost)."""
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
    """What one rank does: take its shard, compute its gradient, all-reduce, step, record. Returns numpy arrays.

    Rank 0 also returns each step's global batch and its gradient and loss computed afresh in one
    model (``big_grad``, ``big_loss``, after the timed loop), the independent side of Step 3's check.
    """
    device = torch.device(f"cuda:{torch.cuda.current_device()}") if dist.get_backend() == "nccl" else torch.device("cpu")
    x_all, y_all = load_data(config)
    model = make_model(config).to(device)
    optimizer = make_optimizer(config, model.parameters())
    sizes = config.sizes
    start = sum(sizes[:rank])
    total = sum(sizes)
    n_params = sum(p.numel() for p in model.parameters())
    keep_full = n_params <= FULL_PARAMS_LIMIT or rank == 0  # rank 0's history feeds the big-batch check
    # A step records copies only, each written once into a row allocated before the loop: its parameters
    # into a row of `params`, its flat gradient straight into a row of `local_grads`, and the all-reduce runs
    # in place on a row of `reduced_grads`. Digests, the line model's per-example gradients and rank 0's
    # big-batch check are computed from the rows after the timed loop (the same bits as inside it). A rank
    # that returns only digests keeps rows too while they fit in DEFERRED_DIGEST_BYTES; past that it hashes
    # inside the loop instead.
    keep_rows_everywhere = n_params <= FULL_PARAMS_LIMIT or 4 * (config.steps + 1) * n_params <= DEFERRED_DIGEST_BYTES
    keep_rows = keep_full or keep_rows_everywhere

    # Allocated and written once before the loop: the first write to a fresh page is a page fault
    # (about 0.5 ms per 280 kB gradient here), which would otherwise land inside every recorded step.
    local_grads = np.zeros((config.steps, n_params), np.float32)
    reduced_grads = np.zeros((config.steps, n_params), np.float32)
    params = np.zeros((config.steps + 1, n_params), np.float32) if keep_rows else None
    for buffer in (local_grads, reduced_grads, params):
        if buffer is not None:
            buffer.fill(0)
    losses, t_compute, t_comm = np.empty(config.steps, np.float32), np.empty(config.steps), np.empty(config.steps)
    # The same memory as torch tensors. On the CPU a step's tensors are these rows themselves; on a GPU
    # they live on the device and each is copied to its row once.
    on_cpu = device.type == "cpu"
    local_rows, reduced_rows = torch.from_numpy(local_grads), torch.from_numpy(reduced_grads)
    param_rows = None if params is None else torch.from_numpy(params)
    flat_params = [p.detach().view(-1) for p in model.parameters()]  # views: the optimizer steps in place
    digests = []

    def snapshot(i):
        if param_rows is None:
            digests.append(digest(flat_params))
        elif on_cpu:
            torch.cat(flat_params, out=param_rows[i])
        else:
            param_rows[i].copy_(torch.cat(flat_params))

    x_dev, y_dev = x_all.to(device), y_all.to(device)  # the data set on the device once; on the CPU, x_all itself
    batches = []  # each step's global batch: rank 0 checks against it after the loop
    loop_start = time.perf_counter()
    for step in range(config.steps):
        snapshot(step)
        batches.append(batch_indices(config, step))
        rows = batches[-1][start:start + sizes[rank]]
        x, y = x_dev[rows], y_dev[rows]

        t0 = time.perf_counter()
        model.zero_grad(set_to_none=False)
        loss = mse(model(x), y)
        loss.backward()
        local = local_rows[step] if on_cpu else torch.empty(n_params, device=device)
        torch.cat([p.grad.reshape(-1) for p in model.parameters()], out=local)  # models.flat_grad, into its row
        if device.type == "cuda":
            torch.cuda.synchronize()
        t1 = time.perf_counter()

        if not on_cpu:
            local_rows[step].copy_(local)
        g = reduced_rows[step] if on_cpu else torch.empty_like(local)  # all-reduced in place: `local` stays
        if config.all_reduce and config.mean == "weighted":
            torch.mul(local, sizes[rank], out=g)  # Σ b_i g_i is the sum of every example's gradient
        else:
            g.copy_(local)
        if config.all_reduce:
            dist.all_reduce(g)
            g /= total if config.mean == "weighted" else world_size
        if device.type == "cuda":
            torch.cuda.synchronize()
        t2 = time.perf_counter()

        set_flat_grad(model, g)
        optimizer.step()
        if not on_cpu:
            reduced_rows[step].copy_(g)
        losses[step] = loss.item()
        t_compute[step], t_comm[step] = t1 - t0, t2 - t1
        launcher.report_progress(step)
    snapshot(config.steps)
    loop_seconds = time.perf_counter() - loop_start

    # The work after the loop reports progress as it goes (launcher.report_progress() without a step): with many
    # steps, many ranks or a loaded machine it takes minutes, and a rank doing it is not stuck.
    if params is not None:
        digests = []
        for row in params:
            digests.append(digest([torch.from_numpy(row)]))
            launcher.report_progress()
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
    if config.model == "line":
        shards = [batch[start:start + sizes[rank]] for batch in batches]
        example_grads = []
        for step, rows in enumerate(shards):
            example_grads.append(per_example_grads(model_at(params[step], config), x_all[rows], y_all[rows]).numpy())
            launcher.report_progress()
        out["example_grad"] = np.stack(example_grads)
    # The big-batch check. With the all-reduce every replica holds the same parameters at every step (the
    # records' digests say so), so when every rank kept its rows the ranks share the steps out, round robin,
    # each computing whole global batches in one process; a sum of zero-filled rows gathers them on rank 0.
    # Otherwise rank 0 computes every step alone. Nothing here is timed, so the ranks computing it take every
    # core between them.
    shared = config.all_reduce and world_size > 1 and keep_rows_everywhere
    if rank == 0 or shared:
        cores = launcher.cpu_count()
        torch.set_num_threads(max(1, cores // world_size) if shared else cores)
        big_grad, big_loss = np.zeros((config.steps, n_params), np.float32), np.zeros(config.steps, np.float32)
        for step in range(rank, config.steps, world_size) if shared else range(config.steps):
            rows = batches[step]
            big_grad[step], big_loss[step] = big_batch(config, params[step], x_all[rows], y_all[rows])
            launcher.report_progress()
        if shared:
            for part in (big_grad, big_loss):
                gathered = torch.from_numpy(part).to(device)
                dist.all_reduce(gathered)  # each row is one rank's and zero in every other: the sum is that row
                part[...] = gathered.cpu().numpy()
        if rank == 0:
            out["big_grad"], out["big_loss"] = big_grad, big_loss
            out["batch_index"] = np.stack([rows.numpy() for rows in batches])
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
