"""A function that computes nothing never gets "correct": issue 44's ways of passing an exercise without solving it.

Each way below passed before the checkers ran the reader's function in a fresh process (and, on ranks, took the
real answers from a launch of their own). Now each gets a failing verdict, within its check's time limit, and
leaves nothing running; the reference answers still pass, fast:

- walking up the caller's frames (``sys._getframe``, ``inspect.stack``) to the checker's cases, in the notebook's
  check and on the ranks (where the worker's ``expected`` was);
- finding the checker's cases through ``gc.get_objects()``;
- rebinding a helper of ``dpviz.engine.verdict`` (``close``) from an otherwise right answer, after which a plainly
  wrong answer passed too; and in a graded notebook, the same rebinding from the solution cell's top level, which
  the locked check cell did not undo (:mod:`dpviz.exercises.regrade` grades outside the kernel);
- a thread started by the function that fires after it returned and starts a process (one per rank on ranks);
- on ranks, replacing what the rank writes its result with (``pickle.dump``) by a pickle that runs code where the
  result is read, in the notebook's process: a rank's result is read as data only (numpy, plain Python, dpviz's
  classes), and anything else is refused unrun.

Processes started by the cheats carry a marker in their command line, so the test can find any that outlived its
check, orphans included.
"""

from __future__ import annotations

import os
import time
import uuid

import nbformat
import psutil
import pytest
import torch.distributed as dist

import dpviz.engine.verdict as verdict_module
import dpviz.exercises as ex
from dpviz.engine import sandbox
from dpviz.exercises.regrade import Regrade
from dpviz.grading import load_solutions

solutions = load_solutions()
MARK = f"{600 + uuid.uuid4().int % 1000}.{os.getpid()}"  # `sleep MARK`: a process a cheat started
FAST = 2.0  # seconds a right answer's check may take once the machine is warm


def marked() -> list[psutil.Process]:
    """Live processes whose command line is ``sleep MARK``, wherever they were re-parented."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if (p.info["cmdline"] or [])[-1:] == [MARK] and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


@pytest.fixture
def nothing_left():
    """After the test, and after a cheat's timers had time to fire: no marked process and no new child."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    time.sleep(1.5)  # the timers below fire 0.3 s after the call; give them time to try
    assert not marked(), f"left running: {[(p.pid, p.cmdline()) for p in marked()]}"
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before
            and p.status() != psutil.STATUS_ZOMBIE and "forkserver" not in " ".join(p.cmdline())
            and "resource_tracker" not in " ".join(p.cmdline())]
    assert not left, f"left running: {left}"


def notebook_function(source: str, name: str, namespace: dict | None = None):
    """Define ``name`` from ``source`` as a notebook cell does: IPython keeps the cell's text in linecache."""
    import linecache

    filename = f"<test cell {name} {abs(hash(source))}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {} if namespace is None else namespace
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


# --- in the notebook's check -------------------------------------------------------------------------


def sgd_step_from_frames(theta, grad, eta):  # the checker's current case, from a frame above
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        case = frame.f_locals.get("case")
        if hasattr(case, "expected"):
            return case.expected
        frame = frame.f_back
    return None


def sgd_step_from_the_path(theta, grad, eta):  # check_sgd_step's own `path`: every θ of the descent
    import inspect

    import numpy

    for info in inspect.stack():
        path = info.frame.f_locals.get("path")
        if isinstance(path, dict) and "theta" in path:
            thetas = path["theta"]
            for t in range(len(thetas) - 1):
                if numpy.array_equal(thetas[t], theta) and numpy.allclose(thetas[t + 1], theta - eta * grad):
                    return thetas[t + 1]
        cases = info.frame.f_locals.get("cases")
        for case in cases if isinstance(cases, list) else []:
            if numpy.array_equal(case.args[0], theta) and case.args[2] == eta:
                return case.expected
    return None


def sgd_step_from_gc(theta, grad, eta):  # the checker's Case objects, wherever they are held
    import gc

    import numpy

    for obj in gc.get_objects():
        if type(obj).__name__ == "Case":
            args = obj.args
            if numpy.array_equal(args[0], theta) and args[2] == eta:
                return obj.expected
    return None


def sgd_step_with_a_late_process(theta, grad, eta):  # right, but a timer starts a process after it returned
    import subprocess
    import threading

    threading.Timer(0.3, subprocess.Popen, args=(["sleep", LATE_MARK],)).start()  # noqa: F821 (see with_mark)
    return theta - eta * grad


