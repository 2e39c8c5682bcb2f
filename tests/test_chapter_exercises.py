"""The chapters' "Your turn" cells are the catalogue's: each chapter holds exactly its exercises from
``dpviz.exercises.catalogue``, each once, in catalogue order, with the catalogue's words, stub and check cell, and
ends with its closing sections in the order Your turn, What to take away, Check yourself.
``python -m dpviz.exercises.write_cells`` writes them, so running it changes nothing here.

Reads the saved notebooks only; nothing is executed.
"""

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dpviz.exercises import catalogue, write_cells

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CHAPTERS = sorted(p for p in NOTEBOOKS.glob("*.ipynb") if re.match(r"\d\d_", p.name))
CLOSING = ("Your turn", "What to take away", "Check yourself")


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def source(cell: dict) -> str:
    return "".join(cell.get("source", ""))


def stub_names(cell: dict) -> list[str]:
    """The functions a code cell defines whose body (after a docstring) raises NotImplementedError."""
    text = "\n".join(line for line in source(cell).splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            if body and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0]):
                names.append(node.name)
    return names


def check_names(cell: dict) -> list[str]:
    """The exercises a code cell checks: the names in its ``from dpviz.exercises import check_<name>``."""
    return re.findall(r"^from dpviz\.exercises import check_(\w+)\s*$", source(cell), re.MULTILINE)


def closing_headings(nb: dict) -> list[str]:
    return [line[3:].strip() for cell in nb["cells"] if cell["cell_type"] == "markdown"
            for line in source(cell).splitlines() if line.startswith("## ") and line[3:].strip() in CLOSING]


def chapter(path: Path) -> str:
    return path.name[:2]


def expected_markdown(exercises) -> list[str]:
    head = f"{write_cells.HEADING}\n\n{write_cells.INTRO}\n\n"
    return [(head if i == 0 else "") + e.markdown() for i, e in enumerate(exercises)]


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_holds_its_catalogue_exercises_once_in_order(path):
    nb, exercises = load(path), catalogue.for_chapter(chapter(path))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    stubs = [(name, c) for c in code for name in stub_names(c)]
    checks = [(name, c) for c in code for name in check_names(c)]
    want = [e.name for e in exercises]
    assert [n for n, _ in stubs] == want, f"{path.name}: stubs {[n for n, _ in stubs]}, the catalogue has {want}"
    assert [n for n, _ in checks] == want, \
        f"{path.name}: check cells {[n for n, _ in checks]}, the catalogue has {want}"
    for e, (_, stub), (_, check) in zip(exercises, stubs, checks):
        assert source(stub) == e.stub(), f"{path.name}: the stub of {e.name} is not the catalogue's"
        assert source(check) == e.check_cell(), f"{path.name}: the check cell of {e.name} is not the catalogue's"


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_your_turn_section_is_the_catalogues_cells_in_a_row(path):
    """One "## Your turn" cell, then per exercise its markdown, stub and check cell, then the next section."""
    nb, exercises = load(path), catalogue.for_chapter(chapter(path))
    cells = nb["cells"]
    starts = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
              and any(line.strip() == write_cells.HEADING for line in source(c).splitlines())]
    if not exercises:
        assert not starts, f"{path.name}: a 'Your turn' section, but the catalogue has no exercise for it"
        return
    assert len(starts) == 1, f"{path.name}: {len(starts)} markdown cells hold '{write_cells.HEADING}'"
    markdown = expected_markdown(exercises)
    for e in exercises:  # each exercise's words once in the whole notebook, so a copy elsewhere fails too
        copies = sum(e.markdown() in source(c) for c in cells if c["cell_type"] == "markdown")
        assert copies == 1, f"{path.name}: the words of {e.name} appear in {copies} markdown cells"
    start = starts[0]
    got = [(c["cell_type"], source(c)) for c in cells[start:start + 3 * len(exercises)]]
    want = [pair for e, text in zip(exercises, markdown)
            for pair in (("markdown", text), ("code", e.stub()), ("code", e.check_cell()))]
    assert got == want, f"{path.name}: the 'Your turn' section is not the catalogue's cells"
    after = cells[start + 3 * len(exercises):]
    if after:  # the section ends at the next level-1 or level-2 heading
        heading = write_cells.section_heading(after[0])
        assert heading is not None, f"{path.name}: cell {after[0].get('id')} follows the exercises inside the " \
                                    f"'Your turn' section"


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_ends_with_your_turn_take_away_check_yourself(path):
    found = closing_headings(load(path))
    assert found == [h for h in CLOSING if h in found], f"{path.name}: closing sections in the order {found}"
    if catalogue.for_chapter(chapter(path)):
        assert "Check yourself" in found, f"{path.name}: no 'Check yourself' section"


