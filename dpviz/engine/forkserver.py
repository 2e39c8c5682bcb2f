"""The fork server ranks start from: when it starts, when it stops, and how to tell it from a rank.

Importing torch takes a rank about a second, and k ranks on 2 cores take k/2 seconds
together: most of a short run. A fork server imports torch once, and every later rank is
a fork of it that starts in milliseconds. The server is a helper of the launching process,
like multiprocessing's resource tracker: it exits with that process, however it ends, and
after FORK_SERVER_IDLE seconds with no run (or at :func:`stop_fork_server`). Set the
environment variable DPVIZ_START_METHOD=spawn to start every rank afresh instead.

Nothing starts at import. The server starts at the first run, or earlier at
:func:`warm_up`, which returns at once and lets the server import torch while the
caller goes on. multiprocessing has no public way to ask for the server's pid or to
stop it: :class:`_StdlibForkServer` is the one place that reaches into its private names.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
import sys
import threading
import warnings

from dpviz.engine.checks import check_choice

START_METHODS = ("forkserver", "spawn")  # DPVIZ_START_METHOD; forkserver is the default where the OS has one
FORK_SERVER_PRELOAD = ("numpy", "torch", "torch.distributed")  # imported once, by the fork server
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


class _StdlibForkServer:
    """This process's multiprocessing fork server, reached through the private names multiprocessing keeps it under.

    multiprocessing.forkserver offers ``ensure_running()`` but neither the server's pid nor a way to
    stop it, so these methods read and call ``multiprocessing.forkserver._forkserver``'s private state
    (as of CPython 3.11). If a Python upgrade renames it, ``missing()`` lists what is gone and
    ``tests/test_launch.py::test_the_private_fork_server_handle_finds_and_stops_the_live_server`` says so.
    """

    PRIVATE = ("_forkserver_pid", "_forkserver_address", "_lock", "_stop_unlocked")  # on the ForkServer object

    @staticmethod
    def _server():
        import multiprocessing.forkserver as forkserver

        return getattr(forkserver, "_forkserver", None)

    @classmethod
    def missing(cls) -> list[str]:
        """The private names this class uses that this Python's multiprocessing no longer has."""
        server = cls._server()
        if server is None:
            return ["multiprocessing.forkserver._forkserver"]
        return [f"multiprocessing.forkserver._forkserver.{name}" for name in cls.PRIVATE if not hasattr(server, name)]

    @classmethod
    def pid(cls) -> int | None:
        """The running server's process id, or None (none started, or stopped)."""
        return getattr(cls._server(), "_forkserver_pid", None)

    @classmethod
    def stop(cls) -> None:
        """Stop the server: close the pipe it watches, so it exits, and wait for it."""
        server = cls._server()
        with server._lock:
            try:
                server._stop_unlocked()
            except ChildProcessError:  # someone else already waited for it
                server._forkserver_pid = None
                server._forkserver_address = None


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
        ctx.set_forkserver_preload([*FORK_SERVER_PRELOAD, *_extra_preload, SERVER_EXIT])
    return ctx


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
    """The process id of this process's fork server, or None when none is running."""
    return _StdlibForkServer.pid()


def stop_fork_server() -> bool:
    """Stop this process's fork server now, unless a run is using it; return whether one was stopped."""
    global _idle_timer
    with _runs_lock:
        if _runs_in_flight or fork_server_pid() is None:
            return False
        if _idle_timer is not None:
            _idle_timer.cancel()
            _idle_timer = None
        _StdlibForkServer.stop()
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
