"""Classroom-grade runs: no rank outlives its parent, stalls are named, runs started together do not race.

The parent-death tests start a real launching process (a ``python -c`` child, or a
Jupyter kernel), wait for its ranks, kill it, and require every rank gone within
5 s (the target is 2 s; each test prints what it measured).
"""

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from glob import glob
from pathlib import Path

import psutil
import pytest

import _workers
from conftest import live_children
from dpviz import cli
from dpviz.engine import launch as launcher
from dpviz.engine.supervise import RankTimeout
from dpviz.engine.launch import launch

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
GONE_WITHIN = 5.0  # seconds allowed after the parent's death (target 2 s)


# --- helpers ---

def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def ranks_of(pid: int) -> list[psutil.Process]:
    """The live rank processes started under ``pid``: each names itself ``dpviz-rank-N`` as it starts."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    ranks = []
    for p in children:
        try:
            if p.name().startswith("dpviz-rank-") and _alive(p):
                ranks.append(p)
        except psutil.Error:
            continue
    return ranks


def wait_for(predicate, timeout: float, what: str, interval: float = 0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def has_torch(p: psutil.Process) -> bool:
    """Whether a rank has torch loaded, that is: it is past its imports."""
    try:
        return any("libtorch" in m.path for m in p.memory_maps())
    except psutil.Error:
        return False


def time_until_gone(processes: list[psutil.Process], limit: float = GONE_WITHIN + 5) -> float:
    """Seconds until none of ``processes`` runs (a zombie counts as gone); kills survivors after ``limit``."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if not any(_alive(p) for p in processes):
            return time.monotonic() - start
        time.sleep(0.02)
    for p in processes:  # ours: started by this test; do not leave them running
        if _alive(p):
            p.kill()
    return float("inf")


# --- the launching process dies ---

PARENT = """
import sys
sys.path.insert(0, {tests!r})
import _workers
from dpviz.engine.launch import launch
launch(_workers.forever, 2, args=({marker!r},))
"""


@pytest.mark.parametrize("when", ["starting", "running"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_ranks_die_with_their_parent(method, sig, when, tmp_path):
    marker = str(tmp_path / "running")
    code = PARENT.format(tests=str(TESTS), marker=marker)
    log = open(tmp_path / "parent.log", "w")
    env = dict(os.environ, DPVIZ_START_METHOD=method)
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        ranks = wait_for(lambda: (r := ranks_of(parent.pid)) and len(r) == 2 and r, 60, "two ranks")
        if when == "running":
            wait_for(lambda: all(os.path.exists(f"{marker}.{r}") for r in range(2)), 120, "both ranks in the worker")
        everything = psutil.Process(parent.pid).children(recursive=True)  # the ranks and the launch helpers
        killed = time.monotonic()
        os.kill(parent.pid, sig)
        parent.wait(30)
        time_until_gone(ranks)
        seconds = time.monotonic() - killed
        time_until_gone(everything)
        everything_gone = time.monotonic() - killed
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        log.close()
    print(f"\n{method}, {signal.Signals(sig).name} to the parent while {when}: ranks gone {seconds:.2f} s after it, "
          f"every child {everything_gone:.2f} s after it")
    assert seconds < GONE_WITHIN, f"a rank outlived its parent by more than {GONE_WITHIN} s"
    assert everything_gone < GONE_WITHIN


# --- a real Jupyter kernel ---

LIVE_RUN = "from dpviz.topics.ground_floor.run_training import record_run\nrecord_run(k=2, steps=100000, model='line', b=4)\n"


class Kernel:
    """A python3 kernel of this environment on local sockets in ``folder``."""

    def __init__(self, folder: Path):
        from jupyter_client.manager import KernelManager

        self.km = KernelManager(kernel_name="python3", transport="ipc", ip=str(folder / "kernel-ipc"))
        self.km.start_kernel(cwd=str(ROOT))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)

    @property
    def pid(self) -> int:
        return self.km.provisioner.process.pid

    def run(self, code: str, timeout: float = 300) -> dict:
        errors = []

        def hook(msg):
            if msg["msg_type"] == "error":
                errors.append("\n".join(msg["content"]["traceback"]))

        reply = self.kc.execute_interactive(code, timeout=timeout, output_hook=hook, allow_stdin=False)
        assert reply["content"]["status"] == "ok", errors
        return reply

    def close(self) -> None:
        self.kc.stop_channels()
        try:
            self.km.shutdown_kernel(now=True)
        except Exception:
            pass


@pytest.fixture
def kernel(tmp_path):
    k = Kernel(tmp_path)
    yield k
    k.close()


def start_live_run(kernel: Kernel) -> list[psutil.Process]:
    kernel.kc.execute(LIVE_RUN)  # not waited for, as a cell still running when the kernel is killed
    ranks = wait_for(lambda: (r := ranks_of(kernel.pid)) and len(r) == 2 and r, 120, "the live run's two ranks")
    wait_for(lambda: all(has_torch(p) for p in ranks), 120, "the ranks past their imports", interval=0.3)
    return ranks


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "restart"])
def test_ranks_die_with_their_kernel(how, kernel):
    ranks = start_live_run(kernel)
    start = time.monotonic()
    if how == "restart":
        kernel.km.restart_kernel(now=True)
    else:
        os.kill(kernel.pid, getattr(signal, how))
    time_until_gone(ranks)
    seconds = time.monotonic() - start
    print(f"\nkernel {how}: ranks gone {seconds:.2f} s after it")
    assert seconds < GONE_WITHIN