@pytest.mark.parametrize("cheat", [sgd_step_from_frames, sgd_step_from_the_path, sgd_step_from_gc],
                         ids=lambda f: f.__name__)
def test_the_checkers_cases_are_out_of_reach(cheat, nothing_left):
    start = time.monotonic()
    verdict = ex.check_sgd_step(cheat)
    assert verdict.status == verdict_module.FAILED, verdict
    assert f"{cheat.__name__}: at step 0 of the line model's descent path" in verdict, verdict
    assert "it returned None" in verdict, verdict
    assert time.monotonic() - start < sandbox.TIME_LIMIT


def test_a_rebound_helper_does_not_reach_the_next_check(nothing_left):
    right_and_rebinding = notebook_function(
        "def sgd_step(theta, grad, eta):\n"
        "    import dpviz.engine.verdict as v\n"
        "    v.close = lambda *args, **kwargs: True\n"
        "    v.first_mismatch = lambda *args, **kwargs: None\n"
        "    return theta - eta * grad\n", "sgd_step")
    plainly_wrong = notebook_function("def sgd_step(theta, grad, eta):\n    return theta\n", "sgd_step")
    close, first_mismatch = verdict_module.close, verdict_module.first_mismatch
    verdict = ex.check_sgd_step(right_and_rebinding)  # dpviz is not there to rebind: the import itself is refused
    assert not verdict.passed and sandbox.REFUSED in verdict, verdict
    assert (verdict_module.close, verdict_module.first_mismatch) == (close, first_mismatch)
    verdict = ex.check_sgd_step(plainly_wrong)
    assert verdict.status == verdict_module.FAILED and "θ came back unchanged" in verdict, verdict


def with_mark(fn) -> verdict_module.Submitted:
    """``fn`` handed in as its text, with this test's marker written into it (the fresh process has no MARK)."""
    import inspect

    return verdict_module.Submitted(fn.__name__, inspect.getsource(fn).replace("LATE_MARK", repr(MARK)))


def test_a_thread_that_fires_after_the_return_is_ended_before_the_verdict(nothing_left):
    start = time.monotonic()
    verdict = ex.check_sgd_step(with_mark(sgd_step_with_a_late_process))
    assert verdict.status == verdict_module.FAILED, verdict
    assert ("sgd_step_with_a_late_process left 1 thread running after it returned when called as "
            "sgd_step_with_a_late_process((-1, 2), ") in verdict, verdict
    assert "the checker ended it, so that nothing outlives the check" in verdict, verdict
    assert time.monotonic() - start < sandbox.TIME_LIMIT


def test_a_closure_is_told_to_become_a_def():
    eta_used = 0.1
    verdict = ex.check_sgd_step(lambda theta, grad, eta: theta - eta_used * grad)
    assert verdict == ("<lambda>: it uses eta_used from the code around it, which the checker cannot send to the "
                       "fresh process it runs the function in. Define the function with def and use only its "
                       "arguments, np and math (import anything else inside it).")


def test_a_notebook_helper_is_named_with_what_the_fresh_process_has():
    namespace = {"step_of": lambda theta, grad, eta: theta - eta * grad}
    uses_a_helper = notebook_function("def sgd_step(theta, grad, eta):\n    return step_of(theta, grad, eta)\n",
                                      "sgd_step", namespace)
    verdict = ex.check_sgd_step(uses_a_helper)
    assert verdict.status == verdict_module.FAILED
    assert verdict.endswith("raised NameError: name 'step_of' is not defined when called as sgd_step((-1, 2), "
                            "(-6.44007, 2.4245), 0.1). step_of is defined in the notebook, but the checker runs the "
                            "function alone, in a fresh process. Define the function with def and use only its "
                            "arguments, np and math (import anything else inside it)."), verdict


def test_the_reference_answers_pass_fast_once_warm():
    ex.check_sgd_step(solutions.sgd_step)  # warm: the first fresh process reads numpy from disk
    for checker, answer in [(ex.check_sgd_step, solutions.sgd_step), (ex.check_bubble, solutions.bubble),
                            (ex.check_mean_gradient, solutions.mean_gradient)]:
        start = time.monotonic()
        verdict = checker(answer)
        took = time.monotonic() - start
        assert verdict.passed, verdict
        assert took < FAST, f"{checker.__name__}: {took:.2f} s"


