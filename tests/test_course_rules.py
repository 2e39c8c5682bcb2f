"""Rules every chapter keeps, read from the saved notebooks (JSON only, nothing runs): each chapter with runs has a
slider panel, and no saved output names a path on the machine that ran it."""

import json
import re
from pathlib import Path

import pytest

from dpviz import course

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = [c for c in course.COURSE if c.topic != "question_bank"]  # the question bank asks; it draws nothing
# a path that belongs to one machine: a checkout, a home, a temporary folder, an installed package
MACHINE_PATH = re.compile(r"(/work/|/root/|/home/\w|/Users/\w|/tmp/|site-packages|dist-packages|[A-Z]:\\\\)")


def _notebook(chapter) -> dict:
    return json.loads((ROOT / "notebooks" / f"{chapter.number}_{chapter.notebook}.ipynb").read_text(encoding="utf-8"))


def _outputs(nb: dict):
    for cell in nb["cells"]:
        yield from cell.get("outputs", [])


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.topic)
def test_the_chapter_has_a_slider_panel(chapter):
    panels = [o for o in _outputs(_notebook(chapter))
              if "".join(o.get("data", {}).get("text/plain", "")).startswith("SliderFigure(")]
    assert panels, f"chapter {chapter.number} displays no slider panel (a SliderFigure)"


@pytest.mark.parametrize("chapter", course.COURSE, ids=lambda c: c.topic)
def test_no_saved_output_names_a_path_on_the_machine_that_ran_it(chapter):
    found = []
    for output in _outputs(_notebook(chapter)):
        texts = [("stream", output.get("text", ""))] + [
            (kind, value) for kind, value in output.get("data", {}).items() if not kind.startswith("image/")]
        for kind, value in texts:
            text = "".join(value) if isinstance(value, list) else str(value)
            text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", text)
            for m in MACHINE_PATH.finditer(text):
                found.append(f"{kind}: …{text[max(0, m.start() - 60):m.end() + 40]}…")
    assert not found, f"chapter {chapter.number}'s saved outputs name machine paths:\n" + "\n".join(found[:5])
