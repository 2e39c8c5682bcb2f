"""Start k ranks of a torch.distributed process group and collect what each returns.

    from dpviz.engine.launch import launch
    results = launch(my_module.worker, k=4, args=(config,))   # one entry per rank

``worker(rank, world_size, *args)`` must be a top-level function in an importable
module: a rank is a fresh process (forked from a fork server that has imported
torch, or spawned), and it cannot unpickle a function defined in a notebook cell.
Each rank's return value should hold numpy arrays and plain Python values; it
travels back through a pickle file, never as a torch tensor through a queue (the
shared-memory handoff breaks when the rank exits first). A worker calls
:func:`report_progress` after each step, and ``report_progress()`` (no step) as it goes through long work after
its loop (a check computed again, digests): that work is progress too.

What the launcher guarantees:

* the ranks meet through a file store in the run's own temporary folder, so two
  runs started at the same moment (a class running the same cell) never race for
  a port;
* ``backend="auto"`` picks nccl when every rank can have its own GPU, gloo otherwise;
* an exception in any rank is raised here as :class:`RankError`, naming the rank
  and carrying its traceback; the one exception is gloo losing a peer while the
  ranks join the group, before any worker code ran: the ranks start once more;
* a run none of whose running ranks makes progress for ``stall_timeout`` seconds
  ends with :class:`RankTimeout`, naming the ranks furthest behind, the step they
  are stuck after (or that they finished every step) and what their processes
  were seen doing; a long run that keeps reporting progress is never cut short,
  nor is a rank waiting for a peer that does (``deadline`` is an optional bound on
  the whole run, off by default);
* every child is reaped on success, failure, timeout, KeyboardInterrupt and
  SIGTERM, and no rank outlives the launching process however that process ends
  (killed, or a Jupyter kernel restarted): each rank asks the OS to kill it when
  its parent dies (Linux) and watches its parent from a thread (everywhere), and
  a rank forked for a run that is already over (an interrupt while the fork server
  still imports torch) finds its run's folder gone and leaves at once;
* a script without the ``if __name__ == "__main__":`` guard is refused in one
  sentence before any process starts (each would run the script again);
* threads per rank are set so k ranks share the cores without oversubscribing
  them, with a warning when k exceeds the core count;
* ranks start in milliseconds, not the second it takes to import torch: they are
  forked from a fork server that imported torch once (started by the first run,
  it exits with the launching process, after FORK_SERVER_IDLE seconds without a
  run, or at :func:`stop_fork_server`; DPVIZ_START_METHOD=spawn turns it off).
  :func:`dpviz.engine.forkserver.warm_up` starts it ahead of the first run.

The work is split by job: :mod:`dpviz.engine.forkserver` (the fork server's life),
:mod:`dpviz.engine.supervise` (waiting on the ranks, naming failures and stalls,
reaping) and :mod:`dpviz.engine.rank` (what runs inside a rank). Their public names,
and the errors, are importable from here too.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import pickle
import sys
import time
import warnings

from dpviz.engine import confine
from dpviz.engine.checks import check_choice, check_int, check_real
from dpviz.engine.cores import quota_cores
from dpviz.engine.forkserver import (
    FORK_SERVER_IDLE,
    FORK_SERVER_PRELOAD,
    START_METHODS,
    _context,
    _run_ended,
    _run_started,
    fork_server_pid,
    is_helper_process,
    start_fork_server,
    stop_fork_server,
    warm_up,
)
from dpviz.engine.rank import _SPAWNED, WATCH_INTERVAL, _rank_entry, _read_result, report_progress  # noqa: F401
from dpviz.engine.supervise import (
    RankError,
    RankTimeout,
    _make_run_dir,
    _progress_bar,
    _reap,
    _ReapOnSigterm,
    _remove_run_dir,
    _sweep_stale_dirs,
    _unguarded_main,
    _wait,
)

BACKENDS = ("auto", "gloo", "nccl")
REJOIN_ATTEMPTS = 2  # starts of the ranks, when the first fails only because gloo lost a peer while they joined
STALL_TIMEOUT = 60.0  # seconds a running rank may go without reporting progress
START_TIMEOUT = 120.0  # seconds a rank may take to start and join the group (torch import on a loaded machine)
_gpus = None  # gpu_count(), once asked
_log = logging.getLogger(__name__)

__all__ = [
    "BACKENDS", "STALL_TIMEOUT", "START_TIMEOUT", "START_METHODS", "FORK_SERVER_PRELOAD", "FORK_SERVER_IDLE",
    "WATCH_INTERVAL", "RankError", "RankTimeout", "launch", "report_progress", "resolve_backend", "threads_per_rank",
    "cpu_count", "gpu_count", "warm_up", "start_fork_server", "fork_server_pid", "stop_fork_server", "is_helper_process",
    "SharingCores", "sharing_cores_said_elsewhere",
]


class SharingCores(UserWarning):
    """Warned when a gloo run has more ranks than cores: its times include the ranks' turns on the CPU."""


