"""Student code runs with no rights (dpviz.engine.confine): each attack a hostile student tried, as a test.

As root (the tests and a class's grader), a check's fresh process is confined: another user, a namespace with no
course in it, and nothing left once the verdict is given. As a plain user only the limits that need no rights
hold; those tests run either way.
"""

from __future__ import annotations

import io
import os
import sys
import textwrap
import time
import uuid
from contextlib import redirect_stdout
from pathlib import Path

import psutil
import pytest

import dpviz.exercises as ex
from dpviz.engine import confine, sandbox
from dpviz.engine.verdict import Submitted

CHECKOUT = Path(__file__).resolve().parents[1]
confined = pytest.mark.skipif(not confine.fresh_isolated(),
                              reason="not root, or the sandbox user cannot run this Python: checks are not confined")


def answer(source: str) -> Submitted:
    source = textwrap.dedent(source)
    return Submitted(source.split("def ", 1)[1].split("(", 1)[0], source)


def test_a_reference_imported_from_dpviz_is_not_accepted_and_the_verdict_says_why():
    verdict = ex.check_t_comm_ring(answer("""
        def t_comm_ring(k, M, alpha, beta):
            from dpviz.topics.ground_floor import costmodel
            return costmodel.t_comm_ring(k, M, alpha, beta)
        """))
    assert not verdict.passed, verdict
    assert "dpviz cannot be imported where your function is checked" in verdict, verdict
    assert "costmodel" not in verdict.split("raised", 1)[1].split("when called", 1)[0], verdict


def test_a_flood_written_straight_into_the_pipe_is_cut_and_nothing_past_the_limit_reaches_the_notebook():
    flood = answer("""
        def t_comm_ring(k, M, alpha, beta):
            import json, os
            line = (json.dumps({"print": "x" * 1_000_000}) + "\\n").encode()
            for fd in range(3, 64):
                try:
                    for _ in range(200):  # 200 MB
                        os.write(fd, line)
                except OSError:
                    pass
            return 0.0
        """)
    shown = io.StringIO()
    start = time.monotonic()
    with redirect_stdout(shown):
        verdict = ex.check_t_comm_ring(flood)
    assert not verdict.passed, verdict
    assert len(shown.getvalue()) <= sandbox.PRINT_LIMIT, len(shown.getvalue())
    assert time.monotonic() - start < 30


@confined
def test_the_fresh_process_sees_no_course_runs_as_another_user_and_writes_only_its_scratch():
    probe = answer(f"""
        def t_comm_ring(k, M, alpha, beta):
            import os
            seen = []
            for path in ({str(CHECKOUT / 'instructor' / 'solutions.py')!r}, {str(CHECKOUT / 'README.md')!r},
                         "/root", {os.getcwd()!r}):
                try:
                    os.listdir(path) if os.path.isdir(path) else open(path).read(1)
                    seen.append(path)
                except OSError:
                    pass
            try:
                open("/usr/dpviz-was-here", "w")
                seen.append("/usr")
            except OSError:
                pass
            print("uid", os.getuid(), "saw", seen)
            return 0.0
        """)
    shown = io.StringIO()
    with redirect_stdout(shown):
        ex.check_t_comm_ring(probe)
    text = shown.getvalue()
    assert "saw []" in text and "uid 0 " not in text, text


@confined
def test_a_detached_process_does_not_outlive_the_check():
    mark = f"{700 + uuid.uuid4().int % 1000}.{os.getpid()}"
    detach = answer(f"""
        def t_comm_ring(k, M, alpha, beta):
            import subprocess
            subprocess.Popen(["setsid", "sleep", {mark!r}], start_new_session=True)
            subprocess.Popen(["sh", "-c", "(sleep {mark} &) &"], start_new_session=True)
            return 0.0
        """)
    ex.check_t_comm_ring(detach)
    time.sleep(0.5)
    left = [p for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [])[-1:] == [mark]]
    assert not left, left


@confined
def test_on_ranks_the_function_runs_as_the_sandbox_user(tmp_path):
    private = tmp_path / "instructor-only"
    private.mkdir(mode=0o700)
    target = private / "written-by-a-rank"
    sneaky = answer(f"""
        def average_gradients(model_grads, world_size):
            try:
                open({str(target)!r}, "w").write("the rank ran as root")
            except OSError:
                pass
            for grad in model_grads:
                dist.all_reduce(grad)
                grad /= world_size
        """)
    verdict = ex.check_average_gradients(sneaky)
    assert verdict.passed, verdict
    assert not target.exists()


def test_the_sandbox_is_said_to_be_unconfined_once_where_it_cannot_be(monkeypatch, capsys):
    monkeypatch.setattr(confine, "_noted", False)
    confine.note_once(False)
    confine.note_once(False)
    said = capsys.readouterr().err
    assert said.count("not as an isolated user") == 1, said
    assert sys.executable  # (the check itself still runs: the unconfined path is the plain interpreter)


def test_every_reference_answer_passes_without_isolation(monkeypatch, capsys):
    """A plain user's laptop (no sandbox user to become): every chapter's right answers still pass, and the
    check says once that it ran them unconfined."""
    from dpviz.exercises.catalogue import EXERCISES
    from dpviz.grading import load_solutions

    monkeypatch.setenv(confine.USER_VARIABLE, "dpviz-no-such-user")  # (the ranks read it too: they get this env)
    monkeypatch.setattr(confine, "_noted", False)
    assert not confine.isolated() and not confine.fresh_isolated()
    solutions = load_solutions()
    for exercise in EXERCISES:
        verdict = getattr(ex, exercise.checker)(getattr(solutions, exercise.name))
        assert verdict.passed, verdict
    assert capsys.readouterr().err.count("not as an isolated user") == 1


def test_a_function_that_asks_for_gigabytes_is_refused_them():
    """The worker's address space is capped (confine.MEMORY_LIMIT): an 8 GB array is a MemoryError in its verdict,
    not a machine that swaps."""
    greedy = answer("""
        def t_comm_ring(k, M, alpha, beta):
            return float(np.empty(10**9).size)
        """)
    verdict = ex.check_t_comm_ring(greedy)
    assert not verdict.passed and "MemoryError" in verdict, verdict
