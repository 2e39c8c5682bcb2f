"""What a checker answers: a :class:`Verdict` (a string that knows whether it passed), and the helpers
every checker shares to compare a reader's numbers with the real ones and to word the answer.

:func:`run_cases` is how a checker in the notebook calls the reader's function: in a fresh process
(:class:`dpviz.engine.sandbox.FreshProcess`) that receives the function's source and one call's
arguments at a time, never the answer; the expected values and every helper here stay in the checker's
process, out of the function's reach. A function reaches that process as its source text (a notebook
cell's ``def`` works: IPython keeps cell sources; so does a ``lambda`` that uses only its arguments), or
as a :class:`Submitted` definition (what grading reads from a handed-in notebook). One that uses a
variable from around it (a closure) cannot be sent, and its verdict says to define it with ``def``.

In graded mode (:func:`graded`, set by the graded release and the regrade) a failing verdict says what is wrong
and at which case, but leaves out the expected value and the hint, which would give the answer away to the next try;
self-study keeps both.

Plain Python and numpy: no torch, so the chapters without ranks load it at once.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import textwrap
import types
from dataclasses import dataclass

import numpy as np

import dpviz.engine.sandbox as guard
from dpviz.engine.tolerance import GRAD_TOLERANCE

PASSED, FAILED, NOT_ATTEMPTED = "passed", "failed", "not attempted"
RTOL = GRAD_TOLERANCE  # float32 rounding, relative to the largest expected magnitude
GRADED_VARIABLE = "DPVIZ_GRADED"  # "1" where the checks are graded: the nbgrader release and the regrade set it


def graded() -> bool:
    """Whether the checks are graded (:data:`GRADED_VARIABLE` is "1"): then a failing verdict names the mistake and the
    first wrong case only, without the expected value or a hint that holds the formula."""
    return os.environ.get(GRADED_VARIABLE) == "1"


class Verdict(str):
    """A checker's answer: one or two sentences, with ``status`` (passed, failed, not attempted) attached.

    It is a ``str``, so ``print(check_x(x))`` shows the sentences; ``verdict.passed`` is True only on success.
    """

    def __new__(cls, text: str, status: str):
        self = super().__new__(cls, text)
        self.status = status
        return self

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def __repr__(self) -> str:  # a bare `check_x(x)` at the end of a cell shows the text, without quotes
        return str(self)


def not_attempted(name: str) -> Verdict:
    """The fixed answer for a stub that still raises NotImplementedError (the same text every time, for nbval).

    Voilà shows a chapter without its code cells (its kernels carry ``VOILA_*`` variables), so there the answer
    does not point at a function above that nobody can see."""
    if any(key in os.environ for key in ("VOILA_KERNEL_ID", "VOILA_BASE_URL", "VOILA_PREHEAT")):
        return Verdict(f"{name}: an exercise to write in JupyterLab; this page shows the chapter without its code.",
                       NOT_ATTEMPTED)
    return Verdict(f"{name}: not attempted yet — write the function above, then run this cell again.", NOT_ATTEMPTED)


def passed(name: str, what: str) -> Verdict:
    return Verdict(f"{name}: correct — {what}.", PASSED)


def failed(name: str, what: str, hint: str = "", *, rule: str = "") -> Verdict:
    """A failing answer: ``what`` is the case that went wrong and what came back there.

    ``hint`` says how to put it right and may give the answer away, so graded mode (:func:`graded`) keeps only the
    name it gives the mistake (:func:`mistake_named`).
    ``rule`` repeats what the exercise or the checker asks of every answer (what to return, how to define the
    function): it is shown when there is no hint, and in graded mode in the hint's place.
    """
    extra = " ".join(filter(None, (mistake_named(hint), rule))) if graded() else (hint or rule)
    return Verdict(f"{name}: {what}." + (f" {extra}" if extra else ""), FAILED)


_FORMULA = re.compile(r"[0-9√/×·Σ−=()*+^]| not ")


def mistake_named(hint: str) -> str:
    """What a hint calls the mistake, without the fix: its first clause ("That is a step uphill."), when that clause
    holds no number and no formula sign; else nothing (graded mode shows this in the hint's place)."""
    clause = re.split(r"[:;,.]", hint, maxsplit=1)[0].strip()
    return "" if not clause or _FORMULA.search(clause) else clause + "."


def raised(name: str, error: BaseException | str, call: str = "", kind: str = "") -> Verdict:
    """The answer when the reader's function raised something other than NotImplementedError.

    ``error`` is the exception or its words (:func:`dpviz.engine.sandbox.error_words`), ``kind`` its class name
    when only the words came back. ``SystemExit`` and ``KeyboardInterrupt`` are answered like any exception,
    with a word on what raises them.
    """
    if isinstance(error, BaseException):
        kind, error = type(error).__name__, guard.error_words(error)
    hint = ""
    if kind == "SystemExit":
        hint = " (sys.exit() or exit() raises it): the function must return its answer, not end the program"
    elif kind == "KeyboardInterrupt":
        hint = " (an interrupt, or a raise of it): run the cell again, or look for what raises it"
    when = f" when called as {call}" if call else ""
    return Verdict(f"{name} raised {error}{when}{hint}.", FAILED)


def cut_short(name: str, outcome: guard.Outcome, call: str = "", *, on: str = "",
              limit: str = "") -> Verdict | None:
    """The answer when a call ran out of time, called os._exit or started a process; None when it did none of these.

    ``call`` is how the call reads (``f(1, 2)``), ``on`` in which process (``" on rank 0"``), ``limit``
    how the time limit reads (default: this check's :data:`~dpviz.engine.sandbox.TIME_LIMIT` for all its calls).
    """
    when = (f" when called as {call}" if call else "") + on
    if outcome.timed_out:
        limit = limit or f"this check's {guard.TIME_LIMIT:g} s for all its calls"
        return Verdict(f"{name} was still running{when} after {limit}: look for a loop that never ends.", FAILED)
    if outcome.exit_code is not None:
        code = outcome.exit_code if isinstance(outcome.exit_code, str) else guard.short_repr(outcome.exit_code)
        return Verdict(f"{name} called os._exit({code}){when}, which ends the process "
                       "at once; the checker stopped it there. Return the answer instead.", FAILED)
    if outcome.ended:
        return Verdict(f"{name} ended the process it ran in ({outcome.ended}){when}; the checker stopped there. "
                       "Return the answer instead.", FAILED)
    if outcome.forks or outcome.children or outcome.threads:
        if outcome.forks or outcome.children:
            n = outcome.forks or outcome.children
            what = (f"forked {guard.count_words(n, 'child process')}" if outcome.forks else
                    f"left {guard.count_words(n, 'child process')} running")
        else:
            n = outcome.threads
            what = f"left {guard.count_words(n, 'thread')} running after it returned"
        return Verdict(f"{name} {what}{when}; the checker ended {'it' if n == 1 else 'them'}, so that nothing "
                       "outlives the check. Compute the answer in the function itself.", FAILED)
    return None


def prints_note(printed: int, shown: int, on: str = "") -> str:
    """The sentence added to a verdict when the function printed more than the checker shows."""
    return f" It printed {printed:,} characters{on}; only the first {shown:,} are shown."


@dataclass(frozen=True)
class Submitted:
    """A function handed in as the text of its definition: ``Submitted("sgd_step", "def sgd_step(...): ...")``.

    What grading checks (:mod:`dpviz.exercises.regrade`): the definition read from a handed-in notebook's
    solution cell, whatever that notebook's other cells did in its kernel.
    """

    name: str
    source: str


DEF_HINT = ("Define the function with def and use only its arguments, np and math (import anything else inside "
            "it).")


def require_function(checker: str, fn) -> str:
    """The function's name, or one sentence saying that the checker wants the function itself."""
    if isinstance(fn, Submitted):
        return fn.name
    if not callable(fn):
        raise TypeError(f"{checker} expects your function itself, e.g. {checker}(my_function); got {fn!r}.")
    return getattr(fn, "__name__", "your function")


def source_of(fn) -> str | None:
    """The dedented source of ``fn`` (a notebook cell's function works: IPython keeps cell sources), or None.

    For a lambda, the lambda expression alone (read from the line that holds it); for a :class:`Submitted`
    function, its text.
    """
    if isinstance(fn, Submitted):
        return fn.source
    if getattr(fn, "__name__", None) == "<lambda>":
        return _lambda_text(fn)
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError, SyntaxError):
        return None