@contextlib.contextmanager
def sharing_cores_said_elsewhere():
    """Silence :class:`SharingCores` inside the block: for runs that are not timed, or whose records and figures say
    how many cores there were (every record keeps ``cores``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SharingCores)
        yield


def cpu_count() -> int:
    """The cores this process may use: the affinity mask where the OS has one, or fewer where a cgroup's CPU quota
    (a JupyterHub pod's limit, a container's ``--cpus``) allows fewer at a time (:mod:`dpviz.engine.cores`)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    quota = quota_cores()
    return cores if quota is None else min(cores, quota)


def resolve_backend(backend: str, k: int) -> str:
    """Turn ``auto`` into a concrete backend and check that nccl has a GPU per rank."""
    check_choice("backend", backend, BACKENDS)
    if backend == "gloo":
        return backend
    gpus = gpu_count()
    if backend == "auto":
        return "nccl" if gpus >= k else "gloo"
    if backend == "nccl" and gpus < k:
        raise ValueError(f"backend 'nccl' needs one GPU per rank, so k must be <= {gpus} GPUs on this machine; got k={k}.")
    return backend


def gpu_count() -> int:
    """The GPUs torch sees, asked once of a process started like a rank, so that this process need not import torch."""
    global _gpus
    if _gpus is None:
        if "torch" in sys.modules:
            _gpus = _torch_gpu_count()
        elif not _gpu_driver_present():
            _gpus = 0  # no GPU driver on this machine: nothing for torch to find, and no process to start
        else:
            _refuse_unguarded_main()
            ctx = _context()
            count = ctx.Value("i", -1, lock=False)
            _run_started()
            try:
                probe = ctx.Process(target=_count_gpus_into, args=(count,), name="dpviz-gpu-count", daemon=True)
                probe.start()
                probe.join()
            finally:
                _run_ended()
            if count.value < 0:
                script = _unguarded_main()
                if probe.exitcode == 1 and script:
                    raise RuntimeError(f"{script} launches ranks without the `if __name__ == \"__main__\":` guard, so "
                                       "every process it starts runs the script again; put the call under that guard.")
                raise RuntimeError(f"the process counting GPUs exited with code {probe.exitcode} before it counted them.")
            _gpus = count.value
    return _gpus


def _refuse_unguarded_main() -> None:
    """Raise, before any process starts, when the running script would be run again by every process started.

    A rank, forked from the fork server or spawned, first imports the launching script (as multiprocessing does,
    to find what the script defined); without the ``if __name__ == "__main__":`` guard that import launches again,
    and each rank dies printing a traceback of its own (about 70 lines a rank), burying the one sentence that says
    why. So the sentence comes first, alone.
    """
    if multiprocessing.parent_process() is not None:
        return  # a process started by a launcher: its parent has already been told, or is guarded
    script = _unguarded_main()
    if script:
        raise RuntimeError(f"{script} launches ranks without the `if __name__ == \"__main__\":` guard, so every "
                           "process it starts would run the script again; put the call under that guard.")


def _gpu_driver_present() -> bool:
    """Whether a GPU driver torch could use is loaded: NVIDIA's (CUDA) or AMD's (ROCm). Linux only; elsewhere, True."""
    if not sys.platform.startswith("linux"):
        return True
    return os.path.exists("/proc/driver/nvidia/gpus") or os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/kfd")


def _torch_gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _count_gpus_into(count) -> None:
    count.value = _torch_gpu_count()


