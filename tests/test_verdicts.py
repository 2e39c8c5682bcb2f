"""Every outcome a verdict: whatever a reader's function does, its checker answers with a short Verdict within a
stated time, and nothing the function started is left running.

In the notebook's process (``dpviz.engine.sandbox``): a loop that never ends, ``time.sleep``, ``os._exit``,
``sys.exit``, ``KeyboardInterrupt`` and other ``BaseException``s, a fork, a child process, megabytes printed or
returned, a ``__repr__`` that raises, NaN, the wrong type or shape. On 3 real gloo ranks
(``dpviz.exercises.rank_exercises.RankGuard``): the same, plus ``dist.destroy_process_group()`` and a rank killed outright.
And the four verdicts that used to mislead (chapters 04, 05, 06, 12) now name the mistake.

After each ranked case no process named ``dpviz-rank-*`` of this test process may be left: one whose parent chain
leads here, or, since a forked child whose rank has ended is re-parented away from that chain, one in this test
process's process group (other sessions' ranks run in their own groups, and ranks that were there before the
test are not counted).
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
import torch
import torch.distributed as dist

import dpviz.exercises as ex
from dpviz.engine import sandbox as guard
from dpviz.engine.verdict import FAILED, PASSED

LONGEST = 400  # characters: "at most a few hundred"


def short(verdict):
    assert len(verdict) <= LONGEST, f"{len(verdict)} characters: {verdict[:500]}"
    return verdict


# --- processes --------------------------------------------------------------------------------------


def my_ranks() -> set[int]:
    """Live processes named dpviz-rank-* that descend from this test process, or that were orphaned in its process
    group (their launcher gone: adopted by init). Another pytest-xdist worker's ranks share the group but descend from
    that worker, so they are not this test's."""
    me, group = os.getpid(), os.getpgid(0)
    found = set()
    for p in psutil.process_iter(["name"]):
        if not (p.info["name"] or "").startswith("dpviz-rank"):
            continue
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            ancestors = {a.pid for a in p.parents()}
            if me in ancestors or (os.getpgid(p.pid) == group and ancestors <= {1}):
                found.add(p.pid)
        except (psutil.NoSuchProcess, ProcessLookupError):
            pass
    return found


@pytest.fixture
def no_rank_left():
    before = my_ranks()
    yield
    end = time.monotonic() + 3.0  # reaped ranks may take a moment to vanish from the process table
    while (left := my_ranks() - before) and time.monotonic() < end:
        time.sleep(0.1)
    assert not left, f"left running: {[(pid, psutil.Process(pid).name()) for pid in left]}"


@pytest.fixture
def no_child_left():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before
            and p.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(p.cmdline())
            and "forkserver" not in " ".join(p.cmdline())]
    assert not left, f"left running: {left}"


# --- in the notebook's process ----------------------------------------------------------------------


def loops(theta, grad, eta):
    while True:
        pass


def swallows_every_stop(theta, grad, eta):  # catches the first stop, loops again; the repeats end it
    for _ in range(3):
        try:
            while True:
                pass
        except BaseException:
            pass
    return theta - eta * grad


def sleeps(theta, grad, eta):
    import time

    time.sleep(100)


def exits(theta, grad, eta):
    import os

    os._exit(3)


def calls_sys_exit(theta, grad, eta):
    import sys

    sys.exit()


def raises_system_exit(theta, grad, eta):
    raise SystemExit(2)


def interrupts(theta, grad, eta):
    raise KeyboardInterrupt


def raises_a_base_exception(theta, grad, eta):
    class Mine(BaseException):
        pass

    raise Mine("not an Exception")


def forks(theta, grad, eta):
    import os
    import time

    if os.fork() == 0:
        time.sleep(600)
    return theta - eta * grad


def starts_a_child(theta, grad, eta):
    import subprocess

    subprocess.Popen(["sleep", "600"])
    return theta - eta * grad


def prints_megabytes(theta, grad, eta):
    print("x" * 1_000_000)
    return theta - eta * grad


