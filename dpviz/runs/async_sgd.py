"""Asynchronous SGD through a real parameter server, and synchronous SGD through the same server to compare.

    from dpviz.runs.async_sgd import record_async
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
:class:`~dpviz.runs.models.LineModel` and steps it with :class:`~dpviz.runs.optim.SGD`, the
arithmetic of plain SGD, so one worker alone (k = 1) reproduces plain SGD bit for bit.

A worker's compute on the line model takes microseconds; each sleeps ``delays[i]`` seconds per
gradient to stand in for real work, and a larger delay makes a slow worker.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.distributed as dist

from dpviz.checks import check_choice, check_int, check_real
from dpviz.data import line_data
from dpviz.records.async_sgd import MODES, AsyncRecord
from dpviz.runs import launch as launcher
from dpviz.runs import optim
from dpviz.runs.models import LineModel
from dpviz.runs.where import where_it_ran
from dpviz.theory.waiting import line_loss

SERVER = 0
MAX_DELAY = 10.0  # seconds per gradient
_PUSH = 5  # floats in a worker's message
_PULL = 4  # floats in the server's reply


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
        check_real("lr", self.lr, low=0.0, low_open=True)
        check_int("dataset_size", self.dataset_size, low=1)
        check_int("b", self.b, low=1, high=self.dataset_size)
        if self.delays is None:
            self.delays = (0.002,) * self.k
        self.delays = tuple(float(check_real("delays entries", d, low=0.0, high=MAX_DELAY)) for d in self.delays)
        if len(self.delays) != self.k:
            raise ValueError(f"delays must list one delay per worker (k={self.k} entries); got {len(self.delays)}.")
        if self.max_staleness is not None:
            check_int("max_staleness", self.max_staleness, low=0)
            if self.mode == "sync":
                raise ValueError("max_staleness applies to mode='async' only; synchronous gradients are never stale.")
        check_int("seed", self.seed, low=0)


def batch_rows(config: AsyncConfig, worker: int, number: int) -> np.ndarray:
    """The data set rows of worker ``worker``'s gradient number ``number``: a seeded draw of b distinct rows."""
    rng = np.random.default_rng((config.seed, worker, number))
    return rng.choice(config.dataset_size, size=config.b, replace=False)


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
        return _serve(config, world_size - 1)
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
    """The gradient of each mini-batch at each θ, in this process: (T, 2) float32.

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
    """Plain SGD in this process on the given mini-batches (rows, one per step), each gradient at the current θ.

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
    """The record from the server's and the workers' results, adding plain SGD and the fresh gradients (this process)."""
    server, workers = results[SERVER], results[1:]
    states = server["states"]
    t = config.updates
    staleness = server["staleness"]
    x, y = line_data(config.dataset_size, seed=config.seed)
    if config.mode == "async":
        batches = np.stack([batch_rows(config, w, n) for w, n in zip(server["worker"], server["number"])])
    else:
        batches = np.stack([np.concatenate([batch_rows(config, w, n) for w in range(1, config.k + 1)])
                            for n in server["number"]])
    arrays = {
        "worker": server["worker"], "staleness": staleness,
        "theta_before": states[:t], "theta_pulled": states[np.arange(t) - staleness], "theta_after": states[1:],
        "grad": server["grad"], "batch_loss": server["batch_loss"],
        "fresh_grad": batch_grads(config, states[:t], batches, 1 if config.mode == "async" else config.k),
        "loss": line_loss(x, y, states).astype(np.float64), "wall": server["wall"], "batch_index": batches.astype(np.int64),
        "dropped_worker": server["dropped_worker"], "dropped_staleness": server["dropped_staleness"],
        "worker_gradients": np.array([w["gradients"] for w in workers], dtype=np.int64),
        "worker_idle": np.array([w["idle"] for w in workers]),
        "worker_busy": np.array([w["busy"] for w in workers]),
    }
    if config.mode == "async":
        arrays["sequential_theta"] = plain_sgd(config, batches)
    meta = dict(
        mode=config.mode, k=config.k, updates=t, lr=config.lr, b=config.b, delays=list(config.delays),
        max_staleness=config.max_staleness, seed=config.seed, model="line", dataset_size=config.dataset_size,
        **where_it_ran(AsyncRecord, backend="gloo"),
    )
    return AsyncRecord(meta, arrays)
