"""The browser tests' way of starting a server: a logged URL is not a listening port.

Jupyter Server 2.x logs its URL before its event loop binds the port, and a port that :func:`free_port` found free
can be taken by another process before the server binds it. CI once failed every chapter on the first of these
(connection refused right after the URL appeared). These tests stand in for the server with a small Python program
that does each thing on purpose.
"""

from __future__ import annotations

import socket
import sys
import textwrap
import time

import pytest

from browser_support import ServerExited, start_listening

# A server that logs its URL, waits, then listens: the order Jupyter Server uses, with the gap made long.
LATE_BINDER = textwrap.dedent("""
    import socket, sys, time
    port = int(sys.argv[1])
    print(f"running at http://127.0.0.1:{port}/lab", flush=True)
    time.sleep(0.5)
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.listen()
    time.sleep(60)
""")

# The first start finds its port taken (as Jupyter Server says it) and exits; later starts listen.
TAKEN_ONCE = textwrap.dedent("""
    import pathlib, socket, sys, time
    port, marker = int(sys.argv[1]), pathlib.Path(sys.argv[2])
    print(f"running at http://127.0.0.1:{port}/lab", flush=True)
    if not marker.exists():
        marker.write_text("tried")
        print(f"The port {port} is already in use.", flush=True)
        sys.exit(1)
    s = socket.socket(); s.bind(("127.0.0.1", port)); s.listen()
    time.sleep(60)
""")

BROKEN = 'import sys; print("running at http://127.0.0.1:" + sys.argv[1] + "/lab", flush=True); sys.exit(3)'


def _start(tmp_path, program, *extra):
    return start_listening("stand-in", lambda port: [sys.executable, "-c", program, str(port), *extra],
                           lambda port: rf"http://127\.0\.0\.1:{port}/lab", cwd=tmp_path, env=None,
                           log=tmp_path / "server.log", timeout=20)


def test_waits_for_the_port_not_just_the_log(tmp_path):
    start = time.monotonic()
    server, port, _ = _start(tmp_path, LATE_BINDER)
    try:
        assert time.monotonic() - start >= 0.5, "start_listening returned before the stand-in bound its port"
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    finally:
        assert server.stop() == []


def test_a_port_taken_in_the_meantime_gets_a_new_start(tmp_path):
    server, port, _ = _start(tmp_path, TAKEN_ONCE, str(tmp_path / "tried"))
    try:
        assert (tmp_path / "tried").exists(), "the first start did not run"
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    finally:
        assert server.stop() == []


def test_a_server_that_dies_is_reported_with_its_log(tmp_path):
    with pytest.raises(ServerExited, match=r"stand-in exited with code 3 before it did listen on port \d+"):
        _start(tmp_path, BROKEN)