def definition(name: str, fn) -> tuple[str, str] | Verdict:
    """What a fresh process needs to define ``fn``: (the name to call, the source to run), or the failing verdict
    that says why the function cannot be sent (a closure, a lambda or a callable whose text cannot be read)."""
    if isinstance(fn, Submitted):
        return fn.name, fn.source
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return failed(name, "it is not a function defined with def, so the checker cannot send it to the fresh "
                      "process it runs the function in", rule=DEF_HINT)
    if code.co_freevars:
        names = ", ".join(code.co_freevars)
        return failed(name, f"it uses {names} from the code around it, which the checker cannot send to the fresh "
                      "process it runs the function in", rule=DEF_HINT)
    source = source_of(fn)
    if source is None:
        return failed(name, "its source text could not be read, and the checker runs the function from it in a "
                      "fresh process", rule=DEF_HINT)
    if code.co_name == "<lambda>":
        return "_answer", f"_answer = (\n{source}\n)\n"
    return code.co_name, source


def _lambda_text(fn) -> str | None:
    """The text of the lambda expression that made ``fn``, found among the lambdas of the lines that hold it."""
    code = fn.__code__
    try:
        lines, _ = inspect.getsourcelines(fn)
    except (OSError, TypeError, SyntaxError):
        return None
    text = textwrap.dedent("".join(lines))
    tree = None
    for attempt in (text, text.rstrip().rstrip(",") + "\n", f"(\n{text.rstrip().rstrip(',')}\n)\n"):
        try:
            tree = ast.parse(attempt)
            text = attempt
            break
        except SyntaxError:
            continue
    if tree is None:
        return None
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Lambda):
            continue
        segment = ast.get_source_segment(text, node)
        try:
            compiled = compile(f"(\n{segment}\n)", "<lambda>", "eval")
        except SyntaxError:
            continue
        inner = next((c for c in compiled.co_consts if isinstance(c, types.CodeType)), None)
        if inner is not None and _same_signature(inner, code):  # (bytecode itself differs between compilers' passes)
            found.append(segment)
    return found[0] if len(set(found)) == 1 else None


