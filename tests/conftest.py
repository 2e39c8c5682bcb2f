"""Shared test set-up: an off-screen matplotlib, and a check that no test leaves a rank running."""

import matplotlib

matplotlib.use("Agg")

import psutil  # noqa: E402
import pytest  # noqa: E402


def live_children():
    """This process's descendants that are still running.

    Zombies do not count, nor does multiprocessing's resource tracker: the first
    ``spawn`` in a process starts that one helper, which lives as long as the
    parent (the kernel) and is shared by every later launch.
    """
    alive = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(p.cmdline()):
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
