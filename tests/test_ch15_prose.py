"""Chapter 15 and the question bank against issue 46: short, a prediction before the lesson run, no kill step typed by
hand, the imports a natural answer uses, and no claim that chapter 07's timings choose between two formulas.

Reads the saved notebooks only; nothing is executed.
"""

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
LIMIT = 2200  # words of markdown, tables included


def notebook(stem: str) -> dict:
    (path,) = NOTEBOOKS.glob(f"[0-9][0-9]_{stem}.ipynb")
    return json.loads(path.read_text(encoding="utf-8"))


def source(cell: dict) -> str:
    return "".join(cell.get("source", ""))


def markdown(nb: dict) -> str:
    return "\n".join(source(c) for c in nb["cells"] if c["cell_type"] == "markdown")


def code_ids(nb: dict) -> list:
    return [(c["id"], source(c)) for c in nb["cells"] if c["cell_type"] == "code"]


@pytest.fixture(scope="module")
def fifteen():
    return notebook("when_a_replica_fails")


def test_chapter_15_is_at_most_2200_words(fifteen):
    count = len(re.findall(r"\S+", markdown(fifteen)))
    assert count <= LIMIT, count


def test_a_prediction_comes_right_before_the_live_run_and_is_answered_from_its_record(fifteen):
    cells = code_ids(fifteen)
    runs = [i for i, (_, text) in enumerate(cells) if "record_restarts(" in text]
    assert len(runs) == 1
    run = runs[0]
    assert "Prediction.number(" in cells[run - 1][1] and cells[run - 1][1].rstrip().endswith("guess")
    assert "guess.answer(**lost_steps_answer(live))" in cells[run + 1][1]


def test_the_kill_steps_of_the_shipped_restart_are_printed_not_typed(fifteen):
    # the shipped restart record killed at steps 10 and 17; the prose must leave those numbers to the claim
    text = markdown(fifteen)
    assert not re.search(r"step 1[07]\b", text), re.search(r"[^.]*step 1[07]\b[^.]*", text).group(0)


def test_the_chapter_imports_numpy_and_math_for_a_students_answer(fifteen):
    first = code_ids(fifteen)[0][1]
    assert re.search(r"^import math$", first, re.M) and re.search(r"^import numpy as np$", first, re.M)


def test_the_question_bank_no_longer_says_chapter_07_chooses_between_the_formulas():
    text = " ".join(markdown(notebook("question_bank")).split())
    assert "lets the measurements choose between the two" not in text
    assert "at $k = 2$ the ring's" in text and "both fit the same times equally well" in text