def _same_signature(a: types.CodeType, b: types.CodeType) -> bool:
    return (a.co_names, a.co_varnames, a.co_argcount, a.co_kwonlyargcount, a.co_flags & 0x0C) == (
        b.co_names, b.co_varnames, b.co_argcount, b.co_kwonlyargcount, b.co_flags & 0x0C)


def is_stub(fn) -> bool:
    """True if ``fn`` does nothing but raise NotImplementedError (a docstring, ``pass`` or ``...`` aside).

    Decided without calling it: a check must not start a process for a stub. From the
    source where it can be read, else from the names the compiled body uses.
    """
    source = fn.source if isinstance(fn, Submitted) else source_of(fn)
    if source is not None:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            tree = None
        if tree is not None and tree.body and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = [s for s in tree.body[0].body
                    if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) and not isinstance(s, ast.Pass)]
            return bool(body) and all(isinstance(s, ast.Raise) and _names_not_implemented(s.exc) for s in body[:1])
    if isinstance(fn, Submitted):
        return False
    code = getattr(fn, "__code__", None)
    return code is not None and set(code.co_names) == {"NotImplementedError"}


def _names_not_implemented(exc) -> bool:
    if isinstance(exc, ast.Call):
        exc = exc.func
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


# --- numbers in sentences -------------------------------------------------------------------------


def num(x) -> str:
    """A number as a sentence shows it: 6 significant digits, no trailing zeros."""
    x = float(x)
    if x == 0:
        return "0"
    return f"{x:.6g}"


def vec(values) -> str:
    """A short vector as ``(a, b, c)``; a long one as its first four entries and its length."""
    flat = np.asarray(values, dtype=float).reshape(-1)
    if flat.size <= 4:
        return "(" + ", ".join(num(v) for v in flat) + ")"
    return "(" + ", ".join(num(v) for v in flat[:4]) + f", … {flat.size} values)"


def index_words(index) -> str:
    """An element index as a sentence names it: ``3`` or ``(2, 1)``."""
    index = tuple(int(i) for i in np.atleast_1d(index))
    return str(index[0]) if len(index) == 1 else "(" + ", ".join(map(str, index)) + ")"


def close(got, expected, rtol: float = RTOL) -> bool:
    """Equal to float32 rounding: every element within ``rtol`` × the largest expected magnitude."""
    got, expected = np.asarray(got, dtype=float), np.asarray(expected, dtype=float)
    if got.shape != expected.shape:
        return False
    scale = max(float(np.max(np.abs(expected))) if expected.size else 0.0, 1e-12)
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.abs(got - expected) <= rtol * scale + 1e-12))


def first_mismatch(got, expected, rtol: float = RTOL):
    """The index of the first element that differs beyond rounding (row-major order), or None."""
    got, expected = np.asarray(got, dtype=float), np.asarray(expected, dtype=float)
    scale = max(float(np.max(np.abs(expected))) if expected.size else 0.0, 1e-12)
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(got - expected) <= rtol * scale + 1e-12)
    found = np.argwhere(bad)
    return None if len(found) == 0 else tuple(int(i) for i in found[0])


