"""A healthy run is never called hung, and a rank nobody reaps never exists (issue 44, section 5).

Each case runs real ranks and real processes: work after the loop that outlasts the stall timeout, a run whose
big-batch gradient shrinks below its own rounding, an interrupt while the fork server imports torch, a launcher
killed while it does, a system without /proc, a fork server killed under its ranks, a script without the guard.
"""

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import psutil
import pytest

pytestmark = pytest.mark.filterwarnings("ignore:k=.* ranks share")

import _supervision_workers as workers
import _workers
from dpviz.engine import forkserver, supervise
from dpviz.engine.launch import launch
from dpviz.engine.supervise import RankError, RankTimeout
from dpviz.topics.ground_floor.run_training import record_run

HERE = os.path.dirname(os.path.abspath(__file__))


# --- work after the loop is progress ---

def test_a_training_run_whose_checks_outlast_the_stall_timeout_completes(no_leftover_processes):
    """The line model's work after its loop (per-example gradients, digests, the big-batch gradient computed again)
    took longer than the stall timeout, and was called "stalled ... stuck after step 299" (seen before the fix)."""
    launch(_workers.sum_ranks, 2)  # a warm fork server: the time below is the run's own
    start = time.monotonic()
    run = record_run(k=2, b=32, steps=300, stall_timeout=1.0)
    after_loop = time.monotonic() - start - run.loop_seconds.max()
    print(f"\n{after_loop:.1f} s of the run after the ranks' loop, with a stall timeout of 1 s")
    assert "bit-identical" in run.check()
    if after_loop <= 1.5:
        pytest.skip(f"this machine did the work after the loop in {after_loop:.1f} s, too fast to outlast the timeout")


def test_a_rank_waiting_for_a_peer_that_reports_work_is_not_stalled(no_leftover_processes):
    """Rank 0 works 4 s after the loop, reporting as it goes; rank 1 waits for it in a collective, quiet for 4 s
    against a stall timeout of 1.5 s: the run goes on while one rank makes progress."""
    assert launch(workers.long_check_after_the_loop, 2, args=(5, 4.0, True), stall_timeout=1.5) == [0, 1]


def test_work_after_the_loop_that_reports_nothing_is_named_as_such(no_leftover_processes):
    with pytest.raises(RankTimeout) as stall:
        launch(workers.long_check_after_the_loop, 2, args=(5, 30.0, False), stall_timeout=1.5, total_steps=5)
    text = str(stall.value)
    assert text.startswith("rank 0 stalled: no progress for 1.5 s, stuck after finishing all 5 steps (in the work "
                           "after the loop), busy on the CPU"), text
    assert stall.value.observed == {0: "busy"}


def test_a_rank_that_stops_after_its_last_step_is_not_blamed_for_a_step(no_leftover_processes):
    with pytest.raises(RankTimeout) as stall:
        launch(workers.hang_after_the_loop, 2, args=(5,), stall_timeout=1.5, total_steps=5)
    text = str(stall.value)
    assert "after finishing all 5 steps (in the work after the loop)" in text and "after step 4" not in text, text


def test_writing_a_large_result_reports_progress(no_leftover_processes):
    """A result is written in chunks, each reported: 32 MB from each rank in 1 MB chunks slowed to 50 ms each
    (1.6 s in all, as a few GB take on a loaded machine) against a stall timeout of 0.8 s."""
    results = launch(workers.big_result, 2, args=(32, 0.05), stall_timeout=0.8)
    assert [r.nbytes for r in results] == [32 << 20] * 2


# --- the check's tolerance follows the arithmetic ---

def test_a_converged_whole_batch_run_passes_its_own_check_and_a_wrong_one_still_fails(no_leftover_processes):
    """Every step's batch is the whole data set, so the big-batch gradient falls toward 0 as the line fits it: its
    size is 4e-7 of the gradients summed to make it, and its error 4e-2 of itself ("CHECK FAILED" before the fix),
    2e-8 of the largest gradient summed."""
    run = record_run(k=2, b=32, dataset_size=64, steps=100)
    assert run.big_batch_rel_err().max() > 1e-3  # the case: relative to itself the big-batch gradient misses
    assert run.rounding_rel_err().max() < 1e-6
    assert "matched the big-batch gradient" in run.check()
    scale = max(np.abs(run.local_grad[50]).max(), np.abs(run.example_grad[50]).max())
    run.reduced_grad[50, :, 0] += 1e-3 * scale  # a mistake of a thousandth of the largest gradient, on every rank
    with pytest.raises(AssertionError, match="reduced gradient differs from the big-batch gradient by 1.00e-03 of the "
                                             "largest gradient summed > 1e-05"):
        run.check()


