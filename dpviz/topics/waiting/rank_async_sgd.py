"""The rank side of :mod:`dpviz.topics.waiting.run_async_sgd`: the parameter server (rank 0) and its workers, in torch.

Once the run is over, the server also computes the record's references in one process: every applied
gradient again at the θ it was applied to (:func:`batch_grads`), and plain SGD on the same mini-batches
(:func:`plain_sgd`).
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine.data import line_data
from dpviz.engine import launch as launcher
from dpviz.topics.ground_floor import rank_optim as optim
from dpviz.topics.ground_floor.rank_models import LineModel

SERVER = 0  # rank 0 serves θ; ranks 1..k work
_PUSH = 5  # floats in a worker's message
_PULL = 4  # floats in the server's reply


def batch_rows(config: AsyncConfig, worker: int, number: int) -> np.ndarray:
    """The data set rows of worker ``worker``'s gradient number ``number``: a seeded draw of b distinct rows."""
    rng = np.random.default_rng((config.seed, worker, number))
    return rng.choice(config.dataset_size, size=config.b, replace=False)


def update_batches(config: AsyncConfig, server: dict) -> np.ndarray:
    """The data set rows behind each update the server applied: one worker's mini-batch (async), or every
    worker's, in worker order (sync). (T, b) or (T, k·b)."""
    if config.mode == "async":
        return np.stack([batch_rows(config, w, n) for w, n in zip(server["worker"], server["number"])])
    return np.stack([np.concatenate([batch_rows(config, w, n) for w in range(1, config.k + 1)]) for n in server["number"]])


def mse(pred, target):
    return torch.mean((pred - target) ** 2)



def _line(theta) -> LineModel:
    """A line model holding θ = (w, c) exactly (float32)."""
    model = LineModel()
    with torch.no_grad():
        for p, value in zip(model.parameters(), torch.as_tensor(theta, dtype=torch.float32).reshape(2)):
            p.fill_(value)
    return model



def _theta(model) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])



def async_worker(rank: int, world_size: int, config: AsyncConfig) -> dict:
    """Rank 0 serves θ; every other rank pulls, computes a gradient on its own mini-batch, and pushes."""
    x_all, y_all = (torch.from_numpy(a) for a in line_data(config.dataset_size, seed=config.seed))
    dist.barrier()
    if rank == SERVER:
        server = _serve(config, world_size - 1)
        batches = server["batch_index"] = update_batches(config, server)
        server["fresh_grad"] = batch_grads(config, server["states"][:config.updates], batches,
                                           1 if config.mode == "async" else config.k)
        if config.mode == "async":
            server["sequential_theta"] = plain_sgd(config, batches)
        return server
    return _work(rank, config, x_all, y_all)



def _work(rank, config, x_all, y_all) -> dict:
    delay = config.delays[rank - 1]
    reply = torch.zeros(_PULL, dtype=torch.float64)
    busy = idle = 0.0
    number = 0
    t = time.monotonic()
    dist.recv(reply, src=SERVER)
    idle += time.monotonic() - t
    while reply[3] == 0:
        t = time.monotonic()
        if delay:
            time.sleep(delay)  # this worker's compute time
        model = _line(reply[:2])
        rows = torch.from_numpy(batch_rows(config, rank, number))
        loss = mse(model(x_all[rows]), y_all[rows])
        loss.backward()
        grad = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        message = torch.tensor([grad[0].item(), grad[1].item(), loss.item(), reply[2].item(), number], dtype=torch.float64)
        busy += time.monotonic() - t
        t = time.monotonic()
        dist.send(message, dst=SERVER)
        dist.recv(reply, src=SERVER)
        idle += time.monotonic() - t
        launcher.report_progress(number)
        number += 1
    return {"gradients": number, "idle": idle, "busy": busy}



