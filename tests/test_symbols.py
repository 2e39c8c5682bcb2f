"""One meaning per symbol: the table of dpviz.topics.ground_floor.symbols is the README's and chapter 00's, word for word."""

import json
from pathlib import Path

from dpviz.topics.ground_floor.symbols import SYMBOLS, table

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_holds_the_table_word_for_word():
    assert table() in (ROOT / "README.md").read_text(encoding="utf-8")


def test_chapter_00_shows_the_table_from_the_code():
    """The chapter does not type the table: a code cell shows ``symbols_table()``, and its saved output is the table."""
    nb = json.loads((ROOT / "notebooks" / "00_ground_floor.ipynb").read_text(encoding="utf-8"))
    shown = [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).startswith("symbols_table()")]
    assert len(shown) == 1, "chapter 00 shows the symbols with one cell that calls symbols_table()"
    outputs = [o for o in shown[0]["outputs"] if o.get("output_type") == "execute_result"]
    assert outputs and "".join(outputs[0]["data"]["text/markdown"]) == table()
    assert "".join(outputs[0]["data"]["text/plain"]) == table()
    typed = [c for c in nb["cells"] if c["cell_type"] == "markdown" and "| symbol |" in "".join(c["source"])]
    assert not typed, "the table is shown from dpviz.topics.ground_floor.symbols, not typed into a markdown cell"


def test_each_symbol_once_and_defined_in_a_chapter():
    names = [s.symbol for s in SYMBOLS]
    assert len(names) == len(set(names))
    assert {"$B$", "$b$", "$k$", "$M$", "$m$", "$p$", "$\\eta$", "$\\alpha$", "$\\beta$", "$T_{compute}$",
            "$T_{comm}$", "$S$"} <= set(names)
    chapters = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert all(s.chapter in chapters for s in SYMBOLS)


def test_chapters_are_numbered_without_a_gap_and_none_runs_long():
    import statistics

    paths = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert [p.name[:2] for p in paths] == [f"{i:02d}" for i in range(len(paths))]
    counts = {path.name: chapter_words(path) for path in paths}
    long = {name: n for name, n in counts.items() if n > 3000}
    assert not long, f"chapters over 3,000 words (every word of their markdown, tables included): {long}"
    median = statistics.median(counts.values())
    assert median <= 2200, f"the median chapter has {median:g} words (at most 2,200): {counts}"


def chapter_words(path: Path) -> int:
    """Every word of a chapter's markdown cells, tables included: what a reader reads."""
    import re

    nb = json.loads(path.read_text(encoding="utf-8"))
    return sum(len(re.findall(r"\S+", "".join(c["source"]))) for c in nb["cells"] if c["cell_type"] == "markdown")
