"""The fork server leaves with its launcher even while it is still importing torch.

multiprocessing's fork server learns of its launcher's death in its serving loop only (the pipe it watches closes),
and it enters that loop after importing everything it preloads: torch, 1 to 2 s on a quiet 2-core machine and 9 to
13 s on a busy one, during which a killed launcher's server lived on. The fork server imports this module first
(:data:`dpviz.engine.forkserver.SERVER_START`): it starts a thread that ends the server with ``os._exit`` the moment
the server's parent is gone (the server is handed to another parent), within WATCH_INTERVAL. The thread runs only
while the server imports: :mod:`dpviz.engine.server_exit`, imported last, stops it (:func:`stop_watching`), so the
serving loop, which forks the ranks, runs in a process of one thread, where forking is safe. Imported anywhere but
inside the fork server's start, this module does nothing: the server is told by its command line
(:func:`started_as_fork_server`).
"""

from __future__ import annotations

import os
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


def _watch(parent: int) -> None:
    while not _stop.wait(WATCH_INTERVAL):
        if os.getppid() != parent:
            os._exit(1)  # the launcher is gone: nothing of the server's is worth finishing


def stop_watching() -> None:
    """End the watch (the server is about to serve, and watches its launcher's pipe itself from now on)."""
    global _watcher
    if _watcher is not None:
        _stop.set()
        _watcher.join()
        _watcher = None


if started_as_fork_server(sys.orig_argv):
    _watcher = threading.Thread(target=_watch, args=(os.getppid(),), name="dpviz-server-watch", daemon=True)
    _watcher.start()
