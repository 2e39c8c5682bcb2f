"""The rank side of :mod:`dpviz.topics.accumulation.run_accumulation`: every configuration's micro-batches, syncs and steps, in torch.

Once every configuration has run, the ranks compute the gradient of each update's examples in one
backward pass on a fresh model (:func:`big_batch_grad`), the reference the accumulated gradients are
checked against: rank 0 hands every rank the parameters each update started from, and the ranks share
the references out (one thread each, so every rank gives the bits one process would). Updates that start
from the same parameters, bit for bit, on the same examples of the same model have the same reference, so
it is computed once for all of them (:func:`reference_plan`): every configuration's first update, and every
update of two configurations that step alike, such as one process summing m micro-batches and m ranks.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine.data import teacher_data
from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor import rank_optim as optim
from dpviz.topics.ground_floor.rank_models import build_model, flat_grad, set_flat_grad


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
    """What one rank does: every configuration in turn (those with k = 1 in rank 0 only), then its share of
    the big-batch references (:func:`reference_plan`). Returns numpy data, one dict per configuration (a rank
    left out of a k = 1 configuration holds only its references)."""
    if dist.get_backend() == "nccl":
        raise ValueError("backend must be gloo: these runs time CPU processes.")
    threads = torch.get_num_threads()
    results, offset, done = [], 0, -1
    data = {}  # (dataset_size, d_in, seed) -> the data set as tensors, made once per rank

    def data_for(config):
        key = (config.dataset_size, config.d_in, config.seed)
        if key not in data:
            data[key] = tuple(map(torch.from_numpy, teacher_data(config.dataset_size, config.d_in, seed=config.seed)))
        return data[key]

    for config in configs:
        _barrier(done)  # nobody starts a configuration before everyone has finished the last one
        if config.k == 1 and rank > 0:
            results.append(None)
            done = offset + config.steps - 1  # where rank 0 is heading while this rank waits
        else:
            result = _run_one(rank, config, *data_for(config), offset)
            result["threads"] = threads
            results.append(result)
            done = offset + config.steps - 1
        offset += config.steps
    _barrier(done)  # every configuration has run on every rank
    starts = [_starts(config, results[i]["history"] if rank == 0 else None, world_size) for i, config in enumerate(configs)]
    plan = reference_plan(configs, starts, world_size)
    computed = {}  # (config, step) of a reference this rank computed -> its gradient
    for i, config in enumerate(configs):
        if results[i] is None:
            results[i] = {}
        results[i]["big_share"] = {}
        if rank == 0:
            results[i]["batch_index"] = np.stack([batch_rows(config, s).numpy() for s in range(config.steps)])
    for (i, step), (first, owner) in plan.items():
        if owner != rank:
            continue
        if first not in computed:
            j, s = first
            x_all, y_all = data_for(configs[j])
            rows = batch_rows(configs[j], s)
            computed[first] = big_batch_grad(configs[j], starts[j][s], x_all[rows], y_all[rows])
            launcher.report_progress()  # work after the loop: each step reported, so it is not a stall
        results[i]["big_share"][step] = computed[first]  # one array for every update that shares it
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



def _starts(config: AccumConfig, history, world_size: int) -> np.ndarray:
    """(steps + 1, P): the parameters each update of ``config`` started from, rank 0's ``history``, sent to every rank."""
    n_params = sum(q.numel() for q in make_model(config).parameters())
    start = torch.from_numpy(history) if history is not None else torch.empty(config.steps + 1, n_params)
    if world_size > 1:
        dist.broadcast(start, src=0)
    return start.numpy()


def reference_plan(configs: list, starts: list, world_size: int) -> dict:
    """Who computes which big-batch reference: ``{(config, step): ((config, step) computed, rank)}``.

    Two updates share one reference when they start from the same parameters, bit for bit, on the same
    examples of the same model; the first of them names it. The distinct ones go to the ranks by their
    examples, the next one to the rank with the fewest so far, so that every rank computes the same plan
    from the same ``starts``.
    """
    plan, first, load = {}, {}, [0] * world_size
    for i, config in enumerate(configs):
        model_and_data = (config.d_in, config.width, config.depth, config.seed, config.dataset_size, config.global_batch)
        for step in range(config.steps):  # batch_rows(config, step) draws the same examples for the same data and step
            key = (model_and_data, step, hashlib.sha1(starts[i][step].tobytes()).hexdigest())
            if key not in first:
                owner = load.index(min(load))
                load[owner] += config.global_batch
                first[key] = ((i, step), owner)
            plan[(i, step)] = first[key]
    return plan


def big_batch_grad(config: AccumConfig, flat: np.ndarray, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """The gradient of all the update's examples (x, y) in one backward pass, at parameters ``flat``, in one pass."""
    model = make_model(config)
    torch.nn.utils.vector_to_parameters(torch.from_numpy(np.asarray(flat, dtype=np.float32)), model.parameters())
    mse(model(x), y).backward()
    return flat_grad(model).numpy().copy()
