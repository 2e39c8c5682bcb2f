"""The fork server leaves with its launcher even while it is still importing torch.

multiprocessing's fork server learns of its launcher's death in its serving loop only (the pipe it watches closes),
and it enters that loop after importing everything it preloads: torch, 1 to 2 s on a quiet 2-core machine and 9 to
13 s on a busy one, during which a killed launcher's server lived on. The fork server imports this module first
(:data:`dpviz.engine.forkserver.SERVER_START`): it starts a thread that ends the server with ``os._exit`` the moment
the launcher is gone (the pipe the server's serving loop will watch reads end of file, or the server is handed to
another parent), within WATCH_INTERVAL, and at once if the launcher died before the server got this far. The thread
runs only while the server imports: :mod:`dpviz.engine.server_exit`, imported last, stops it (:func:`stop_watching`),
so the serving loop, which forks the ranks, runs in a process of one thread, where forking is safe.

A thread cannot act while the import holds the interpreter's lock (loading torch's shared libraries: seconds on a
busy machine), so the server also asks the kernel to kill it when its parent dies (Linux's PR_SET_PDEATHSIG, through
:func:`dpviz.engine.private.die_with_parent`, as a rank does), but only when the launcher's main thread started it:
the kernel sends that signal when the starting *thread* ends, and a launcher's other threads may end long before it
does. Imported anywhere but inside the fork server's start, this module does nothing: the server is told by its
command line (:func:`started_as_fork_server`).
"""

from __future__ import annotations

import os
import re
import select
import sys
import threading

SERVER_COMMAND = "from multiprocessing.forkserver import main"  # how multiprocessing starts its fork server (-c)
WATCH_INTERVAL = 0.05  # seconds between the importing server's looks at its parent

_stop = threading.Event()
_watcher = None


def started_as_fork_server(argv: list[str]) -> bool:
    """Whether a process started with command line ``argv`` (``sys.orig_argv``) is multiprocessing's fork server.

    multiprocessing starts the server as ``python [flags] -c "...from multiprocessing.forkserver import main;
    main(...)" [the launcher's argv, in newer Pythons]``; ``sys.orig_argv`` (public, Python 3.10+) is that line.
    A rank forked from the server has the same command line, but has this module already imported: its
    import, and so this check, runs once, in the server, while it imports its preload list.
    """
    if "-c" not in argv[1:]:
        return False
    command = argv.index("-c", 1) + 1
    return command < len(argv) and SERVER_COMMAND in argv[command]


def _launcher_pipe(argv: list[str]) -> int | None:
    """The descriptor of the pipe through which the fork server learns that its launcher is gone (it reads end of
    file once the launcher has exited), read from the server's command line ``main(listener, alive, ...)``."""
    command = argv[argv.index("-c", 1) + 1]
    found = re.search(r"main\((\d+), (\d+)", command)
    return int(found.group(2)) if found else None


def _launcher_gone(pipe: int | None, parent: int) -> bool:
    """Whether the launcher has exited: its end of the pipe is closed (readable here), or this process has another
    parent than the one it had."""
    if pipe is not None:
        try:
            if select.select([pipe], [], [], 0)[0]:
                return True
        except (OSError, ValueError):
            pass
    return os.getppid() != parent


def _watch(pipe: int | None, parent: int) -> None:
    while not _stop.wait(WATCH_INTERVAL):
        if _launcher_gone(pipe, parent):
            os._exit(1)  # the launcher is gone: nothing of the server's is worth finishing


def stop_watching() -> None:
    """End the watch (the server is about to serve, and watches its launcher's pipe itself from now on)."""
    global _watcher
    if _watcher is not None:
        _stop.set()
        _watcher.join()
        _watcher = None


def _started_by_main_thread(parent: int) -> bool:
    """Whether this process is a child of ``parent``'s main thread (Linux's /proc/PID/task/PID/children)."""
    try:
        with open(f"/proc/{parent}/task/{parent}/children") as f:
            return str(os.getpid()) in f.read().split()
    except OSError:
        return False


if started_as_fork_server(sys.orig_argv):
    _pipe, _parent = _launcher_pipe(sys.orig_argv), os.getppid()
    if _started_by_main_thread(_parent):
        import signal

        from dpviz.engine import private

        private.die_with_parent(signal.SIGKILL)
    if _launcher_gone(_pipe, _parent):  # it died before this module ran (a busy machine starts Python slowly)
        os._exit(1)
    _watcher = threading.Thread(target=_watch, args=(_pipe, _parent), name="dpviz-server-watch", daemon=True)
    _watcher.start()
