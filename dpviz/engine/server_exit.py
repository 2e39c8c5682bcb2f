"""The fork server leaves at once when it ends, without tearing down an interpreter that imported torch.

The fork server imports this module last (:data:`dpviz.engine.forkserver.SERVER_EXIT`). When its launcher
dies, or closes the pipe the server watches (:func:`dpviz.engine.forkserver.stop_fork_server`, the idle timer),
multiprocessing's server loop raises SystemExit, and the interpreter then finalizes: with torch imported, that took
0.8 s on a quiet 2-core machine and 5.9 s on a busy one, where nothing a cell started may outlive it by 5 s. The
server holds no file or buffer of its own to write (its ranks are forks that leave through ``os._exit``, and the
resource tracker cleans up after all of them), so at exit it flushes its two streams and leaves with ``os._exit(0)``,
the status its SystemExit would have given. Imported anywhere but inside the fork server's start, it does nothing.
"""

from __future__ import annotations

import atexit
import os
import sys


def _in_fork_server_start() -> bool:
    """Whether this import runs inside ``multiprocessing.forkserver.main``: the server importing its preload list."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "main" and frame.f_globals.get("__name__") == "multiprocessing.forkserver":
            return True
        frame = frame.f_back
    return False


def _leave_now(server_pid: int) -> None:
    if os.getpid() != server_pid:  # a fork of the server that ran its exit handlers: leave it to them
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    os._exit(0)


if _in_fork_server_start():
    atexit.register(_leave_now, os.getpid())  # registered last, so it runs first: torch's own handlers are skipped
