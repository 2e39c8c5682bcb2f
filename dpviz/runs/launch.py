"""Start k ranks of a torch.distributed process group and collect what each returns.

    from dpviz.runs.launch import launch
    results = launch(my_module.worker, k=4, args=(config,))   # one entry per rank

``worker(rank, world_size, *args)`` must be a top-level function in an importable
module: a rank is a fresh process (forked from a fork server that has imported
torch, or spawned), and it cannot unpickle a function defined in a notebook cell.
Each rank's return value should hold numpy arrays and plain Python values; it
travels back through a pickle file, never as a torch tensor through a queue (the
shared-memory handoff breaks when the rank exits first). A worker calls
:func:`report_progress` after each step.

What the launcher guarantees:

* the ranks meet through a file store in the run's own temporary folder, so two
  runs started at the same moment (a class running the same cell) never race for
  a port;
* ``backend="auto"`` picks nccl when every rank can have its own GPU, gloo otherwise;
* an exception in any rank is raised here as :class:`RankError`, naming the rank
  and carrying its traceback;
* a rank that makes no progress for ``stall_timeout`` seconds ends the run with
  :class:`RankTimeout`, naming the rank and the step it is stuck after; a long
  run that keeps reporting progress is never cut short (``deadline`` is an
  optional bound on the whole run, off by default);
* every child is reaped on success, failure, timeout, KeyboardInterrupt and
  SIGTERM, and no rank outlives the launching process however that process ends
  (killed, or a Jupyter kernel restarted): each rank asks the OS to kill it when
  its parent dies (Linux) and watches its parent from a thread (everywhere);
* threads per rank are set so k ranks share the cores without oversubscribing
  them, with a warning when k exceeds the core count;
* ranks start in milliseconds, not the second it takes to import torch: they are
  forked from a fork server that imported torch once (started by the first run,
  it exits with the launching process, after FORK_SERVER_IDLE seconds without a
  run, or at :func:`stop_fork_server`; DPVIZ_START_METHOD=spawn turns it off).

This module imports torch only inside a rank's work and in the functions that need
it, so a new rank is guarded against its parent's death before it spends seconds
importing torch.
"""

from __future__ import annotations

import ctypes
import datetime
import multiprocessing
import multiprocessing.connection
import os
import pickle
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import warnings

from dpviz.checks import check_choice, check_int, check_real

BACKENDS = ("auto", "gloo", "nccl")
STALL_TIMEOUT = 60.0  # seconds a running rank may go without reporting progress
START_TIMEOUT = 120.0  # seconds a rank may take to start and join the group (torch import on a loaded machine)
WATCH_INTERVAL = 0.2  # seconds between a rank's checks that its parent is alive
START_METHODS = ("forkserver", "spawn")  # DPVIZ_START_METHOD; forkserver is the default where the OS has one
FORK_SERVER_PRELOAD = ("numpy", "torch", "torch.distributed")  # imported once, by the fork server
FORK_SERVER_IDLE = 600.0  # seconds without a run after which the fork server exits

_runs_lock = threading.Lock()
_runs_in_flight = 0
_idle_timer = None

# A rank's phases, as the launcher sees them through the shared state.
_SPAWNED, _STARTED, _JOINED, _DONE = 0, 1, 2, 3
_FIELDS = 3  # per rank in the shared state: last step reported, progress count, phase

# Set inside a rank by the launcher; read by report_progress().
_state = None
_rank = None


class RankError(RuntimeError):
    """A rank raised an exception; ``rank`` and ``rank_traceback`` say where and why."""

    def __init__(self, rank: int, rank_traceback: str):
        self.rank = rank
        self.rank_traceback = rank_traceback
        last = rank_traceback.strip().splitlines()[-1] if rank_traceback.strip() else "unknown error"
        super().__init__(f"rank {rank} failed: {last}\n\n--- traceback from rank {rank} ---\n{rank_traceback}")


class RankTimeout(TimeoutError):
    """A rank stalled (or the run passed its deadline); ``ranks`` lists the ones named, ``steps`` every rank's last step.

    A step of -1 means the rank had reported no step yet.
    """

    def __init__(self, ranks: list[int], message: str, steps: list[int] | None = None):
        self.ranks = list(ranks)
        self.steps = None if steps is None else list(steps)
        super().__init__(message)


