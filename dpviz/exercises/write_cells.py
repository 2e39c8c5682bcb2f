"""Write each chapter's "Your turn" cells from the exercise catalogue, and keep its closing sections in order.

    python -m dpviz.exercises.write_cells                  # every chapter in ./notebooks
    python -m dpviz.exercises.write_cells notebooks/       # a folder, or chapter files by name

It prints each notebook it rewrote. Run it after changing :mod:`dpviz.exercises.catalogue`;
``tests/test_chapter_exercises.py`` fails until the chapters match the catalogue again.

**The section.** A chapter's "Your turn" section starts at the markdown cell whose first line is
``## Your turn`` and runs up to, not including, the next markdown cell whose first line is a level-1
or level-2 heading (``# …`` or ``## …``), or to the end of the notebook. Deeper headings
(``### The ring's cost``) stay inside it. The chapter is the number that starts the file's name
(``<number>_<notebook>.ipynb``, :attr:`dpviz.course.Chapter.stem`).

**What it writes there.** For each exercise of ``catalogue.for_chapter(chapter)``, in catalogue
order, three cells: the markdown (``Exercise.markdown()``, the first one headed by ``## Your turn``
and :data:`INTRO`), the stub (``Exercise.stub()``) and the check cell (``Exercise.check_cell()``).
A cell of the old section with exactly that source is kept as it was: id, metadata, execution
count and saved outputs. So nbval still compares against the outputs it saved, and a stub's check
cell keeps its saved "not attempted yet". Other copies are dropped. A new cell gets the id
``ex-<name>-md``, ``-stub`` or ``-check`` and no outputs; a new check cell's output must then be
saved by running the chapter (``jupyter nbconvert --to notebook --execute``) before nbval passes.

**The closing order.** A chapter ends with "Your turn", "What to take away", "Check yourself",
each at most once and in that order. A section is a markdown cell that starts with a level-1 or
level-2 heading plus the cells after it, up to the next one. The writer puts the closing sections
into that order by moving whole sections, with their cells unchanged. It never cuts a cell: a
closing heading in the middle of a markdown cell ("## What to take away … ## Check yourself") stays
where it is. If that leaves the order wrong, the writer names the cell to split.

Apart from that section and those moves, no cell changes. The writer stops with a one-sentence
``ValueError``, and writes nothing, when:

- a chapter with exercises in the catalogue has no ``## Your turn`` cell, or has two;
- ``## Your turn`` is inside a cell instead of on its first line;
- the section holds a cell that is neither exercise markdown (``## Your turn`` or ``### …`` first)
  nor a stub or check cell, since dropping that cell would lose it;
- a chapter the catalogue has no exercise for has a "Your turn" section.

Notebooks are read and written as plain JSON, ``json.dumps(nb, indent=1, ensure_ascii=False)``
plus a newline (nbformat's layout). A notebook is only written when it changes. The module itself
imports only the catalogue, :mod:`dpviz.course` and the standard library: no torch, no Jupyter, nothing
that starts a process.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from dpviz import course
from dpviz.exercises.catalogue import for_chapter

HEADING = "## Your turn"
INTRO = ("In JupyterLab, write each function below in the cell that holds its stub, then run the cell under it. "
         "The checker runs your function against the real thing and answers in a sentence or two: what passed, or "
         "the first place where your answer differs and what was expected there. Until you replace the "
         "`raise NotImplementedError` line, it says the exercise is not attempted yet. Your function finds `np` "
         "(numpy) and `math` without an import; import anything else inside it.")
CLOSING = ("Your turn", "What to take away", "Check yourself")  # the order a chapter ends in

_SECTION_HEADING = re.compile(r"#{1,2} (.*)")
_CHAPTER = re.compile(r"(\d\d)_")


def section_sources(chapter: str) -> list[tuple[str, str, str]]:
    """The "Your turn" section the catalogue gives ``chapter``: (cell type, id of a new cell, source), per cell."""
    cells = []
    for i, exercise in enumerate(for_chapter(chapter)):
        head = f"{HEADING}\n\n{INTRO}\n\n" if i == 0 else ""
        cells += [("markdown", f"ex-{exercise.name}-md", head + exercise.markdown()),
                  ("code", f"ex-{exercise.name}-stub", exercise.stub()),
                  ("code", f"ex-{exercise.name}-check", exercise.check_cell())]
    return cells


def chapter_of(path: Path) -> str | None:
    """The chapter number that starts a notebook's name (``<number>_<notebook>.ipynb``); None for a file whose name
    starts with no chapter number."""
    match = _CHAPTER.match(path.name)
    return match.group(1) if match else None


def source(cell: dict) -> str:
    text = cell.get("source", "")
    return text if isinstance(text, str) else "".join(text)


def section_heading(cell: dict) -> str | None:
    """The text of the level-1 or level-2 heading on a markdown cell's first line; None if it has none."""
    if cell.get("cell_type") != "markdown":
        return None
    match = _SECTION_HEADING.match(source(cell).split("\n", 1)[0])
    return match.group(1).strip() if match else None


