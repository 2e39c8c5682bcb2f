"""The course's order is the import rule: a topic imports the engine and earlier topics only.

``dpviz/engine/`` is what every chapter stands on and names no chapter; ``dpviz/topics/<topic>/`` is one chapter's
code, and may import the engine, :mod:`dpviz.course` (which imports nothing of dpviz) and the topics before it in
the course. Above them sit the course-level modules (the command line, ``./run``'s regeneration and recipes,
grading, the exercises and the docs), which may import anything.

Within that: torch is imported only by rank files (``rank_*.py``) and the engine's rank side, so a chapter's
kernel never loads it; matplotlib only by drawing files (plots, figures, widgets and the engine's canvas, slider,
layout and style), so no rank ever loads it; and no module imports itself back through a chain of imports.
Each rule is checked on the text (the import graph below, imports inside functions and
``importlib.import_module("a.literal.name")`` included) and the two about torch and matplotlib also in a fresh
interpreter.
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dpviz"
sys.path.insert(0, str(PACKAGE.parent))
from dpviz import course  # noqa: E402  (imports nothing of dpviz itself)

EXTERNAL = ("torch", "matplotlib")  # the packages outside dpviz that the graph keeps track of
TOPICS = [c.topic for c in course.COURSE]

# The engine's rank side: the launcher counts GPUs with torch in a child process, and a rank joins its group.
ENGINE_RANK_SIDE = ("dpviz.engine.launch", "dpviz.engine.rank")
# Rank code outside a rank file, each with its reason: the collective exercises' worker (course level, it runs the
# student's function beside the real collective), and run_training's main(), the torchrun entry point, which is a
# rank under torchrun and imports torch inside that function only.
OTHER_RANK_CODE = ("dpviz.exercises.rank_exercises", "dpviz.topics.ground_floor.run_training")
ENGINE_DRAWING = ("dpviz.engine.canvas", "dpviz.engine.slider", "dpviz.engine.layout", "dpviz.engine.style")
COURSE_DRAWING = ("dpviz.cli", "dpviz.regenerate")  # ./run draws the figures


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def is_import_call(node) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func) in ("importlib.import_module", "import_module", "__import__")


def imports_of(name: str) -> set[str]:
    """Every dpviz module (and torch, matplotlib) that ``name`` imports anywhere in its text, functions included."""
    tree = ast.parse(MODULES[name].read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{name} uses a relative import; dpviz names every module in full"
            targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
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


def place(name: str):
    """("engine", None), ("topic", its index in the course), ("course", None) for the course-level modules."""
    parts = name.split(".")
    if len(parts) > 1 and parts[1] == "engine":
        return "engine", None
    if len(parts) > 2 and parts[1] == "topics":
        return "topic", TOPICS.index(parts[2])
    return "course", None


def is_rank_file(name: str) -> bool:
    return name.rsplit(".", 1)[-1].startswith("rank_") or name in ENGINE_RANK_SIDE or name in OTHER_RANK_CODE


def is_drawing_file(name: str) -> bool:
    leaf = name.rsplit(".", 1)[-1]
    return (place(name)[0] == "topic" and (leaf.startswith("plots") or leaf in ("figures", "widget"))
            or name in ENGINE_DRAWING or name in COURSE_DRAWING)


def test_every_topic_folder_is_a_chapter_of_the_course_and_every_chapter_has_one():
    folders = sorted(p.name for p in (PACKAGE / "topics").iterdir() if (p / "__init__.py").exists())
    assert folders == sorted(TOPICS)


def test_a_topic_imports_the_engine_and_earlier_topics_only():
    bad = []
    for name, deps in GRAPH.items():
        where, index = place(name)
        if where != "topic":
            continue
        for dep in deps - set(EXTERNAL):
            dep_where, dep_index = place(dep)
            if dep in ("dpviz", "dpviz.course") or dep_where == "engine" or (dep_where == "topic" and dep_index <= index):
                continue
            bad.append(f"{name} imports {dep}")
    assert not bad, "a topic may import the engine and earlier topics only:\n" + "\n".join(sorted(bad))


def test_the_engine_imports_no_topic_and_nothing_above_it():
    bad = [f"{name} imports {dep}" for name, deps in GRAPH.items() if place(name)[0] == "engine"
           for dep in deps - set(EXTERNAL) if place(dep)[0] != "engine" and dep not in ("dpviz", "dpviz.course")]
    assert not bad, "the engine names no chapter:\n" + "\n".join(sorted(bad))


def test_the_course_module_imports_nothing_of_dpviz_at_import_time():
    tree = ast.parse(MODULES["dpviz.course"].read_text())
    top = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert not [ast.unparse(node) for node in top if "dpviz" in ast.unparse(node)]


def test_torch_only_in_rank_files():
    bad = sorted(name for name, deps in GRAPH.items() if "torch" in deps and not is_rank_file(name))
    assert not bad, f"these import torch but are not rank files: {bad}"


def test_matplotlib_only_in_drawing_files():
    bad = sorted(name for name, deps in GRAPH.items() if "matplotlib" in deps and not is_drawing_file(name))
    assert not bad, f"these import matplotlib but do not draw: {bad}"


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


def test_importing_every_module_but_the_rank_files_leaves_torch_unloaded():
    names = sorted(n for n in MODULES if not is_rank_file(n) and n != "dpviz.__main__")
    code = (
        "import importlib, json, sys\n"
        f"for name in {names!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m == 'torch')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout) == [], "importing every module but the rank files loaded torch"


def test_importing_every_run_and_rank_file_loads_no_matplotlib():
    names = sorted(n for n in MODULES if is_rank_file(n) or n.rsplit(".", 1)[-1].startswith("run_"))
    code = (
        "import importlib, json, sys\n"
        "found = {}\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "    if 'matplotlib' in sys.modules:\n"
        "        found = name\n"
        "        break\n"
        "print(json.dumps(found))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout) == {}, f"importing {json.loads(out.stdout)} loaded matplotlib"
