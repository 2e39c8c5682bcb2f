"""Run folders in a /tmp that two PID namespaces share (two containers of one JupyterHub, one uid): a launch sweeps
the folders of launchers that are gone, told by the lock a live launcher holds, never by a PID it cannot see (issue
23, item 9); and the torchrun entry point, run without torchrun, says what is missing (item 10)."""

import multiprocessing.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.filterwarnings("ignore:k=.* ranks share")

import _workers  # noqa: E402
from dpviz.engine.forkserver import fork_server_pid, stop_fork_server
from dpviz.engine.launch import launch  # noqa: E402
from dpviz.engine.rank import _pid_alive  # noqa: E402
from dpviz.engine.supervise import LOCKLESS_AGE, _sweep_stale_dirs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]

# A run of a few seconds in the other namespace, long enough for a launch here to sweep while it runs.
RECORD = """
import sys
from dpviz.topics.ground_floor.run_training import record_run
print(record_run(k=2, b=8, steps=int(sys.argv[1])).check())
"""

# A launcher that runs until it is killed; its ranks touch MARKER.<rank> once running.
FOREVER = """
import sys
sys.path.insert(0, sys.argv[1])
import _workers
from dpviz.engine.launch import launch
launch(_workers.forever, 2, args=(sys.argv[2],))
"""


@pytest.fixture
def shared_tmp(tmp_path, monkeypatch):
    """A /tmp of the test's own, for this process and the other namespace alike: its sweeps meet no other runs.

    Made in the system's temporary folder itself, not under pytest's ``tmp_path``: a launcher's fork server puts
    its socket in it, and an AF_UNIX path may not pass 107 bytes. Under ``tmp_path`` the other namespace's socket
    reached 107 once pytest's run counter had three digits (``/tmp/pytest-of-root/pytest-100/...``), and its fork
    server failed to start with "AF_UNIX path too long". ``tmp_path`` is asked for first, so that pytest's own
    folders are made in the system's /tmp, and so is this process's multiprocessing folder: neither goes with
    this one. A fork server this process starts meanwhile has it as its TMPDIR, so it is stopped before the
    folder is removed.
    """
    multiprocessing.util.get_temp_dir()
    server_before = fork_server_pid()
    base = Path(tempfile.mkdtemp(prefix="dpviz-test-tmp-"))
    monkeypatch.setenv("TMPDIR", str(base))
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    yield base
    if fork_server_pid() not in (None, server_before):
        stop_fork_server()
    shutil.rmtree(base, ignore_errors=True)