def cpu_count() -> int:
    """The cores this process may use (the affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def resolve_backend(backend: str, k: int) -> str:
    """Turn ``auto`` into a concrete backend and check that nccl has a GPU per rank."""
    import torch

    check_choice("backend", backend, BACKENDS)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if backend == "auto":
        return "nccl" if gpus >= k else "gloo"
    if backend == "nccl" and gpus < k:
        raise ValueError(f"backend 'nccl' needs one GPU per rank, so k must be <= {gpus} GPUs on this machine; got k={k}.")
    return backend


def threads_per_rank(k: int) -> int:
    """How many intra-op threads each of k ranks gets so that together they fill the cores once."""
    return max(1, cpu_count() // k)


def report_progress(step: int) -> None:
    """Called by a worker inside a rank after each step; shows progress and tells the launcher the rank is not stuck."""
    if _state is not None:
        i = _FIELDS * _rank
        _state[i] = step
        _state[i + 1] += 1


def launch(
    worker,
    k: int,
    *,
    args: tuple = (),
    backend: str = "auto",
    stall_timeout: float | None = None,
    deadline: float | None = None,
    start_timeout: float = START_TIMEOUT,
    timeout: float | None = None,
    threads: int | None = None,
    total_steps: int | None = None,
    progress: bool = False,
) -> list:
    """Run ``worker(rank, k, *args)`` in k processes of one process group; return their results in rank order.

    ``stall_timeout`` (seconds, default 60) is how long a running rank may go
    without progress: without calling :func:`report_progress`, or, before its first
    report, after joining the group. ``start_timeout`` (default 120) is how long a
    rank may take to start and join the group. ``deadline`` (seconds, default
    None: no limit) bounds the whole run. ``timeout`` is the older name of
    ``stall_timeout``. With ``progress=True`` and ``total_steps`` set, a bar
    follows the slowest rank.
    """
    k = check_int("k", k, low=1, high=1024)
    if timeout is not None and stall_timeout is not None:
        raise TypeError("pass stall_timeout or its older name timeout, not both.")
    if timeout is not None:
        stall_timeout = check_real("timeout", timeout, low=0, low_open=True)
    else:
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
            stacklevel=2,
        )
    try:
        payload = pickle.dumps((worker, args), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:
        raise TypeError(
            f"worker and args must pickle, so worker must be a top-level function of an importable module; "
            f"pickling failed with {type(e).__name__}: {e}"
        ) from None

    _sweep_stale_dirs()
    procs = []
    bar = _progress_bar(total_steps) if progress and total_steps else None
    outdir = tempfile.mkdtemp(prefix=f"dpviz-launch-{os.getpid()}-")
    store = os.path.join(outdir, "store")  # the rendezvous: a FileStore no other run can touch
    # The process group's own timeout only has to outlast the launcher's checks, which name the culprit.
    group_timeout = max(start_timeout, stall_timeout) + stall_timeout + 30.0
    # A rank forked from the fork server has the server's environment, not ours: send ours.
    where = dict(os.environ)
    _run_started()
    with _ReapOnSigterm():
        try:
            ctx = _context()
            state = ctx.Array("q", [-1, 0, _SPAWNED] * k, lock=False)
            for rank in range(k):
                p = ctx.Process(
                    target=_rank_entry,
                    args=(os.getpid(), rank, k, backend, store, threads, group_timeout, outdir, state, payload, where),
                    name=f"dpviz-rank-{rank}",
                    daemon=True,
                )
                p.start()
                procs.append(p)
            _wait(procs, outdir, state, stall_timeout, max(start_timeout, stall_timeout), deadline, bar)
            return [_read_result(outdir, rank) for rank in range(k)]
        finally:
            if bar is not None:
                bar.close()
            _reap(procs)
            shutil.rmtree(outdir, ignore_errors=True)
            _run_ended()


def _context():
    """The multiprocessing context ranks start from: a fork server with torch imported, or plain spawn.

    Importing torch takes a rank about a second, and k ranks on 2 cores take k/2 seconds
    together: most of a short run. A fork server imports torch once, and every later rank is a
    fork of it that starts in milliseconds. The server is a helper of the launching process,
    like multiprocessing's resource tracker: it exits with that process, however it ends, and
    after FORK_SERVER_IDLE seconds with no run (or at :func:`stop_fork_server`). Set the
    environment variable DPVIZ_START_METHOD=spawn to start every rank afresh instead.
    """
    method = os.environ.get("DPVIZ_START_METHOD") or "forkserver"
    check_choice("DPVIZ_START_METHOD", method, START_METHODS)
    if method not in multiprocessing.get_all_start_methods():
        method = "spawn"  # Windows has no fork server
    ctx = multiprocessing.get_context(method)  # a local context: the global start method is left alone
    if method == "forkserver":
        ctx.set_forkserver_preload(list(FORK_SERVER_PRELOAD))
    return ctx


def start_fork_server() -> bool:
    """Start the fork server now, if this process would use one and has none; return whether one was started.

    The call returns at once: the server imports torch in the background, while this process goes
    on (importing torch itself, in a notebook). Its first run then finds the server ready. The
    idle timer starts as after a run.
    """
    import multiprocessing.forkserver as forkserver

    if multiprocessing.parent_process() is not None or getattr(multiprocessing.current_process(), "_inheriting", False):
        return False  # a rank, or a process still importing its parent's main module: not a launcher
    if _context().get_start_method() != "forkserver" or fork_server_pid() is not None:
        return False
    _run_started()
    try:
        forkserver.ensure_running()
    finally:
        _run_ended()
    return True


def start_fork_server_in_notebook() -> None:
    """In an interactive IPython session (a Jupyter kernel), start the fork server; elsewhere do nothing.

    ``dpviz.runs`` calls this when it is imported, so a chapter's first run does not wait for a second
    import of torch after the kernel's own. Scripts and the command line start the server at their
    first run instead, so a command that runs nothing starts nothing.
    """
    ipython = sys.modules.get("IPython")
    if ipython is None or getattr(ipython, "get_ipython", lambda: None)() is None:
        return
    try:
        start_fork_server()
    except Exception:  # only a head start: the first run starts the server (or reports why it cannot)
        pass


def fork_server_pid() -> int | None:
    """The process id of this process's fork server, or None when none is running."""
    import multiprocessing.forkserver as forkserver

    return getattr(forkserver._forkserver, "_forkserver_pid", None)


