"""The course's order is the import rule: a topic imports the engine and earlier topics only.

``dpviz/engine/`` is what every chapter stands on and names no chapter; ``dpviz/topics/<topic>/`` is one chapter's
code, and may import the engine, :mod:`dpviz.course` (which imports nothing of dpviz) and the topics before it in
the course. Above them sit the course-level modules (the command line, ``./run``'s regeneration and recipes,
grading, the exercises and the docs), which may import anything.

Within that: torch is imported only by rank files (``rank_*.py``) and the engine's rank side, so a chapter's
kernel never loads it; matplotlib only by drawing files (plots, figures, widgets and the engine's canvas, slider,
layout and style), so no rank ever loads it; and no module imports itself back through a chain of imports.
Inside a topic, the modules below its fronts (theory, records, plans, claims, plots, figures, the deck) import no
``run_*`` front and no ``rank_*`` file, of their own topic or any other; what a front and one of them both need
lives in the lower module.
Each rule is checked on the text (the import graph below, imports inside functions and
``importlib.import_module("a.literal.name")`` included) and the two about torch and matplotlib also in a fresh
interpreter.
"""

import ast
import io
import json
import re
import subprocess
import sys
import tokenize
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


def import_sites(name: str):
    """(line, statement, target) for each name that an import anywhere in ``name``'s text may load, functions
    included; ``from a import b`` gives both ``a`` and ``a.b``, since ``b`` may be a module."""
    tree = ast.parse(MODULES[name].read_text())
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
            yield node.lineno, ast.unparse(node), target


def imports_of(name: str) -> set[str]:
    """Every dpviz module (and torch, matplotlib) that ``name`` imports anywhere in its text, functions included."""
    found = set()
    for _, _, target in import_sites(name):
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


def is_below_the_fronts(name: str) -> bool:
    """A topic's module below its fronts: its theory (``theory*``, or a module named by its concept), its records
    and plans, its claims, plots, figures and deck. Every file but the fronts (``run_*``), the rank files
    (``rank_*``) and the widget, which may start runs."""
    leaf = name.rsplit(".", 1)[-1]
    return place(name)[0] == "topic" and not leaf.startswith(("run_", "rank_")) and leaf != "widget"


def is_run_or_rank(name: str) -> bool:
    return name.rsplit(".", 1)[-1].startswith(("run_", "rank_"))


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


def test_below_the_fronts_a_topic_imports_no_run_and_no_rank():
    bad = sorted({f"{name} imports {target} ({MODULES[name].relative_to(PACKAGE.parent)}:{line}: {statement})"
                  for name in MODULES if is_below_the_fronts(name)
                  for line, statement, target in import_sites(name)
                  if target in MODULES and is_run_or_rank(target)})
    assert not bad, ("theory, records, plans, claims, plots, figures and decks stand on records and theory, never on "
                     "a run_* front or a rank_* file; move what both need down into records or theory:\n"
                     + "\n".join(bad))


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


# A chapter's number, in each form a library file could write one. Only dpviz/course.py decides numbers; any other
# file asks it (course.number_of(__name__), course.ref("speedup_model"), course.chapter(topic).number), so that
# renumbering a chapter or inserting one touches course.py and the notebooks' file names only.
CHAPTER_NUMBER = "|".join(course.NUMBERS)
NOTEBOOK_NAME = "|".join(c.notebook for c in course.COURSE)
NUMBER_IN_TEXT = re.compile(
    r"\b[Cc]hapters?\s+\d+\b"                                   # "chapter 06", "Chapters 04 and 05", "chapter 6"
    rf"|(?<![\w.-])(?:{CHAPTER_NUMBER})_(?:{NOTEBOOK_NAME})\b"    # a notebook's name: "06_speedup_model.ipynb"
    rf"|[\"'`](?:{CHAPTER_NUMBER})-[a-z]"                         # a card's key quoted in prose: "15-tf-more-gpus"
)
KEY_AT_START = re.compile(rf"(?:{CHAPTER_NUMBER})-[a-z]")       # a string that is a card's key: "06-limits"


def format_specs(tree) -> set[int]:
    """The ids of the nodes inside f-strings' format specs (the "02" of f"{x:02}" is a width, not a chapter)."""
    return {id(node) for f in ast.walk(tree) if isinstance(f, ast.FormattedValue) and f.format_spec
            for node in ast.walk(f.format_spec)}


