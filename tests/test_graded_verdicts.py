"""Graded mode (issue 54): with ``DPVIZ_GRADED=1`` a failing verdict of every checker that runs without ranks says
which case went wrong and what the function gave there, never the expected value or the hint that holds the formula;
self-study keeps both. Also: a success names no module of the library, and two verdicts that blamed a mistake the
student had not made now name the one they made.

Every answer is handed to its checker as source text (:class:`dpviz.engine.verdict.Submitted`), as grading does.
"""

from __future__ import annotations

import inspect
import re

import pytest

import dpviz.exercises as ex
from dpviz.engine.verdict import GRADED_VARIABLE, Submitted, graded, mistake_named
from dpviz.exercises import catalogue
from dpviz.grading import load_solutions

solutions = load_solutions()
UNRANKED = [e for e in catalogue.EXERCISES if catalogue.RANKS_NOTE not in e.text]
FORMULA_SIGNS = ("·", "√", "Σ", "−")  # the notes' formulas use these; a case's inputs and a returned value never do

# A typical mistake per checker, written as a student would, and words of the self-study hint that names it.
MISTAKES = {
    "sgd_step": ("return theta + eta * grad", "a step uphill"),
    "mean_gradient": ("return np.sum(example_grads, axis=0)", "That is the sum"),
    "weighted_mean": ("return np.mean(group_grads, axis=0)", "plain mean of the group means"),
    "t_comm_ring": ("return (k - 1) * alpha + (k - 1) / k * M / beta", "one trip around the ring"),
    "speedup": ("return t_compute / (t_compute + t_comm)", "The compute is shared"),
    "bus_bandwidth": ("return M / seconds", "That is algbw"),
    "data_parallel_step": ("return theta - eta * np.sum(rank_grads, axis=0)", "the sum of the 4 gradients"),
    "lr_for_k": ("return lr_base * k", "multiplies by √k, not k"),
    "warmup_lr": ("return lr * step / warmup if step < warmup else lr", "Step 0 must already move"),
    "accumulated_gradient": ("return np.sum(micro_grads, axis=0)", "m times too large"),
    "wait_times": ("return np.asarray(compute) - np.min(compute)", "behind the fastest"),
    "staleness": ("return np.full(len(t_grad), len(t_grad) - 1.0)", "k − 1 holds only"),
    "bubble": ("return (p - 1) / m", "idle time over busy time"),
    "owned_shard": ("return np.pad(layer, (0, -len(layer) % k))[rank::k]", "takes every"),
    "step_bytes": ("return (4 if zero_stage == 3 else 2) * (k - 1) / k * M", "four ring passes"),
    "powersgd_bytes": ("r = min(rows, cols, r)\n    return 4 * (rows + cols) * r", "compresses the bias"),
    "slow_link_bytes": ("return 2 * (k - 1) / k * M", "what a flat ring sends"),
    "young_daly_interval": ("return math.sqrt(delta * mtbf)", "without the factor 2"),
}


def written(exercise, body: str) -> Submitted:
    """A function with the exercise's name and parameters, and this body."""
    return Submitted(exercise.name, f"def {exercise.name}({exercise.params}):\n    {body}\n")


def scaled_reference(exercise) -> Submitted:
    """The reference solution's answer times 1.5 plus 1: wrong at every case, and like no typical mistake."""
    source = inspect.getsource(getattr(solutions, exercise.name))
    wrong = f"wrong_{exercise.name}"
    return Submitted(wrong, f"{source}\n\ndef {wrong}(*args):\n"
                            f"    return np.asarray({exercise.name}(*args), dtype=float) * 1.5 + 1\n")


def check(exercise, answer, monkeypatch, *, graded_mode: bool):
    if graded_mode:
        monkeypatch.setenv(GRADED_VARIABLE, "1")
    else:
        monkeypatch.delenv(GRADED_VARIABLE, raising=False)
    return getattr(ex, exercise.checker)(answer)


def case_words(verdict: str) -> str:
    """The verdict up to what the function gave: its name and the case."""
    return re.split(r", (?:it gives|it returned|element) ", verdict, maxsplit=1)[0]


NUMBER = r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?"


def numbers(text: str) -> set[str]:
    return set(re.findall(NUMBER, text))


def expected_numbers(verdict: str) -> set[str]:
    """The numbers a self-study verdict shows as the expected value."""
    found = re.search(rf"expected (\([^)]*\)|{NUMBER})", verdict)
    return numbers(found.group(1)) if found else set()


def test_graded_mode_is_the_variable_set_to_one(monkeypatch):
    monkeypatch.delenv(GRADED_VARIABLE, raising=False)
    assert not graded()
    monkeypatch.setenv(GRADED_VARIABLE, "0")
    assert not graded()
    monkeypatch.setenv(GRADED_VARIABLE, "1")
    assert graded()


