"""The fork server leaves at once when it ends, without tearing down an interpreter that imported torch.

The fork server imports this module last (:data:`dpviz.engine.forkserver.SERVER_EXIT`). When its launcher dies, the
pipe the server watches closes, multiprocessing's server loop raises SystemExit, and the interpreter then finalizes:
with torch imported, that took 0.8 s on a quiet 2-core machine and 5.9 s on a busy one, where nothing a cell started
may outlive it by 5 s. The server holds no file or buffer of its own to write (its ranks are forks that leave through
``os._exit``, and the resource tracker cleans up after all of them), so at exit it flushes its two streams and leaves
with ``os._exit(0)``, the status its SystemExit would have given. (:func:`dpviz.engine.forkserver.stop_fork_server`
and the idle timer end the server with SIGTERM, which finalizes nothing.) Imported anywhere but inside the fork
server's start, it does nothing: the server is told by its command line (:func:`started_as_fork_server`). Its
import also ends the watch :mod:`dpviz.engine.server_start` kept while the server imported.
"""

from __future__ import annotations

import atexit
import os
import sys

from dpviz.engine.server_start import SERVER_COMMAND, started_as_fork_server, stop_watching  # noqa: F401


def _leave_now(server_pid: int) -> None:
    if os.getpid() != server_pid:  # a fork of the server that ran its exit handlers: leave it to them
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    os._exit(0)


if started_as_fork_server(sys.orig_argv):
    stop_watching()  # the preload is imported: the serving loop watches the launcher from now on
    atexit.register(_leave_now, os.getpid())  # registered last, so it runs first: torch's own handlers are skipped