def ratio(got, expected) -> float | None:
    """got / expected when one factor relates them (within rounding), else None."""
    got, expected = np.asarray(got, dtype=float), np.asarray(expected, dtype=float)
    if got.shape != expected.shape or not np.any(expected):
        return None
    i = int(np.argmax(np.abs(expected)))
    r = got.reshape(-1)[i] / expected.reshape(-1)[i]
    return float(r) if np.isfinite(r) and close(got, r * expected) else None


def shape_words(shape) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + (",)" if len(shape) == 1 else ")")


# --- checking a function on a list of cases -------------------------------------------------------


class Case:
    """One call of the reader's function: its arguments, the real answer, and how a sentence names the case."""

    def __init__(self, args: tuple, expected, label: str):
        self.args = args
        self.expected = np.asarray(expected, dtype=float)
        self.label = label.rstrip(",")  # e.g. "at step 2 of the descent path with η = 0.1"


def run_cases(name: str, fn, cases, *, success: str, mistakes=(), returns: str = "", raises=None) -> Verdict:
    """Call ``fn`` on each case in turn, in a fresh process; the first wrong answer is the verdict, else ``success``.

    ``raises`` maps an exception's class name to a hint for the typical mistake that raises it (a division by a
    warm-up of 0). ``mistakes`` are typical wrong answers, ``(wrong(*args), hint)``: when the reader's result matches
    one, the hint says what went wrong (in self-study; graded mode leaves hints out, see :func:`failed`).
    ``returns`` says what the function must return, for the answer to a ``None`` or a non-number. A stub
    is "not attempted" without starting anything.

    The function runs in a :class:`~dpviz.engine.sandbox.FreshProcess` that is sent its source and one
    case's arguments at a time (the next case's only once this one's answer is back); the expected values
    and the comparison stay here. All calls together get :data:`~dpviz.engine.sandbox.TIME_LIMIT` seconds
    and :data:`~dpviz.engine.sandbox.PRINT_LIMIT` printed characters; whatever they raise or print,
    ``os._exit``, forks, child processes and threads left running included, comes back as the verdict.
    """
    if is_stub(fn):
        return not_attempted(name)
    found = definition(name, fn)
    if isinstance(found, Verdict):
        return found
    budget = _Budget(guard.TIME_LIMIT, guard.PRINT_LIMIT)
    with guard.FreshProcess(*found) as box:
        verdict = _first_wrong(name, fn, box, cases, mistakes, returns, budget, raises or {}) or passed(name, success)
    if budget.printed > budget.print_limit:
        verdict = Verdict(str(verdict) + prints_note(budget.printed, budget.print_limit), verdict.status)
    return verdict


class _Budget:
    """What is left of one check's time and print budgets."""

    def __init__(self, seconds: float, print_limit: int):
        self.seconds, self.left = float(seconds), float(seconds)
        self.print_limit, self.printed = int(print_limit), 0


def _first_wrong(name, fn, box, cases, mistakes, returns, budget, raises) -> Verdict | None:
    for case in cases:
        call = f"{name}{_call_words(case.args)}"
        if budget.left <= 0:
            return cut_short(name, guard.Outcome(timed_out=True), call, limit=_limit_words(budget))
        outcome = box.call(*_copies(case.args), seconds=budget.left,
                           print_room=max(budget.print_limit - budget.printed, 0))
        budget.left -= outcome.seconds
        budget.printed += outcome.printed
        if outcome.kind == "NotImplementedError":
            return not_attempted(name)
        known = cut_short(name, outcome, call, limit=_limit_words(budget))
        if known:
            return known
        if outcome.error is not None:  # the reader's error, reported in one sentence
            verdict = _with_scope_hint(raised(name, outcome.error, call, outcome.kind), outcome, fn)
            hint = raises.get(outcome.kind, "")
            hint = mistake_named(hint) if graded() else hint
            return Verdict(f"{verdict} {hint}", FAILED) if hint else verdict
        value = outcome.value if isinstance(outcome.value, dict) else {}
        expected = case.expected
        must = f"It must return {returns}." if returns else ""
        if "shape" in value:  # more numbers than are sent back: only the shape came
            shape = value["shape"]
            size = int(np.prod(shape))
            return failed(name, f"{case.label}, it returned {size:,} numbers of shape {shape_words(shape)}; expected "
                          f"shape {shape_words(expected.shape)}", rule=must)
        array = value.get("array")
        if array is None:
            return failed(name, f"{case.label}, it returned {value.get('repr', 'something that is not numbers')}",
                          rule=must)
        if expected.ndim == 0 and array.size == 1:
            array = array.reshape(())
        if close(array, expected):
            continue
        hint = _recognise(array, case.args, mistakes)
        if array.shape != expected.shape:
            what = f"{case.label}, it returned {array.size:,} number{'s' if array.size != 1 else ''} of shape " \
                   f"{shape_words(array.shape)}; expected shape {shape_words(expected.shape)}"
            return failed(name, what, hint, rule=must)
        rule = ""
        if not np.all(np.isfinite(array)) and np.all(np.isfinite(expected)):
            rule = "NaN comes from 0/0, inf − inf or a NaN among the inputs; inf from a division by 0 or an overflow."
        return failed(name, _wrong_value(case.label, array, expected), hint, rule=rule)
    return None