# --- no rank nobody reaps ---

KERNEL_INTERRUPTED = r"""
import os, signal, sys, threading, time
sys.path.insert(0, {here!r})
import psutil
import _workers
from dpviz.engine import forkserver
from dpviz.engine.launch import launch

def ranks():
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.name().startswith("dpviz-rank"):
                found.append(p.pid)
        except psutil.NoSuchProcess:
            pass
    return found

if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Timer({delay}, os.kill, (os.getpid(), signal.SIGINT)).start()
    try:
        launch(_workers.sum_ranks, 2)
        print("finished before the interrupt", flush=True)
    except KeyboardInterrupt:
        kept = sys.exc_info()  # as IPython keeps the last error (sys.last_traceback), and with it the run's frames
        print("interrupted", flush=True)
    launch(_workers.sum_ranks, 1)  # its fork waits behind any fork the interrupted run asked for
    end, left = time.monotonic() + 2.0, []
    while time.monotonic() < end:
        left = ranks()
        time.sleep(0.05)
    print("ranks left", left, flush=True)
    start = time.monotonic()
    forkserver.stop_fork_server()
    print("stopped in", round(time.monotonic() - start, 2), flush=True)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
"""


def test_an_interrupt_while_the_server_imports_torch_leaves_no_rank():
    """A kernel interrupted while its first run waits for the fork server (still importing torch): the fork it had
    asked for runs later, for a run that is over. Before the fix that rank lived for minutes (3 of 3 trials in the
    issue; here, whenever the kernel keeps the error, as IPython does, and with it the pipe the rank watches); now it
    finds its run's folder gone and leaves, and the server stops at once."""
    done = subprocess.run([sys.executable, "-c", KERNEL_INTERRUPTED.format(here=HERE, delay=0.4)],
                          capture_output=True, text=True, timeout=180, env=_forkserver_env())
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and lines[0] == "interrupted", (done.stdout, done.stderr[-2000:])
    assert lines[1] == "ranks left []", done.stdout
    assert float(lines[2].split()[-1]) < 3.0, done.stdout