def _other_namespace():
    """Skip unless this machine lets us start a process in a PID namespace of its own (root, or unshare allowed)."""
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        pytest.skip("needs Linux and util-linux's unshare to start a process in another PID namespace")
    probe = subprocess.run(UNSHARE + ["true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"unshare refused a new PID namespace here (not root?): {probe.stderr.strip()}")


def _unused_pid() -> int:
    """A PID that no process here has: the old sweep took a folder named by such a PID for a dead launcher's."""
    with open("/proc/sys/kernel/pid_max") as f:
        top = int(f.read()) - 100
    return next(pid for pid in range(top, 300, -1) if not _pid_alive(pid))


def _wait_for(what, ready, child, timeout=180.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = ready()
        if found:
            return found
        if child.poll() is not None:
            raise AssertionError(f"the launcher ended before {what}: {child.communicate()}")
        time.sleep(0.05)
    raise AssertionError(f"no {what} after {timeout:g} s")


def test_a_live_run_in_another_pid_namespace_keeps_its_folder(shared_tmp, no_leftover_processes):
    _other_namespace()
    pid = _unused_pid()
    # The namespace's first process, sh, sets its next PID (ns_last_pid), then forks the launcher, which gets `pid`
    # (not being the last command, it is not exec'd in sh's place). Where ns_last_pid is refused the launcher gets a
    # small PID, which some process here has too: the run must still finish.
    script = f'echo {pid - 1} > /proc/sys/kernel/ns_last_pid 2>/dev/null; "$0" "$@"; exit $?'
    child = subprocess.Popen(UNSHARE + ["sh", "-c", script, sys.executable, "-c", RECORD, "400"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Its ranks have met in the run folder's file store: the run is under way.
        folder = _wait_for("run folder with a store",
                           lambda: [d for d in shared_tmp.glob("dpviz-launch-*") if (d / "store").exists()], child)[0]
        assert folder.name.startswith(f"dpviz-launch-{pid}-") or not os.access("/proc/sys/kernel/ns_last_pid", os.W_OK)

        mine = launch(_workers.sum_ranks, 2)  # sweeps the shared folder while the other run is live
        assert [r["sum"] for r in mine] == [3.0, 3.0]
        assert child.poll() is not None or folder.exists(), "the sweep removed a live run's folder"

        out, err = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()  # --kill-child: the namespace, its launcher and ranks with it
            child.communicate()
    assert child.returncode == 0, f"the run in the other namespace failed:\n{err[-3000:]}"
    assert "bit-identical" in out  # Run.check() passed: its record came back whole
    assert not list(shared_tmp.glob("dpviz-launch-*"))  # both runs removed their folders


def test_a_killed_launchers_folder_is_swept_by_the_next_launch(shared_tmp, tmp_path, no_leftover_processes):
    marker = str(tmp_path / "running")
    child = subprocess.Popen([sys.executable, "-c", FOREVER, str(ROOT / "tests"), marker], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for("running ranks", lambda: all(os.path.exists(f"{marker}.{r}") for r in range(2)), child)
        left = list(shared_tmp.glob(f"dpviz-launch-{child.pid}-*"))
        os.kill(child.pid, signal.SIGKILL)  # no time to clean up
        child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert len(left) == 1 and left[0].exists()  # what the kill left behind

    launch(_workers.sum_ranks, 2)
    assert not left[0].exists() and not list(shared_tmp.glob("dpviz-launch-*"))


def test_a_folder_without_a_lock_is_swept_only_once_old(shared_tmp):
    """A folder made by a dpviz from before locks, or by a launcher at the instant before it locks: kept while young."""
    young, old = shared_tmp / "dpviz-launch-1-young", shared_tmp / "dpviz-launch-1-old"
    for folder in (young, old):
        folder.mkdir()
        (folder / "store").write_bytes(b"")
    then = time.time() - LOCKLESS_AGE - 60
    os.utime(old, (then, then))
    _sweep_stale_dirs()
    assert young.exists() and not old.exists()


def test_the_torchrun_entry_without_torchrun_says_what_is_missing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    done = subprocess.run([sys.executable, "-m", "dpviz.topics.ground_floor.run_training", "--steps", "2", "--out", str(tmp_path / "r")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=180)
    assert done.returncode == 2
    said = done.stderr.strip()
    assert "\n" not in said and "Traceback" not in said, said  # one sentence
    assert "RANK and WORLD_SIZE (set by torchrun for each rank) are missing" in said
    assert "torchrun --nproc-per-node 2 -m dpviz.topics.ground_floor.run_training" in said
    assert not list(tmp_path.iterdir())


def test_a_tmpdir_too_long_for_the_fork_servers_socket_is_named_before_any_rank_starts(tmp_path):
    """multiprocessing's own error, "AF_UNIX path too long", names neither TMPDIR nor what to do."""
    long = tmp_path / ("d" * 80)
    long.mkdir()
    code = "from dpviz.topics.ground_floor.run_training import record_run\nrecord_run(k=2, b=8, steps=2)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "TMPDIR": str(long), "DPVIZ_START_METHOD": "forkserver"})
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ValueError: TMPDIR must be a folder with a shorter path") and "at most 107" in last, last
    assert "AF_UNIX" not in done.stderr and "dpviz-rank" not in done.stderr
    assert not list(long.glob("dpviz-launch-*"))  # no run folder was made: nothing started