def is_helper_process(cmdline: str, ppid: int, owner: int) -> bool:
    """Whether a process (its command line and parent) is one of the helpers launching process ``owner`` keeps.

    Two helpers outlive a run and serve every later one, for as long as their owner lives:
    multiprocessing's resource tracker, and the fork server, a direct child of the owner. A rank
    is never one: it is a child of the fork server (or, spawned, has no such command line).
    """
    return "resource_tracker" in cmdline or ("multiprocessing.forkserver" in cmdline and ppid == owner)


def stop_fork_server() -> bool:
    """Stop this process's fork server now, unless a run is using it; return whether one was stopped."""
    import multiprocessing.forkserver as forkserver

    global _idle_timer
    with _runs_lock:
        if _runs_in_flight or fork_server_pid() is None:
            return False
        if _idle_timer is not None:
            _idle_timer.cancel()
            _idle_timer = None
        server = forkserver._forkserver
        with server._lock:
            try:
                server._stop_unlocked()  # closes the pipe the server watches, so it exits; then waits for it
            except ChildProcessError:  # someone else already waited for it
                server._forkserver_pid = None
                server._forkserver_address = None
        return True


def _run_started() -> None:
    global _runs_in_flight, _idle_timer
    with _runs_lock:
        _runs_in_flight += 1
        if _idle_timer is not None:
            _idle_timer.cancel()
            _idle_timer = None


def _run_ended() -> None:
    global _runs_in_flight, _idle_timer
    with _runs_lock:
        _runs_in_flight -= 1
        if _runs_in_flight == 0 and fork_server_pid() is not None:
            _idle_timer = threading.Timer(FORK_SERVER_IDLE, stop_fork_server)
            _idle_timer.daemon = True
            _idle_timer.start()


def _progress_bar(total):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="steps (slowest rank)", leave=False)


class _Terminated(BaseException):
    """Raised in the launching thread by SIGTERM, so that the ranks are reaped before the process ends."""