def returns_megabytes(theta, grad, eta):
    return "x" * 1_000_000


def returns_a_bad_repr(theta, grad, eta):
    class BadRepr:
        def __repr__(self):
            raise ValueError("no repr")

    return BadRepr()


def raises_a_huge_message(theta, grad, eta):
    raise ValueError("y" * 1_000_000)


def test_a_loop_that_never_ends_gets_a_verdict_at_the_stated_limit(no_child_left):
    start = time.monotonic()
    verdict = short(ex.check_sgd_step(loops))
    took = time.monotonic() - start
    assert verdict.status == FAILED
    assert verdict.startswith("loops was still running when called as loops(")
    assert f"after this check's {guard.TIME_LIMIT:g} s for all its calls: look for a loop that never ends." in verdict
    assert guard.TIME_LIMIT <= took < guard.TIME_LIMIT + 2


def bubble_swallows_every_stop(p, m):  # catches what it can, loops again: the fresh process is killed
    for _ in range(3):
        try:
            while True:
                pass
        except BaseException:
            pass
    return (p - 1) / (m + p - 1)


def bubble_sleeps(p, m):
    import time

    time.sleep(100)


def bubble_loops(p, m):
    while True:
        pass


@pytest.mark.parametrize("fn", [bubble_swallows_every_stop, bubble_sleeps], ids=lambda f: f.__name__)
def test_a_loop_that_catches_the_stop_and_a_sleep_end_too(fn, monkeypatch, no_child_left):
    monkeypatch.setattr(guard, "TIME_LIMIT", 0.5)
    start = time.monotonic()
    verdict = short(ex.check_bubble(fn))
    assert "was still running" in verdict and "this check's 0.5 s" in verdict, verdict
    assert time.monotonic() - start < 3


def test_the_watchdog_gives_back_a_timer_it_found(monkeypatch):
    monkeypatch.setattr(guard, "TIME_LIMIT", 0.3)
    fired = []

    def mine(signum, frame):
        fired.append(signum)

    old = signal.signal(signal.SIGALRM, mine)
    old_timer = signal.setitimer(signal.ITIMER_REAL, 50.0)
    try:
        ex.check_bubble(bubble_loops)
        delay, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 45 < delay <= 50, delay
        assert signal.getsignal(signal.SIGALRM) is mine and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if old_timer[0] > 0:  # pytest-timeout's own timer, if it runs one
            signal.setitimer(signal.ITIMER_REAL, *old_timer)


def test_off_the_main_thread_a_loop_still_ends(monkeypatch):
    monkeypatch.setattr(guard, "TIME_LIMIT", 0.5)
    answers = []
    thread = threading.Thread(target=lambda: answers.append(ex.check_sgd_step(loops)))
    thread.start()
    thread.join(10)
    assert not thread.is_alive() and "was still running" in answers[0], answers


IN_PROCESS = [  # (function, what the verdict must say)
    (exits, "exits called os._exit(3) when called as exits("),
    (calls_sys_exit, "calls_sys_exit raised SystemExit when called as"),
    (raises_system_exit, "raised SystemExit: 2 when called as"),
    (interrupts, "interrupts raised KeyboardInterrupt when called as"),
    (raises_a_base_exception, "raised Mine: not an Exception when called as"),
    (forks, "forks forked 1 child process when called as forks("),
    (starts_a_child, "starts_a_child left 1 child process running when called as"),
    (returns_megabytes, "it returned 'xxxx"),
    (returns_a_bad_repr, "it returned an object of type BadRepr whose __repr__ raised ValueError"),
    (raises_a_huge_message, "raised ValueError: yyyy"),
    (lambda theta, grad, eta: theta * np.nan, "it gives (nan, nan), expected"),
    (lambda theta, grad, eta: {"theta": theta}, "it returned {'theta': array"),
    (lambda theta, grad, eta: None, "it returned None. It must return the new θ"),
    (lambda theta, grad, eta: np.zeros((3, 3)), "it returned 9 numbers of shape (3, 3); expected shape (2,)"),
]


