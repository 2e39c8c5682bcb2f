"""No chapter lays a figure out in a cell: a figure is one dpviz call (STYLE.md, notebooks), so a cell never
makes axes, sets titles or spaces panels itself; the figure functions under dpviz/topics/ do, where tests see them."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
LAYOUT = re.compile(r"\bplt\.|\bsubplots\b|subplots_adjust|\bset_(title|xlabel|ylabel|xlim|ylim)\(|\bFigure\(|"
                    r"\bgridspec|\bimport matplotlib|\bfrom matplotlib\b")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name[:2])
def test_no_cell_builds_a_figure_by_hand(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    found = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        for line in "".join(cell["source"]).splitlines():
            code = line.split("#", 1)[0]
            if LAYOUT.search(code) and not code.lstrip().startswith("%"):
                found.append(f"cell {i}: {line.strip()}")
    assert not found, f"{path.name} lays out figures in its cells:\n" + "\n".join(found)
