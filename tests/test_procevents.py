"""tests/_procevents.py, which the hub test counts ranks with: it must see a process that lives a moment only."""

import os
import subprocess
import sys
import time

import pytest

import _procevents

pytestmark = pytest.mark.skipif(_procevents.why_not() is not None, reason=str(_procevents.why_not()))

SHORT_LIVED = "open('/proc/self/comm', 'wb').write(b'dpviz-rank-7')"
# after setuid the process may no longer write its own /proc files (it is not "dumpable"); prctl names it instead
SET_USER_THEN_NAME = "import ctypes, os; os.setuid(65534); ctypes.CDLL(None).prctl(15, b'dpviz-rank-7', 0, 0, 0)"


def test_a_process_that_renames_itself_and_exits_at_once_is_seen_with_its_user_and_ancestors():
    with _procevents.ProcessEvents(prefix="dpviz-rank-") as events:
        child = subprocess.run([sys.executable, "-c", SHORT_LIVED], check=True)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not events.named:
            time.sleep(0.05)
    assert child.returncode == 0
    assert len(events.named) == 1, f"expected the one renamed process, got {events.named}"
    (uid, ancestors), = events.named.values()
    assert uid == os.getuid()
    assert os.getpid() in ancestors, f"the test's own process is not among {ancestors}"
    assert not events.lost


def test_a_change_of_user_after_the_fork_is_followed():
    with _procevents.ProcessEvents(prefix="dpviz-rank-") as events:
        subprocess.run([sys.executable, "-c", SET_USER_THEN_NAME], check=True)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not events.named:
            time.sleep(0.05)
    assert [uid for uid, _ in events.named.values()] == [65534]
