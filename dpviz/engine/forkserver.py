"""The fork server ranks start from: when it starts, when it stops, and how to tell it from a rank.

Importing torch takes a rank about a second, and k ranks on 2 cores take k/2 seconds
together: most of a short run. A fork server imports torch once, and every later rank is
a fork of it that starts in milliseconds. The server is a helper of the launching process,
like multiprocessing's resource tracker: it exits with that process, however it ends, and
after FORK_SERVER_IDLE seconds with no run (or at :func:`stop_fork_server`). Set the
environment variable DPVIZ_START_METHOD=spawn to start every rank afresh instead.

Nothing starts at import. The server starts at the first run, or earlier at
:func:`warm_up`, which returns at once and lets the server import torch while the
caller goes on. Everything here is multiprocessing's public API: ``get_context``,
``set_forkserver_preload`` and ``forkserver.ensure_running()``. multiprocessing does not
say which process is the server nor offer to stop it, so the server is found as this
process's child with the fork server's command line, and stopped by SIGTERM; the next
``ensure_running()`` sees it dead and starts another (as it does after any crash).

Why not ``torch.multiprocessing.start_processes``: it would make the launching kernel
import torch (a chapter's kernel never does, tests/test_torch_free_kernel.py), it sets
no preload for a fork server, and its ranks' parent-death signal is SIGINT, which a
rank may catch; the launcher starts processes from a multiprocessing context instead.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
import signal
import sys
import threading
import time
import warnings

from dpviz.engine.checks import check_choice
from dpviz.engine.server_start import SERVER_COMMAND, started_as_fork_server

START_METHODS = ("forkserver", "spawn")  # DPVIZ_START_METHOD; forkserver is the default where the OS has one
FORK_SERVER_PRELOAD = ("numpy", "torch", "torch.distributed")  # imported once, by the fork server
SERVER_START = "dpviz.engine.server_start"  # imported by the server before all the others: it leaves with its launcher
SERVER_EXIT = "dpviz.engine.server_exit"  # imported by the server after all the others: it then leaves at once at its end
# What torch imports, with sympy, the first time a process calls backward with a given gradient (a pipeline
# stage's out.backward(grad_out), tensor parallelism's y.backward(dy)): 0.6-0.8 s of each such rank's first
# step on 2 cores. warm_up(backward_with_gradient=True) has the server import it once for all its ranks, for
# about 40 MB more in the server (and so in an idle chapter's memory), which the ranks then share.
BACKWARD_WITH_GRADIENT = ("torch.fx.experimental.symbolic_shapes",)
FORK_SERVER_IDLE = 600.0  # seconds without a run after which the fork server exits
# The longest path a Unix socket address holds (sun_path less its closing NUL): the fork server's socket is
# multiprocessing's folder in TMPDIR plus "/listener-" and 8 characters.
UNIX_SOCKET_BYTES = 107 if sys.platform.startswith("linux") else 103

_extra_preload: list = []  # modules warm_up was asked to add to FORK_SERVER_PRELOAD for the next server
_runs_lock = threading.Lock()
_runs_in_flight = 0
_idle_timer = None
_server_pid = None  # the fork server fork_server_pid() found, kept while it runs
STOP_GRACE = 2.0  # seconds the fork server has to leave on SIGTERM before SIGKILL
SERVER_FOUND_WITHIN = 2.0  # seconds start_fork_server waits for the new server to show its command line


# --- the server's pid and its stop: public calls only ---

def _children(pid: int | None = None) -> list[int]:
    """The child processes of ``pid`` (of this process by default), every thread's: Linux's /proc, elsewhere ``ps``."""
    parent = os.getpid() if pid is None else pid
    if os.path.isdir("/proc/self/task"):
        try:
            tids = os.listdir(f"/proc/{parent}/task")
        except OSError:  # it has exited
            return []
        pids, readable = [], False
        for tid in tids:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    pids.extend(int(p) for p in f.read().split())
                readable = True
            except OSError:  # a thread that ended while we read: its children are another thread's now
                continue
        if readable:
            return pids
        for entry in os.listdir("/proc"):  # a kernel without .../children files: every process's parent
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if entry.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == parent:
                        pids.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
        return pids
    import subprocess

    try:
        out = subprocess.run(["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = [line.split() for line in out.splitlines()]
    return [int(row[0]) for row in rows if len(row) == 2 and row[1] == str(parent)]


def descendants(pid: int) -> list[int]:
    """Every process descended from ``pid``: its children, theirs and so on, each parent before its children.

    Read it while ``pid`` lives: once it ends, its children pass to init (or a subreaper) and no chain of parents
    leads from them back to it. Processes that may fork meanwhile should be stopped first (SIGSTOP), as Linux
    documents the children lists as exact only then."""
    found = _children(pid)
    for parent in found:  # the list grows as it is read: a breadth-first walk
        found += [child for child in _children(parent) if child != pid and child not in found]
    return found


def _command_line(pid: int) -> list[str]:
    """A process's command line (empty once it has exited): Linux's /proc, elsewhere ``ps``."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [arg.decode(errors="replace") for arg in f.read().split(b"\0")[:-1]]
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return []
    except OSError:
        return []
    import subprocess

    try:
        out = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    return out.stdout.split()  # enough to find "-c" and the words of multiprocessing's command


