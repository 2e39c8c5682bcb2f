"""Predict, then run: every chapter that runs something (all but the ground floor and the question bank) asks the
reader for a prediction before a run and answers it after, from what the run recorded.

The notebooks are read as JSON: a code cell builds a ``Prediction`` (dpviz.engine.predict), at least one code cell
after it does the work, and a later code cell calls ``.answer(`` on the same name. The saved output of that answer
cell (Run All, no prediction committed) is the collapsed question with the measured answer.
"""

import json
import re
from pathlib import Path

import pytest

from dpviz import course

ROOT = Path(__file__).resolve().parents[1]
WITHOUT = {"ground_floor", "question_bank"}  # a chapter of words and symbols, and one of questions: nothing runs
CHAPTERS = [c for c in course.COURSE if c.topic not in WITHOUT]
ASKED = re.compile(r"^(\w+)\s*=\s*Prediction\.(choice|number)\(", re.MULTILINE)


def _code_cells(chapter) -> list[str]:
    path = ROOT / "notebooks" / f"{chapter.number}_{chapter.notebook}.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.topic)
def test_the_chapter_asks_before_a_run_and_answers_after_it(chapter):
    cells = _code_cells(chapter)
    sources = ["".join(c["source"]) for c in cells]
    asked = [(i, m.group(1)) for i, src in enumerate(sources) for m in ASKED.finditer(src)]
    assert asked, f"chapter {chapter.number} asks for no prediction (Prediction.choice or Prediction.number)"
    for i, name in asked:
        answered = [j for j in range(i + 1, len(sources)) if re.search(rf"\b{name}\.answer\(", sources[j])]
        assert answered, f"chapter {chapter.number}: the prediction {name!r} is never answered"
        j = answered[0]
        assert j > i + 1, f"chapter {chapter.number}: {name!r} is answered in the cell right after it, with no run between"
        saved = "".join("".join(o.get("data", {}).get("text/html", "")) for o in cells[j].get("outputs", []))
        assert "<details" in saved and "The run measured" in saved or "nbval-ignore-output" in \
            cells[j].get("metadata", {}).get("tags", []), (
            f"chapter {chapter.number}: the saved answer to {name!r} is not the collapsed question with the measured "
            "answer (run the notebook again with the shipped records)")