def closing_headings(cells: list[dict]) -> list[tuple[str, int, bool]]:
    """Every closing heading in document order: (its text, the index of its cell, whether it starts that cell)."""
    found = []
    for i, cell in enumerate(cells):
        if cell.get("cell_type") == "markdown":
            for n, line in enumerate(source(cell).split("\n")):
                if line.startswith("## ") and line[3:].strip() in CLOSING:
                    found.append((line[3:].strip(), i, n == 0))
    return found


def _cell_id(cell: dict) -> str:
    return cell.get("id", "(no id)")


def find_section(cells: list[dict], where: str) -> tuple[int, int] | None:
    """The cells [start, end) of the "Your turn" section, or None if there is none."""
    starts = []
    for text, i, first in closing_headings(cells):
        if text == CLOSING[0]:
            if not first:
                raise ValueError(f"{where}: '{HEADING}' is inside cell {_cell_id(cells[i])}, not on its first line; "
                                 f"split the cell so that the heading starts one")
            starts.append(i)
    if len(starts) > 1:
        raise ValueError(f"{where}: two '{HEADING}' cells ({', '.join(_cell_id(cells[i]) for i in starts)}); "
                         f"a chapter has one 'Your turn' section")
    if not starts:
        return None
    start = starts[0]
    end = next((i for i in range(start + 1, len(cells)) if section_heading(cells[i]) is not None), len(cells))
    return start, end


def _is_exercise_cell(cell: dict, first: bool) -> bool:
    text = source(cell)
    if cell.get("cell_type") == "markdown":
        return first or text.startswith("### ")
    if cell.get("cell_type") == "code":
        return re.match(r"\s*def \w+\(", text) is not None or "from dpviz.exercises import check_" in text
    return False


def _new_cell(cell_type: str, cell_id: str, text: str) -> dict:
    lines = text.splitlines(keepends=True)
    if cell_type == "markdown":
        return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": lines}
    return {"cell_type": "code", "execution_count": None, "id": cell_id, "metadata": {}, "outputs": [],
            "source": lines}


def rewrite_section(cells: list[dict], chapter: str, where: str) -> list[dict]:
    """``cells`` with the "Your turn" section made exactly the catalogue's exercises for ``chapter``."""
    wanted = section_sources(chapter)
    span = find_section(cells, where)
    if span is None:
        if wanted:
            raise ValueError(f"{where}: the catalogue has exercises for chapter {chapter} but the notebook has no "
                             f"'{HEADING}' cell; add one before 'What to take away' and run the writer again")
        return cells
    start, end = span
    if not wanted:
        raise ValueError(f"{where}: a 'Your turn' section, but the catalogue has no exercise for chapter {chapter}")
    old = cells[start:end]
    for i, cell in enumerate(old):
        if not _is_exercise_cell(cell, first=i == 0):
            raise ValueError(f"{where}: cell {_cell_id(cell)} in the 'Your turn' section is not an exercise cell "
                             f"and would be lost; move it out of the section")
    taken = {_cell_id(c) for c in cells[:start] + cells[end:]}
    used: set[int] = set()
    section = []
    for cell_type, cell_id, text in wanted:
        same = [i for i, c in enumerate(old) if i not in used and c.get("cell_type") == cell_type
                and source(c) == text]
        if same:
            keep = next((i for i in same if _cell_id(old[i]) == cell_id), same[0])  # prefer the writer's own id
            used.add(keep)
            section.append(old[keep])
            taken.add(_cell_id(old[keep]))
            continue
        fresh, n = cell_id, 1
        while fresh in taken:
            n += 1
            fresh = f"{cell_id}-{n}"
        taken.add(fresh)
        section.append(_new_cell(cell_type, fresh, text))
    return cells[:start] + section + cells[end:]


