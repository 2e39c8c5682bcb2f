"""Shared test set-up: an off-screen matplotlib, and a check that no test leaves a rank running."""

import matplotlib

matplotlib.use("Agg")

import os  # noqa: E402

import psutil  # noqa: E402
import pytest  # noqa: E402


def is_launch_helper(p: psutil.Process, owner: int) -> bool:
    """Whether ``p`` is one of the two helpers a launching process (pid ``owner``) keeps between runs.

    The first run in a process starts multiprocessing's resource tracker and the
    launcher's fork server (torch imported once; every rank is a fork of it). Both
    live as long as their owner (the kernel) and serve every later run. A rank is
    never one of them: it is named ``dpviz-rank-N`` and is a child of the fork
    server, not of the owner.
    """
    cmd = " ".join(p.cmdline())
    if "resource_tracker" in cmd:
        return True
    return "multiprocessing.forkserver" in cmd and p.ppid() == owner and not p.name().startswith("dpviz-rank")


def live_children(pid: int | None = None):
    """The descendants of ``pid`` (default: this process) that are still running, its two launch helpers excepted."""
    owner = os.getpid() if pid is None else pid
    alive = []
    try:
        children = psutil.Process(owner).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    for p in children:
        try:
            if p.status() != psutil.STATUS_ZOMBIE and not is_launch_helper(p, owner):
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return alive


@pytest.fixture
def no_leftover_processes():
    """Fails the test if it leaves any child process behind."""
    before = {p.pid for p in live_children()}
    yield
    left = [p for p in live_children() if p.pid not in before]
    assert not left, f"processes left running: {[(p.pid, p.name()) for p in left]}"
