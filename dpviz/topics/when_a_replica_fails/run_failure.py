"""When a replica fails: a real SIGKILL in one of k ranks, checkpoint and restart, carrying on with fewer.

    from dpviz.topics.when_a_replica_fails.run_failure import record_restarts, record_unfailed
    clean = record_unfailed(k=2, steps=24)
    run = record_restarts(k=2, steps=24, checkpoint_every=4, kills=((1, 10),))   # rank 1 dies at step 10
    run.notice_seconds, run.lost_steps          # measured: until the launcher named the dead rank; work redone

Every run trains the same MLP on the same batches (the data-parallel draw of
:mod:`dpviz.topics.ground_floor.run_training`) with SGD and momentum. A kill is real: the victim sends itself
SIGKILL after its backward pass, before the all-reduce its peers are already waiting in; the launcher names it
(:class:`dpviz.engine.launch.RankError`) and ends the others. What the run then does:

* :func:`record_restarts`: start k ranks again from the last checkpoint (rank 0 saves one every C steps, all or
  nothing) until the steps are done. The data order is a function of the step, so the restarted run takes the
  same batches the unfailed one did, and its parameters are the same bit for bit.
* :func:`record_carry_on`: no checkpoint: the survivors hand over their state as they see the all-reduce fail,
  k − 1 ranks carry on from it (the dead rank's shard dropped), and later a newcomer joins, receiving θ and the
  velocity from a survivor by broadcast.
* :func:`record_torchrun_restart`: the same restart done by torchrun's elastic agent (``--max-restarts``).

This module is the torch-free front; the ranks run :mod:`dpviz.topics.when_a_replica_fails.rank_failure`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

import numpy as np

from dpviz.engine import launch as launcher
from dpviz.engine.checks import check_int, check_real, check_timeout
from dpviz.engine.forkserver import descendants
from dpviz.topics.when_a_replica_fails.checkpoints import leftovers, load_checkpoint, remove_leftovers
from dpviz.topics.when_a_replica_fails.records import Failure, FailureSettings, Training, YoungDalyCheck
from dpviz.topics.ground_floor.run_training import TrainConfig


def failure_worker(rank: int, world_size: int, config, attempt) -> dict:
    """Runs in each rank: :func:`dpviz.topics.when_a_replica_fails.rank_failure.failure_worker` (with torch)."""
    from dpviz.topics.when_a_replica_fails.rank_failure import failure_worker

    return failure_worker(rank, world_size, config, attempt)


@dataclass
class FailureConfig(FailureSettings):
    """The settings a record keeps (:class:`~dpviz.topics.when_a_replica_fails.records.FailureSettings`), plus what a
    live run alone needs: a stall timeout, and the checks of the TrainConfig its ranks draw batches from."""
    stall_timeout: float = 60.0  # seconds a rank may go without progress

    def __post_init__(self):
        super().__post_init__()
        check_timeout("stall_timeout", self.stall_timeout)
        self.train_config()  # checks b, width, depth, d_in, seed and dataset_size

    def train_config(self) -> TrainConfig:
        """The same run as a :class:`TrainConfig`, for its data, model and batch draws."""
        return TrainConfig(k=self.k, b=self.b, steps=self.steps, model="mlp", width=self.width, depth=self.depth,
                           d_in=self.d_in, lr=self.lr, seed=self.seed, dataset_size=self.dataset_size)


@dataclass
class Attempt:
    """One start of the ranks: where it starts from, what it trains, and who dies."""
    folder: str = ""              # checkpoints and hand-overs ("" : none)
    resume: bool = False          # start from the folder's last checkpoint, if any
    state: dict | None = None     # else from this state {"step", "params", "velocity", "loss"}, if given
    kill_rank: int | None = None  # the rank that is SIGKILLed ...
    kill_step: int | None = None  # ... after the backward pass of this step
    stop: int = 0                 # train up to (not including) this step
    shards: tuple = ()            # rank r trains on shard shards[r] of each step's global batch
    lr: float = 0.05              # this attempt's learning rate
    handoff: bool = False         # survivors save their state when the all-reduce fails
    newcomers: int = 0            # the last ranks start fresh and receive the state by broadcast


def _config(config, overrides) -> FailureConfig:
    return FailureConfig(**{**(asdict(config) if config else {}), **overrides})


def _check_kills(kills, config: FailureConfig, *, k: int | None = None) -> tuple:
    kills = tuple(tuple(kill) for kill in kills)
    k = config.k if k is None else k
    for kill in kills:
        if len(kill) != 2:
            raise ValueError(f"kills must list (rank, step) pairs; got {kill!r}.")
        check_int("a kill's rank", kill[0], low=0, high=k - 1)
        check_int("a kill's step", kill[1], low=0, high=config.steps - 1)
    return kills


def _launch(config, attempt, k):
    return launcher.launch(failure_worker, k, args=(config, attempt), backend="gloo", threads=1,
                           stall_timeout=config.stall_timeout)


def record_unfailed(config: FailureConfig | None = None, **overrides) -> Training:
    """k ranks train every step with no failure: the run a restarted one must equal."""
    config = _config(config, overrides)
    t0 = time.perf_counter()
    results = _launch(config, Attempt(stop=config.steps, shards=tuple(range(config.k)), lr=config.lr), config.k)
    return Training(config, results[0]["loss"], results[0]["params"], results[0]["velocity"],
                    results[0]["step_seconds"], np.zeros(0), time.perf_counter() - t0)


def _saves(folder: str) -> np.ndarray:
    path = os.path.join(folder, "saves.log")
    if not os.path.exists(path):
        return np.zeros(0)
    with open(path) as f:
        return np.array([float(line.split()[1]) for line in f if line.strip()])


def _failed(folder: str, error: launcher.RankError, caught: float) -> dict:
    with open(os.path.join(folder, "killed.json")) as f:
        killed = json.load(f)
    os.remove(os.path.join(folder, "killed.json"))
    killed.update(named_rank=error.rank, notice_seconds=caught - killed["time"], caught=caught)
    return killed


def record_restarts(config: FailureConfig | None = None, *, kills=((1, 10),), **overrides) -> Training:
    """Train with a checkpoint every C steps; the i-th (rank, step) in ``kills`` SIGKILLs that rank at that step in
    the i-th start of the ranks; after each failure k ranks start again from the last checkpoint.

    The losses kept are those of the attempts whose steps survived: steps up to a checkpoint from the attempt
    that saved it, the rest from the last attempt. Each kill's cost is measured (:class:`Failure`)."""
    config = _config(config, overrides)
    kills = _check_kills(kills, config)
    for (_, before), (_, after) in zip(kills, kills[1:]):
        resumed = (before // config.checkpoint_every) * config.checkpoint_every
        if after < resumed:
            raise ValueError(f"kills must come in the order the run meets them: after a kill at step {before} the "
                             f"run resumes at step {resumed}, so the next kill's step must be from {resumed} to "
                             f"{config.steps - 1}; got {after}.")
    failures, killed_runs = [], []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dpviz-ckpt-") as folder:
        pending = list(kills)
        while True:
            kill = pending.pop(0) if pending else (None, None)
            attempt = Attempt(folder=folder, resume=True, kill_rank=kill[0], kill_step=kill[1], stop=config.steps,
                              shards=tuple(range(config.k)), lr=config.lr)
            remove_leftovers(folder)  # a save cut short by a kill left its temporary; it is never read
            try:
                results = _launch(config, attempt, config.k)
                break
            except launcher.RankError as e:
                killed_runs.append(_failed(folder, e, time.time()))
                ckpt = load_checkpoint(folder)
                killed_runs[-1]["resumed"] = 0 if ckpt is None else ckpt["step"]
        assert not leftovers(folder), f"a half-written checkpoint was left: {leftovers(folder)}"
        saves = _saves(folder)
    # each restart's delay: from the error naming the dead rank to the next attempt's first step
    starts = [run["wall_start"] for run in killed_runs[1:]] + [results[0]["wall_start"]]
    for killed, started in zip(killed_runs, starts):
        failures.append(Failure(killed["rank"], killed["step"], killed["named_rank"], killed["notice_seconds"],
                                killed["resumed"], killed["step"] - killed["resumed"], killed["lost_seconds"],
                                started - killed["caught"]))
    return Training(config, results[0]["loss"], results[0]["params"], results[0]["velocity"],
                    results[0]["step_seconds"], saves, time.perf_counter() - t0, failures)


HANDOFF_TRIES = 3  # runs of the failing group, when the launcher ended a survivor before it handed its state over


class HandoffLost(RuntimeError):
    """A survivor was ended (the launcher reaps every rank 0.3 s after naming the dead one) before it saved."""


def _survivors_state(folder: str, survivors: list) -> dict:
    """The state the survivors handed over, checked to be the same on every survivor."""
    states = []
    for rank in survivors:
        path = os.path.join(folder, f"survivor-{rank}.npz")
        if not os.path.exists(path):
            for other in survivors:  # the next try starts from a clean folder
                if os.path.exists(os.path.join(folder, f"survivor-{other}.npz")):
                    os.remove(os.path.join(folder, f"survivor-{other}.npz"))
            raise HandoffLost(f"survivor rank {rank} was ended before it could hand over its state "
                              f"({HANDOFF_TRIES} tries); run again on a less busy machine.")
        with np.load(path) as z:
            states.append({name: z[name] for name in z.files})
    for rank, state in zip(survivors[1:], states[1:]):
        for name in ("params", "velocity"):
            if not np.array_equal(state[name], states[0][name]):
                raise AssertionError(f"survivors {survivors[0]} and {rank} hold different {name}.")
    state = states[0]
    state["step"] = int(state["step"])
    return state


def record_carry_on(config: FailureConfig | None = None, *, kill=(1, 8), regrow_at: int = 16,
                    lr_rule: str = "linear", **overrides) -> Training:
    """Train k ranks; SIGKILL rank ``kill[0]`` at step ``kill[1]``; k − 1 survivors carry on from the state they hold
    (no checkpoint, nothing redone), the dead rank's shard of each batch dropped, until step ``regrow_at``, where a
    newcomer joins from a survivor's θ and velocity (broadcast) and k ranks finish the run.

    The survivors hand their state over as their all-reduce fails; dpviz's launcher ends them soon after it names
    the dead rank (torchft would keep them running and rebuild the group in place). On a machine so busy that a
    survivor is ended before it saves, the failing run is started again, up to ``HANDOFF_TRIES`` times.

    ``lr_rule`` is the learning rate while the group is smaller: "linear" scales η by (k − 1)/k with the batch
    (:func:`dpviz.topics.bigger_batch` taught why), "same" keeps it."""
    config = _config(config, overrides)
    if config.k < 2:
        raise ValueError(f"k must be at least 2 for a group to carry on without one rank; got k={config.k}.")
    (victim, at), = _check_kills((kill,), config)
    if at < 1:
        raise ValueError(f"kill's step must be from 1 to {config.steps - 1}, so the survivors hold a velocity; got {at}.")
    check_int("regrow_at", regrow_at, low=at + 1, high=config.steps)
    if lr_rule not in ("linear", "same"):
        raise ValueError(f"lr_rule must be one of 'linear', 'same'; got {lr_rule!r}.")
    k = config.k
    survivors = [r for r in range(k) if r != victim]
    smaller_lr = config.lr * (k - 1) / k if lr_rule == "linear" else config.lr
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dpviz-carry-on-") as folder:
        whole = Attempt(folder=folder, kill_rank=victim, kill_step=at, stop=config.steps, shards=tuple(range(k)),
                        lr=config.lr, handoff=True)
        for tries in range(1, HANDOFF_TRIES + 1):
            try:
                _launch(config, whole, k)
                raise AssertionError(f"rank {victim} was to be killed at step {at}, and the run finished.")
            except launcher.RankError as e:
                killed = _failed(folder, e, time.time())
            try:
                state = _survivors_state(folder, survivors)
                break
            except HandoffLost:
                if tries == HANDOFF_TRIES:
                    raise
        fewer = Attempt(state=state, stop=regrow_at, shards=tuple(survivors), lr=smaller_lr)
        shrunk = _launch(config, fewer, k - 1)
        state = {name: shrunk[0][name] for name in ("params", "velocity", "loss")} | {"step": regrow_at}
        regrown = Attempt(state=state, stop=config.steps, shards=tuple(survivors) + (victim,), lr=config.lr,
                          newcomers=1)
        results = _launch(config, regrown, k)
    failure = Failure(victim, at, killed["named_rank"], killed["notice_seconds"], at, 0, 0.0,
                      shrunk[0]["wall_start"] - killed["caught"])
    world = np.full(config.steps, k, np.int64)
    world[at:regrow_at] = k - 1
    return Training(config, results[0]["loss"], results[0]["params"], results[0]["velocity"],
                    results[0]["step_seconds"], np.zeros(0), time.perf_counter() - t0, [failure], world,
                    [r["joined_digests"] for r in results])


def record_young_daly(config: FailureConfig | None = None, *, every=(1, 2, 4, 8), mtbf_steps: float = 12.0,
                      failure_seed: int = 0, **overrides) -> YoungDalyCheck:
    """Train once per checkpoint interval C in ``every``, failures injected at one per ``mtbf_steps`` steps of work
    (:func:`dpviz.topics.when_a_replica_fails.theory.kill_schedule`, the same arrivals for every C), and measure
    what each run lost."""
    from dpviz.topics.when_a_replica_fails.theory import kill_schedule

    config = _config(config, overrides)
    every = tuple(check_int("every entries", e, low=1, high=config.steps) for e in every)
    if not every:
        raise ValueError(f"every must list at least one interval from 1 to steps={config.steps}; got ().")
    check_real("mtbf_steps", mtbf_steps, low=0, low_open=True)
    runs = []
    for e in every:
        kills = kill_schedule(config.steps, e, mtbf_steps, config.k, seed=failure_seed)
        runs.append(record_restarts(config, kills=kills, checkpoint_every=e))
    seconds = np.concatenate([run.step_seconds for run in runs])
    saves = np.concatenate([run.checkpoint_seconds for run in runs])
    return YoungDalyCheck(
        config, np.array(every), float(mtbf_steps),
        np.array([len(run.failures) for run in runs]), np.array([len(run.checkpoint_seconds) for run in runs]),
        np.array([run.checkpoint_seconds.sum() for run in runs]),
        np.array([sum(f.lost_seconds for f in run.failures) for run in runs]),
        np.array([sum(f.notice_seconds + f.restart_seconds for f in run.failures) for run in runs]),
        float(np.median(seconds)), float(np.median(saves)) if len(saves) else float("nan"), runs)


def _end_torchrun(job: subprocess.Popen) -> None:
    """Kill torchrun, if it still runs, and every process under it, then reap it.

    torch starts each worker in a session of its own, so a signal to torchrun's process group misses them, and once
    torchrun has died they are orphans whose parents lead nowhere: the tree is read while torchrun lives, and each
    process found is stopped at once, so that none starts another (nor the agent a replacement worker) before
    all are killed."""
    if job.poll() is not None:
        return  # torchrun ended by itself, after ending its workers; its pid may already be another process's
    stopped = set()
    while found := {job.pid, *descendants(job.pid)} - stopped:
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= found
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(job.pid, signal.SIGKILL)  # and whatever left the tree but stayed in torchrun's group
    job.wait()


def record_torchrun_restart(config: FailureConfig | None = None, *, kill=(1, 6), timeout: float = 300.0,
                            **overrides) -> Training:
    """The same restart done by torchrun's elastic agent: ``python -m torch.distributed.run --standalone
    --nproc-per-node k --max-restarts 1`` runs :mod:`dpviz.topics.when_a_replica_fails.rank_failure` as a script;
    rank ``kill[0]`` SIGKILLs itself at step ``kill[1]`` in the first attempt, the agent sees it die, ends the
    others and starts all k again; they resume from the last checkpoint. ``timeout`` (seconds) bounds the job.

    torchrun starts its workers by spawning fresh interpreters, each importing torch (seconds each on a busy
    machine), where dpviz's launcher forks them from a warm server: this is the slower, standard way."""
    config = _config(config, overrides)
    (victim, at), = _check_kills((kill,), config)
    check_real("timeout", timeout, low=0, low_open=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dpviz-torchrun-") as folder:
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({"config": asdict(config), "kill_rank": victim, "kill_step": at}, f)
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={config.k}",
                   "--max-restarts=1", "--monitor-interval=0.1", "-m",
                   "dpviz.topics.when_a_replica_fails.rank_failure", folder]
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        # a session of its own: a Ctrl-C at the terminal reaches this process alone, which then ends the job
        job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               start_new_session=True)
        try:
            _, stderr = job.communicate(timeout=timeout)
        finally:
            _end_torchrun(job)
        if job.returncode != 0:
            raise RuntimeError(f"torchrun exited with code {job.returncode}:\n{stderr[-3000:]}")
        with open(os.path.join(folder, "killed.json")) as f:
            killed = json.load(f)
        with open(os.path.join(folder, "attempt-1.json")) as f:
            second = json.load(f)
        with np.load(os.path.join(folder, "result.npz")) as z:
            result = {name: z[name] for name in z.files}
        saves = _saves(folder)
        assert not leftovers(folder), f"a half-written checkpoint was left: {leftovers(folder)}"
    # torchrun's agent names the rank in its log, not to us: the notice is not measured apart, and the restart's
    # seconds run from the kill to the restarted ranks' first step
    resumed = second["start"]
    failure = Failure(victim, at, victim, float("nan"), resumed, at - resumed, killed["lost_seconds"],
                      second["wall_start"] - killed["time"])
    return Training(config, result["loss"], result["params"], result["velocity"], np.zeros(0), saves,
                    time.perf_counter() - t0, [failure])