def _is_fork_server(pid: int) -> bool:
    line = _command_line(pid)
    return started_as_fork_server(line) or SERVER_COMMAND in " ".join(line[1:])


def _running(pid: int) -> bool:
    """Whether child ``pid`` has not exited. ``os.waitid`` with WNOWAIT looks without reaping it: multiprocessing's
    ``ensure_running()`` reaps a dead server itself, and fails on one reaped by someone else."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:  # not (or no longer) a child of ours
        return False


def server_end(pid: int) -> str | None:
    """How fork server ``pid`` (a child of this process) ended, in words, or None while it runs; it is not reaped."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return "ended"
    if info is None:
        return None
    if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
        try:
            name = signal.Signals(info.si_status).name
        except ValueError:
            name = f"signal {info.si_status}"
        return f"was killed by {name}"
    return f"exited with code {info.si_status}"


def _stop(pid: int) -> None:
    """End the fork server with SIGTERM and wait until it has exited, without reaping it.

    It has nothing to save (its ranks are forks that leave by ``os._exit``) and a signal skips the interpreter's
    finalization, as :mod:`dpviz.engine.server_exit` does at its other ends. The exited server stays a zombie
    until the next run, whose ``ensure_running()`` reaps it and starts a new one (or until this process ends).
    """
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    end = time.monotonic() + STOP_GRACE
    while _running(pid):
        if time.monotonic() > end:  # a preloaded module caught SIGTERM
            os.kill(pid, signal.SIGKILL)
            end = float("inf")
        time.sleep(0.002)


def _context():
    """The multiprocessing context ranks start from: a fork server with torch imported, or plain spawn."""
    method = os.environ.get("DPVIZ_START_METHOD") or "forkserver"
    check_choice("DPVIZ_START_METHOD", method, START_METHODS)
    if method not in multiprocessing.get_all_start_methods():
        method = "spawn"  # Windows has no fork server
    ctx = multiprocessing.get_context(method)  # a local context: the global start method is left alone
    if method == "forkserver":
        if fork_server_pid() is None:
            _check_socket_room()
        ctx.set_forkserver_preload(preload_modules())
    return ctx


def preload_modules() -> list[str]:
    """What a fork server started now imports: SERVER_START first, FORK_SERVER_PRELOAD, what warm_up added, and
    SERVER_EXIT last."""
    return [SERVER_START, *FORK_SERVER_PRELOAD, *_extra_preload, SERVER_EXIT]


def _check_socket_room() -> None:
    """Before a fork server starts: raise, naming TMPDIR, if its socket's path would not fit a Unix socket address
    (multiprocessing's own error, "AF_UNIX path too long", names neither the variable nor a way out)."""
    folder = multiprocessing.util.get_temp_dir()  # made once per process, in TMPDIR; multiprocessing reuses it
    length = len(os.fsencode(os.path.join(folder, "listener-" + 8 * "x")))
    if length > UNIX_SOCKET_BYTES:
        raise ValueError(
            f"TMPDIR must be a folder with a shorter path: the fork server's socket would be {length} bytes long "
            f"({folder}/listener-...), and a Unix socket's path holds at most {UNIX_SOCKET_BYTES}; set TMPDIR to a "
            "short folder such as /tmp, or DPVIZ_START_METHOD=spawn to start ranks without a fork server."
        )


