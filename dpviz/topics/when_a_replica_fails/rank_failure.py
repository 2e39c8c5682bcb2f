"""The rank side of :mod:`dpviz.topics.when_a_replica_fails.run_failure`: data-parallel SGD with momentum that
checkpoints, can be killed, resumes, shrinks and regrows, in torch.

One loop, :func:`train`, serves every run of the chapter:

* it starts from the folder's last checkpoint, from a state handed to it (the survivors' parameters and
  velocity), or from θ0;
* rank r trains on shard ``shards[r]`` of each step's global batch (the draw of
  :func:`dpviz.topics.ground_floor.rank_training.batch_indices` for the original k ranks), so a smaller group can
  drop the dead rank's shard and keep the data order of every other;
* after every ``checkpoint_every``-th step rank 0 saves θ, the velocity and the losses so far, all or nothing;
* the victim, at its step, writes when and what it lost, then sends itself SIGKILL: a real kill, no traceback;
* a survivor whose all-reduce fails hands its state over (all or nothing) before the launcher ends it;
* ranks past the survivors (``newcomers``) start from a fresh model of another seed and receive θ and the
  velocity by ``dist.broadcast`` from rank 0; every rank's digest after the broadcast is returned.

Run under torchrun as a script (``python -m torch.distributed.run --nproc-per-node 2 --max-restarts 1 -m
dpviz.topics.when_a_replica_fails.rank_failure <folder>``) it reads RANK and WORLD_SIZE from the environment,
kills its victim only in the first attempt (TORCHELASTIC_RESTART_COUNT 0), and rank 0 writes the result.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine import launch as launcher
from dpviz.topics.when_a_replica_fails.checkpoints import load_checkpoint, save_checkpoint
from dpviz.topics.ground_floor import rank_optim as optim
from dpviz.topics.ground_floor.rank_models import build_model, flat_grad, set_flat_grad
from dpviz.topics.ground_floor.rank_training import batch_indices, digest, load_data, mse
from dpviz.topics.ground_floor.run_training import TrainConfig


def _flat(tensors) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def _unflat(flat: torch.Tensor, like) -> list:
    out, i = [], 0
    for t in like:
        out.append(flat[i:i + t.numel()].view_as(t).clone())
        i += t.numel()
    return out


def _write_json(path: str, data: dict) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _save_state(path: str, step: int, params, velocity, loss) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        np.savez(f, step=np.int64(step), params=params, velocity=velocity, loss=loss)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def train(rank: int, world_size: int, config, attempt, progress=lambda step: None) -> dict:
    """One rank of one attempt (see the module's docstring); returns numpy arrays and plain values."""
    train_cfg = config.train_config()
    x_all, y_all = load_data(train_cfg)
    b = config.b
    newcomer = rank >= world_size - attempt.newcomers
    model = build_model("mlp", d_in=config.d_in, width=config.width, depth=config.depth,
                        seed=config.seed + (1000 + rank if newcomer else 0))
    params = list(model.parameters())
    sgd = optim.SGD(params, lr=attempt.lr, momentum=config.momentum)
    start, losses = 0, np.zeros(0, np.float32)
    state = load_checkpoint(attempt.folder) if attempt.resume else attempt.state
    if state is not None and not newcomer:
        start, losses = int(state["step"]), np.asarray(state["loss"], np.float32)
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(torch.from_numpy(np.array(state["params"])), params)
        if start > 0:
            sgd.velocity = _unflat(torch.from_numpy(np.array(state["velocity"])), params)
    digests = []
    if attempt.newcomers:
        # the newcomer learns θ, the velocity and the step from rank 0, a survivor: one broadcast of each
        flat_p = _flat(params).clone()
        flat_v = _flat(sgd.velocity) if sgd.velocity[0] is not None else torch.zeros_like(flat_p)
        meta = torch.tensor([start], dtype=torch.int64)
        for t in (flat_p, flat_v, meta):
            dist.broadcast(t, src=0)
        start = int(meta.item())
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(flat_p, params)
        sgd.velocity = _unflat(flat_v, params) if start > 0 else [None] * len(params)
        digests = [digest(params).decode(), digest(sgd.velocity).decode() if start > 0 else ""]
    losses = list(losses)
    step_seconds, checkpoint_seconds, checkpoint_steps = [], [], []
    t_safe = time.perf_counter()  # when the last state that a restart could resume from was made
    wall_start = time.time()
    shard = attempt.shards[rank]
    for step in range(start, attempt.stop):
        t0 = time.perf_counter()
        rows = batch_indices(train_cfg, step)[shard * b:(shard + 1) * b]
        model.zero_grad(set_to_none=False)
        loss = mse(model(x_all[rows]), y_all[rows])
        loss.backward()
        if attempt.kill_step == step and attempt.kill_rank == rank:
            _write_json(os.path.join(attempt.folder, "killed.json"), {
                "rank": rank, "step": step, "time": time.time(), "lost_seconds": time.perf_counter() - t_safe,
                "wall_start": wall_start, "start": start})
            os.kill(os.getpid(), signal.SIGKILL)
        # the loss rides with the gradient: one all-reduce gives every rank the step's global mean loss
        g = torch.cat([flat_grad(model), loss.detach().reshape(1)])
        try:
            dist.all_reduce(g)
        except Exception:
            if attempt.handoff and sgd.velocity[0] is not None:
                # the group lost a rank: hand over what this survivor holds, θ and v after `step` steps
                _save_state(os.path.join(attempt.folder, f"survivor-{rank}.npz"), step,
                            _flat(params).numpy(), _flat(sgd.velocity).numpy(), np.asarray(losses, np.float32))
            raise
        g /= world_size
        set_flat_grad(model, g[:-1])
        sgd.step()
        losses.append(g[-1].item())
        step_seconds.append(time.perf_counter() - t0)
        done = step + 1
        if rank == 0 and attempt.folder and done % config.checkpoint_every == 0 and done < attempt.stop:
            t1 = time.perf_counter()
            save_checkpoint(attempt.folder, step=done, arrays={
                "params": _flat(params).numpy(), "velocity": _flat(sgd.velocity).numpy(),
                "loss": np.asarray(losses, np.float32)})
            checkpoint_seconds.append(time.perf_counter() - t1)
            checkpoint_steps.append(done)
            with open(os.path.join(attempt.folder, "saves.log"), "a") as f:  # every save's time, killed runs' too
                f.write(f"{done} {checkpoint_seconds[-1]!r}\n")
        if done % config.checkpoint_every == 0:
            t_safe = time.perf_counter()
        progress(step)
    return {
        "start": start, "loss": np.asarray(losses, np.float32), "step_seconds": np.asarray(step_seconds),
        "checkpoint_seconds": np.asarray(checkpoint_seconds), "checkpoint_steps": np.asarray(checkpoint_steps, np.int64),
        "params": _flat(params).numpy(),
        "velocity": _flat(sgd.velocity).numpy() if sgd.velocity[0] is not None else np.zeros(0, np.float32),
        "digest": digest(params).decode(), "joined_digests": digests, "wall_start": wall_start,
    }


def failure_worker(rank: int, world_size: int, config, attempt) -> dict:
    """One rank under dpviz's launcher."""
    return train(rank, world_size, config, attempt, progress=launcher.report_progress)


def main(argv=None) -> None:
    """Under torchrun: ``<folder>`` holds config.json (the run) written by the front; rank 0 writes result.npz."""
    if "RANK" not in os.environ or "MASTER_PORT" not in os.environ:
        raise SystemExit("this script runs under torchrun, which sets RANK, WORLD_SIZE and MASTER_PORT: "
                         "python -m torch.distributed.run --standalone --nproc-per-node 2 --max-restarts 1 -m "
                         "dpviz.topics.when_a_replica_fails.rank_failure <folder>")
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not os.path.isfile(os.path.join(args[0], "config.json")):
        raise SystemExit(f"folder must be one folder holding config.json (written by record_torchrun_restart); "
                         f"got {args!r}.")
    folder = args[0]
    with open(os.path.join(folder, "config.json")) as f:
        spec = json.load(f)  # a FailureConfig, checked by the front that wrote it
    config = SimpleNamespace(**spec["config"])
    config.train_config = lambda: TrainConfig(k=config.k, b=config.b, steps=config.steps, model="mlp",
                                              width=config.width, depth=config.depth, d_in=config.d_in, lr=config.lr,
                                              seed=config.seed, dataset_size=config.dataset_size)
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    attempt = SimpleNamespace(folder=folder, resume=True, state=None, stop=config.steps, lr=config.lr,
                              kill_rank=spec["kill_rank"] if restart == 0 else None,
                              kill_step=spec["kill_step"] if restart == 0 else None,
                              shards=tuple(range(world_size)), handoff=False, newcomers=0)
    torch.set_num_threads(1)
    # The agent's store outlives a restart, and the keys the first attempt's gloo ranks published (their
    # addresses) are still in it: a second init_process_group("gloo") read them and failed to connect to ranks
    # that no longer listen (torch 2.13, "connectFullMesh failed ... Connection refused"). A prefix per attempt
    # gives each attempt keys of its own.
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world_size,
                          is_master=rank == 0 and not agent_store)
    dist.init_process_group("gloo", store=dist.PrefixStore(f"dpviz/attempt-{restart}", store), rank=rank,
                            world_size=world_size)
    try:
        out = train(rank, world_size, config, attempt)
        if rank == 0:
            _save_state(os.path.join(folder, "result.npz"), out["start"], out["params"], out["velocity"], out["loss"])
            _write_json(os.path.join(folder, f"attempt-{restart}.json"), {"start": out["start"], "restart": restart,
                                                                         "wall_start": out["wall_start"]})
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
