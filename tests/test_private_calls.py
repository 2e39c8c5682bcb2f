"""dpviz's few calls without a public API live in dpviz/engine/private.py, and still do what dpviz needs of them.

Each of them is a name Python (or the C library) may rename or drop without notice; the first test here fails
naming the one that is gone. The others check that each call still does its job on this machine (a process
killed with its parent even while it is stopped, orphans re-parented, an exception raised in another thread),
and that no other module of dpviz reaches for ``ctypes``, ``sys._getframe`` or another private name of ``sys``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from dpviz.engine import private

PACKAGE = Path(__file__).resolve().parents[1] / "dpviz"
PRIVATE = PACKAGE / "engine" / "private.py"
LINUX = sys.platform.startswith("linux")
PUBLIC_FUNCTIONS = ("die_with_parent", "become_child_subreaper", "release_freed_memory", "raise_in_thread",
                    "missing")


def test_every_private_name_dpviz_calls_is_still_there():
    gone = private.missing()
    assert not gone, (f"Python {sys.version.split()[0]} on {sys.platform} no longer has {', '.join(gone)}: "
                      "dpviz/engine/private.py calls it (its docstring says what for); find the new name or a public "
                      "way, and update that module, the one place dpviz uses them")


def test_each_call_is_in_the_module_docstring_with_its_reason():
    for name in PUBLIC_FUNCTIONS:
        assert callable(getattr(private, name)), name
        assert getattr(private, name).__doc__, f"private.{name} has no docstring"
    for name in PUBLIC_FUNCTIONS[:-1]:
        assert f":func:`{name}`" in private.__doc__, f"the module docstring does not give private.{name}'s reason"


# --- each call still works ---

ORPHAN = """
import os, signal, sys, time
from dpviz.engine import private
child = os.fork()
if child == 0:
    ok = private.die_with_parent(signal.SIGKILL)
    print(os.getpid(), ok, flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)  # stopped: no thread of its own could notice its parent's death now
    time.sleep(60)
    os._exit(0)
time.sleep(60)
"""


@pytest.mark.skipif(not LINUX, reason="PR_SET_PDEATHSIG is Linux's")
def test_a_process_stopped_by_a_signal_still_dies_with_its_parent():
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN], stdout=subprocess.PIPE, text=True)
    try:
        pid, ok = parent.stdout.readline().split()
        child = psutil.Process(int(pid))
        assert ok == "True"
        end = time.monotonic() + 10
        while child.status() != psutil.STATUS_STOPPED and time.monotonic() < end:
            time.sleep(0.01)
        killed = time.monotonic()
        parent.kill()
        parent.wait(30)
        while child.is_running() and child.status() != psutil.STATUS_ZOMBIE and time.monotonic() - killed < 10:
            time.sleep(0.01)
        seconds = time.monotonic() - killed
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    alive = child.is_running() and child.status() != psutil.STATUS_ZOMBIE
    if alive:
        child.kill()
    assert not alive and seconds < 2.0, f"the stopped child outlived its parent ({seconds:.2f} s)"


SUBREAPER = """
import os, subprocess, time
from dpviz.engine import private
print(private.become_child_subreaper())
# sh starts sleep in the background and exits: sleep is an orphan, and comes back to this process
orphan = int(subprocess.run(["sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True).stdout)
end = time.monotonic() + 10
while time.monotonic() < end:
    with open(f"/proc/{orphan}/stat") as f:
        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
    if ppid == os.getpid():
        break
    time.sleep(0.01)
print(ppid == os.getpid())
os.kill(orphan, 9)
os.waitpid(orphan, 0)
"""


@pytest.mark.skipif(not LINUX, reason="PR_SET_CHILD_SUBREAPER is Linux's")
def test_a_subreaper_gets_the_orphans_of_its_children():
    done = subprocess.run([sys.executable, "-c", SUBREAPER], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True"], done.stdout


def test_freed_memory_goes_back_where_the_c_library_allows():
    import platform

    assert private.release_freed_memory() is (LINUX and platform.libc_ver()[0] == "glibc")


class Stop(BaseException):
    pass


def test_an_exception_is_raised_in_another_thread():
    if sys.implementation.name != "cpython":
        pytest.skip("PyThreadState_SetAsyncExc is CPython's")
    caught, started = [], threading.Event()

    def loop():
        started.set()
        try:
            while True:
                pass
        except Stop:
            caught.append(True)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    started.wait(10)
    assert private.raise_in_thread(thread.ident, Stop)
    thread.join(10)
    assert caught == [True] and not thread.is_alive()


# --- nothing else in dpviz reaches for them ---

def private_reaches(path: Path) -> list[str]:
    """Imports of ctypes, and private names of sys (sys._getframe, sys._current_frames) or frame walks (f_back)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + ([f"{node.module}.{a.name}" for a in node.names] if node.module == "sys" else [])
        for name in names:
            if name.split(".")[0] == "ctypes" or (name.startswith("sys._") and not name.startswith("sys.__")):
                found.append(f"{path.name}:{node.lineno}: imports {name}")
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "sys" and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                found.append(f"{path.name}:{node.lineno}: sys.{node.attr}")
            if node.attr == "f_back":
                found.append(f"{path.name}:{node.lineno}: walks frames ({ast.unparse(node)})")
    return sorted(found, key=lambda line: int(line.split(":")[1]))


def test_no_other_module_calls_ctypes_or_private_names_of_sys():
    found = [line for path in sorted(PACKAGE.rglob("*.py")) if path != PRIVATE for line in private_reaches(path)]
    assert not found, "only dpviz/engine/private.py may (with its reason):\n" + "\n".join(found)


def test_the_check_above_finds_what_it_looks_for(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import ctypes\nimport sys\nf = sys._getframe(1)\nwhile f: f = f.f_back\nsys._current_frames()\n")
    assert [line.split(": ", 1)[1] for line in private_reaches(sample)] == [
        "imports ctypes", "sys._getframe", "walks frames (f.f_back)", "sys._current_frames"]