KERNEL_WARMING = r"""
import time
from dpviz.engine import forkserver
forkserver.start_fork_server()
print(forkserver.fork_server_pid(), flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_launcher_killed_while_its_server_imports_torch_takes_the_server_with_it(sig):
    """The server used to finish importing torch first (9 to 13 s on a busy machine); now it leaves within 2 s."""
    kernel = subprocess.Popen([sys.executable, "-c", KERNEL_WARMING], stdout=subprocess.PIPE, text=True,
                              env=_forkserver_env())
    try:
        server = psutil.Process(int(kernel.stdout.readline()))
        time.sleep(0.1)  # torch takes a second or more to import: the server is at it
        importing = not any("libtorch" in m.path for m in server.memory_maps())
        killed = time.monotonic()
        kernel.send_signal(sig)
        kernel.wait(30)
        while server.is_running() and server.status() != psutil.STATUS_ZOMBIE and time.monotonic() - killed < 30:
            time.sleep(0.005)
        seconds = time.monotonic() - killed
    finally:
        if kernel.poll() is None:
            kernel.kill()
            kernel.wait()
    print(f"\nthe fork server left {seconds:.2f} s after its launcher's {sig.name}"
          f"{' before loading libtorch' if importing else ' while importing torch'}")
    assert seconds < 2.0


def _forkserver_env():
    env = dict(os.environ, DPVIZ_START_METHOD="forkserver")
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


# --- the words follow what was observed ---

def _stop_rank_1(pid_dir):
    def act():
        end = time.monotonic() + 60
        path = os.path.join(pid_dir, "rank-1")
        while not (os.path.exists(path) and os.path.getsize(path)) and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(0.5)
        os.kill(int(open(path).read()), signal.SIGSTOP)
    threading.Thread(target=act, daemon=True).start()


def test_a_stopped_rank_is_said_to_be_stopped_only_where_that_was_seen(tmp_path, monkeypatch, no_leftover_processes):
    _stop_rank_1(str(tmp_path))
    with pytest.raises(RankTimeout) as seen:
        launch(_workers.all_reduce_loop, 2, args=(str(tmp_path), 100_000, 0.005), stall_timeout=2)
    assert seen.value.ranks == [1] and seen.value.observed == {1: "stopped"}, str(seen.value)
    assert "stopped by a signal" in str(seen.value)

    empty = tmp_path / "no-proc"
    empty.mkdir()
    monkeypatch.setattr(supervise, "PROC", str(empty))  # a system without /proc, as macOS
    os.remove(tmp_path / "rank-1")
    _stop_rank_1(str(tmp_path))
    with pytest.raises(RankTimeout) as unseen:
        launch(_workers.all_reduce_loop, 2, args=(str(tmp_path), 100_000, 0.005), stall_timeout=2)
    text = str(unseen.value)
    assert "stopped by a signal" not in text and "could not be seen: no /proc" in text, text
    assert set(unseen.value.observed.values()) == {"unknown"}


def test_a_tiny_timeout_never_reads_as_a_stopped_rank(no_leftover_processes):
    """--timeout 1e-9 printed "stopped by a signal (SIGSTOP or a debugger)" on Linux: no rank was stopped."""
    with pytest.raises(RankTimeout) as stall:
        launch(_workers.steady, 2, args=(50, 0.05), stall_timeout=1e-9)
    assert "stopped by a signal" not in str(stall.value), str(stall.value)
    assert "stopped" not in stall.value.observed.values()


def test_what_a_process_was_seen_doing():
    """The states sampled from /proc (state letter, CPU ticks) and the words they give, a thrashing rank included
    (in the kernel's uninterruptible sleep now and then), which no test can bring about on demand."""
    observed, joined, starting = supervise._observed, supervise._JOINED, supervise._JOINED - 1
    assert observed([("T", 5)] * 5, joined) == "stopped"
    assert observed([("S", 5), ("D", 6), ("R", 7), ("D", 7), ("S", 8)], joined) == "memory"
    assert observed([("R", 0), ("R", 5), ("R", 10), ("R", 15), ("R", 20)], joined) == "busy"
    assert observed([("S", 3)] * 5, joined) == "waiting"
    assert observed([("S", 3)] * 5, starting) == "starting"
    assert observed([None] * 5, joined) == "unknown"
    words = supervise._stall_message([1], [7, 5], [joined] * 2, 60, {1: "memory"}, 100)
    assert words.startswith("rank 1 stalled: no progress for 60 s, stuck after step 5, waiting on memory"), words


def test_a_killed_fork_server_is_named_not_rank_0(tmp_path, no_leftover_processes):
    launch(_workers.sum_ranks, 1)
    server = forkserver.fork_server_pid()
    marker = str(tmp_path / "running")

    def kill_server():
        end = time.monotonic() + 60
        while not all(os.path.exists(f"{marker}.{r}") for r in range(2)) and time.monotonic() < end:
            time.sleep(0.02)
        os.kill(server, signal.SIGKILL)
    threading.Thread(target=kill_server, daemon=True).start()
    with pytest.raises(RankError) as lost:
        launch(_workers.forever, 2, args=(marker,), stall_timeout=30)
    text = str(lost.value)
    assert text.startswith("the fork server the ranks were started from was killed by SIGKILL, and every rank ended "
                           "with it"), text
    assert "code 255" not in text
    assert launch(_workers.sum_ranks, 2)[1]["sum"] == 3.0  # the next run starts a new server


def test_a_script_without_the_guard_gets_one_sentence_and_no_rank_tracebacks(tmp_path):
    script = tmp_path / "noguard.py"
    script.write_text("from dpviz.topics.ground_floor.run_training import record_run\n"
                      "run = record_run(k=2, b=4, steps=2)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=180)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last == (f"RuntimeError: {script} launches ranks without the `if __name__ == \"__main__\":` guard, so every "
                    "process it starts would run the script again; put the call under that guard."), done.stderr
    assert done.stderr.count("Traceback") == 1 and "forkserver" not in done.stderr, done.stderr
    print(f"\n{len(done.stderr.splitlines())} lines on stderr (146 for k=2 before the fix, 282 in the issue)")
