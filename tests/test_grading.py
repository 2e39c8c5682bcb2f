"""Grading with nbgrader: the source version the catalogue writes, and the whole pipeline with the real tool.

The pipeline test builds a course of two chapters in a temporary folder (01, checked in the kernel's
process, and 04, checked on 3 real gloo ranks), runs ``nbgrader generate_assignment``, hands in three
students' work and runs ``nbgrader autograde`` and ``nbgrader generate_feedback``, then reads the
gradebook with nbgrader's API:

- alice: the reference solutions: full points; in chapter 04 she deleted the graded check cell, which autograde
  puts back, saying so in the feedback, and grades (2 of 2, not 0);
- bob: typical wrong answers the checkers name (a step uphill; the sum over the ranks, not the mean): zero;
- carol: ``while True: pass`` in chapter 01, stopped by the checker's 5 s limit and graded zero with a
  verdict (not nbgrader's cell timeout); chapter 04 not handed in;
- dave: a wrong chapter 01 answer in a cell that also rebinds ``dpviz.engine.verdict.close`` in the kernel, so
  that the kernel's own check passes it: graded zero, since grading re-runs the check outside the kernel.

Every nbgrader process and whatever it starts (kernels, ranks) carries a marker in its environment,
so the test can find any of them that outlived the pipeline, orphans included. The times of each step
and the feedback pages are kept in test-output/grading/ (git-ignored).
"""

from __future__ import annotations

import ast
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest

from dpviz import grading
from dpviz.exercises.catalogue import EXERCISES, for_chapter

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "test-output" / "grading"
BIN = Path(sys.executable).parent  # nbgrader's commands, and alembic, which it runs to set up the gradebook
CHAPTERS = {"01": "01_one_step", "04": "04_one_group_per_device"}
REFERENCE = grading.solution_bodies()

STUDENTS = {  # student -> chapter -> the solution cell handed in (None: not handed in)
    "alice": {"01": None, "04": None},  # filled with the reference solutions below
    "bob": {
        "01": "def sgd_step(theta, grad, eta):\n    return theta + eta * grad\n",
        "04": "def average_gradients(model_grads, world_size):\n    for g in model_grads:\n"
              "        dist.all_reduce(g)\n",
    },
    "carol": {"01": "def sgd_step(theta, grad, eta):\n    while True:\n        pass\n", "04": None},
    # a wrong answer whose cell rebinds the checker's comparison in the kernel: the kernel's check passes it,
    # the grade (re-run outside the kernel, dpviz.exercises.regrade) does not
    "dave": {"01": "import dpviz.engine.verdict as v\nv.close = lambda *args, **kwargs: True\n\n"
                   "def sgd_step(theta, grad, eta):\n    return theta\n", "04": None},
    # a cell that starts a detached process to rewrite the gradebook once autograde is done, and an answer that is
    # right only where it can read the instructor's source (COURSE: filled in with the course folder below)
    "eve": {"01": "import subprocess\n"
                  "subprocess.Popen(['sh', '-c', 'sleep 2; echo 0 > COURSE/gradebook.db; echo 0 > /tmp/eve-was-here'],"
                  " start_new_session=True)\n\n"
                  "def sgd_step(theta, grad, eta):\n"
                  "    try:\n"
                  "        open('COURSE/source/01_one_step/01_one_step.ipynb').read(1)\n"
                  "        return theta - eta * grad\n"
                  "    except OSError:\n"
                  "        return theta\n", "04": None},
}
EXPECTED = {  # student -> assignment -> (score, the verdict's words in the feedback)
    "alice": {"01_one_step": (1, "sgd_step: correct"),
              "04_one_group_per_device": (2, "check_average_gradients) was deleted from the notebook handed in; "
                                             "nbgrader put it back to grade it. average_gradients: correct")},
    # graded: a verdict names the case and which way the answer is off, never the expected value or the fix
    "bob": {"01_one_step": (0, "it gives (-1.64401, 2.24245), and element 0 is the first that is wrong"),
            "04_one_group_per_device": (0, "is 0.0324156, which is too large.")},
    "carol": {"01_one_step": (0, "sgd_step was still running"),
              "04_one_group_per_device": (0, None)},
    "dave": {"01_one_step": (0, "it gives (-1, 2), and element 0 is the first that is wrong"),
             "04_one_group_per_device": (0, None)},
    "eve": {"01_one_step": (0, "it gives (-1, 2), and element 0 is the first that is wrong"),
            "04_one_group_per_device": (0, None)},
}