@pytest.mark.parametrize("exercise", UNRANKED, ids=lambda e: e.name)
def test_graded_verdict_names_the_case_but_not_the_expected_value(exercise, monkeypatch):
    answer = scaled_reference(exercise)
    full = check(exercise, answer, monkeypatch, graded_mode=False)
    brief = check(exercise, answer, monkeypatch, graded_mode=True)
    assert not full.passed and not brief.passed, (full, brief)
    assert case_words(brief) == case_words(full), (full, brief)  # the same first wrong case, named the same way
    assert "expected " not in brief, brief
    hidden = expected_numbers(full) - numbers(full.split("expected ")[0])  # those the case's inputs do not show
    assert not hidden & numbers(re.sub(r"element [\d(), ]+is", "", brief)), (hidden, brief)  # an index is no value
    assert not any(sign in brief for sign in FORMULA_SIGNS), brief


@pytest.mark.parametrize("exercise", UNRANKED, ids=lambda e: e.name)
def test_a_typical_mistake_keeps_its_hint_in_self_study_only(exercise, monkeypatch):
    body, hint = MISTAKES[exercise.name]
    answer = written(exercise, body)
    full = check(exercise, answer, monkeypatch, graded_mode=False)
    brief = check(exercise, answer, monkeypatch, graded_mode=True)
    assert not full.passed and hint in full, full
    assert not brief.passed and len(brief) < len(full), brief  # the fix is gone
    assert case_words(brief) == case_words(full), (full, brief)
    named = mistake_named(full[full.index(". ", len(case_words(full))) + 2:])  # the hint's name for the mistake
    assert brief.endswith(f". {named}" if named else "."), (named, brief)  # kept only where it holds no formula
    assert not any(sign in brief for sign in FORMULA_SIGNS), brief


def test_every_unranked_checker_has_a_typical_mistake_here():
    assert set(MISTAKES) == {e.name for e in UNRANKED}


def test_graded_mode_still_says_what_the_function_must_return(monkeypatch):
    exercise = catalogue.BY_NAME["step_bytes"]
    verdict = check(exercise, written(exercise, "return None"), monkeypatch, graded_mode=True)
    assert "it returned None. It must return a number of bytes." in verdict, verdict


@pytest.mark.parametrize("exercise", UNRANKED, ids=lambda e: e.name)
def test_a_success_names_no_module_of_the_library(exercise, monkeypatch):
    verdict = check(exercise, getattr(solutions, exercise.name), monkeypatch, graded_mode=False)
    assert verdict.passed, verdict
    assert not re.search(r"\b[a-z_]+\.[a-z_]+", verdict), verdict  # module.function
    assert not any(word in verdict for word in ("costmodel", "theory", "lr_rules")), verdict


# --- verdicts that blamed the wrong mistake ----------------------------------------------------------------------


def test_four_passes_at_zero_3_are_blamed_on_the_pass_count(monkeypatch):
    """At k = 4, four passes of (k−1)/k · M are 3·M bytes, which the checker used to read as "each pass sends M"."""
    exercise = catalogue.BY_NAME["step_bytes"]
    four = check(exercise, written(exercise, MISTAKES["step_bytes"][0]), monkeypatch, graded_mode=False)
    assert "ZeRO stage 3" in four and "four ring passes" in four and "one pass of (k−1)/k · M too many" in four, four
    assert "not M" not in four, four
    whole_m = check(exercise, written(exercise, "return (3 if zero_stage == 3 else 2) * M"), monkeypatch,
                    graded_mode=False)
    assert "not M" in whole_m, whole_m


def test_a_compressed_bias_is_blamed_on_the_bias(monkeypatch):
    """At r = 4, a 32×1 bias compressed to rank 1 is 4·33 bytes, which the checker used to read as values for bytes."""
    exercise = catalogue.BY_NAME["powersgd_bytes"]
    compressed = "r = min(rows, cols, r)\n    return 4 * (rows + cols) * r if 2 * (rows + cols) * r < rows * cols " \
                 "or cols == 1 else 4 * rows * cols"
    bias = check(exercise, written(exercise, compressed), monkeypatch, graded_mode=False)
    assert "32×1 matrix" in bias and "compresses the bias" in bias and "sends a bias whole" in bias, bias
    assert "counts values" not in bias, bias
    values = check(exercise, written(exercise, "return (rows + cols) * r"), monkeypatch, graded_mode=False)
    assert "counts values, not bytes" in values, values


@pytest.mark.parametrize("name, body, words", [
    ("warmup_lr", "return lr * min(step + 1, warmup) / warmup", "test warmup before dividing by it"),
    ("wait_times", "return max(compute) - compute", "np.asarray(compute) makes it an array"),
])
def test_a_typical_mistake_that_raises_gets_its_sentence(name, body, words, monkeypatch):
    exercise = catalogue.BY_NAME[name]
    verdict = check(exercise, written(exercise, body), monkeypatch, graded_mode=False)
    assert not verdict.passed and " raised " in verdict and words in verdict, verdict
    assert words not in check(exercise, written(exercise, body), monkeypatch, graded_mode=True)
