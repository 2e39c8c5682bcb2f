"""The three layers: ranks run (torch) -> records (numpy) -> pictures (matplotlib), theory (numpy) beside the records.

Drawing, records, theory and teaching never import torch or the runs; no module of dpviz imports itself back
through a chain of imports (counting imports inside functions too).
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dpviz"
TORCH_FREE = ("dpviz.records", "dpviz.theory", "dpviz.plots", "dpviz.widgets", "dpviz.teaching", "dpviz.figures",
              "dpviz.data", "dpviz.checks",
              # the exercises' checkers that run in the notebook's process (dpviz.exercises.ranked starts ranks)
              "dpviz.exercises.verdict", "dpviz.exercises.solutions", "dpviz.exercises.gradients",
              "dpviz.exercises.formulas", "dpviz.exercises.catalogue")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(name: str) -> set[str]:
    """Every dpviz module (and torch) that ``name`` imports anywhere in its text, functions included."""
    tree = ast.parse(MODULES[name].read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] == "torch":
                found.add("torch")
            elif target in MODULES:
                found.add(target)
    found.discard(name)
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def test_no_import_cycle_anywhere_in_dpviz():
    state = {}

    def visit(name, path):
        state[name] = "open"
        for dep in sorted(GRAPH.get(name, ())):
            if dep == "torch":
                continue
            if state.get(dep) == "open":
                pytest.fail("import cycle: " + " -> ".join([*path, name, dep]))
            if dep not in state:
                visit(dep, [*path, name])
        state[name] = "done"

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [])


@pytest.mark.parametrize("layer", TORCH_FREE)
def test_torch_free_layers_never_import_torch_or_the_runs(layer):
    for name, deps in GRAPH.items():
        if name == layer or name.startswith(layer + "."):
            bad = sorted(d for d in deps if d == "torch" or d.startswith("dpviz.runs") or d in ("dpviz.cli", "dpviz.regenerate"))
            assert not bad, f"{name} imports {bad}: the {layer} layer must stay free of torch and the runs"


def test_importing_every_drawing_and_record_module_leaves_torch_unloaded():
    names = sorted(n for n in MODULES if any(n == layer or n.startswith(layer + ".") for layer in TORCH_FREE))
    code = (
        "import importlib, json, sys\n"
        f"for name in {names!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'torch' or m.startswith('dpviz.runs'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [], f"importing the torch-free layers loaded {out.stdout.strip()}"
