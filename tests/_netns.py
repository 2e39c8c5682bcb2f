"""Two "machines" on one host for the cluster test: two network namespaces joined by a veth pair.

Each namespace has its own loopback and one interface, ``dpv0``, with its own address
(``10.231.N.1`` and ``10.231.N.2``), so a torchrun agent started in one cannot reach the
other through loopback: only through ``dpv0``, as on a real cluster. Everything started in
a namespace is ended by PID (``ip netns pids``) and the namespaces are deleted on exit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = REPO / ".venv" / "bin" / "python"
if not PYTHON.exists():
    PYTHON = Path(sys.executable)
IFNAME = "dpv0"  # the same interface name on every machine, as a lab's GLOO_SOCKET_IFNAME assumes


@dataclass
class Machine:
    name: str     # the network namespace
    address: str  # its address on dpv0


def _ip(*args, timeout=10):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=timeout)


def refusal() -> str | None:
    """Why this machine cannot make network namespaces (one sentence), or None when it can."""
    if os.geteuid() != 0:
        return "network namespaces need root, and this test runs as an ordinary user."
    probe = f"dpvprobe{os.getpid()}"
    try:
        made = _ip("netns", "add", probe)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"`ip netns add` could not run here ({e})."
    if made.returncode:
        return f"this machine refuses network namespaces (`ip netns add`: {made.stderr.strip()})."
    _ip("netns", "del", probe)
    return None


@contextlib.contextmanager
def two_machines():
    """Yield two :class:`Machine`s joined by a veth pair; on exit end every process in them and delete them."""
    tag = f"{os.getpid() % 10_000}x{time.monotonic_ns() % 1000}"
    subnet = 1 + os.getpid() % 250
    machines = [Machine(f"dpv{tag}n{i}", f"10.231.{subnet}.{i + 1}") for i in range(2)]
    made = []
    try:
        for m in machines:
            _check(_ip("netns", "add", m.name))
            made.append(m)
        a, b = machines
        _check(_ip("link", "add", IFNAME, "netns", a.name, "type", "veth", "peer", "name", IFNAME, "netns", b.name))
        for m in machines:
            _check(_ip("-n", m.name, "addr", "add", f"{m.address}/24", "dev", IFNAME))
            _check(_ip("-n", m.name, "link", "set", "lo", "up"))  # down in a fresh namespace
            _check(_ip("-n", m.name, "link", "set", IFNAME, "up"))
        yield machines
    finally:
        for m in made:
            end_everything_in(m)
            _ip("netns", "del", m.name)


def _check(done: subprocess.CompletedProcess) -> None:
    if done.returncode:
        raise RuntimeError(f"`{' '.join(done.args)}` failed: {done.stderr.strip()}")


def pids_in(machine: Machine) -> list[int]:
    listed = _ip("netns", "pids", machine.name)
    return [int(p) for p in listed.stdout.split()] if listed.returncode == 0 else []


def end_everything_in(machine: Machine, *, grace: float = 3.0) -> list[int]:
    """SIGTERM, then SIGKILL, every process in ``machine``'s namespace (all started by this test); returns them."""
    found = pids_in(machine)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids_in(machine):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while pids_in(machine) and time.monotonic() < deadline:
            time.sleep(0.1)
    return found


def start_agent(machine: Machine, args: list[str], *, env: dict, log: Path) -> subprocess.Popen:
    """Start ``python -m torch.distributed.run ARGS`` in ``machine``'s namespace, its output going to ``log``."""
    full_env = {**os.environ, **env}
    with open(log, "wb") as out:
        return subprocess.Popen(["ip", "netns", "exec", machine.name, str(PYTHON), "-m", "torch.distributed.run", *args],
                                cwd=REPO, env=full_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
