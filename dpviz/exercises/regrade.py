"""Grades that a notebook's cells cannot sway: nbgrader's autograde re-runs every check outside the student's kernel.

    # nbgrader_config.py (python -m dpviz.grading source writes it)
    from dpviz.exercises.regrade import autograde_steps
    c.Autograde.autograde_preprocessors = autograde_steps()

nbgrader's autograde runs a handed-in notebook in a kernel, top to bottom, and gives a tests cell its
points when it raises nothing. Every cell a student may edit runs in that same kernel before the locked
check cells, so its top-level code could rebind anything there (a helper of :mod:`dpviz.engine.verdict`,
the checker itself, ``print``), and locking the check cell would not undo it. So :class:`Regrade`, a step
nbgrader runs right after executing the notebook, judges each exercise again in nbgrader's own process,
which no student code reaches: it reads the definition of the function from the notebook's solution cell
(the last ``def`` of that name there; a :class:`~dpviz.engine.verdict.Submitted`), runs the chapter's
checker on it (the function in a fresh process, or on fresh ranks, as in the notebook), and writes that
verdict as the tests cell's output: the function's prints and the verdict, then an ``AssertionError``
when it did not pass. Whatever the kernel's run of that cell printed is replaced, so the grade and the
feedback follow this verdict alone.

A graded cell the student deleted, which nbgrader puts back (``OverwriteCells.add_missing_cells``, set by
the config), starts with :data:`~dpviz.exercises.catalogue.RESTORED`; its output then says so first, so the student
reads in the feedback why the cell is there.

Only the function's own definition is checked, with ``np`` and ``math`` in scope (and ``torch`` and
``dist`` on ranks), exactly as in the notebook: a helper defined elsewhere in the notebook is not there.
Imports nbconvert and traitlets, which nbgrader brings; nothing else of nbgrader.
"""

from __future__ import annotations

import ast
import contextlib
import io
import textwrap

import os

from jupyter_client.manager import KernelManager
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

import dpviz.exercises as checkers
from dpviz.engine import confine
from dpviz.engine.verdict import FAILED, GRADED_VARIABLE, Submitted, Verdict
from dpviz.exercises.catalogue import EXERCISES, RESTORED

VERDICT_WIDTH = 100  # characters per line of a verdict in the graded cell's output (as dpviz.grading's tests cell)
BY_CHECKER = {e.checker: e for e in EXERCISES}


class ConfinedKernelManager(KernelManager):
    """The kernel nbgrader runs a handed-in notebook in, as the sandbox user in a namespace that hides the course
    folder (nbgrader's working folder), /root and /home (:func:`dpviz.engine.confine.kernel_command`); where this
    process is not root, or has no bwrap, the kernel nbgrader would start anyway."""

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        return confine.kernel_command(cmd, os.path.realpath(self.connection_file), hide=[os.getcwd()])


class Regrade(Preprocessor):
    """nbgrader step: each tests cell's output becomes the verdict of its check re-run on the handed-in definition."""

    enabled = Bool(True)

    def preprocess(self, nb, resources):
        with graded_mode():
            return self._regrade(nb), resources

    def _regrade(self, nb):
        solutions = {}
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.get("cell_type") == "code" and meta.get("solution"):
                solutions.setdefault(meta.get("grade_id"), "".join(cell.get("source", "")))
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            exercise = BY_CHECKER.get(meta.get("grade_id"))
            if cell.get("cell_type") == "code" and meta.get("grade") and exercise is not None:
                verdict, printed = regrade(exercise.name, exercise.checker, solutions.get(exercise.name))
                restored = RESTORED.format(cell_id=meta.get("grade_id"))
                if "".join(cell.get("source", "")).startswith(f"# {restored}"):  # deleted, put back by nbgrader
                    printed = restored + "\n" + printed
                cell.outputs = outputs(exercise.name, verdict, printed)
        return nb


@contextlib.contextmanager
def graded_mode():
    """Verdicts name the mistake and the case, never the expected answer, while the block runs (and in the ranks it
    starts, which take this environment); the process's setting is put back after."""
    before = os.environ.get(GRADED_VARIABLE)
    os.environ[GRADED_VARIABLE] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(GRADED_VARIABLE, None)
        else:
            os.environ[GRADED_VARIABLE] = before


def autograde_steps() -> list:
    """nbgrader's autograde steps with :class:`Regrade` right after the one that executes the notebook."""
    from nbgrader.converters.autograde import Autograde
    from nbgrader.preprocessors import Execute

    steps = list(Autograde.class_traits()["autograde_preprocessors"].make_dynamic_default())
    at = steps.index(Execute) + 1 if Execute in steps else 0
    return steps[:at] + [Regrade] + steps[at:]


def regrade(name: str, checker: str, cell_source: str | None) -> tuple[Verdict, str]:
    """The verdict of ``checker`` on the definition of ``name`` in ``cell_source``, and what the function printed."""
    if cell_source is None:
        return Verdict(f"{name}: its solution cell is missing from the notebook handed in.", FAILED), ""
    found = definition_in(name, cell_source)
    if isinstance(found, Verdict):
        return found, ""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        verdict = getattr(checkers, checker)(Submitted(name, found))
    return verdict, printed.getvalue()


def definition_in(name: str, cell_source: str) -> str | Verdict:
    """The text of the last top-level ``def name`` in a cell, or the failing verdict saying why there is none."""
    text = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in cell_source.splitlines())
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        return Verdict(f"{name}: its cell does not run: SyntaxError on line {e.lineno}: {e.msg}.", FAILED)
    defs = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    if not defs:
        return Verdict(f"{name}: its cell does not define {name} with def at the top level.", FAILED)
    return ast.get_source_segment(text, defs[-1]) + "\n"


def outputs(name: str, verdict: Verdict, printed: str) -> list:
    """The tests cell's outputs for ``verdict``: the prints and the verdict, then an AssertionError unless it passed."""
    from nbformat.v4 import new_output

    text = (printed if not printed or printed.endswith("\n") else printed + "\n") + textwrap.fill(verdict,
                                                                                                  VERDICT_WIDTH) + "\n"
    cells = [new_output("stream", name="stdout", text=text)]
    if not verdict.passed:
        message = f"{name} has not passed yet: the verdict above says why"
        cells.append(new_output("error", ename="AssertionError", evalue=message,
                                traceback=[f"AssertionError: {message}"]))
    return cells