@pytest.mark.parametrize("fn, fragment", IN_PROCESS, ids=[f for _, f in IN_PROCESS])
def test_whatever_the_function_does_in_process_is_a_short_verdict(fn, fragment, no_child_left):
    verdict = short(ex.check_sgd_step(fn))
    assert verdict.status == FAILED and fragment in verdict, verdict


def test_megabytes_printed_show_their_first_characters_and_a_count(capsys):
    verdict = short(ex.check_sgd_step(prints_megabytes))
    printed = capsys.readouterr().out
    assert verdict.passed, verdict
    assert len(printed) == guard.PRINT_LIMIT
    assert verdict.endswith(f"It printed {8 * 1_000_001:,} characters; only the first {guard.PRINT_LIMIT:,} are shown.")


def test_the_stream_and_exit_are_given_back():
    streams, real_exit = (sys.stdout, sys.stderr), os._exit
    ex.check_sgd_step(exits)
    ex.check_sgd_step(prints_megabytes)
    assert (sys.stdout, sys.stderr) == streams and os._exit is real_exit


def test_chapter_06_names_a_latency_term_of_2k_rounds():
    verdict = short(ex.check_t_comm_ring(lambda k, M, alpha, beta: 2 * k * alpha + 2 * (k - 1) / k * M / beta))
    assert verdict.status == FAILED
    assert "it gives 0.00604, expected 0.00603 (0.17 % too large)" in verdict, verdict
    assert "Your latency term counts 2k rounds; a ring has 2(k−1)" in verdict, verdict


def test_a_correct_answer_still_passes_under_the_guard():
    assert ex.check_sgd_step(lambda theta, grad, eta: theta - eta * grad).passed
    assert ex.check_t_comm_ring(lambda k, M, alpha, beta: 2 * (k - 1) * alpha + 2 * (k - 1) / k * M / beta).passed


# --- on real ranks ----------------------------------------------------------------------------------
# Module-level functions, as a student would write them in a cell; the ranks get their source.


def avg_loops(model_grads, world_size):
    while True:
        pass


def avg_exits(model_grads, world_size):
    import os

    os._exit(3)


def avg_calls_sys_exit(model_grads, world_size):
    import sys

    sys.exit()


def avg_interrupts(model_grads, world_size):
    raise KeyboardInterrupt


def avg_raises_a_base_exception(model_grads, world_size):
    class Mine(BaseException):
        pass

    raise Mine("not an Exception")


def avg_destroys_the_group(model_grads, world_size):
    dist.destroy_process_group()


def avg_destroys_the_group_through_its_own_import(model_grads, world_size):
    import torch.distributed

    torch.distributed.destroy_process_group()


def avg_forks(model_grads, world_size):
    import os
    import time

    if os.fork() == 0:
        time.sleep(600)
    for grad in model_grads:
        dist.all_reduce(grad)
        grad /= world_size


def avg_starts_a_child(model_grads, world_size):
    import subprocess

    subprocess.Popen(["sleep", "600"])
    for grad in model_grads:
        dist.all_reduce(grad)
        grad /= world_size


def avg_kills_its_rank(model_grads, world_size):
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def avg_prints_megabytes(model_grads, world_size):
    print("x" * 2_000_000)
    for grad in model_grads:
        dist.all_reduce(grad)
        grad /= world_size


def avg_returns_megabytes(model_grads, world_size):
    return "x" * 1_000_000


def avg_returns_a_bad_repr(model_grads, world_size):
    class BadRepr:
        def __repr__(self):
            raise ValueError("no repr")

    return BadRepr()


def avg_raises_a_huge_message(model_grads, world_size):
    raise ValueError("y" * 1_000_000)


def avg_makes_nan(model_grads, world_size):
    for grad in model_grads:
        grad.fill_(float("nan"))


def avg_returns_new_tensors(model_grads, world_size):  # chapter 04: right numbers, inputs untouched
    means = []
    for grad in model_grads:
        total = grad.clone()
        dist.all_reduce(total)
        means.append(total / world_size)
    return means