# --- graded: the check re-run outside the kernel --------------------------------------------------------


def graded_notebook(solution: str, stale_output: str) -> nbformat.NotebookNode:
    """Chapter 01's graded cells as autograde leaves them: the solution cell, and the tests cell with what the
    student's kernel printed there."""
    solution_cell = nbformat.v4.new_code_cell(solution)
    solution_cell.metadata["nbgrader"] = {"solution": True, "grade": False, "locked": False, "grade_id": "sgd_step"}
    tests = nbformat.v4.new_code_cell("verdict = check_sgd_step(sgd_step)\nassert verdict.passed")
    tests.metadata["nbgrader"] = {"solution": False, "grade": True, "locked": True, "grade_id": "check_sgd_step",
                                  "points": 1}
    tests.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stale_output)]
    return nbformat.v4.new_notebook(cells=[solution_cell, tests])


def test_grading_reruns_the_check_from_the_handed_in_definition(monkeypatch):
    # The solution cell rebinds the checker's helper at its top level: in the student's kernel every later check
    # passes then, and the locked check cell does not undo it ...
    plainly_wrong = notebook_function("def sgd_step(theta, grad, eta):\n    return theta\n", "sgd_step")
    monkeypatch.setattr(verdict_module, "close", lambda *args, **kwargs: True)
    assert ex.check_sgd_step(plainly_wrong).passed
    monkeypatch.undo()
    # ... so grading re-runs the check outside the kernel, on the definition in the solution cell.
    cheat = ("import dpviz.engine.verdict as v\n"
             "v.close = lambda *args, **kwargs: True\n\n"
             "def sgd_step(theta, grad, eta):\n"
             "    \"\"\"Return theta after one gradient-descent step of size eta.\"\"\"\n"
             "    return theta\n")
    nb, _ = Regrade().preprocess(graded_notebook(cheat, "sgd_step: correct — (as the kernel said)\n"), {})
    outputs = nb.cells[1].outputs
    assert [o.output_type for o in outputs] == ["stream", "error"]
    assert "θ came back unchanged" in outputs[0].text and "correct" not in outputs[0].text
    assert outputs[1].ename == "AssertionError"

    right = ("import numpy as np\n\n"
             "def sgd_step(theta, grad, eta):\n    print('stepping')\n    return theta - eta * grad\n")
    nb, _ = Regrade().preprocess(graded_notebook(right, "anything\n"), {})
    outputs = nb.cells[1].outputs
    assert [o.output_type for o in outputs] == ["stream"]
    assert outputs[0].text.startswith("stepping\n" * 8) and "sgd_step: correct" in outputs[0].text


def test_grading_names_a_missing_or_broken_definition():
    missing_colon = "def sgd_step(theta, grad, eta)\n    return theta\n"
    for solution, words in [("x = 1\n", "its cell does not define sgd_step with def at the top level"),
                            (missing_colon, "its cell does not run: SyntaxError")]:
        nb, _ = Regrade().preprocess(graded_notebook(solution, ""), {})
        assert words in nb.cells[1].outputs[0].text and nb.cells[1].outputs[1].ename == "AssertionError"


# --- on the ranks ----------------------------------------------------------------------------------------
# Module-level functions, as a student would write them in a cell; the ranks get their source.


def average_from_frames(model_grads, world_size):  # the worker's `expected`, from a frame above
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        expected = frame.f_locals.get("expected")
        if isinstance(expected, list) and len(expected) == len(model_grads):
            for grad, answer in zip(model_grads, expected):
                grad.copy_(answer)
            return
        frame = frame.f_back


def average_without_the_real_all_reduce(model_grads, world_size):  # the checker's own collective made a no-op
    import torch.distributed

    torch.distributed.all_reduce = lambda tensor, *args, **kwargs: None


def average_with_a_late_process(model_grads, world_size):  # right, but a timer starts a process on every rank
    import subprocess
    import threading

    for grad in model_grads:
        dist.all_reduce(grad)
        grad /= world_size
    threading.Timer(0.3, subprocess.Popen, args=(["sleep", LATE_MARK],)).start()  # noqa: F821 (see with_mark)