def order_closing(cells: list[dict], where: str) -> list[dict]:
    """``cells`` with the closing sections moved, whole, into the order Your turn, What to take away, Check yourself."""
    blocks: list[list[dict]] = [[]]
    for cell in cells:
        if section_heading(cell) is not None and blocks[-1]:
            blocks.append([])
        blocks[-1].append(cell)
    slots = [i for i, block in enumerate(blocks) if block and section_heading(block[0]) in CLOSING]
    moved = sorted((blocks[i] for i in slots), key=lambda block: CLOSING.index(section_heading(block[0])))
    for i, block in zip(slots, moved):
        blocks[i] = block
    cells = [cell for block in blocks for cell in block]

    found = closing_headings(cells)
    for (before, i, first_i), (after, j, first_j) in zip(found, found[1:]):
        if CLOSING.index(after) > CLOSING.index(before):
            continue
        if before == after:
            raise ValueError(f"{where}: '## {after}' twice (cells {_cell_id(cells[i])} and {_cell_id(cells[j])}); "
                             f"a chapter has each closing section once")
        split = cells[j] if not first_j else cells[i]
        raise ValueError(f"{where}: '## {after}' stands after '## {before}', and the writer moves only sections that "
                         f"start a cell; split cell {_cell_id(split)} so that each closing heading starts one")
    return cells


def write_chapter(nb: dict, chapter: str, where: str = "the notebook") -> dict:
    """A copy of the notebook ``nb`` with its "Your turn" section written from the catalogue and its closing order
    put right; ``nb`` itself is not changed."""
    cells = rewrite_section(list(nb.get("cells", [])), chapter, where)
    return {**nb, "cells": order_closing(cells, where)}


def dumps(nb: dict) -> str:
    """The notebook as this project saves it: nbformat's JSON layout."""
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def rewritten(path: Path) -> tuple[str, str]:
    """The chapter at ``path`` as saved, and as the writer would save it."""
    chapter = chapter_of(path)
    if chapter is None:
        raise ValueError(f"{path}: its name does not start with a chapter number (such as "
                         f"{course.chapter('speedup_model').number}_)")
    text = path.read_text(encoding="utf-8")
    return text, dumps(write_chapter(json.loads(text), chapter, str(path)))


def chapter_paths(paths: list[Path]) -> list[Path]:
    """The chapters named: a folder stands for its ``NN_*.ipynb`` files, a file for itself."""
    out = []
    for path in map(Path, paths):
        if path.is_dir():
            out += sorted(p for p in path.glob("*.ipynb") if chapter_of(p) is not None)
        elif path.is_file():
            out.append(path)
        else:
            raise ValueError(f"{path}: no such folder or notebook")
    return out


def write_all(paths: list[Path]) -> list[Path]:
    """Check every chapter first, then write those that change; the paths written. Nothing is written if any
    chapter is refused."""
    plans = []
    for path in chapter_paths(paths):
        text, new = rewritten(path)
        if new != text:
            plans.append((path, new))
    for path, new in plans:
        path.write_text(new, encoding="utf-8")
    return [path for path, _ in plans]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpviz.exercises.write_cells",
                                     description="Write the chapters' 'Your turn' cells from the exercise catalogue.")
    parser.add_argument("paths", nargs="*", type=Path, default=[Path("notebooks")],
                        help="chapter notebooks, or folders of them (default: notebooks)")
    args = parser.parse_args(argv)
    try:
        written = write_all(args.paths)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    if not written:
        print("every chapter already matches the catalogue")
    return 0


if __name__ == "__main__":
    sys.exit(main())