def _serve(config, k) -> dict:
    model = LineModel()  # θ_0, the line model's usual start
    sgd = optim.SGD(model.parameters(), lr=config.lr)
    states = [_theta(model).clone()]  # θ_0, θ_1, ...: θ_v is what a worker that pulled version v holds
    log = {name: [] for name in ("worker", "staleness", "grad", "batch_loss", "number", "wall")}
    dropped_worker, dropped_staleness = [], []
    start = time.monotonic()
    message = torch.zeros(_PUSH, dtype=torch.float64)

    in_flight = []  # replies not yet taken by their worker: (work, tensor), the tensor kept alive until sent

    def reply(worker, stop=False):
        # Non-blocking: gloo's send waits for the receiver, and a slow or stuck worker must not stop the server.
        theta = states[-1]
        message = torch.tensor([theta[0].item(), theta[1].item(), len(states) - 1, float(stop)], dtype=torch.float64)
        in_flight[:] = [(work, t) for work, t in in_flight if not work.is_completed()]
        in_flight.append((dist.isend(message, dst=worker), message))

    def apply(grad):
        for p, g in zip(model.parameters(), grad):
            p.grad = g.reshape(1).clone()
        sgd.step()
        states.append(_theta(model).clone())
        log["wall"].append(time.monotonic() - start)
        launcher.report_progress(len(states) - 2)

    for worker in range(1, k + 1):
        reply(worker)
    if config.mode == "async":
        while len(states) - 1 < config.updates:
            worker = dist.recv(message)  # whichever worker is first
            version, staleness = int(message[3]), len(states) - 1 - int(message[3])
            if config.max_staleness is not None and staleness > config.max_staleness:
                dropped_worker.append(worker)
                dropped_staleness.append(staleness)
                reply(worker)
                continue
            grad = message[:2].to(torch.float32)
            for name, value in zip(("worker", "staleness", "grad", "batch_loss", "number"),
                                   (worker, staleness, grad, float(message[2]), int(message[4]))):
                log[name].append(value)
            apply(grad)
            reply(worker)
        for _ in range(k):  # every worker has one gradient in flight: take it, apply nothing, tell it to stop
            reply(dist.recv(message), stop=True)
    else:
        while len(states) - 1 < config.updates:
            got = {}
            for _ in range(k):
                worker = dist.recv(message)
                got[worker] = message.clone()
            grad = got[1][:2].to(torch.float32)
            for worker in range(2, k + 1):
                grad = grad + got[worker][:2].to(torch.float32)  # summed in worker order: the same bytes every run
            grad = grad / k
            for name, value in zip(("worker", "staleness", "grad", "batch_loss", "number"),
                                   (0, 0, grad, float(np.mean([float(got[w][2]) for w in got])), int(got[1][4]))):
                log[name].append(value)
            apply(grad)
            last = len(states) - 1 == config.updates
            for worker in range(1, k + 1):
                reply(worker, stop=last)
    for work, _ in in_flight:
        work.wait()
    return {
        "worker": np.array(log["worker"], dtype=np.int64),
        "staleness": np.array(log["staleness"], dtype=np.int64),
        "grad": np.stack([g.numpy() for g in log["grad"]]).astype(np.float32),
        "batch_loss": np.array(log["batch_loss"], dtype=np.float32),
        "number": np.array(log["number"], dtype=np.int64),
        "wall": np.array([0.0] + log["wall"]),
        "states": np.stack([s.numpy() for s in states]).astype(np.float32),
        "dropped_worker": np.array(dropped_worker, dtype=np.int64),
        "dropped_staleness": np.array(dropped_staleness, dtype=np.int64),
    }



def batch_grads(config: AsyncConfig, thetas: np.ndarray, batches: np.ndarray, parts: int) -> np.ndarray:
    """The gradient of each mini-batch at each θ, in one process: (T, 2) float32.

    A row of ``batches`` holding ``parts`` mini-batches (a synchronous update's k) gives the mean of
    their gradients, summed in worker order as the server does.
    """
    x_all, y_all = (torch.from_numpy(a) for a in line_data(config.dataset_size, seed=config.seed))
    out = []
    for theta, rows in zip(thetas, batches):
        grad = None
        for part in np.split(rows, parts):
            model = _line(theta)
            part = torch.from_numpy(part)
            mse(model(x_all[part]), y_all[part]).backward()
            g = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
            grad = g if grad is None else grad + g
        out.append((grad / parts if parts > 1 else grad).numpy())
    return np.stack(out).astype(np.float32)



def plain_sgd(config: AsyncConfig, batches: np.ndarray) -> np.ndarray:
    """Plain SGD in one process on the given mini-batches (rows, one per step), each gradient at the current θ.

    The ordinary training loop: forward, backward, step. Returns θ_0 and θ after every step, (T+1, 2) float32.
    """
    x_all, y_all = (torch.from_numpy(a) for a in line_data(config.dataset_size, seed=config.seed))
    model = LineModel()
    sgd = optim.SGD(model.parameters(), lr=config.lr)
    thetas = [_theta(model).numpy().copy()]
    for rows in batches:
        rows = torch.from_numpy(rows)
        loss = mse(model(x_all[rows]), y_all[rows])
        loss.backward()
        sgd.step()
        for p in model.parameters():
            p.grad = None
        thetas.append(_theta(model).numpy().copy())
    return np.stack(thetas).astype(np.float32)