def test_every_catalogue_chapter_has_a_notebook():
    assert {e.chapter for e in catalogue.EXERCISES} <= {chapter(p) for p in CHAPTERS}


def test_the_writer_changes_nothing(tmp_path):
    copy = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, copy, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    assert write_cells.write_all([copy]) == []
    for path in CHAPTERS:
        assert (copy / path.name).read_bytes() == path.read_bytes(), path.name


# --- the writer, on tampered copies of a chapter -----------------------------------------------------------------

SIX = NOTEBOOKS / "06_speedup_model.ipynb"


def section(nb: dict) -> tuple[int, int]:
    return write_cells.find_section(nb["cells"], "test")


def rewritten(nb: dict, tmp_path: Path) -> str:
    """What the writer saves for ``nb``, a chapter 06 that it must change."""
    path = tmp_path / SIX.name
    path.write_text(write_cells.dumps(nb), encoding="utf-8")
    assert write_cells.write_all([path]) == [path]
    return path.read_text(encoding="utf-8")


def test_the_writer_drops_a_duplicate_and_restores_a_lost_cell(tmp_path):
    nb = load(SIX)
    start, _ = section(nb)
    cells = nb["cells"]
    lost = cells[start + 2]  # the first check cell
    duplicate = dict(cells[start + 1], id="copy-of-stub")
    nb["cells"] = cells[:start + 2] + [duplicate] + cells[start + 3:]
    text = rewritten(nb, tmp_path)
    again = json.loads(text)
    restored = again["cells"][start + 2]
    assert "copy-of-stub" not in {c["id"] for c in again["cells"]}
    assert (restored["id"], source(restored), restored["outputs"]) == (lost["id"], source(lost), [])
    assert [source(c) for c in again["cells"]] == [source(c) for c in cells]


def test_the_writer_moves_your_turn_back_before_the_take_away(tmp_path):
    nb = load(SIX)
    start, end = section(nb)
    cells = nb["cells"]
    nb["cells"] = cells[:start] + cells[end:-2] + cells[start:end] + cells[-2:]  # Your turn after the take-away
    assert rewritten(nb, tmp_path) == SIX.read_text(encoding="utf-8")


def test_the_writer_refuses_to_drop_a_foreign_cell(tmp_path):
    nb = load(SIX)
    start, end = section(nb)
    nb["cells"].insert(end, {"cell_type": "code", "execution_count": None, "id": "mine", "metadata": {},
                             "outputs": [], "source": ["x = 1"]})
    path = tmp_path / SIX.name
    path.write_text(write_cells.dumps(nb), encoding="utf-8")
    with pytest.raises(ValueError, match="cell mine in the 'Your turn' section is not an exercise cell"):
        write_cells.write_all([path])
    assert path.read_text(encoding="utf-8") == write_cells.dumps(nb)


def test_the_writer_names_a_cell_to_split(tmp_path):
    nb = load(SIX)
    start, _ = section(nb)
    cells = nb["cells"]
    prose = max(i for i in range(start) if cells[i]["cell_type"] == "markdown")  # the last prose before Your turn
    cut = dict(cells[prose], id="prose", source=source(cells[prose]) + "\n\n## Check yourself\n\nEarly.")
    nb["cells"] = cells[:prose] + [cut] + cells[prose + 1:]
    path = tmp_path / SIX.name
    path.write_text(write_cells.dumps(nb), encoding="utf-8")
    with pytest.raises(ValueError, match="split cell prose"):
        write_cells.write_all([path])


def test_the_writer_imports_no_torch():
    code = "import sys, dpviz.exercises.write_cells; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"
