"""Shared test set-up: an off-screen matplotlib, and a check that no test leaves a rank running."""

import matplotlib

matplotlib.use("Agg")

import os  # noqa: E402

import psutil  # noqa: E402
import pytest  # noqa: E402

from dpviz.runs.launch import is_helper_process  # noqa: E402


def live_children(pid: int | None = None):
    """The descendants of ``pid`` (default: this process) that are still running, its launch helpers excepted
    (:func:`dpviz.runs.launch.is_helper_process`: the resource tracker and the fork server, which live as long as it)."""
    owner = os.getpid() if pid is None else pid
    alive = []
    try:
        children = psutil.Process(owner).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    for p in children:
        try:
            if p.status() != psutil.STATUS_ZOMBIE and not is_helper_process(" ".join(p.cmdline()), p.ppid(), owner):
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return alive


@pytest.fixture(scope="session")
def wheel_python(tmp_path_factory):
    """The python of a fresh environment holding the wheel built from this checkout (built once per session)."""
    from wheel_support import install_wheel

    return install_wheel(tmp_path_factory.mktemp("wheel-install"))


@pytest.fixture(scope="session")
def book_build(tmp_path_factory):
    """One full build of the book (``book/build.py --clean``, as ``./run book`` makes it) for the whole session,
    from notebooks/ or DPVIZ_BOOK_NOTEBOOKS: the finished process (its output), its site folder and its wall time."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    notebooks = Path(os.environ.get("DPVIZ_BOOK_NOTEBOOKS", root / "notebooks")).resolve()
    base = tmp_path_factory.mktemp("book")
    out = base / "site"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(root / "book" / "build.py"), "--out", str(out), "--work", str(base / "work"),
                           "--clean", "--notebooks", str(notebooks)], cwd=root, capture_output=True, text=True, timeout=900)
    proc.site, proc.wall = out, time.perf_counter() - start
    return proc


@pytest.fixture
def no_leftover_processes():
    """Fails the test if it leaves any child process behind."""
    before = {p.pid for p in live_children()}
    yield
    left = [p for p in live_children() if p.pid not in before]
    assert not left, f"processes left running: {[(p.pid, p.name()) for p in left]}"
