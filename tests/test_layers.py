"""The three layers: ranks run (torch) -> records (numpy) -> pictures (matplotlib), theory (numpy) beside the records.

Drawing, records, theory, claims and teaching never import torch or the runs; the runs never import drawing,
widgets, teaching, claims or matplotlib; no module of dpviz imports itself back through a chain of imports
(counting imports inside functions too). Each of these is checked on the text (the import graph below) and
in a fresh interpreter. The graph sees every import because none is made by a computed name and none is
hidden below code (``noqa: E402``).
"""

import ast
import json
import re
import subprocess
import sys
from collections import deque
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dpviz"
TORCH_FREE = ("dpviz.records", "dpviz.theory", "dpviz.plots", "dpviz.widgets", "dpviz.teaching", "dpviz.figures",
              "dpviz.data", "dpviz.checks",
              # the exercises' checkers that run in the notebook's process (dpviz.exercises.ranked starts ranks)
              "dpviz.exercises.verdict", "dpviz.exercises.guard", "dpviz.grading", "dpviz.exercises.gradients",
              "dpviz.exercises.formulas", "dpviz.exercises.catalogue", "dpviz.exercises.write_cells")
# What the torch layer never loads: it writes records, and only their readers draw, teach or state claims.
DRAWING = ("dpviz.plots", "dpviz.widgets", "dpviz.figures", "dpviz.teaching", "dpviz.claims", "matplotlib")
EXTERNAL = ("torch", "matplotlib")  # the packages outside dpviz that the graph keeps track of


def in_layer(name: str, layer: str) -> bool:
    return name == layer or name.startswith(layer + ".")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}
if any(in_layer(name, "dpviz.claims") for name in MODULES):  # the claims are numpy only from their first module on
    TORCH_FREE += ("dpviz.claims",)
RUNS = sorted(name for name in MODULES if in_layer(name, "dpviz.runs"))


def absolute(node: ast.ImportFrom, name: str) -> str:
    """The module a ``from ... import`` names, relative imports resolved against ``name``."""
    if not node.level:
        return node.module
    package = name.split(".") if MODULES[name].name == "__init__.py" else name.split(".")[:-1]
    return ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))


def is_import_call(node) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func) in ("importlib.import_module", "import_module", "__import__")