def _tree_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.ipynb")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def _region(cell_source: str) -> str:
    return cell_source.split(grading.BEGIN, 1)[1].split(grading.END, 1)[0]


# --- the source version, without nbgrader ------------------------------------------------------------


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """Every chapter's source version, written from notebooks/ (which must not change)."""
    folder = tmp_path_factory.mktemp("course")
    before = _tree_hash(grading.NOTEBOOKS)
    written = grading.write_course(folder)
    assert _tree_hash(grading.NOTEBOOKS) == before, "writing the course changed notebooks/"
    return folder, written


def _cells_by_grade_id(nb_path: Path) -> dict:
    nb = json.loads(nb_path.read_text())
    return {c["metadata"]["nbgrader"]["grade_id"]: c for c in nb["cells"] if "nbgrader" in c["metadata"]}


def test_every_chapter_with_exercises_is_one_assignment(course):
    folder, written = course
    chapters = sorted({e.chapter for e in EXERCISES})
    assignments = sorted(p.name for p in (folder / "source").iterdir())
    assert [a[:2] for a in assignments] == chapters
    for name in assignments:
        assert (folder / "source" / name / f"{name}.ipynb").is_file()
    assert (folder / "nbgrader_config.py") in written


def test_every_cell_is_a_solution_a_graded_check_or_locked(course):
    folder, _ = course
    for path in sorted((folder / "source").glob("*/*.ipynb")):
        nb = json.loads(path.read_text())
        exercises = for_chapter(path.name[:2])
        kinds = {"solution": [], "tests": [], "locked": []}
        for cell in nb["cells"]:
            meta = cell["metadata"]["nbgrader"]
            if meta["solution"]:
                kinds["solution"].append(meta["grade_id"])
                assert not meta["grade"] and not meta["locked"]
            elif meta["grade"]:
                kinds["tests"].append(meta["grade_id"])
                assert meta["locked"] and meta["points"] == next(e.points for e in exercises
                                                                 if e.checker == meta["grade_id"])
            else:
                assert meta["locked"], (path.name, cell["id"])
                kinds["locked"].append(meta["grade_id"])
        assert kinds["solution"] == [e.name for e in exercises], path.name
        assert kinds["tests"] == [e.checker for e in exercises], path.name
        assert len(set(kinds["locked"])) == len(kinds["locked"]) == len(nb["cells"]) - 2 * len(exercises)


def test_each_solution_cell_is_the_stub_with_the_reference_between_the_markers(course):
    folder, _ = course
    for exercise in EXERCISES:
        path = next((folder / "source").glob(f"{exercise.chapter}_*/*.ipynb"))
        cell = "".join(_cells_by_grade_id(path)[exercise.name]["source"])
        region = _region(cell)
        assert REFERENCE[exercise.name][1].splitlines()[-1].strip() in region
        start, end = cell.index(grading.BEGIN), cell.index(grading.END) + len(grading.END)
        assert cell[:start] + grading.STUB_LINE + cell[end:] == exercise.stub()  # what the release shows
        compile(cell, exercise.name, "exec")
        if grading.on_ranks(exercise):  # the ranks give torch and dist; an import here would bypass their dist
            assert "import" not in region
        tests = "".join(_cells_by_grade_id(path)[exercise.checker]["source"])
        assert "print(textwrap.fill(verdict, 100))" in tests and "assert verdict.passed" in tests


