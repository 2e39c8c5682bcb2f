"""Sentences about measurements are printed by code, not typed (issue: every sentence true of the runs it describes).

* No chapter's markdown states a measured number: every number followed by ms, s, µs, %, or × in a markdown cell
  is either on :data:`ALLOWED` (a modeled, chosen or sourced value, with the reason) or the test fails. What a run
  measured is printed by a claims function under the reasoning.
* No saved output of a cell that only reads committed records is excluded from nbval: a cell tagged
  ``nbval-ignore-output`` must depend on a run the chapter starts itself (or on the clock).
* No claims function ends in a bare ``assert``: each assertion names the numbers that contradict it.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# a number, then (through spaces, a closing $ or a thin space) a unit of time, a per cent or a times sign
MEASURED = re.compile(r"(?<![\w.])(\d[\d.,]*)(?:\s|\$|\\,|~)*(ms|µs|us|ns|s|%|×|per ?cent)(?![\w])")

# (chapter, the number as written) -> why it may stand in prose: a value the chapter chose, modeled or quoted
ALLOWED = {
    ("00", "1$ s"): "modeled: the T_compute the chapter chooses for the formula",
    ("00", "0.05$ s"): "modeled: the T_comm the chapter chooses for the formula",
    ("06", "1$ s"): "modeled: the T_compute of the worked example",
    ("06", "0.02$ s"): "modeled: the T_comm of the worked example",
    ("06", "0.1$ s"): "modeled: the T_compute of the modeled s01",
    ("06", "90 %"): "chosen: dpviz.topics.speedup_model.claims.EFFICIENCY, the peel-off threshold",
    ("06", "1.3×"): "quoted: the notes' untraced BERT-Large figure, presented as unsourced",
    ("06", "3.3×"): "quoted: the notes' untraced BERT-Large figure, presented as unsourced",
    ("07", "20 %"): "chosen: dpviz.topics.measuring.alpha_beta's trust rule",
    ("11", "50$ ms"): "chosen: the straggler's injected delay d (dpviz.topics.waiting.run_figures.LIVE_STRAGGLER)",
    ("11", "50 ms"): "chosen: the straggler's injected delay d, time.sleep(0.05)",
    ("11", "5 ms"): "chosen: dpviz.topics.waiting.records_straggler.WAIT_TOLERANCE, the absolute part",
    ("11", "30 %"): "chosen: dpviz.topics.waiting.records_straggler.WAIT_TOLERANCE, the share of d",
    ("11", "4 ms"): "chosen: the fast asynchronous workers' sleep per gradient (the shipped record's delays)",
    ("11", "20 ms"): "chosen: the slow asynchronous worker's sleep per gradient (the shipped record's delays)",
}


def markdown_cells(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [(i, "".join(c["source"])) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"]


def test_the_allowed_constants_are_the_code_s():
    from dpviz.topics.speedup_model.claims import EFFICIENCY
    from dpviz.topics.measuring import alpha_beta

    assert f"{EFFICIENCY:.0%}".replace("%", " %") == "90 %"
    assert f"{alpha_beta.FIT_ERROR:.0%}".replace("%", " %") == "20 %"
    from dpviz.topics.waiting.records_async_sgd import shipped_async
    from dpviz.topics.waiting.records_straggler import WAIT_TOLERANCE
    from dpviz.topics.waiting.run_figures import LIVE_STRAGGLER

    assert max(LIVE_STRAGGLER["delays"]) == 0.05 and WAIT_TOLERANCE == (0.005, 0.30)
    assert sorted({round(d * 1e3) for d in next(iter(shipped_async().values())).meta["delays"]}) == [4, 20]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_measured_number_is_typed_into_a_chapter(path):
    chapter = path.name[:2]
    typed = [f"cell {i}: {m.group(0)!r} in “…{md[max(0, m.start() - 50):m.end() + 30]}…”"
             for i, md in markdown_cells(path) for m in MEASURED.finditer(md)
             if (chapter, m.group(0)) not in ALLOWED]
    assert not typed, (f"{path.name} states numbers in markdown that no code printed; print them from the record "
                       "with a claims function, or, for a modeled, chosen or quoted value, add it to ALLOWED with "
                       "the reason:\n" + "\n".join(typed))


def test_every_allowed_number_is_still_in_its_chapter():
    present = {(path.name[:2], m.group(0)) for path in CHAPTERS for _, md in markdown_cells(path)
               for m in MEASURED.finditer(md)}
    assert not set(ALLOWED) - present, f"stale entries in ALLOWED: {sorted(set(ALLOWED) - present)}"


# a call that starts ranks (or times the chapter itself): its output may change from one execution to the next
LIVE_CALL = re.compile(r"\b(record_\w+|run_\w+|launch|time\.perf_counter|perf_counter)\s*\(")


def live_names(cells) -> set[str]:
    """Names bound, anywhere in the chapter, to what a live call returned (or to something made from them)."""
    names: set[str] = set()
    changed = True
    while changed:  # a name made from a live name is live too
        changed = False
        for cell in cells:
            if cell["cell_type"] != "code":
                continue
            try:
                tree = ast.parse("".join(cell["source"]))
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.Assign, ast.For, ast.AugAssign, ast.AnnAssign)):
                    value = node.iter if isinstance(node, ast.For) else node.value
                    if value is None:
                        continue
                    text = ast.unparse(value)
                    if LIVE_CALL.search(text) or any(re.search(rf"\b{re.escape(n)}\b", text) for n in names):
                        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                        for target in targets:
                            for name in ast.walk(target):
                                if isinstance(name, ast.Name) and name.id not in names:
                                    names.add(name.id)
                                    changed = True
    return names


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_only_cells_that_depend_on_a_live_run_are_excluded_from_nbval(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    live = live_names(cells)
    excluded = []
    for i, cell in enumerate(cells):
        if "nbval-ignore-output" not in cell.get("metadata", {}).get("tags", []):
            continue
        source = "".join(cell["source"])
        if LIVE_CALL.search(source) or any(re.search(rf"\b{re.escape(n)}\b", source) for n in live):
            continue
        excluded.append(f"cell {i}: {source.splitlines()[0] if source else ''}")
    assert not excluded, (f"{path.name}: these cells read only committed records (or nothing live), yet nbval does "
                          "not compare their output:\n" + "\n".join(excluded))


def test_no_claim_ends_in_a_bare_assert():
    bare = []
    for path in sorted((ROOT / "dpviz" / "claims").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assert) and node.msg is None:
                bare.append(f"{path.name}:{node.lineno}")
    assert not bare, "asserts without a message (say which numbers contradict the claim): " + ", ".join(bare)