def among_other_labels(tree) -> set[int]:
    """The ids of strings listed beside strings that are no chapter's number: ``["0.5", "1", ..., "16"]`` is a row
    of tick labels, and its "16" is a number on an axis, whatever the course's length."""
    return {id(e) for seq in ast.walk(tree) if isinstance(seq, (ast.List, ast.Tuple, ast.Set))
            if any(isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value not in course.NUMBERS
                   for e in seq.elts)
            for e in seq.elts}


def chapter_numbers_in(path: Path) -> list[str]:
    """Every place in one file that writes a chapter's number: a string that is one ("06"; not in a row of other
    labels), a string that starts with a card's key ("06-limits"), and any string, docstring or comment naming a
    chapter by number."""
    text = path.read_text()
    tree = ast.parse(text)
    skip, labels = format_specs(tree), among_other_labels(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            value = node.value
            if (value in course.NUMBERS and id(node) not in labels) or KEY_AT_START.match(value) \
                    or NUMBER_IN_TEXT.search(value):
                match = NUMBER_IN_TEXT.search(value)
                found.append(f"{node.lineno}: {match.group(0) if match else value!r}")
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT and NUMBER_IN_TEXT.search(token.string):
            found.append(f"{token.start[0]}: {NUMBER_IN_TEXT.search(token.string).group(0)} (a comment)")
    return found


def test_the_course_gives_every_other_module_its_numbers():
    first, second, third = course.COURSE[1:4]
    assert course.ref(first.topic) == f"chapter {first.number}"
    assert course.Ref(first.topic, second.topic) == f"Chapters {first.number} and {second.number}"
    assert course.ref(first.topic, second.topic, third.topic) == (
        f"chapters {first.number}, {second.number} and {third.number}")
    assert course.number_of(f"{third.package}.deck") == course.number_of(third.package + ".x.y") == third.number
    for bad in ("dpviz.engine.quiz", "dpviz.topics", "dpviz.topics.no_such_topic.deck"):
        with pytest.raises(ValueError):
            course.number_of(bad)
    with pytest.raises(ValueError):
        course.ref()
    # a chapter's own modules compute their number, and what they hold answers to its number and its topic
    from dpviz.exercises.catalogue import EXERCISES, for_chapter
    from dpviz.topics.ground_floor.symbols import SYMBOLS
    for c in course.COURSE:
        cards = course.cards_for(c.number)
        assert cards == course.cards_for(c.topic)
        assert all(card.chapter == c.number and card.key.startswith(f"{c.topic}-") for card in cards)
        assert for_chapter(c.number) == for_chapter(c.topic) == [e for e in EXERCISES if e.topic == c.topic]
    assert {e.chapter for e in EXERCISES} <= set(course.NUMBERS)
    assert {s.chapter for s in SYMBOLS} <= set(course.NUMBERS)


def test_the_chapter_number_pattern_finds_each_form_and_no_other_number():
    for number_written in ("chapter 06 has a numeric example", "as Chapters 04 and 05 show", "in chapter\n12",
                           "``06_speedup_model.ipynb``", 'e.g. "15-tf-more-gpus"'):
        assert NUMBER_IN_TEXT.search(number_written), number_written
    for other in ("2025-06-01", "f'{k:02d}'", "the 05 quantile", "10-fold", "step 04", "x_01_speedup_model",
                  "Chapter {number}", "fig_06_speedup", "0.06_speedup_model", "chapters' numbers"):
        assert not NUMBER_IN_TEXT.search(other), other
    assert KEY_AT_START.match("06-limits") and not KEY_AT_START.match("06") and not KEY_AT_START.match("2025-06-01")


def test_only_the_course_module_writes_a_chapter_number(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('"""Chapter 06."""\nA = f"{x:02}"  # chapter 07\nB = "08"\nC = "09-key"\nD = f"{n:05}-rank"\n'
                      'E = ["0.5", "1", "10"]\nF = ("10", "11")\n')
    assert [line.split(":")[0] for line in chapter_numbers_in(sample)] == ["1", "3", "4", "7", "7", "2"]

    bad = [f"{path.relative_to(PACKAGE.parent)}:{where}" for name, path in sorted(MODULES.items())
           if name != "dpviz.course" for where in chapter_numbers_in(path)]
    assert not bad, ("only dpviz/course.py writes a chapter's number; ask it instead (course.number_of(__name__), "
                     "course.ref(topic), course.chapter(topic).number) or name the chapter by its topic:\n"
                     + "\n".join(bad))