@pytest.fixture(scope="module")
def ranked_verdicts():
    """The rank cheats, checked on 3 real ranks in one launch (the reference first: the last cheat's rebinding of
    dist.all_reduce stays in the ranks it ran on)."""
    from dpviz.exercises import ranked

    cheats = [solutions.average_gradients, average_from_frames, average_without_the_real_all_reduce]
    start = time.monotonic()
    verdicts = ranked.check_many([("average_gradients", fn) for fn in cheats])
    return dict(zip([fn.__name__ for fn in cheats], verdicts)), time.monotonic() - start


@pytest.mark.parametrize("cheat", ["average_from_frames", "average_without_the_real_all_reduce"])
def test_on_ranks_the_real_answers_are_out_of_reach(ranked_verdicts, cheat):
    verdicts, took = ranked_verdicts
    assert verdicts[cheat].status == verdict_module.FAILED, verdicts[cheat]
    assert verdicts[cheat].startswith(f"{cheat}: on rank 0, element "), verdicts[cheat]
    assert "nothing was exchanged" in verdicts[cheat], verdicts[cheat]
    assert verdicts["average_gradients"].passed, verdicts["average_gradients"]
    assert took < 60


def test_on_ranks_a_thread_that_fires_after_the_return_leaves_nothing(nothing_left):
    start = time.monotonic()
    verdict = ex.check_average_gradients(with_mark(average_with_a_late_process))
    assert verdict.status == verdict_module.FAILED, verdict
    assert verdict.startswith("average_with_a_late_process left 1 thread running after it returned on rank 0; "
                              "the checker ended it"), verdict
    assert time.monotonic() - start < 60



def average_through_the_result_pickle(model_grads, world_size):
    import json
    import pickle

    class Payload:
        def __reduce__(self):
            return (exec, ("import dpviz.engine.verdict as v; v.close = lambda *a, **k: True",))

    real = pickle.dump
    pickle.dump = lambda obj, f, protocol=None: real([Payload()], f, protocol)
    json.dumps = lambda *args, **kwargs: pickle.dumps([Payload()]).decode("latin-1")  # what the rank writes back
    for grad in model_grads:
        dist.all_reduce(grad)
        grad /= world_size


def test_on_ranks_a_result_that_would_run_code_in_the_notebook_is_refused_unrun(nothing_left):
    close = verdict_module.close
    verdict = ex.check_average_gradients(average_through_the_result_pickle)
    assert verdict_module.close is close, "a rank's result ran code in the notebook's process"
    assert verdict.status == verdict_module.FAILED and "could not be read" in verdict, verdict
    assert ex.check_average_gradients(solutions.average_gradients).passed


def test_a_pickled_result_that_walks_a_dotted_name_is_refused(tmp_path):
    import pickletools

    from dpviz.engine import rank

    # protocol 4's STACK_GLOBAL with the name 'subprocess.Popen' looked up in dpviz.engine.sandbox, called on 'true':
    # the old unpickler let it through (a class reached from a dpviz module) and ran the command
    stream = (b"\x80\x04" + b"\x8c\x14dpviz.engine.sandbox" + b"\x94" + b"\x8c\x10subprocess.Popen" + b"\x94"
              + b"\x93" + b"\x94" + b"\x8c\x04true" + b"\x85" + b"R" + b".")
    pickletools.dis(stream, out=open(os.devnull, "w"))  # a well-formed pickle: only what it names is refused
    (tmp_path / "rank0.pkl").write_bytes(stream)
    with pytest.raises(rank.UnreadableResult, match="subprocess.Popen"):
        rank._read_result(str(tmp_path), 0)
    (tmp_path / "rank0.json").write_bytes(stream)
    with pytest.raises(rank.UnreadableResult, match="not data"):
        rank._read_result(str(tmp_path), 0, as_data=True)


def average_then_stop_rank_zero(model_grads, world_size):
    import os
    import signal

    if dist.get_rank() == 0:
        os.kill(os.getpid(), signal.SIGSTOP)
    for grad in model_grads:
        dist.all_reduce(grad)
        grad /= world_size


def test_on_ranks_a_stopped_rank_is_named_as_stopped_not_as_a_missing_collective(nothing_left):
    verdict = ex.check_average_gradients(average_then_stop_rank_zero, stall_timeout=4)
    assert verdict.status == verdict_module.FAILED, verdict
    assert "rank 0 was stopped by a signal" in verdict and "a collective that not every rank made" not in verdict, \
        verdict