def imports_of(name: str) -> set[str]:
    """Every dpviz module (and torch, matplotlib) that ``name`` imports anywhere in its text, functions included;
    ``importlib.import_module("a.literal.name")`` counts."""
    tree = ast.parse(MODULES[name].read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = absolute(node, name)
            targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
        elif is_import_call(node) and node.args and isinstance(node.args[0], ast.Constant):
            targets = [str(node.args[0].value)]
        else:
            continue
        for target in targets:
            if target.split(".")[0] in EXTERNAL:
                found.add(target.split(".")[0])
            elif target in MODULES:
                found.add(target)
    found.discard(name)
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def loads(name: str) -> set[str]:
    """What importing ``name`` runs directly: its imports and the packages above each (importing a.b runs a/__init__)."""
    found = set()
    for dep in GRAPH.get(name, ()):
        parts = dep.split(".")
        found.update(p for p in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if p in MODULES or p == dep)
    found.discard(name)
    return found


def chain_to(start: str, layers) -> list | None:
    """The shortest chain of imports from ``start`` to a module in one of ``layers``, or None."""
    previous, queue = {start: None}, deque([start])
    while queue:
        name = queue.popleft()
        if any(in_layer(name, layer) for layer in layers):
            chain = []
            while name is not None:
                chain.append(name)
                name = previous[name]
            return chain[::-1]
        for dep in sorted(loads(name)):
            if dep not in previous:
                previous[dep] = name
                queue.append(dep)
    return None


def test_no_import_cycle_anywhere_in_dpviz():
    state = {}

    def visit(name, path):
        state[name] = "open"
        for dep in sorted(GRAPH.get(name, ())):
            if dep in EXTERNAL:
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
        if in_layer(name, layer):
            bad = sorted(d for d in deps if d == "torch" or d.startswith("dpviz.runs") or d in ("dpviz.cli", "dpviz.regenerate"))
            assert not bad, f"{name} imports {bad}: the {layer} layer must stay free of torch and the runs"


def test_importing_every_drawing_and_record_module_leaves_torch_unloaded():
    names = sorted(n for n in MODULES if any(in_layer(n, layer) for layer in TORCH_FREE))
    code = (
        "import importlib, json, sys\n"
        f"for name in {names!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'torch' or m.startswith('dpviz.runs'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [], f"importing the torch-free layers loaded {out.stdout.strip()}"


def test_the_runs_never_import_drawing_teaching_or_claims():
    """Transitively: a runs module importing a records module that imports a plot counts. Each offending import
    is named once, at the end of the shortest chain that reaches it from dpviz.runs."""
    shortest, reached_from = {}, {}
    for name in RUNS:
        for dep in loads(name):
            chain = None if in_layer(dep, "dpviz.runs") else chain_to(dep, DRAWING)
            if chain:
                chain = [name, *chain]
                offence = tuple(chain[-2:])
                shortest[offence] = min(shortest.get(offence, chain), chain, key=lambda c: (len(c), c))
                reached_from.setdefault(offence, set()).add(name)
    if shortest:
        lines = []
        for offence, chain in sorted(shortest.items()):
            others = len(reached_from[offence] - {chain[0]})
            lines.append(" -> ".join(chain) + (f"  (and from {others} more runs modules)" if others else ""))
        pytest.fail("the torch layer reaches drawing, teaching or claims:\n" + "\n".join(lines))


def test_importing_every_runs_module_loads_no_drawing_teaching_or_claims():
    code = (
        "import importlib, json, sys\n"
        f"layers = {DRAWING!r}\n"
        "def loaded():\n"
        "    return {m for m in sys.modules if any(m == p or m.startswith(p + '.') for p in layers)}\n"
        "before, found = loaded(), {}\n"
        f"for name in {RUNS!r}:\n"
        "    importlib.import_module(name)\n"
        "    now = loaded()\n"
        "    if now - before:\n"
        "        found[name] = sorted(now - before)\n"
        "    before = now\n"
        "print(json.dumps(found))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout)

    def summary(modules):
        parts = []
        for layer in DRAWING:
            inside = [m for m in modules if in_layer(m, layer)]
            if inside:
                parts.append(inside[0] if len(inside) == 1 else f"{layer} ({len(inside)} modules)")
        return ", ".join(parts)

    if found:
        pytest.fail("importing the runs loaded what they must not:\n" + "\n".join(
            f"importing {name} loaded {summary(modules)}" for name, modules in found.items()))


def test_no_import_is_hidden_below_code():
    found = [f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
             for path in sorted(PACKAGE.rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"#\s*noqa\s*:[^#]*\bE402\b", line)]
    if found:
        pytest.fail("imports below code (noqa: E402); move them to the top or to a module of their own:\n" + "\n".join(found))


MODULE_FUNCTION = re.compile(r"dpviz(\.\w+)+:\w+")  # "dpviz.runs.waiting:record_figures", resolved by importing it


def string_imports(path: Path) -> list[str]:
    where = path.relative_to(PACKAGE.parent)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if is_import_call(node) and not (node.args and isinstance(node.args[0], ast.Constant)):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_FUNCTION.fullmatch(node.value):
            found.append(f"{where}:{node.lineno}: {node.value!r}")
    return found


def test_no_module_is_imported_by_a_computed_name():
    found = [line for path in sorted(PACKAGE.rglob("*.py")) for line in string_imports(path)]
    if found:
        pytest.fail("imports the graph cannot see (a computed name, a 'module:function' string):\n" + "\n".join(found))
