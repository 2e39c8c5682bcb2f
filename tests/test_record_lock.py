"""Anyone who can read a records folder can take its lock: a save then waits a stated time, not forever, and stops
with one sentence naming the folder and the holder, nothing lost and nothing left behind (issue 54, item 1).

The holder is a real separate process that takes ``flock`` on the folder, as a stray script or a stuck reader would.
"""

import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dpviz.engine import schema
from dpviz.engine.schema import FolderLockTimeout, load
from dpviz.topics.ground_floor.records import Run

LINE_K4 = Path(__file__).resolve().parents[1] / "figures" / "records" / "line_k4"
HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


@pytest.fixture(scope="module")
def run() -> Run:
    return Run.load(LINE_K4)


def hold(folder: Path, seconds: float) -> subprocess.Popen:
    """A separate process holding the folder's lock for ``seconds``, started and holding when this returns."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), str(seconds)], stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout.readline() == "held\n"
    return holder


def contents(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_a_save_into_a_folder_held_locked_stops_in_time_naming_the_holder(run, tmp_path, monkeypatch):
    base = Run({**run.meta, "seed": 7}, dict(run.arrays)).save(tmp_path / "keep")
    before = contents(tmp_path)
    monkeypatch.setattr(schema, "LOCK_WAIT", 1.0)
    holder = hold(tmp_path, 60)
    try:
        start = time.monotonic()
        with pytest.raises(FolderLockTimeout) as stopped:
            Run({**run.meta, "seed": 8}, dict(run.arrays)).save(base)
        took = time.monotonic() - start
        assert stopped.value.pid == holder.pid and stopped.value.folder == str(tmp_path)
        assert contents(tmp_path) == before  # no temporary file left, nothing replaced
    finally:
        holder.kill()
        holder.wait()
    assert 1.0 <= took < 2.0, f"the save waited {took:.2f} s for a lock it was told to wait 1 s for"
    assert re.fullmatch(rf"records folder '{re.escape(str(tmp_path))}' stayed locked by process {holder.pid} for the "
                        r"1 s this process waits, so nothing in it was read or changed\.", str(stopped.value))
    assert isinstance(stopped.value, TimeoutError)
    again = load(base)
    assert again.meta == run.meta | {"seed": 7} and np.array_equal(again.loss, run.loss)


def test_a_load_waits_the_same_and_a_lock_let_go_in_time_lets_the_save_through(run, tmp_path):
    base = run.save(tmp_path / "r")
    holder = hold(tmp_path, 60)
    try:
        with pytest.raises(FolderLockTimeout, match=rf"locked by process {holder.pid} for the 0\.3 s"):
            with schema.folder_lock(tmp_path, exclusive=False, wait=0.3):
                pass
    finally:
        holder.kill()
        holder.wait()
    brief = hold(tmp_path, 0.5)  # lets go well inside the default wait
    try:
        Run({**run.meta, "seed": 9}, dict(run.arrays)).save(base)
    finally:
        brief.wait()
    assert load(base).meta["seed"] == 9


def test_a_folder_nobody_locks_has_no_holder(tmp_path):
    assert schema.lock_holder(tmp_path) is None
    with schema.folder_lock(tmp_path, exclusive=True, wait=0):
        assert schema.lock_holder(tmp_path) == schema.os.getpid()