class _ReapOnSigterm:
    """While ranks run: turn a default-handled SIGTERM into an exception, reap, then end by SIGTERM as before.

    Only in the main thread, and only where nobody has set a SIGTERM handler of their own.
    """

    def __enter__(self):
        self.installed = False
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGTERM"):
            try:
                if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                    signal.signal(signal.SIGTERM, self._handler)
                    self.installed = True
            except (ValueError, OSError):
                pass
        return self

    def _handler(self, signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not interrupt the reaping
        raise _Terminated()

    def __exit__(self, kind, value, tb):
        if self.installed:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            if kind is _Terminated:
                os.kill(os.getpid(), signal.SIGTERM)  # end the way the sender meant
        return False


def _sweep_stale_dirs() -> None:
    """Remove run folders left by launching processes that were killed (a kill leaves no time to clean up)."""
    base = tempfile.gettempdir()
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    for entry in entries:
        m = re.fullmatch(r"dpviz-launch-(\d+)-\w+", entry.name)
        if not m or _pid_alive(int(m.group(1))):
            continue
        try:
            if entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.getuid():
                shutil.rmtree(entry.path, ignore_errors=True)
        except (OSError, AttributeError):
            pass


def _pid_alive(pid: int) -> bool:
    if sys.platform == "win32":
        return True  # os.kill(pid, 0) is not a probe on Windows; leave the folder
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _wait(procs, outdir, state, stall_timeout, start_allowance, deadline, bar) -> None:
    """Poll until every rank exits cleanly; raise on the first failure, on a stalled rank, or at the deadline."""
    k = len(procs)
    begin = last_poll = time.monotonic()
    seen = [0] * k  # progress count last seen, per rank
    since = [begin] * k  # when each rank last made progress, as seen here
    while True:
        failed = [r for r in range(k) if os.path.exists(_err_path(outdir, r))]
        if failed:
            # The first rank to fail usually makes its peers fail too (a broken
            # connection); report the one whose error file was written first.
            first = min(failed, key=lambda r: os.path.getmtime(_err_path(outdir, r)))
            with open(_err_path(outdir, first)) as f:
                raise RankError(first, f.read())
        codes = [p.exitcode for p in procs]
        for rank, code in enumerate(codes):
            if code not in (None, 0) and not os.path.exists(_err_path(outdir, rank)):
                time.sleep(0.2)  # give a failing rank a moment to finish writing its traceback
                if os.path.exists(_err_path(outdir, rank)):
                    break
                raise RankError(rank, f"process exited with code {code} without a Python traceback (killed, or crashed in native code)")
        if all(code == 0 for code in codes):
            return

        now = time.monotonic()
        if now - last_poll > 1.0:
            # This process itself did not run for a while (suspended, stopped, starved of CPU):
            # the ranks may not have either, so that time does not count against them.
            since = [t + (now - last_poll) for t in since]
        last_poll = now
        steps = [state[_FIELDS * r] for r in range(k)]
        phases = [state[_FIELDS * r + 2] for r in range(k)]
        for r in range(k):
            count = state[_FIELDS * r + 1]
            if count != seen[r]:
                seen[r], since[r] = count, now
        if bar is not None and min(steps) + 1 > bar.n:
            bar.update(min(steps) + 1 - bar.n)

        running = [r for r in range(k) if codes[r] is None]
        allowance = [start_allowance if phases[r] < _JOINED else stall_timeout for r in range(k)]
        if any(now - since[r] > allowance[r] for r in running):
            # Ranks waiting in a collective for a stuck peer stop reporting too; of those
            # that have been quiet a long while, the ones furthest behind are to blame.
            quiet = [r for r in running if now - since[r] > allowance[r] / 2]
            behind = min(steps[r] for r in quiet)
            named = [r for r in quiet if steps[r] == behind]
            raise RankTimeout(named, _stall_message(named, steps, phases, allowance[named[0]]), steps)
        if deadline is not None and now - begin > deadline:
            behind = min(steps[r] for r in running)
            named = [r for r in running if steps[r] == behind]
            raise RankTimeout(named, _deadline_message(named, steps, deadline), steps)
        time.sleep(0.02)


def _ranks_words(ranks) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _stall_message(named, steps, phases, seconds) -> str:
    step = steps[named[0]]
    if phases[named[0]] < _JOINED:
        where = "stuck starting up (never joined the process group)"
    elif step < 0:
        where = "stuck before its first step" if len(named) == 1 else "stuck before their first step"
    else:
        where = f"stuck after step {step}"
    return f"{_ranks_words(named)} stalled: no progress for {seconds:g} s, {where}{_others(named, steps)}."


def _deadline_message(named, steps, deadline) -> str:
    step = steps[named[0]]
    where = "having reported no step" if step < 0 else f"last at step {step}"
    return f"{_ranks_words(named)} still running at the deadline of {deadline:g} s, {where}{_others(named, steps)}."


def _others(named, steps) -> str:
    """Where the ranks that are not named got to, e.g. " (ranks 0, 1, 3 reached step 57)"."""
    groups = {}
    for r, step in enumerate(steps):
        if r not in named:
            groups.setdefault(step, []).append(r)
    if not groups:
        return ""
    parts = [
        f"{_ranks_words(ranks)} reported no step" if step < 0 else f"{_ranks_words(ranks)} reached step {step}"
        for step, ranks in sorted(groups.items(), reverse=True)
    ]
    return f" ({'; '.join(parts)})"


def _reap(procs) -> None:
    """Make sure no rank outlives the call: terminate, then kill what is left."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    end = time.monotonic() + 3.0
    for p in procs:
        p.join(max(0.0, end - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()


def _err_path(outdir: str, rank: int) -> str:
    return os.path.join(outdir, f"rank{rank}.err")


def _out_path(outdir: str, rank: int) -> str:
    return os.path.join(outdir, f"rank{rank}.pkl")


def _read_result(outdir: str, rank: int):
    with open(_out_path(outdir, rank), "rb") as f:
        return pickle.load(f)


def _write_error(outdir: str, rank: int, text: str) -> None:
    tmp = _err_path(outdir, rank) + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, _err_path(outdir, rank))


# --- inside a rank ---

def _die_with_parent(parent_pid: int) -> None:
    """Make sure this rank ends within a fraction of a second of the launching process, however that one ends.

    The rank's parent is the launcher (spawn) or the launcher's fork server, which exits the moment the
    launcher does; the OS kills the rank when that parent dies, and a thread watches the launcher too.
    """
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG: the kernel kills us when the parent dies
        except (OSError, AttributeError):
            pass
    ppid = os.getppid()
    if (ppid == 1 and parent_pid != 1) or not _pid_alive(parent_pid):  # it died before the line above took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid, ppid), name="dpviz-parent-watchdog", daemon=True).start()


def _name_process(name: str) -> None:
    """Show the rank as ``dpviz-rank-N`` in ps, top and psutil's name() (Linux), instead of one more ``python``."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
        except (OSError, AttributeError):
            pass


def _watch_parent(parent_pid: int, ppid: int) -> None:
    """Daemon thread: end the rank at once when the parent is gone (its pipe closes, or we are re-parented)."""
    parent = multiprocessing.parent_process()
    sentinel = getattr(parent, "sentinel", None)
    while True:
        if sentinel is not None:
            try:
                if multiprocessing.connection.wait([sentinel], timeout=WATCH_INTERVAL):
                    os._exit(1)
            except OSError:
                sentinel = None
        else:
            time.sleep(WATCH_INTERVAL)
        if os.getppid() != ppid or not _pid_alive(parent_pid):
            os._exit(1)


def _rank_entry(parent_pid, rank, k, backend, store, threads, group_timeout, outdir, state, payload, where) -> None:
    """Entry point of one rank: first tie its life to the launcher's, then take its environment, import and run."""
    _die_with_parent(parent_pid)
    _name_process(f"dpviz-rank-{rank}")
    if where != os.environ:  # (multiprocessing itself moves the rank to the launcher's folder)
        os.environ.clear()
        os.environ.update(where)
    global _state, _rank
    _state, _rank = state, rank
    _mark(_STARTED)
    try:
        worker, args = pickle.loads(payload)  # imports torch and the worker's module
    except BaseException:
        _write_error(
            outdir, rank,
            traceback.format_exc() + "\n(the worker must be a top-level function of a module every rank can import, "
            "not one defined in a notebook cell)\n",
        )
        os._exit(1)
    _rank_main(worker, rank, k, backend, store, threads, group_timeout, outdir, args)


def _mark(phase: int) -> None:
    i = _FIELDS * _rank
    _state[i + 2] = phase
    _state[i + 1] += 1


def _rank_main(worker, rank, k, backend, store, threads, group_timeout, outdir, args) -> None:
    """Join the group, run the worker, write its result or its traceback."""
    import torch
    import torch.distributed as dist

    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(k), OMP_NUM_THREADS=str(threads))
    torch.set_num_threads(threads)
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
        dist.init_process_group(
            backend,
            init_method=f"file://{store}",
            rank=rank,
            world_size=k,
            timeout=datetime.timedelta(seconds=group_timeout),
        )
        _mark(_JOINED)
        result = worker(rank, k, *args)
        _mark(_DONE)
        tmp = _out_path(outdir, rank) + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, _out_path(outdir, rank))
    except BaseException:
        _write_error(outdir, rank, traceback.format_exc())
        os._exit(1)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