def avg_rebinds_the_name(model_grads, world_size):  # chapter 04: g = g / k
    for g in model_grads:
        dist.all_reduce(g)
        g = g / world_size


def avg_replaces_list_entries(model_grads, world_size):
    for i in range(len(model_grads)):
        dist.all_reduce(model_grads[i])
        model_grads[i] = model_grads[i] / world_size


def rs_exits(chunks, rank, world_size, step):
    import os

    os._exit(3)


def rs_rebinds_the_chunk(chunks, rank, world_size, step):  # chapter 05: rebinding instead of updating
    left, right = (rank - 1) % world_size, (rank + 1) % world_size
    send_i, recv_i = (rank - step) % world_size, (rank - step - 1) % world_size
    inbox = torch.empty_like(chunks[recv_i])
    sending = dist.isend(chunks[send_i], dst=right)
    dist.recv(inbox, src=left)
    sending.wait()
    mine = chunks[recv_i]
    mine = mine + inbox


def rs_loops_on_rank_0(chunks, rank, world_size, step):
    while rank == 0:
        pass


def gc_all_reduce(y_block, world_size):  # chapter 12: an all-reduce where an all-gather belongs
    dist.all_reduce(y_block)
    return y_block


def gc_all_reduce_repeated(y_block, world_size):
    dist.all_reduce(y_block)
    return torch.cat([y_block] * world_size, dim=1)


def gc_returns_a_dict(y_block, world_size):
    return {"y": y_block}


def gc_returns_the_wrong_shape(y_block, world_size):
    return torch.zeros(2, 2)


def gc_returns_megabytes(y_block, world_size):
    return "x" * 1_000_000


CHECK = {"avg": ex.check_average_gradients, "rs_": ex.check_reduce_scatter_step, "gc_": ex.check_gather_columns}

RANKED = [  # (function, what the verdict must say)
    (avg_exits, "avg_exits called os._exit(3) on rank 0, which ends the process at once; the checker stopped it"),
    (rs_exits, "rs_exits called os._exit(3) on rank 0, in step 0 (the first), which ends the process at once"),
    (avg_calls_sys_exit, "avg_calls_sys_exit raised SystemExit on rank 0: sys.exit() or exit() raises it"),
    (avg_interrupts, "avg_interrupts raised KeyboardInterrupt on rank 0"),
    (avg_raises_a_base_exception, "avg_raises_a_base_exception raised Mine: not an Exception on rank 0."),
    (avg_destroys_the_group, "it called dist.destroy_process_group() on rank 0, which would end the ranks' process group"),
    (avg_destroys_the_group_through_its_own_import, "it called dist.destroy_process_group() on rank 0"),
    (avg_forks, "avg_forks forked 1 child process on rank 0; the checker ended it"),
    (avg_starts_a_child, "avg_starts_a_child left 1 child process running on rank 0; the checker ended it"),
    (avg_kills_its_rank, "'s process ended while it ran the function: process was killed by SIGKILL"),
    (avg_returns_megabytes, "It returned a str of 1,000,000 characters and left the gradient tensors as they were"),
    (avg_returns_a_bad_repr, "It returned a value of type BadRepr and left the gradient tensors as they were"),
    (avg_raises_a_huge_message, "raised ValueError: yyyy"),
    (avg_makes_nan, "of gradient tensor 0 (shape (8, 4)) is nan, expected"),
    (avg_returns_new_tensors, "It returned new tensors that hold the mean over the 3 ranks, but the tensors in "
                              "model_grads were left unchanged: the inputs were not changed in place."),
    (avg_rebinds_the_name, "`g = g / world_size` makes a new tensor and points the name g at it, instead of changing "
                           "the tensor in place; the tensor in model_grads still holds the sum over the ranks. "
                           "Use g /= world_size, or g.div_(world_size)."),
    (avg_replaces_list_entries, "It put new tensors into the list model_grads (position 0 first)"),
    (rs_rebinds_the_chunk, "Rank 0's chunks did not change in step 0: `mine = mine + inbox` makes a new tensor and "
                           "points the name mine at it, so chunk 2 itself stays as it was. Update it in place"),
    (gc_all_reduce, "Every rank got the sum of the blocks, which is what dist.all_reduce gives, not each rank's "
                    "block side by side"),
    (gc_all_reduce_repeated, "every column block of Y is the sum of the 3 blocks. Every rank got the sum of the blocks"),
    (gc_returns_a_dict, "on rank 0 it returned a dict; expected a tensor of shape (4, 9)"),
    (gc_returns_the_wrong_shape, "on rank 0 it returned shape (2, 2); expected (4, 9)"),
    (gc_returns_megabytes, "on rank 0 it returned a str of 1,000,000 characters; expected a tensor"),
]