def test_run_all_twice_in_one_kernel_leaves_nothing_behind(kernel):
    cell = "from dpviz.topics.ground_floor.run_training import record_run\nrun = record_run(k=2, b=8, steps=5)\nrun.check()\n"
    kernel.run(cell)
    kernel.run(cell)
    left = live_children(kernel.pid)
    assert not left, f"processes left running in the kernel: {[(p.pid, p.cmdline()) for p in left]}"
    assert not glob(os.path.join(tempfile.gettempdir(), f"dpviz-launch-{kernel.pid}-*"))


def fork_servers_of(pid: int) -> list[psutil.Process]:
    """The fork servers ``pid`` started: its children running multiprocessing's fork server."""
    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    return [p for p in children if _alive(p) and "multiprocessing.forkserver" in " ".join(p.cmdline())]


def test_a_kernel_starts_no_process_on_import_and_its_warmed_up_fork_server_dies_with_it(kernel):
    kernel.run("import dpviz.engine.launch, dpviz.topics.ground_floor.run_training\nimport time; time.sleep(1)")
    assert psutil.Process(kernel.pid).children() == []  # importing starts nothing, in a kernel too
    kernel.run("dpviz.engine.forkserver.warm_up()")  # a chapter's set-up cell
    servers = wait_for(lambda: fork_servers_of(kernel.pid), 30, "the kernel's fork server")
    assert len(servers) == 1
    kernel.run("from dpviz.topics.ground_floor.run_training import record_run\nrecord_run(k=2, b=8, steps=5).check()\n")
    assert fork_servers_of(kernel.pid) == servers  # the run used the server the warm-up started
    os.kill(kernel.pid, signal.SIGKILL)
    seconds = time_until_gone(servers)
    print(f"\nkernel SIGKILL: its fork server gone {seconds:.2f} s after it")
    assert seconds < GONE_WITHIN


def test_a_script_that_imports_the_launcher_and_the_recipes_starts_no_process():
    code = ("import time, psutil, dpviz.recipes, dpviz.engine.launch, dpviz.engine.forkserver, dpviz.engine.supervise, "
            "dpviz.engine.rank; time.sleep(1); print(len(psutil.Process().children()))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"]


# --- stalls, not whole-run timeouts ---

def test_a_run_longer_than_the_stall_timeout_completes(no_leftover_processes):
    start = time.monotonic()
    results = launch(_workers.steady, 2, args=(60, 0.1), stall_timeout=2)
    assert [r["steps"] for r in results] == [60, 60]
    assert time.monotonic() - start > 2 * 2  # the run lasted well past the stall timeout


def test_a_rank_that_stops_reporting_is_named_with_its_step(no_leftover_processes):
    start = time.monotonic()
    with pytest.raises(RankTimeout, match=r"rank 1 stalled: no progress for 2 s, stuck after step 5 \(rank 0 reached step \d+\)\.") as info:
        launch(_workers.stop_reporting, 2, args=(1, 5, 50, 0.02), stall_timeout=2)
    seconds = time.monotonic() - start
    print(f"\nstalled rank named {seconds:.1f} s after launch (stall timeout 2 s, process start included)")
    assert info.value.ranks == [1]
    assert info.value.steps[1] == 5
    assert seconds < 2 + 15  # start-up on a loaded machine takes a few seconds of this


def test_timeout_is_the_stall_timeout(no_leftover_processes):
    with pytest.raises(RankTimeout, match="rank 1 stalled: no progress for 2 s"):
        launch(_workers.stop_reporting, 2, args=(1, 5, 50, 0.02), stall_timeout=2)


def test_the_optional_deadline_bounds_the_whole_run(no_leftover_processes):
    start = time.monotonic()
    with pytest.raises(RankTimeout, match=r"ranks? .* still running at the deadline of 6 s") as info:
        launch(_workers.forever, 2, deadline=6)
    assert info.value.ranks
    assert time.monotonic() - start < 6 + 5


def test_the_older_name_timeout_is_gone():
    with pytest.raises(TypeError, match="timeout"):  # one name for one thing: stall_timeout
        launch(_workers.sum_ranks, 2, timeout=5)


# --- runs started at the same moment ---

def test_concurrent_launches_do_not_race(no_leftover_processes):
    results, errors = {}, []

    def one(i):
        try:
            results[i] = launch(_workers.sum_ranks, 2)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert sorted(results) == [0, 1, 2, 3]
    assert all(r["sum"] == 3 for rs in results.values() for r in rs)


# --- an unwritable --out ---

@pytest.mark.parametrize("command", [["record", "--k", "2", "--steps", "1"], ["bench", "--ks", "2", "--points", "1"]])
def test_unwritable_out_is_refused_before_any_rank_starts(command, monkeypatch, capsys):
    def no_launch(*args, **kwargs):
        raise AssertionError("a rank was started")

    monkeypatch.setattr(launcher, "launch", no_launch)
    monkeypatch.setattr("dpviz.topics.measuring.run_bench.launch", no_launch)
    assert cli.main(command + ["--out", "/proc/x/y"]) == 2
    message = capsys.readouterr().err.strip()
    assert "--out" in message and "/proc/x/y" in message
    assert message.count("\n") == 0 and message.count(". ") == 0 and message.endswith(".")


def test_unwritable_out_exits_fast_with_status_2():
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "dpviz", "record", "--out", "/proc/x/y"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "--out" in done.stderr and done.stderr.strip().count("\n") == 0
    assert time.monotonic() - start < 60


def test_out_parents_are_created(tmp_path):
    cli.check_out(str(tmp_path / "a" / "b" / "run"))
    assert (tmp_path / "a" / "b").is_dir()
    assert not list((tmp_path / "a" / "b").iterdir())  # the probe file is gone
