"""python -m dpviz.renumber: inserting a chapter renames the notebooks after it and rewrites the numbers in prose."""

import json
import re
import shutil
from pathlib import Path

import pytest

from dpviz import course, renumber

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def _markdown(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def test_the_notebooks_carry_the_course_numbers_and_name_only_chapters_that_exist():
    assert renumber.plan(NOTEBOOKS) == {}
    last = len(course.COURSE) - 1
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        for match in renumber.CHAPTERS.finditer(_markdown(path)):
            numbers = [int(n) for n in re.findall(r"\d\d", match.group(2))]
            assert all(0 <= n <= last for n in numbers), f"{path.name}: '{match.group(0)}' names no chapter"


def test_rewrite_moves_every_number_at_once_lists_and_ranges_included():
    numbers = {"07": "08", "08": "09"}
    text = ("Chapter 07 measures it; chapters 07 and 08 differ; chapters 01 to 07; see 08_whole_picture.ipynb "
            "and `07_measuring_an_all_reduce`; chapter 06 stays; 07 alone is not a chapter.")
    assert renumber.rewrite(text, numbers) == (
        "Chapter 08 measures it; chapters 08 and 09 differ; chapters 01 to 08; see 09_whole_picture.ipynb "
        "and `08_measuring_an_all_reduce`; chapter 06 stays; 07 alone is not a chapter.")
    assert renumber.rewrite("# 07 · Measuring an all-reduce\n\nText with 07 · in it.", numbers) == \
        "# 08 · Measuring an all-reduce\n\nText with 07 · in it."  # a chapter's heading moves with it


@pytest.fixture
def inserted(tmp_path, monkeypatch):
    """A copy of the notebooks and README, and a course with a new chapter where the measuring chapter was."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for path in NOTEBOOKS.glob("*.ipynb"):
        shutil.copy(path, folder / path.name)
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    new = course.Chapter("a_new_chapter", "a_new_chapter", "a new chapter")
    at = course.chapter("measuring").number
    monkeypatch.setattr(course, "COURSE", course.COURSE[:int(at)] + (new,) + course.COURSE[int(at):])
    shutil.copy(NOTEBOOKS / "01_one_step.ipynb", folder / "99_a_new_chapter.ipynb")
    return tmp_path, at


def _mentions(texts, number: str) -> int:
    return sum(len(re.findall(rf"\b[Cc]hapters?\s+(?:\d\d{renumber.JOINER})*{number}\b", t)) for t in texts)


def test_inserting_a_chapter_renames_what_follows_and_rewrites_its_number(inserted):
    root, at = inserted
    after_at = f"{int(at) + 1:02d}"
    bank = next(NOTEBOOKS.glob("*_question_bank.ipynb")).name[:2]  # the last chapter, before the insert
    bank_after = f"{int(bank) + 1:02d}"
    before = {p.name: _markdown(p) for p in (root / "notebooks").glob("*.ipynb")}
    mentions = _mentions(before.values(), at)
    assert mentions > 0  # the measuring chapter is named in other chapters' prose: the rewrite has work to do

    dry = renumber.renumber(root / "notebooks", root / "README.md", dry_run=True)
    assert dry["numbers"][at] == after_at and dry["numbers"][bank] == bank_after
    assert (f"{at}_measuring_an_all_reduce.ipynb", f"{after_at}_measuring_an_all_reduce.ipynb") in dry["renamed"]
    assert {p.name: _markdown(p) for p in (root / "notebooks").glob("*.ipynb")} == before  # a dry run writes nothing

    done = renumber.renumber(root / "notebooks", root / "README.md")
    names = sorted(p.name for p in (root / "notebooks").glob("*.ipynb"))
    assert names == sorted(c.stem + ".ipynb" for c in course.COURSE) and renumber.plan(root / "notebooks") == {}
    assert f"{bank_after}_question_bank.ipynb" in done["rerun"] and f"{after_at}_measuring_an_all_reduce.ipynb" in done["rerun"]
    after = {p.name: _markdown(p) for p in (root / "notebooks").glob("*.ipynb")}
    # every "chapter 07" that was there now says 08; the new chapter's own copy of a notebook is left out
    old_texts = [t for name, t in before.items() if "a_new_chapter" not in name]
    new_texts = [t for name, t in after.items() if "a_new_chapter" not in name]
    assert _mentions(new_texts, after_at) == _mentions(old_texts, at) and _mentions(new_texts, at) == 0
    # the chapters before the insert keep their numbers, in prose and on disk
    assert _mentions(new_texts, "06") == _mentions(old_texts, "06") and "06_speedup_model.ipynb" in after
    for name, text in after.items():  # each chapter's own heading carries its new number
        if "a_new_chapter" not in name:
            assert re.search(rf"^# {name[:2]} · ", text, re.M), f"{name}: its heading kept an old number"
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert f"`{bank_after}_question_bank`" in readme and f"`{bank}_question_bank`" not in readme


def test_a_notebook_the_course_does_not_list_or_a_chapter_without_one_is_refused(inserted):
    root, _ = inserted
    (root / "notebooks" / "99_a_new_chapter.ipynb").rename(root / "notebooks" / "01_a_new_chapter.ipynb")
    with pytest.raises(renumber.RenumberError, match="carry the same number"):
        renumber.plan(root / "notebooks")
    (root / "notebooks" / "01_a_new_chapter.ipynb").unlink()
    with pytest.raises(renumber.RenumberError, match="has no notebook for it"):
        renumber.plan(root / "notebooks")
    shutil.copy(NOTEBOOKS / "01_one_step.ipynb", root / "notebooks" / "99_not_a_chapter.ipynb")
    with pytest.raises(renumber.RenumberError, match="99_not_a_chapter.ipynb is not a chapter of the course"):
        renumber.plan(root / "notebooks")
