"""One meaning per symbol: the table of dpviz.topics.ground_floor.symbols is the README's and chapter 00's, word for word."""

import json
from pathlib import Path

from dpviz.topics.ground_floor.symbols import SYMBOLS, table

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_holds_the_table_word_for_word():
    assert table() in (ROOT / "README.md").read_text(encoding="utf-8")


def test_chapter_00_holds_the_table():
    nb = json.loads((ROOT / "notebooks" / "00_ground_floor.ipynb").read_text(encoding="utf-8"))
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    assert table() in cells


def test_each_symbol_once_and_defined_in_a_chapter():
    names = [s.symbol for s in SYMBOLS]
    assert len(names) == len(set(names))
    assert {"$B$", "$b$", "$k$", "$M$", "$m$", "$p$", "$\\eta$", "$\\alpha$", "$\\beta$", "$T_{compute}$",
            "$T_{comm}$", "$S$"} <= set(names)
    chapters = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert all(s.chapter in chapters for s in SYMBOLS)


def test_chapters_are_numbered_without_a_gap_and_none_runs_long():
    import re

    paths = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert [p.name[:2] for p in paths] == [f"{i:02d}" for i in range(len(paths))]
    for path in paths:
        nb = json.loads(path.read_text(encoding="utf-8"))
        words = sum(prose_words("".join(c["source"])) for c in nb["cells"] if c["cell_type"] == "markdown")
        assert words <= 3000, f"{path.name} has {words} words of prose (at most 3,000)"


def prose_words(markdown: str) -> int:
    """Words of prose in a markdown cell: every word outside a table (a table's rows start with "|")."""
    import re

    return sum(len(re.findall(r"\S+", line)) for line in markdown.splitlines() if not line.lstrip().startswith("|"))
