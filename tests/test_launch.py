"""The launcher: results in rank order, failing and hung ranks named, every child reaped."""

import _thread
import os
import signal
import sys
import threading
import time
import warnings

import psutil
import pytest
import torch.multiprocessing as mp

import _workers
from dpviz.engine import forkserver
from dpviz.engine import launch as launcher
from dpviz.engine.supervise import RankError, RankTimeout
from dpviz.engine.launch import launch


@pytest.mark.parametrize("k", [1, 2, 4])
def test_results_come_back_in_rank_order(k, no_leftover_processes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = launch(_workers.sum_ranks, k)
    assert [r["rank"] for r in results] == list(range(k))
    assert all(r["sum"] == k * (k + 1) / 2 for r in results)
    assert all(r["threads"] == launcher.threads_per_rank(k) for r in results)


def test_global_start_method_is_left_alone(no_leftover_processes):
    # Not allow_none=True: multiprocessing itself fixes the platform default the first time any
    # process is started (spawn.get_preparation_data asks for it), whoever starts it.
    before = mp.get_start_method()
    launch(_workers.sum_ranks, 1)
    launch(_workers.sum_ranks, 1)  # a re-run of the same cell works
    assert mp.get_start_method() == before


def test_more_ranks_than_cores_warns(no_leftover_processes):
    k = launcher.cpu_count() + 1
    with pytest.warns(UserWarning, match="oversubscription"):
        launch(_workers.sum_ranks, k)


def test_failing_rank_is_named_with_its_traceback(no_leftover_processes):
    start = time.monotonic()
    with pytest.raises(RankError, match="rank 1 failed") as info:
        launch(_workers.fail_on_rank, 3, args=(1,), stall_timeout=60)
    assert info.value.rank == 1
    assert "deliberate failure in rank 1" in info.value.rank_traceback
    assert "fail_on_rank" in info.value.rank_traceback
    assert time.monotonic() - start < 30


def test_hung_rank_ends_at_the_timeout(no_leftover_processes):
    start = time.monotonic()
    with pytest.raises(RankTimeout, match="rank 2 stalled: no progress for 12 s, stuck before its first step") as info:
        launch(_workers.hang_on_rank, 3, args=(2,), stall_timeout=12)
    assert info.value.ranks == [2]
    assert time.monotonic() - start < 12 + 10


def test_keyboard_interrupt_reaps_every_rank(no_leftover_processes):
    # Ctrl-C (a terminal's, or a kernel's interrupt) raises KeyboardInterrupt in the main thread, and
    # interrupt_main does what Ctrl-C does only under Python's own SIGINT handler. A test run started in the
    # background by a non-interactive shell (`nohup ./run test &`) inherits SIGINT ignored, and Python then leaves it
    # ignored: the interrupt was lost and the launch ran to its stall timeout. The test sets Python's handler for its
    # own duration.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(8.0, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            launch(_workers.hang_on_rank, 2, args=(0,), stall_timeout=120)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(k=0), "k"),
        (dict(k=2, backend="mpi"), "backend"),
        (dict(k=2, stall_timeout=0), "stall_timeout"),
        (dict(k=2, threads=0), "threads"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name, no_leftover_processes):
    with pytest.raises((ValueError, TypeError), match=name) as info:
        launch(_workers.sum_ranks, **kwargs)
    assert str(info.value).count(". ") == 0  # one sentence


def test_nccl_without_a_gpu_per_rank_is_refused():
    import torch

    k = torch.cuda.device_count() + 1
    with pytest.raises(ValueError, match="nccl.*one GPU per rank"):
        launch(_workers.sum_ranks, k, backend="nccl")


# --- where ranks start from: the fork server ---

def test_ranks_are_forks_of_one_fork_server_that_serves_every_run(no_leftover_processes, monkeypatch):
    monkeypatch.delenv("DPVIZ_START_METHOD", raising=False)
    first = launch(_workers.where_am_i, 2, args=("HOME",))
    server = launcher.fork_server_pid()
    assert server is not None and psutil.Process(server).ppid() == os.getpid()
    start = time.monotonic()
    second = launch(_workers.where_am_i, 2, args=("HOME",))
    seconds = time.monotonic() - start
    assert launcher.fork_server_pid() == server
    assert [r["ppid"] for r in first + second] == [server] * 4
    assert [r["name"] for r in second] == ["dpviz-rank-0", "dpviz-rank-1"]
    print(f"\na k=2 run from the warm fork server took {seconds:.2f} s")


def test_ranks_take_the_launchers_environment_and_folder_not_the_servers(no_leftover_processes, monkeypatch, tmp_path):
    monkeypatch.delenv("DPVIZ_START_METHOD", raising=False)
    launch(_workers.sum_ranks, 1)  # the fork server starts here, before the change below
    monkeypatch.setenv("DPVIZ_TEST_VARIABLE", "set after the server started")
    monkeypatch.chdir(tmp_path)
    results = launch(_workers.where_am_i, 2, args=("DPVIZ_TEST_VARIABLE",))
    assert [r["variable"] for r in results] == ["set after the server started"] * 2
    assert [r["cwd"] for r in results] == [str(tmp_path)] * 2


def test_the_fork_server_stops_when_idle_and_on_request(no_leftover_processes, monkeypatch):
    monkeypatch.delenv("DPVIZ_START_METHOD", raising=False)
    launch(_workers.sum_ranks, 1)
    assert launcher.stop_fork_server() is True
    assert launcher.fork_server_pid() is None
    assert launcher.stop_fork_server() is False  # nothing left to stop
    monkeypatch.setattr(forkserver, "FORK_SERVER_IDLE", 0.5)  # read by the idle timer, in dpviz.engine.forkserver
    launch(_workers.sum_ranks, 1)
    server = launcher.fork_server_pid()
    end = time.monotonic() + 10
    while launcher.fork_server_pid() is not None and time.monotonic() < end:
        time.sleep(0.05)
    assert launcher.fork_server_pid() is None  # ended by the idle timer
    assert not psutil.pid_exists(server) or psutil.Process(server).status() == psutil.STATUS_ZOMBIE
    launch(_workers.sum_ranks, 1)  # the next run starts a new one
    assert launcher.fork_server_pid() not in (None, server)


def test_spawn_start_method_still_works(no_leftover_processes, monkeypatch):
    monkeypatch.setenv("DPVIZ_START_METHOD", "spawn")
    results = launch(_workers.where_am_i, 2, args=("HOME",))
    assert [r["ppid"] for r in results] == [os.getpid()] * 2
    assert [r["name"] for r in results] == ["dpviz-rank-0", "dpviz-rank-1"]


def test_no_rank_starts_its_work_before_every_rank_has_joined():
    """A rank whose work is short must not finish, and close its connections, while a peer is still inside gloo's
    rendezvous (that peer then fails with "Connection closed by peer": twice in a row once in CI, and 2 launches in
    300 under load): the ranks pass one barrier after joining, before any work."""
    assert launch(_workers.collectives_before_work, 2) == [1, 1]


def test_an_unknown_start_method_is_refused_in_one_sentence(monkeypatch):
    monkeypatch.setenv("DPVIZ_START_METHOD", "fork")
    with pytest.raises(ValueError, match=r"^DPVIZ_START_METHOD must be one of 'forkserver', 'spawn'; got 'fork'\.$"):
        launch(_workers.sum_ranks, 1)


def test_the_launch_helpers_are_told_apart_from_ranks(no_leftover_processes, monkeypatch):
    monkeypatch.delenv("DPVIZ_START_METHOD", raising=False)
    ranks = launch(_workers.where_am_i, 2, args=("HOME",))
    server = psutil.Process(launcher.fork_server_pid())
    assert launcher.is_helper_process(" ".join(server.cmdline()), server.ppid(), os.getpid())
    # a rank has the server's command line but the server as its parent
    assert not launcher.is_helper_process(" ".join(server.cmdline()), ranks[0]["ppid"], os.getpid())


def fork_servers_here() -> list[psutil.Process]:
    """This process's running fork servers (an exited one, a zombie until the next run reaps it, is not one)."""
    servers = []
    for p in psutil.Process().children():
        try:
            if p.status() != psutil.STATUS_ZOMBIE and "multiprocessing.forkserver" in " ".join(p.cmdline()):
                servers.append(p)
        except psutil.Error:
            pass
    return servers


def test_the_fork_server_is_found_and_stopped_through_public_calls_alone(no_leftover_processes, monkeypatch):
    """multiprocessing keeps the server's pid and its stop private; dpviz finds the server as its child with the fork
    server's command line and stops it by SIGTERM, without reaping it, so that multiprocessing's own
    ensure_running() reaps it and starts the next one."""
    monkeypatch.delenv("DPVIZ_START_METHOD", raising=False)
    launch(_workers.sum_ranks, 1)
    servers = fork_servers_here()
    assert [p.pid for p in servers] == [launcher.fork_server_pid()]
    start = time.perf_counter()
    assert launcher.stop_fork_server()
    seconds = time.perf_counter() - start
    assert launcher.fork_server_pid() is None and fork_servers_here() == []
    assert not servers[0].is_running() or servers[0].status() == psutil.STATUS_ZOMBIE
    assert seconds < 2.0, f"the fork server took {seconds:.2f} s to stop"
    ranks = launch(_workers.where_am_i, 2, args=("HOME",))  # the next run reaps the old server and starts a new one
    new = launcher.fork_server_pid()
    assert new not in (None, servers[0].pid) and [r["ppid"] for r in ranks] == [new] * 2
    assert not psutil.pid_exists(servers[0].pid) or servers[0].pid == new  # reaped by multiprocessing


def test_warm_up_starts_the_server_that_the_first_run_uses(no_leftover_processes, monkeypatch):
    monkeypatch.delenv("DPVIZ_START_METHOD", raising=False)
    launcher.stop_fork_server()
    launcher.warm_up()  # returns at once; the server imports torch in the background
    server = launcher.fork_server_pid()
    assert server is not None and [p.pid for p in fork_servers_here()] == [server]
    launcher.warm_up()  # one is running already: nothing new
    assert [p.pid for p in fork_servers_here()] == [server]
    ranks = launch(_workers.where_am_i, 2, args=("HOME",))
    assert [r["ppid"] for r in ranks] == [server] * 2


def test_warm_up_for_backward_with_a_gradient_has_the_server_import_it_once(no_leftover_processes, monkeypatch):
    from dpviz.engine import forkserver

    monkeypatch.delenv("DPVIZ_START_METHOD", raising=False)
    monkeypatch.setattr(forkserver, "_extra_preload", [])
    names = list(forkserver.BACKWARD_WITH_GRADIENT)
    launcher.stop_fork_server()
    launcher.warm_up()
    assert launch(_workers.imported, 1, args=(names,)) == [[False] * len(names)]  # a plain server: not imported
    launcher.stop_fork_server()
    launcher.warm_up(backward_with_gradient=True)
    assert launch(_workers.imported, 2, args=(names,)) == [[True] * len(names)] * 2  # every rank starts with it
    launcher.stop_fork_server()
    with pytest.raises(TypeError, match="backward_with_gradient must be True or False; got 'yes'"):
        launcher.warm_up(backward_with_gradient="yes")


def test_warm_up_with_spawn_or_a_bad_start_method_starts_nothing(no_leftover_processes, monkeypatch):
    launcher.stop_fork_server()
    monkeypatch.setenv("DPVIZ_START_METHOD", "spawn")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        launcher.warm_up()
    assert fork_servers_here() == [] and launcher.fork_server_pid() is None
    monkeypatch.setenv("DPVIZ_START_METHOD", "fork")
    with pytest.warns(UserWarning, match="did not start ahead of the first run .*DPVIZ_START_METHOD must be one of"):
        launcher.warm_up()  # only a head start: the first run raises the error itself
    assert fork_servers_here() == [] and launcher.fork_server_pid() is None


def test_the_fork_server_leaves_at_once_and_nothing_else_does(monkeypatch):
    """The fork server imports dpviz.engine.server_exit last, and so leaves through os._exit when its launcher dies
    instead of finalizing an interpreter that imported torch (0.8 s quiet, 5.9 s on a busy 2-core machine): within the
    2 s a rank has to leave after its launcher. It knows it is the server by its command line (sys.orig_argv).
    Imported anywhere else, the module changes nothing: a process's own exit status and exit handlers survive it."""
    import subprocess

    from dpviz.engine import server_exit

    monkeypatch.delenv("DPVIZ_START_METHOD", raising=False)
    assert forkserver.preload_modules()[-1] == forkserver.SERVER_EXIT
    launch(_workers.sum_ranks, 1)
    server = psutil.Process(launcher.fork_server_pid())
    assert server_exit.started_as_fork_server(server.cmdline()), server.cmdline()  # what the server reads at import
    assert launch(_workers.imported, 1, args=([forkserver.SERVER_EXIT],)) == [[True]]  # and it did import it
    assert not server_exit.started_as_fork_server([sys.executable, "-c", "import dpviz.engine.server_exit"])
    code = "import dpviz.engine.server_exit, atexit, sys; atexit.register(print, 'handlers ran'); sys.exit(3)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3 and proc.stdout.strip() == "handlers ran", (proc.returncode, proc.stdout, proc.stderr)

    probe = (f"import sys, time; sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
             "import _workers\n"
             "from dpviz.engine.launch import launch, fork_server_pid\n"
             "launch(_workers.sum_ranks, 1)\n"  # the server is up, its preload imported
             "print(fork_server_pid(), flush=True)\n"
             "time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", probe], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, DPVIZ_START_METHOD="forkserver"))
    try:
        server = psutil.Process(int(parent.stdout.readline()))
        killed = time.monotonic()
        parent.kill()  # the launcher dies without a word: the server sees its pipe close
        parent.wait(30)
        while server.is_running() and server.status() != psutil.STATUS_ZOMBIE and time.monotonic() - killed < 10:
            time.sleep(0.005)
        seconds = time.monotonic() - killed
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    print(f"the fork server left {seconds:.3f} s after its launcher was killed")
    assert seconds < 2.0