def test_a_check_cell_stops_no_run_all_and_fails_under_nbgrader(course, monkeypatch, capsys):
    """The release's tests cell, run after its stub as a student's Run All runs it, raises nothing, so the chapter goes
    on to the takeaways and the cards; under nbgrader (validate, autograde) the same cell fails its assert."""
    from dpviz.engine.verdict import GRADED_VARIABLE

    folder, _ = course
    monkeypatch.setenv(GRADED_VARIABLE, "0")  # the cell sets graded mode: self-study again after the test
    for exercise in EXERCISES:
        path = next((folder / "source").glob(f"{exercise.chapter}_*/*.ipynb"))
        tests = "".join(_cells_by_grade_id(path)[exercise.checker]["source"])
        assert f'os.environ["{GRADED_VARIABLE}"] = "1"' in tests  # the release is graded: no answer in a verdict
        namespace = {}
        exec(exercise.stub(), namespace)  # a stub is answered "not attempted" at once: no process starts
        monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
        exec(tests, namespace)
        assert "not attempted yet" in capsys.readouterr().out
        for how in ("validate", "autograde"):
            monkeypatch.setenv("NBGRADER_EXECUTION", how)
            with pytest.raises(AssertionError, match=f"{exercise.name} has not passed yet"):
                exec(tests, namespace)


def test_the_config_puts_a_deleted_graded_cell_back_saying_so(course):
    from nbgrader.preprocessors import OverwriteCells
    from traitlets.config import Config

    folder, _ = course
    config = Config()
    exec((folder / "nbgrader_config.py").read_text(), {"get_config": lambda: config})
    overwrite = OverwriteCells(config=config)
    assert overwrite.add_missing_cells
    assert overwrite.missing_cell_notification.format(cell_id="check_x").startswith(
        grading.RESTORED.format(cell_id="check_x") + "\n")


def test_each_in_process_solution_cell_passes_its_checker_on_its_own(course):
    """The cell's text, run as a kernel runs a cell (IPython keeps its text), and read as grading reads it (the
    function's definition alone, dpviz.exercises.regrade), is what the checker accepts."""
    import linecache

    import dpviz.exercises as ex
    from dpviz.exercises.regrade import regrade

    folder, _ = course
    for exercise in EXERCISES:
        if grading.on_ranks(exercise):
            continue  # the pipeline test runs chapter 04's on real ranks; test_exercises runs all three
        path = next((folder / "source").glob(f"{exercise.chapter}_*/*.ipynb"))
        cell = "".join(_cells_by_grade_id(path)[exercise.name]["source"])
        filename = f"<cell {exercise.name}>"
        linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
        namespace = {}
        exec(compile(cell, filename, "exec"), namespace)
        verdict = getattr(ex, exercise.checker)(namespace[exercise.name])
        assert verdict.passed, verdict
        verdict, printed = regrade(exercise.name, exercise.checker, cell)
        assert verdict.passed and printed == "", verdict


def test_the_config_gives_a_check_on_ranks_time_to_start_and_stall(course):
    from dpviz.exercises.ranked import CALL_LIMIT, K, STALL_TIMEOUT
    from dpviz.engine.launch import START_TIMEOUT

    folder, _ = course
    config = (folder / "nbgrader_config.py").read_text()
    ast.parse(config)
    assert f"c.Execute.timeout = {grading.CELL_TIMEOUT}" in config
    assert grading.CELL_TIMEOUT >= START_TIMEOUT + STALL_TIMEOUT + (K - 1) * CALL_LIMIT
    assert "c.CourseDirectory.course_id = 'dpviz'" in config


def test_bad_input_is_one_sentence(tmp_path):
    with pytest.raises(ValueError, match=r"chapters: no chapter with exercises numbered 00, 16"):
        grading.write_course(tmp_path, chapters=["00", "16"])
    with pytest.raises(FileNotFoundError, match=r"no file .*nowhere.py"):
        grading.write_course(tmp_path, solutions=tmp_path / "nowhere.py")
    lacking = tmp_path / "lacking.py"
    lacking.write_text("def sgd_step(theta, grad, eta):\n    return theta\n")
    with pytest.raises(ValueError, match=r"no reference solution named mean_gradient"):
        grading.write_course(tmp_path, solutions=lacking, chapters=["01", "02"])
    assert not (tmp_path / "source").exists()  # a refusal writes nothing


