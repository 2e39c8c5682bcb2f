"""Shared test set-up: an off-screen matplotlib, and a check that no test leaves a rank running."""

import matplotlib

matplotlib.use("Agg")

import os  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import psutil  # noqa: E402
import pytest  # noqa: E402

from dpviz.engine.forkserver import is_helper_process  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# With pytest-xdist (`./run test` runs 3 workers: `-n 3` in pyproject.toml; `-n 0` for one process) each group below goes to one worker,
# whole and in order (GroupScheduling): every file is a group of its own (a notebook's cells share one kernel and run in order; a
# module's fixtures are built once), except the files that share a session fixture, which share a worker. Groups
# go out longest first, as measured on 2 cores, so that no long one starts last.
SHARED_FIXTURE = {"test_browser.py": "wheel", "test_wheel.py": "wheel"}  # wheel_python: one wheel built
LONGEST_FIRST = ("wheel", "tests/test_colab_versions.py", "tests/test_rerecorded.py", "tests/test_grading.py",
                 "tests/test_book.py", "tests/test_classroom.py", "tests/test_launch.py", "tests/test_figure_text.py",
                 "tests/test_figures.py", "tests/test_busy_machine.py", "tests/test_cluster.py", "tests/test_slurm.py",
                 "tests/test_hub.py")
# Written by the modules that share a session fixture; the controller prints them, which the workers cannot.
WORKER_SUMMARIES = {"browser test (test-output/browser/)": ROOT / "test-output" / "browser" / "timing.txt",
                    "book (test-output/book/)": ROOT / "test-output" / "book" / "summary.txt"}


def group_of(nodeid: str) -> str:
    path = nodeid.split("::")[0]
    return SHARED_FIXTURE.get(Path(path).name, path)


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the files run in their usual order
    rank = {group: i for i, group in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(group_of(item.nodeid), len(rank)))  # stable: files keep their order


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's, called only where it runs
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """xdist's scope scheduling, its scopes the groups of :func:`group_of`, in the order they were collected."""

        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)


def pytest_configure(config):
    config.dpviz_started = time.time()


def pytest_terminal_summary(terminalreporter, config):
    if not config.pluginmanager.has_plugin("dsession"):
        return  # no workers: each module printed its own section
    for title, path in WORKER_SUMMARIES.items():
        if path.is_file() and path.stat().st_mtime >= config.dpviz_started:
            terminalreporter.section(title)
            for line in path.read_text().splitlines():
                terminalreporter.write_line(line)


def live_children(pid: int | None = None):
    """The descendants of ``pid`` (default: this process) that are still running, its launch helpers excepted
    (:func:`dpviz.engine.launch.is_helper_process`: the resource tracker and the fork server, which live as long as it)."""
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


@pytest.fixture(autouse=True)
def _self_study_verdicts():
    """Each test starts in self-study mode and leaves it so: a graded release's tests cell, run in this process by a
    test, sets graded mode (dpviz.engine.verdict.GRADED_VARIABLE) for the process, and later verdicts, those of a
    module's fixture set up between two tests included, would lose their hints. (Not monkeypatch: its delenv of a
    variable that is absent puts nothing back afterwards.)"""
    from dpviz.engine.verdict import GRADED_VARIABLE

    os.environ.pop(GRADED_VARIABLE, None)
    yield
    os.environ.pop(GRADED_VARIABLE, None)
