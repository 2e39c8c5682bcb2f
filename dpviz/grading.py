"""The chapters as an nbgrader course: the instructor's source version, written from the exercise catalogue.

    python -m dpviz.grading source COURSE_DIR                 # every chapter with exercises
    python -m dpviz.grading source COURSE_DIR --chapters one_step one_group_per_device   # by topic or number
    cd COURSE_DIR && nbgrader generate_assignment STEM         # the student release, without the solutions

It writes ``COURSE_DIR/source/<chapter>/<chapter>.ipynb`` for each chapter (one nbgrader assignment
per chapter, named like its notebook: :attr:`dpviz.course.Chapter.stem`, the STEM above) and
``COURSE_DIR/nbgrader_config.py``.
``notebooks/`` is read, never written.

**What becomes what.** Each chapter's "Your turn" section is first made exactly the catalogue's
(:func:`dpviz.exercises.write_cells.write_chapter`, on a copy), then, per exercise:

- the stub becomes an nbgrader *solution* cell (grade_id: the function's name): the def line and
  docstring, then the reference solution's body from ``instructor/solutions.py`` between
  ``### BEGIN SOLUTION`` and ``### END SOLUTION``, with the module-level imports that body uses
  (none for the three that run on ranks, where the checker provides ``torch``, ``dist``, ``math``
  and ``np``). With the config's ``ClearSolutions.code_stub``, ``nbgrader generate_assignment``
  turns it back into the chapter's stub, character for character;
- the check cell becomes an autograded *tests* cell (grade_id ``check_<name>``, the exercise's
  ``points``): it prints the checker's verdict (wrapped), so the sentence is in the feedback, and, under
  nbgrader alone (its validate and autograde set ``NBGRADER_EXECUTION``), fails on an ``assert`` unless the
  verdict passed. nbgrader gives a tests cell its points when it raises nothing. In the student's own kernel
  it never raises, so Run All goes top to bottom past an exercise not answered yet, or answered wrong, to the
  takeaways and the cards, as in the chapter itself;
- every other cell, markdown and code, is locked (read-only), so autograde runs the chapter as written:
  nbgrader puts back a locked cell's source if a student edited it, and the config has it put back a graded
  cell the student deleted (``OverwriteCells.add_missing_cells``), with a first line saying so
  (:data:`RESTORED`), which :mod:`dpviz.exercises.regrade` repeats in the feedback. A deleted solution
  cell is not put back: its check is graded 0, saying the cell is missing.

**What grades.** A solution cell runs in the student's kernel before the locked check cells, and its
top-level code could rebind anything there (a helper of :mod:`dpviz.engine.verdict`, the checker), so the
kernel's verdicts are not what grades. The config puts :class:`dpviz.exercises.regrade.Regrade` into
autograde, right after the notebook is executed: in nbgrader's own process it re-runs every check on the
function defined in its solution cell (in a fresh process, or on fresh ranks, as every check runs) and
makes that verdict the tests cell's output, which nbgrader then scores.

**Why one assignment per chapter.** A class meets one chapter at a time; an assignment is what
nbgrader releases, collects and grades with one due date, and one chapter is what a class
session asks for. Autograding a chapter also takes seconds, not the minutes the whole course would.

**The time limits.** nbgrader's own default is 30 s per cell; a check on ranks may wait for
ranks to start (``dpviz.engine.launch.START_TIMEOUT``, 120 s on a loaded machine), then its calls
(``CALL_LIMIT``, 10 s each, two for the ring step) and a stall timeout (``STALL_TIMEOUT``, 15 s),
so the config gives a cell :data:`CELL_TIMEOUT` seconds. A student's answer that never returns is
stopped by the checker's own limits (5 s in a fresh process, 10 s per call on a rank) and
graded with a verdict, long before that.

The reference solutions are not in the installed package (a student imports it); they are read, as
text, from the checkout's ``instructor/solutions.py`` or the file ``--solutions`` names. This module
imports json, the standard library, :mod:`dpviz.course` and the exercise catalogue only, and nothing that starts a
process (the config it writes imports :mod:`dpviz.exercises.regrade`, in nbgrader's process).
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib.util
import json
import os
import sys
import textwrap
from pathlib import Path

from dpviz import course
from dpviz.engine import confine
from dpviz.engine.verdict import GRADED_VARIABLE
from dpviz.exercises.catalogue import RANKS_NOTE, RESTORED, Exercise, for_chapter
from dpviz.exercises.write_cells import chapter_of, chapter_paths, dumps, write_chapter

CHECKOUT = Path(__file__).resolve().parents[1]
SOLUTIONS = CHECKOUT / "instructor" / "solutions.py"  # not packaged: present in a checkout only
NOTEBOOKS = CHECKOUT / "notebooks"
COURSE_ID = "dpviz"
CELL_TIMEOUT = 300  # seconds one cell may run under autograde: START_TIMEOUT 120 + STALL_TIMEOUT 15 + 2 × 10, doubled
STUB_LINE = "raise NotImplementedError  # your code here"  # the last line of Exercise.stub(), what nbgrader puts back
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
IN_RANK_SCOPE = {"torch", "dist", "math", "np"}  # names the ranks define for a function they compile
VERDICT_WIDTH = 100  # characters per line of a verdict in the graded cell's output
SCHEMA_VERSION = 3  # nbgrader's cell metadata schema in 0.9


def load_solutions(path: Path | str = SOLUTIONS):
    """The reference solutions as a module (for tests and instructors); importing it loads torch and numpy."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"solutions: no file {path}; the reference solutions ship with the checkout's "
                                f"instructor/ folder, not with the installed package")
    spec = importlib.util.spec_from_file_location("dpviz_instructor_solutions", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def on_ranks(exercise: Exercise) -> bool:
    """Whether the checker runs this exercise's function inside real ranks (its text says so)."""
    return RANKS_NOTE in exercise.text


def solution_bodies(path: Path | str = SOLUTIONS) -> dict[str, tuple[list[str], str, list[str]]]:
    """Each reference solution, keyed by function name: (the module-level import lines its body uses,
    the body after the docstring, dedented, comments kept, and its parameter names).

    Read from the file's text: nothing is imported, so torch is not loaded.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"solutions: no file {path}; pass --solutions with the path of instructor/solutions.py")
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text, str(path))
    imports = {}  # a name bound at module level -> the import statement that binds it
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "module", None) != "__future__":
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                imports[bound] = ast.get_source_segment(text, node)
    bodies = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        has_doc = ast.get_docstring(node) is not None
        body = node.body[1:] if has_doc else node.body
        if not body:
            raise ValueError(f"{path}: {node.name} has no body after its docstring")
        start = node.body[0].end_lineno if has_doc else body[0].lineno - 1  # 0-based: the line after the docstring
        code = textwrap.dedent("\n".join(lines[start:node.end_lineno]))
        used = {n.id for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        needed = sorted({imports[name] for name in used if name in imports}, key=list(imports.values()).index)
        bodies[node.name] = (needed, code.strip("\n"), [a.arg for a in node.args.args])
    return bodies


def solution_cell(exercise: Exercise, bodies: dict) -> str:
    """The stub with the reference solution between nbgrader's markers, in place of its last line."""
    if exercise.name not in bodies:
        raise ValueError(f"solutions: no reference solution named {exercise.name} (chapter {exercise.chapter})")
    needed, code, params = bodies[exercise.name]
    if params != [p.strip() for p in exercise.params.split(",")]:
        raise ValueError(f"solutions: {exercise.name}({', '.join(params)}) does not take the catalogue's "
                         f"parameters ({exercise.params})")
    if on_ranks(exercise):  # the ranks define these names; an import of its own would bypass their dist
        needed = [line for line in needed if not _binds(line) & IN_RANK_SCOPE]
    region = "\n".join(needed + ([""] if needed else []) + [code])
    stub = exercise.stub()
    head = stub[: stub.rindex(STUB_LINE)]
    return head + BEGIN + "\n" + textwrap.indent(region, "    ", lambda line: bool(line.strip())) + "\n    " + END


def _binds(import_line: str) -> set[str]:
    node = ast.parse(import_line).body[0]
    return {alias.asname or alias.name.split(".")[0] for alias in node.names}


def tests_cell(exercise: Exercise) -> str:
    """The autograded cell: the chapter's check, printed, then, under nbgrader only, an assert on the verdict.

    The verdict is printed wrapped: the feedback page shows outputs in a ``<pre>`` that does not wrap,
    and the words that name the mistake come at the end of a long line. The assert runs only where nbgrader
    executes the notebook (``NBGRADER_EXECUTION``: validate, autograde), so a student's Run All never stops
    here; the grade itself is the verdict :mod:`dpviz.exercises.regrade` re-runs outside the kernel."""
    return (f"import os\nimport textwrap\n\n"
            f"from dpviz.exercises import {exercise.checker}\n\n"
            f"os.environ[\"{GRADED_VARIABLE}\"] = \"1\"  # graded: a verdict names your mistake, not the answer\n"
            f"verdict = {exercise.checker}({exercise.name})\n"
            f"print(textwrap.fill(verdict, {VERDICT_WIDTH}))\n"
            f"if os.environ.get(\"NBGRADER_EXECUTION\"):  # nbgrader's validate and autograde: not your Run All\n"
            f"    assert verdict.passed, \"{exercise.name} has not passed yet: the verdict above says why\"")


def _nbgrader(grade_id: str, *, grade=False, solution=False, locked=False, points=None) -> dict:
    meta = {"grade": grade, "solution": solution, "locked": locked, "task": False, "grade_id": grade_id,
            "schema_version": SCHEMA_VERSION}
    if points is not None:
        meta["points"] = points
    return meta


def source_notebook(nb: dict, chapter: str, bodies: dict, where: str = "the notebook") -> dict:
    """A copy of the chapter ``nb`` as nbgrader's source version (see the module's docstring); ``nb`` is unchanged."""
    nb = copy.deepcopy(write_chapter(nb, chapter, where))
    exercises = for_chapter(chapter)
    stubs = {e.stub(): e for e in exercises}
    checks = {e.check_cell(): e for e in exercises}
    found = set()
    for cell in nb["cells"]:
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        meta = cell.setdefault("metadata", {})
        if cell["cell_type"] == "code" and text in stubs:
            exercise = stubs[text]
            cell["source"] = solution_cell(exercise, bodies)
            meta["nbgrader"] = _nbgrader(exercise.name, solution=True)
            found.add(("stub", exercise.name))
        elif cell["cell_type"] == "code" and text in checks:
            exercise = checks[text]
            cell["source"] = tests_cell(exercise)
            meta["nbgrader"] = _nbgrader(exercise.checker, grade=True, locked=True, points=exercise.points)
            found.add(("check", exercise.name))
        else:
            meta["nbgrader"] = _nbgrader(f"locked-{cell.get('id', len(found))}", locked=True)
            continue
        cell["outputs"], cell["execution_count"] = [], None
    missing = [e.name for e in exercises if {("stub", e.name), ("check", e.name)} - found]
    if missing:
        raise ValueError(f"{where}: no stub or check cell found for {', '.join(missing)}")
    return nb


def config_text(course_id: str = COURSE_ID) -> str:
    """nbgrader_config.py for the course folder."""
    return f'''"""nbgrader's settings for the dpviz chapters (written by python -m dpviz.grading source; run nbgrader here)."""

c = get_config()  # noqa: F821 (nbgrader defines it)

c.CourseDirectory.course_id = {course_id!r}

# The release's stub is the chapter's own, character for character.
c.ClearSolutions.code_stub = {{"python": {STUB_LINE!r}}}

# Every check is judged again outside the student's kernel, from the function defined in its solution cell, and
# that verdict is the tests cell's output and grade (dpviz.exercises.regrade): no cell can sway it.
from dpviz.exercises.regrade import autograde_steps  # noqa: E402

c.Autograde.autograde_preprocessors = autograde_steps()

# The handed-in notebook runs as the sandbox user in a namespace with no course folder in it (as root), and its
# checks' verdicts never show an expected answer; every process it starts ends with its kernel.
c.Execute.kernel_manager_class = "dpviz.exercises.regrade.ConfinedKernelManager"

# A graded check cell the student deleted is put back and graded, its first line saying so (and the feedback too),
# instead of a silent 0 for a right answer.
c.OverwriteCells.add_missing_cells = True
c.OverwriteCells.missing_cell_notification = {RESTORED + chr(10) * 2!r}

# Seconds one cell may run under autograde. nbgrader's default (30) is shorter than a check on real ranks
# may take on a loaded server: ranks may take 120 s to start, then two calls of 10 s and a 15 s stall timeout.
# A student's answer that never returns is stopped much sooner by the checker itself and graded with a verdict.
c.Execute.timeout = {CELL_TIMEOUT}
'''


def write_course(course_dir: Path | str, *, notebooks: Path | str = NOTEBOOKS, solutions: Path | str = SOLUTIONS,
                 chapters: list[str] | None = None, course_id: str = COURSE_ID) -> list[Path]:
    """Write ``course_dir/source/<chapter>/<chapter>.ipynb`` per chapter with exercises, and nbgrader_config.py.

    ``chapters`` (numbers or topics: ``["one_step", "all_reduce"]``) picks some; default every chapter with
    exercises. Returns the paths written.
    Every chapter is turned into its source version before anything is written, so a refusal writes nothing.
    """
    course_dir = Path(course_dir)
    bodies = solution_bodies(solutions)  # (read before anything is written: a refusal writes nothing)
    paths = [p for p in chapter_paths([Path(notebooks)]) if for_chapter(chapter_of(p))]
    if chapters is not None:
        chapters = [course.chapter(c).number if c in course.TOPICS else c for c in chapters]
        unknown = sorted(set(chapters) - {chapter_of(p) for p in paths})
        if unknown:
            raise ValueError(f"chapters: no chapter with exercises numbered {', '.join(unknown)} in {notebooks}")
        paths = [p for p in paths if chapter_of(p) in chapters]
    if not paths:
        raise ValueError(f"notebooks: no chapter with exercises in {notebooks}")
    plans = []
    for path in paths:
        nb = json.loads(path.read_text(encoding="utf-8"))
        plans.append((course_dir / "source" / path.stem / path.name, source_notebook(nb, chapter_of(path), bodies,
                                                                                     str(path))))
    course_dir.mkdir(parents=True, exist_ok=True)
    course_dir.chmod(0o700)  # sources, solutions, gradebook and submissions: the instructor's alone
    written = []
    for target, nb in plans:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(dumps(nb), encoding="utf-8")
        written.append(target)
    config = course_dir / "nbgrader_config.py"
    config.write_text(config_text(course_id), encoding="utf-8")
    return written + [config]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpviz.grading",
                                     description="The chapters as an nbgrader course.")
    commands = parser.add_subparsers(dest="command", required=True)
    source = commands.add_parser("source", help="write nbgrader's source version of the chapters into COURSE_DIR")
    source.add_argument("course_dir", type=Path, metavar="COURSE_DIR")
    source.add_argument("--notebooks", type=Path, default=NOTEBOOKS, help=f"the chapters (default: {NOTEBOOKS})")
    source.add_argument("--solutions", type=Path, default=SOLUTIONS,
                        help=f"the reference solutions (default: {SOLUTIONS})")
    source.add_argument("--chapters", nargs="+", metavar="CHAPTER",
                        help="only these chapters, by number or topic, e.g. one_step all_reduce")
    source.add_argument("--course-id", default=COURSE_ID, help=f"nbgrader's course id (default: {COURSE_ID})")
    args = parser.parse_args(argv)
    if hasattr(os, "getuid") and os.getuid() == 0:  # the user handed-in code runs as under grading
        print(f"the sandbox user for student code: {confine.ensure_user()}")
    try:
        written = write_course(args.course_dir, notebooks=args.notebooks, solutions=args.solutions,
                               chapters=args.chapters, course_id=args.course_id)
    except (ValueError, FileNotFoundError) as error:
        print(error, file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