@pytest.mark.parametrize("fn, fragment", RANKED, ids=[fn.__name__ for fn, _ in RANKED])
def test_whatever_the_function_does_on_ranks_is_a_short_verdict(fn, fragment, no_rank_left):
    verdict = short(CHECK[fn.__name__[:3]](fn))
    assert verdict.status == FAILED, verdict
    assert fragment in verdict, verdict
    assert "Traceback" not in verdict and "RankError" not in verdict


@pytest.mark.parametrize("fn, where", [(avg_loops, "on rank 0"), (rs_loops_on_rank_0, "on rank 0, in step 0 (the first)")],
                         ids=["every-rank", "rank-0-only"])
def test_a_loop_on_ranks_ends_at_the_call_limit(fn, where, no_rank_left):
    start = time.monotonic()
    verdict = short(CHECK[fn.__name__[:3]](fn, stall_timeout=6.0))  # a call gets 2/3 of it: 4 s
    assert verdict == (f"{fn.__name__} was still running {where} after the 4 s a rank gives one call: look for a "
                       "loop that never ends."), verdict
    assert time.monotonic() - start < 6.0 + 10


def test_megabytes_printed_on_ranks_are_cut_and_counted(no_rank_left, capfd):
    verdict = short(ex.check_average_gradients(avg_prints_megabytes))
    assert verdict.passed, verdict
    assert verdict.endswith("It printed 2,000,001 characters on rank 0; only the first 10,000 are shown.")
    assert len(capfd.readouterr().out) <= 3 * 10_000 + 100


def avg_right(model_grads, world_size):
    for grad in model_grads:
        dist.all_reduce(grad)
        grad /= world_size


def rs_right(chunks, rank, world_size, step):
    left, right = (rank - 1) % world_size, (rank + 1) % world_size
    send_i, recv_i = (rank - step) % world_size, (rank - step - 1) % world_size
    inbox = torch.empty_like(chunks[recv_i])
    sending = dist.isend(chunks[send_i], dst=right)
    dist.recv(inbox, src=left)
    sending.wait()
    chunks[recv_i] += inbox


def gc_right(y_block, world_size):
    blocks = [torch.empty_like(y_block) for _ in range(world_size)]
    dist.all_gather(blocks, y_block)
    return torch.cat(blocks, dim=1)


@pytest.mark.parametrize("fn", [avg_right, rs_right, gc_right], ids=lambda f: f.__name__)
def test_a_correct_answer_still_passes_on_ranks(fn, no_rank_left):
    verdict = CHECK[fn.__name__[:3]](fn)
    assert verdict.status == PASSED, verdict


def test_voila_hides_the_code_so_an_unanswered_check_does_not_point_at_it(monkeypatch):
    from dpviz.engine.verdict import NOT_ATTEMPTED, not_attempted

    monkeypatch.delenv("VOILA_KERNEL_ID", raising=False)
    monkeypatch.delenv("VOILA_BASE_URL", raising=False)
    monkeypatch.delenv("VOILA_PREHEAT", raising=False)
    assert "write the function above" in not_attempted("speedup")
    monkeypatch.setenv("VOILA_BASE_URL", "/")
    said = not_attempted("speedup")
    assert said.status == NOT_ATTEMPTED and "above" not in said and "without its code" in said