def start_fork_server() -> bool:
    """Start the fork server now, if this process would use one and has none; return whether one was started.

    The call returns at once: the server imports torch in the background while this process goes
    on. Its first run then finds the server ready. The idle timer starts as after a run.
    """
    import multiprocessing.forkserver as forkserver

    if multiprocessing.parent_process() is not None or multiprocessing.current_process().name != "MainProcess":
        return False  # a rank, or a child still importing its parent's main module (named already): not a launcher
    if _context().get_start_method() != "forkserver" or fork_server_pid() is not None:
        return False
    _run_started()
    try:
        forkserver.ensure_running()
        # ensure_running() returns once the server is forked, maybe before it has exec'd Python, when its command
        # line, by which fork_server_pid() knows it, is still this process's: a few milliseconds
        end = time.monotonic() + SERVER_FOUND_WITHIN
        while fork_server_pid() is None and time.monotonic() < end:
            time.sleep(0.001)
    finally:
        _run_ended()
    return True


def warm_up(*, backward_with_gradient: bool = False, preload: tuple = ()) -> None:
    """Start the fork server in the background, so that the first run finds torch imported there.

    A chapter's set-up cell calls this: while the student reads, the server imports torch, and the
    first live run starts its ranks in milliseconds instead of waiting a second or two for that
    import. It returns at once, and does nothing where a server runs already or ranks are spawned
    (DPVIZ_START_METHOD=spawn). Only a head start: if the server cannot start now, a warning says
    why and the first run tries again (and raises what stops it).

    ``backward_with_gradient=True``, for a chapter whose ranks call ``backward`` with a given gradient
    (pipeline stages, tensor parallelism), has the server also import :data:`BACKWARD_WITH_GRADIENT`,
    which each such rank would otherwise import on its first step. ``preload`` names more modules for the
    server to import, for a caller that knows which workers its runs will start (``./run``: every recipe's;
    each rank would otherwise import its worker's modules afresh, about 0.1-0.3 s a rank). Both apply to a
    server not yet started.
    """
    if not isinstance(backward_with_gradient, bool):
        raise TypeError(f"backward_with_gradient must be True or False; got {backward_with_gradient!r}.")
    if isinstance(preload, str) or not all(isinstance(m, str) for m in preload):
        raise TypeError(f"preload must be a list of module names; got {preload!r}.")
    wanted = [*(BACKWARD_WITH_GRADIENT if backward_with_gradient else ()), *preload]
    _extra_preload.extend(m for m in dict.fromkeys(wanted) if m not in _extra_preload)
    try:
        start_fork_server()
    except Exception as e:  # noqa: BLE001 - shown in the warning; the first run raises it properly
        warnings.warn(f"the fork server did not start ahead of the first run ({type(e).__name__}: {e}); "
                      f"the first run will start it.", stacklevel=2)


def fork_server_pid() -> int | None:
    """The process id of this process's fork server, or None when none is running.

    multiprocessing keeps the pid to itself (under a private name), so it is found in public: the fork server is
    the child of this process whose command line is multiprocessing's ``from multiprocessing.forkserver import
    main`` (there is one per process), and a server found once is kept while ``os.waitid`` says it runs.
    """
    global _server_pid
    if not hasattr(os, "waitid"):  # Windows: no fork server
        return None
    pid = _server_pid
    if pid is not None and _running(pid):  # (no longer its command line: a server that is exiting has none)
        return pid
    _server_pid = next((p for p in _children() if _running(p) and _is_fork_server(p)), None)
    return _server_pid


def stop_fork_server() -> bool:
    """Stop this process's fork server now, unless a run is using it; return whether one was stopped."""
    global _idle_timer
    with _runs_lock:
        pid = fork_server_pid()
        if _runs_in_flight or pid is None:
            return False
        if _idle_timer is not None:
            _idle_timer.cancel()
            _idle_timer = None
        _stop(pid)
        return True


def is_helper_process(cmdline: str, ppid: int, owner: int) -> bool:
    """Whether a process (its command line and parent) is one of the helpers launching process ``owner`` keeps.

    Two helpers outlive a run and serve every later one, for as long as their owner lives:
    multiprocessing's resource tracker, and the fork server, a direct child of the owner. A rank
    is never one: it is a child of the fork server (or, spawned, has no such command line).
    """
    return "resource_tracker" in cmdline or ("multiprocessing.forkserver" in cmdline and ppid == owner)


# --- the idle timer: runs in flight keep the server, FORK_SERVER_IDLE seconds without one stop it ---

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
