"""The right rank named: a rank killed by a signal is the one blamed, not the peer that lost its connection; a
stopped rank is the only one named as stalled (the reliability issue's items 1 and 2)."""

import os
import signal
import threading
import time

import pytest

pytestmark = pytest.mark.filterwarnings("ignore:k=.* ranks share")

import _workers
from dpviz.engine.supervise import RankError, RankTimeout
from dpviz.engine.launch import launch


def _pids(pid_dir, k, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        files = [os.path.join(pid_dir, f"rank-{r}") for r in range(k)]
        if all(os.path.exists(f) and os.path.getsize(f) for f in files):
            return [int(open(f).read()) for f in files]
        time.sleep(0.05)
    raise AssertionError("the ranks never wrote their pids")


def _after_start(pid_dir, k, victim, sig, delay):
    def act():
        pid = _pids(pid_dir, k)[victim]
        time.sleep(delay)  # mid-run: every rank is inside its loop
        os.kill(pid, sig)
    thread = threading.Thread(target=act, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("victim", [1, 2, 3])
def test_a_killed_rank_is_named_not_the_peer_that_lost_it(victim, tmp_path):
    _after_start(str(tmp_path), 4, victim, signal.SIGKILL, 1.0)
    with pytest.raises(RankError) as failure:
        launch(_workers.all_reduce_loop, 4, args=(str(tmp_path), 100_000, 0.005), stall_timeout=30)
    e = failure.value
    assert e.rank == victim, str(e)[:600]
    assert f"rank {victim} failed: process was killed by SIGKILL" in str(e)
    assert victim not in e.consequences and all(r != victim for r in e.consequences)


def test_a_stopped_rank_is_the_only_one_named(tmp_path):
    _after_start(str(tmp_path), 3, 1, signal.SIGSTOP, 1.0)
    with pytest.raises(RankTimeout) as stall:
        launch(_workers.all_reduce_loop, 3, args=(str(tmp_path), 100_000, 0.005), stall_timeout=3)
    assert stall.value.ranks == [1], str(stall.value)
    assert "rank 1 stalled" in str(stall.value) and "stopped by a signal" in str(stall.value)


def test_a_script_without_the_main_guard_is_told_to_add_it(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "noguard.py"
    script.write_text("from dpviz.topics.ground_floor.run_training import record_run\nrun = record_run(k=2, b=4, steps=2)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=180)
    assert done.returncode != 0
    assert f"{script} launches ranks without the `if __name__ == \"__main__\":` guard" in done.stderr