def threads_per_rank(k: int) -> int:
    """How many intra-op threads each of k ranks gets so that together they fill the cores once."""
    return max(1, cpu_count() // k)


def launch(
    worker,
    k: int,
    *,
    args: tuple = (),
    backend: str = "auto",
    stall_timeout: float | None = None,
    deadline: float | None = None,
    start_timeout: float = START_TIMEOUT,
    threads: int | None = None,
    total_steps: int | None = None,
    progress: bool = False,
    untrusted: bool = False,
) -> list:
    """Run ``worker(rank, k, *args)`` in k processes of one process group; return their results in rank order.

    ``stall_timeout`` (seconds, default 60) is how long the run may go without
    progress from any running rank: without one calling :func:`report_progress`, or,
    before its first report, joining the group. ``total_steps``, when given, lets a
    stall after a rank's last step say so. ``start_timeout`` (default 120) is how long a
    rank may take to start and join the group. ``deadline`` (seconds, default
    None: no limit) bounds the whole run. With ``progress=True`` and ``total_steps`` set, a bar
    follows the slowest rank.

    If a rank fails while the ranks join the group only because gloo lost a peer's connection (rare, and only
    seen while other launchers start ranks at the same moment), nothing of the worker has run on that rank:
    every rank is stopped and the k ranks start once more, in a fresh run folder (logged at INFO on
    ``dpviz.engine.launch``). Any other failure, or a second such one, is raised.

    ``untrusted=True``: the worker runs a reader's code (the exercise checkers). Each rank then becomes the
    sandbox user once it has joined, where the launcher is root (:mod:`dpviz.engine.confine`), and returns its
    result as JSON data; one that is not raises :class:`dpviz.engine.rank.UnreadableResult`.
    """
    k = check_int("k", k, low=1, high=1024)
    stall_timeout = check_real("stall_timeout", STALL_TIMEOUT if stall_timeout is None else stall_timeout, low=0, low_open=True)
    start_timeout = check_real("start_timeout", start_timeout, low=0, low_open=True)
    if deadline is not None:
        deadline = check_real("deadline", deadline, low=0, low_open=True)
    backend = resolve_backend(backend, k)
    cores = cpu_count()
    if threads is None:
        threads = threads_per_rank(k)
    threads = check_int("threads", threads, low=1, high=4096)
    if backend == "gloo" and k > cores:
        warnings.warn(
            f"k={k} ranks share {cores} cores: ranks take turns on the CPU, so measured times include that oversubscription.",
            SharingCores, stacklevel=2,
        )
    try:
        payload = pickle.dumps((worker, args, bool(untrusted)), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:
        raise TypeError(
            f"worker and args must pickle, so worker must be a top-level function of an importable module; "
            f"pickling failed with {type(e).__name__}: {e}"
        ) from None

    _refuse_unguarded_main()
    bar = _progress_bar(total_steps) if progress and total_steps else None
    begin = time.monotonic()
    try:
        for attempt in range(1, REJOIN_ATTEMPTS + 1):
            left = None if deadline is None else max(deadline - (time.monotonic() - begin), 1e-3)
            try:
                return _launch_once(payload, k, backend, threads, stall_timeout, start_timeout, left, bar, total_steps,
                                    untrusted)
            except RankError as e:
                if not e.rejoinable or attempt == REJOIN_ATTEMPTS:
                    raise
                _log.info("rank %d lost a peer while joining the group (%s); starting the %d ranks again",
                          e.rank, str(e).splitlines()[0], k)
    finally:
        if bar is not None:
            bar.close()


def _launch_once(payload, k, backend, threads, stall_timeout, start_timeout, deadline, bar, total_steps=None,
                 untrusted=False) -> list:
    """One start of k ranks in a run folder of their own, watched until they all exit; their results in rank order."""
    _sweep_stale_dirs()
    procs = []
    outdir, lock = _make_run_dir()  # its lock, held until the folder is removed, tells other launchers it is live
    if untrusted and confine.isolated():  # the ranks write their results here after they became the sandbox user
        os.chown(outdir, *confine.user_ids())
    store = os.path.join(outdir, "store")  # the rendezvous: a FileStore no other run can touch
    # The process group's own timeout only has to outlast the launcher's checks, which name the culprit.
    group_timeout = max(start_timeout, stall_timeout) + stall_timeout + 30.0
    # A rank forked from the fork server has the server's environment, not ours: send ours.
    env = dict(os.environ)
    _run_started()
    with _ReapOnSigterm():
        try:
            ctx = _context()
            state = ctx.Array("q", [-1, 0, _SPAWNED] * k, lock=False)
            for rank in range(k):
                p = ctx.Process(
                    target=_rank_entry,
                    args=(os.getpid(), rank, k, backend, store, threads, group_timeout, outdir, state, payload, env),
                    name=f"dpviz-rank-{rank}",
                    daemon=True,
                )
                p.start()
                procs.append(p)
            server = fork_server_pid() if ctx.get_start_method() == "forkserver" else None
            _wait(procs, outdir, state, stall_timeout, max(start_timeout, stall_timeout), deadline, bar, total_steps,
                  server)
            return [_read_result(outdir, rank, untrusted) for rank in range(k)]
        finally:
            _reap(procs)
            _remove_run_dir(outdir, lock)
            _run_ended()