def _wrong_value(label: str, got: np.ndarray, expected: np.ndarray) -> str:
    """Where a returned value first differs from the real one, and by how much; in graded mode without the real one."""
    hide = graded()
    if expected.ndim == 0:
        if hide:
            return f"{label}, it gives {num(got)}, {_too(got, expected)}"
        return f"{label}, it gives {num(got)}, expected {num(expected)}{_off_by(got, expected)}"
    first = first_mismatch(got, expected)
    if expected.size <= 4:
        if hide:
            return f"{label}, it gives {vec(got)}, and element {index_words(first)} is the first that is wrong"
        return (f"{label}, it gives {vec(got)}, expected {vec(expected)} "
                f"(element {index_words(first)} is the first that differs)")
    if hide:
        return f"{label}, element {index_words(first)} is {num(got[first])}, {_too(got[first], expected[first])}"
    return f"{label}, element {index_words(first)} is {num(got[first])}, expected {num(expected[first])}"


def against(got, expected, why: str = "") -> str:
    """``"expected 0.25, the mean over 3 ranks"`` beside a wrong number; in graded mode only which way it is off."""
    if graded():
        return _too(got, expected)
    return f"expected {num(expected)}{why}"


def _too(got, expected) -> str:
    """Which way a wrong number is off, in words that leave the real one out."""
    got, expected = float(got), float(expected)
    if not np.isfinite(got):
        return "which is not a finite number"
    return f"which is too {'large' if got > expected else 'small'}"


def _with_scope_hint(verdict: Verdict, outcome, fn) -> Verdict:
    """A NameError for a name the notebook defines gets a sentence on what the fresh process has in scope."""
    missing = re.match(r"NameError: name '(\w+)' is not defined", outcome.error or "")
    if outcome.kind != "NameError" or not missing:
        return verdict
    if isinstance(fn, Submitted):  # graded from its text: the rest of the notebook is not there either
        return Verdict(f"{verdict} The checker runs the function alone, in a fresh process. {DEF_HINT}", verdict.status)
    if missing.group(1) not in getattr(fn, "__globals__", {}):
        return verdict
    return Verdict(f"{verdict} {missing.group(1)} is defined in the notebook, but the checker runs the function "
                   f"alone, in a fresh process. {DEF_HINT}", verdict.status)


def _limit_words(budget: _Budget) -> str:
    return f"this check's {budget.seconds:g} s for all its calls"


def _off_by(got, expected) -> str:
    """ " (0.17 % too large)" when two numbers that print alike differ by under 10 %: the difference made visible."""
    got, expected = float(got), float(expected)
    if not (np.isfinite(got) and np.isfinite(expected)) or expected == 0:
        return ""
    rel = (got - expected) / abs(expected)
    if abs(rel) >= 0.1:
        return ""
    return f" ({abs(rel) * 100:.2g} % too {'large' if rel > 0 else 'small'})"


def _recognise(array, args, mistakes) -> str:
    for wrong, hint in mistakes:
        try:
            with np.errstate(all="ignore"):
                value = np.asarray(wrong(*_copies(args)), dtype=float)
        except Exception:
            continue
        if value.shape == array.shape and close(array, value):
            return hint
    return ""


def _copies(args):
    return tuple(np.array(a, copy=True) if isinstance(a, np.ndarray) else list(a) if isinstance(a, list) else a
                 for a in args)


def _call_words(args) -> str:
    def words(a):
        if isinstance(a, np.ndarray):
            return vec(a) if a.size <= 4 else f"<array of shape {shape_words(a.shape)}>"
        if isinstance(a, float):
            return num(a)
        return repr(a)

    return "(" + ", ".join(words(a) for a in args) + ")"