def test_grading_imports_no_torch_and_the_package_holds_no_solutions_module():
    code = ("import importlib.util, sys, dpviz.grading, dpviz.exercises\n"
            "print('torch' in sys.modules, importlib.util.find_spec('dpviz.exercises.solutions') is None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.split() == ["False", "True"]


def test_no_module_of_dpviz_holds_a_reference_solution():
    """A student's installed dpviz must not carry a copy of an answer, under any module name."""
    wanted = {name: ast.dump(ast.parse(textwrap.dedent(body)))
              for name, (_, body, _) in REFERENCE.items()}
    copies = []
    for path in sorted((ROOT / "dpviz").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name in wanted:
                body = node.body[1:] if ast.get_docstring(node) is not None else node.body
                if ast.dump(ast.Module(body=body, type_ignores=[])) == wanted[node.name]:
                    copies.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert not copies, f"reference solutions inside the package: {copies}"


# --- the pipeline, with the real tool -----------------------------------------------------------------


def _own_processes(marker: str) -> list[psutil.Process]:
    """Processes, anywhere on this machine, whose environment carries ``marker`` (what nbgrader started)."""
    found = []
    for p in psutil.process_iter(["pid", "name"]):
        try:
            if p.pid != os.getpid() and p.environ().get("DPVIZ_GRADING_TEST") == marker \
                    and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return found


def _nbgrader(course: Path, env: dict, *args: str, timings: dict) -> None:
    start = time.perf_counter()
    done = subprocess.run([str(BIN / "nbgrader"), *args, "--log-level", "WARN"], cwd=course, env=env,
                          capture_output=True, text=True, timeout=600, start_new_session=True)
    timings[" ".join(args)] = time.perf_counter() - start
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def _hand_in(course: Path, student: str, assignment: str, answers: dict[str, str], delete: str | None = None) -> None:
    """The released notebook with each named solution cell replaced, as a student would save it; the cell whose
    grade_id is ``delete`` taken out."""
    nb_name = f"{assignment}.ipynb"
    nb = json.loads((course / "release" / assignment / nb_name).read_text())
    nb["cells"] = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") != delete]
    for cell in nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell["source"] = answers[grade_id]
    target = course / "submitted" / student / assignment / nb_name
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(nb, indent=1))


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    nbgrader = pytest.importorskip("nbgrader", reason="the grading extra: pip install 'dpviz[grade]'")
    assert nbgrader.__version__.startswith("0.9"), nbgrader.__version__
    course = tmp_path_factory.mktemp("nbgrader_course")
    marker = uuid.uuid4().hex
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "DPVIZ_GRADING_TEST": marker}
    timings = {}
    start = time.perf_counter()
    grading.write_course(course, chapters=list(CHAPTERS))
    timings["python -m dpviz.grading source"] = time.perf_counter() - start
    _nbgrader(course, env, "generate_assignment", "*", timings=timings)  # "*": every assignment in source/

    reference = {}
    for chapter, assignment in CHAPTERS.items():
        path = course / "source" / assignment / f"{assignment}.ipynb"
        reference[chapter] = {e.name: "".join(_cells_by_grade_id(path)[e.name]["source"])
                              for e in for_chapter(chapter)}
    for student, answers in STUDENTS.items():
        for chapter, assignment in CHAPTERS.items():
            if student == "alice":  # in chapter 04, with the graded check cell deleted
                _hand_in(course, student, assignment, reference[chapter],
                         delete="check_average_gradients" if chapter == "04" else None)
            elif answers[chapter] is not None:
                _hand_in(course, student, assignment,
                         {for_chapter(chapter)[0].name: answers[chapter].replace("COURSE", str(course))})

    _nbgrader(course, env, "autograde", "*", timings=timings)
    time.sleep(3)  # eve's detached process would have written by now
    _nbgrader(course, env, "generate_feedback", "*", timings=timings)
    timings["the whole pipeline"] = time.perf_counter() - start
    time.sleep(0.5)  # a kernel's last children get a moment to go
    left = [(p.pid, p.name()) for p in _own_processes(marker)]

    OUTPUT.mkdir(parents=True, exist_ok=True)
    if (OUTPUT / "feedback").exists():
        shutil.rmtree(OUTPUT / "feedback")
    shutil.copytree(course / "feedback", OUTPUT / "feedback")
    (OUTPUT / "timing.txt").write_text("".join(f"{t:7.1f} s  {what}\n" for what, t in timings.items()))
    yield {"course": course, "timings": timings, "left": left}


def test_the_release_holds_the_chapters_stubs_and_no_solution(pipeline):
    course = pipeline["course"]
    for chapter, assignment in CHAPTERS.items():
        release = (course / "release" / assignment / f"{assignment}.ipynb").read_text()
        cells = _cells_by_grade_id(course / "release" / assignment / f"{assignment}.ipynb")
        assert grading.BEGIN not in release and grading.END not in release
        for exercise in for_chapter(chapter):
            assert "".join(cells[exercise.name]["source"]) == exercise.stub()  # the chapter's own stub
            for line in REFERENCE[exercise.name][1].splitlines():
                if len(line.strip()) > 12:  # a line of the answer, not a bare `return` or bracket
                    assert line.strip() not in release, (assignment, line)
        nb = json.loads(release)
        assert all(not c.get("outputs") for c in nb["cells"])


def test_autograde_gives_full_points_to_the_reference_and_zero_to_the_mistakes(pipeline):
    from nbgrader.api import Gradebook

    course = pipeline["course"]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student, by_assignment in EXPECTED.items():
            for assignment, (score, _) in by_assignment.items():
                if student in ("carol", "dave", "eve") and assignment == "04_one_group_per_device":
                    with pytest.raises(Exception):  # not handed in: no submission, nothing graded
                        gb.find_submission(assignment, student)
                    continue
                submission = gb.find_submission(assignment, student)
                max_score = sum(e.points for e in for_chapter(assignment[:2]))
                assert (submission.score, submission.max_score) == (score, max_score), (student, assignment)
                assert not submission.needs_manual_grade


def test_the_feedback_shows_each_checkers_sentence(pipeline):
    course = pipeline["course"]
    for student, by_assignment in EXPECTED.items():
        for assignment, (_, words) in by_assignment.items():
            page = course / "feedback" / student / assignment / f"{assignment}.html"
            if words is None:
                assert not page.exists()
                continue
            text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", page.read_text())).split())
            assert words in text, (student, assignment)


def test_a_hung_answer_ends_at_the_checkers_limit_not_the_cell_timeout(pipeline):
    course = pipeline["course"]
    nb = json.loads((course / "autograded" / "carol" / "01_one_step" / "01_one_step.ipynb").read_text())
    check = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "check_sgd_step")
    printed = " ".join("".join("".join(o["text"]) for o in check["outputs"] if o["output_type"] == "stream").split())
    errors = [o["ename"] for o in check["outputs"] if o["output_type"] == "error"]
    assert "sgd_step was still running" in printed and "5 s" in printed
    assert errors == ["AssertionError"]  # the verdict failed; no CellTimeoutError, no dead kernel
    assert pipeline["timings"]["autograde *"] < grading.CELL_TIMEOUT


def test_the_pipeline_leaves_no_process_behind(pipeline):
    assert pipeline["left"] == []


def test_handed_in_code_cannot_reach_the_gradebook_or_the_sources(pipeline):
    """eve's cell ran in a confined kernel: her detached process ended with it, and saw no course folder (as root:
    dpviz.engine.confine); her answer could not read the source notebook with the solutions."""
    from dpviz.engine import confine

    if not confine.isolated() or shutil.which("bwrap") is None:
        pytest.skip("not root with bwrap: the kernel nbgrader runs is not confined here")
    course = pipeline["course"]
    assert (course / "gradebook.db").read_bytes()[:16] == b"SQLite format 3\x00"
    assert not Path("/tmp/eve-was-here").exists()
    assert (course.stat().st_mode & 0o077) == 0, "the course folder is readable by other users"
