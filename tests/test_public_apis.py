"""dpviz stands on the public APIs of matplotlib, ipywidgets, Pillow and multiprocessing (STYLE.md item 11).

A private name (one that starts with ``_`` and is not a dunder) of those libraries buys a little today and breaks
silently on the next release, or on the version a student has (Colab's matplotlib, ipywidgets 7). This test reads
every module under ``dpviz/`` and lists each place that touches one:

* an import of a private module or name (``from matplotlib import _api``, ``import multiprocessing.forkserver._x``,
  ``importlib.import_module("PIL._imaging")``);
* an attribute access whose chain starts at a name bound to one of those libraries, or to an object reached from
  one (``fig = plt.figure(); fig.canvas._renderer``, ``self.canvas = FigureCanvasAgg(fig)`` then
  ``self.canvas._x`` in any method of that class, ``multiprocessing.current_process()._inheriting``, a parameter
  annotated with such a class), and ``getattr``/``setattr``/``hasattr``/``delattr`` with such an object and a
  private name written as a string;
* in a class that subclasses one of their classes: a private method defined there that the base class has (an
  override of a private hook), and any private attribute read through ``self`` or ``super()`` that the class does not
  set itself;
* by name, where the walk cannot follow an object (an unannotated parameter: ``def draw(text): text._get_layout()``):
  an attribute whose private name one of those libraries defines (read from their installed source and stubs) and
  no module of dpviz defines. IPython's display protocol (``_repr_mimebundle_``, ``_ipython_display_``) is public.

The one module allowed to do so is :data:`PRIVATE_CALLS` (dpviz/engine/private.py), which holds every call dpviz
makes for which Python offers no public way, each with its reason, and is checked by tests/test_private_calls.py.
The walk is by name within a function (not by flow): a name bound anywhere in a function to one of those libraries'
objects is one for the whole function.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dpviz"
PRIVATE_CALLS = PACKAGE / "engine" / "private.py"  # the one module allowed private names, each with its reason
WATCHED = ("matplotlib", "mpl_toolkits", "ipywidgets", "PIL", "multiprocessing", "torch.multiprocessing")
IMPORT_CALLS = ("importlib.import_module", "import_module", "__import__")
ATTRIBUTE_CALLS = ("getattr", "setattr", "hasattr", "delattr")


# IPython's display protocol (_repr_mimebundle_, _repr_html_, _ipython_display_): public names a class defines so
# that Jupyter can show it, spelled with underscores on purpose
DISPLAY_PROTOCOL = re.compile(r"_repr_[a-z]+_|_ipython_[a-z_]+_")


def is_private(name: str) -> bool:
    dunder = name.startswith("__") and name.endswith("__")
    return name.startswith("_") and not dunder and not DISPLAY_PROTOCOL.fullmatch(name)


def watched_library(path: str) -> str | None:
    """The watched library a dotted origin ("matplotlib.pyplot.figure().canvas") belongs to, or None."""
    for root in sorted(WATCHED, key=len, reverse=True):
        if path == root or path.startswith(root + "."):
            return root
    return None


def dotted(parts) -> str:
    """["plt", "figure", "()", "axes", "[]"] as "plt.figure().axes[]"."""
    return "".join(p if p in ("()", "[]") or i == 0 else "." + p for i, p in enumerate(parts))


def leads_to_watched(origin: str) -> bool:
    """Whether an origin is in a watched library, or is a package one of them lives in ("torch")."""
    return watched_library(origin) is not None or any(root.startswith(origin + ".") for root in WATCHED)


def chain(node) -> tuple[ast.AST, list[str]] | None:
    """An expression like ``a.b(x).c[0].d`` as its root node and its steps (["b", "()", "c", "[]", "d"])."""
    steps = []
    while True:
        if isinstance(node, ast.Attribute):
            steps.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call):
            steps.append("()")
            node = node.func
        elif isinstance(node, ast.Subscript):
            steps.append("[]")
            node = node.value
        elif isinstance(node, ast.Name):
            steps.append(node.id)
            return node, steps[::-1]
        else:
            return None


class Scope:
    """Names (and ``self.x`` paths) bound to watched origins: "plt" -> "matplotlib.pyplot"."""

    def __init__(self, parent: Scope | None = None):
        self.bound = dict(parent.bound) if parent else {}

    def origin(self, node) -> str | None:
        """The dotted origin of an expression, when it starts at a bound name: ``plt.figure().canvas`` ->
        "matplotlib.pyplot.figure().canvas"; None for anything else."""
        found = chain(node)
        if found is None:
            return None
        root, steps = found
        if isinstance(root, ast.Name) and root.id == "super" and steps[:2] == ["super", "()"] and "super()" in self.bound:
            return dotted([self.bound["super()"], *steps[2:]])
        for cut in range(len(steps), 0, -1):  # the longest bound prefix: "self.canvas" before "self"
            key = ".".join(steps[:cut])
            if key in self.bound:
                return dotted([self.bound[key], *steps[cut:]])
        return None

    def bind(self, target, origin: str | None) -> bool:
        """Bind an assignment target to an origin; whether anything new was bound."""
        if origin is None:
            return False
        if isinstance(target, (ast.Tuple, ast.List)):
            return any([self.bind(t, origin + "[]") for t in target.elts])
        if isinstance(target, ast.Starred):
            return self.bind(target.value, origin + "[]")
        if isinstance(target, ast.Name):
            key = target.id
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            key = f"self.{target.attr}"
        else:
            return False
        if key in self.bound or not leads_to_watched(origin):  # the first binding stands (x = x.parent ends)
            return False
        self.bound[key] = origin
        return True


def import_bindings(node) -> list[tuple[str, str]]:
    """(name bound, dotted origin) for an import statement."""
    if isinstance(node, ast.Import):
        return [(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0]) for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [(a.asname or a.name, f"{node.module}.{a.name}") for a in node.names if a.name != "*"]
    return []


def base_has(origin: str, name: str) -> bool:
    """Whether the watched class at ``origin`` has attribute ``name`` (True where the class cannot be imported here,
    so that an override is never let by unseen)."""
    import importlib

    module, _, attr = origin.rpartition(".")
    try:
        return hasattr(getattr(importlib.import_module(module), attr), name)
    except Exception:  # noqa: BLE001 - an origin this walk could not resolve: assume the worst
        return True


def defined_private_names(trees) -> set[str]:
    """Every private name the modules define: a function, method or class, an attribute or variable assigned, a
    parameter, an import's alias."""
    names = set()
    for tree in trees:
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(n.name)
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                names.add(n.attr)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
            elif isinstance(n, ast.arg):
                names.add(n.arg)
            elif isinstance(n, ast.alias):
                names.add(n.asname or n.name.split(".")[0])
    return {name for name in names if is_private(name)}


def parsed(paths):
    for path in paths:
        try:
            yield ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue


@functools.lru_cache(maxsize=1)
def library_private_names() -> dict[str, str]:
    """Every private name the watched libraries installed here define (their tests left out), to the library's name:
    about 3,400, read from their source and stubs in about 3 s."""
    names = {}
    for library in WATCHED:
        spec = importlib.util.find_spec(library)
        if spec is None or not spec.submodule_search_locations:
            continue
        folder = Path(list(spec.submodule_search_locations)[0])
        sources = [p for p in folder.rglob("*.py*") if p.suffix in (".py", ".pyi") and "tests" not in p.parts]
        for name in defined_private_names(parsed(sources)):  # .pyi: the stubs of compiled modules (ft2font)
            names.setdefault(name, library)
    return names


@functools.lru_cache(maxsize=1)
def dpviz_private_names() -> frozenset[str]:
    return frozenset(defined_private_names(parsed(PACKAGE.rglob("*.py"))))


def find_private_uses(source: str, filename: str = "<text>", library_names: dict | None = None,
                      ours: frozenset = frozenset()) -> list[str]:
    """Each place in ``source`` that touches a private name of a watched library, as "file:line: what".

    Two rules. By flow: an attribute reached from a name bound to a watched library. By name: with
    ``library_names`` (:func:`library_private_names`), an attribute whose private name a watched library defines
    and neither dpviz (``ours``) nor this source does, on any object but a module imported from elsewhere: that
    catches an object the flow cannot follow (an unannotated parameter, ``def draw(text): text._get_layout()``).
    """
    tree = ast.parse(source)
    found = []

    def report(node, what, library):
        found.append(f"{filename}:{node.lineno}: {what} (a private name of {library})")

    def check_import(node):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif (isinstance(node, ast.Call) and ast.unparse(node.func) in IMPORT_CALLS and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names = [node.args[0].value]
        for name in names:
            library = watched_library(name)
            if library and any(is_private(part) for part in name.split(".")):
                report(node, f"imports {name}", library)

    def bind_all(body_nodes, scope: Scope, class_origin: str | None):
        """Bind every assignment in a function (or module) body until nothing changes."""
        nodes = [n for stmt in body_nodes for n in walk_here(stmt)]
        changed = True
        while changed:
            changed = False
            for n in nodes:
                if isinstance(n, (ast.Import, ast.ImportFrom)):
                    for name, origin in import_bindings(n):
                        changed |= scope.bind(ast.Name(id=name), origin)
                elif isinstance(n, ast.Assign):
                    for t in n.targets:
                        changed |= scope.bind(t, scope.origin(n.value))
                elif isinstance(n, (ast.AnnAssign, ast.AugAssign)) and n.value is not None:
                    changed |= scope.bind(n.target, scope.origin(n.value))
                elif isinstance(n, ast.NamedExpr):
                    changed |= scope.bind(n.target, scope.origin(n.value))
                elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
                    origin = scope.origin(n.iter)
                    changed |= scope.bind(n.target, origin + "[]" if origin else None)
                elif isinstance(n, ast.withitem) and n.optional_vars is not None:
                    changed |= scope.bind(n.optional_vars, scope.origin(n.context_expr))

    def check_uses(body_nodes, scope: Scope, own_names=frozenset()):
        for stmt in body_nodes:
            for n in walk_here(stmt):
                if isinstance(n, (ast.Import, ast.ImportFrom)) or (isinstance(n, ast.Call) and ast.unparse(n.func) in IMPORT_CALLS):
                    check_import(n)
                if isinstance(n, ast.Attribute) and is_private(n.attr):
                    origin = scope.origin(n.value)
                    library = origin and watched_library(origin)
                    steps = chain(n.value)[1][1:] if chain(n.value) else []
                    first = not any(is_private(step) for step in steps)  # a chain is reported at its first private step
                    own = origin and n.attr in own_names and isinstance(n.value, ast.Name) and n.value.id == "self"
                    if library and first and not own:
                        report(n, f"{ast.unparse(n)} reaches {origin}.{n.attr}", library)
                if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ATTRIBUTE_CALLS
                        and len(n.args) >= 2 and isinstance(n.args[1], ast.Constant)
                        and isinstance(n.args[1].value, str) and is_private(n.args[1].value)):
                    origin = scope.origin(n.args[0])
                    library = origin and watched_library(origin)
                    if library:
                        report(n, f"{n.func.id}(..., {n.args[1].value!r}) on {origin}", library)

    def visit(body_nodes, parent: Scope, class_origin: str | None = None, self_bound: dict | None = None,
              own_names=frozenset()):
        scope = Scope(parent)
        if class_origin:
            scope.bound["self"] = class_origin + "()"
            scope.bound["super()"] = class_origin + "()"
        scope.bound.update(self_bound or {})
        bind_all(body_nodes, scope, class_origin)
        check_uses(body_nodes, scope, own_names)
        for stmt in body_nodes:
            for n in walk_here(stmt, into_defs=True):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    inner = Scope(scope)
                    args = n.args.posonlyargs + n.args.args + n.args.kwonlyargs
                    for a in args:
                        inner.bound.pop(a.arg, None)  # a parameter hides an outer name of the same spelling
                        if a.annotation is not None:
                            inner.bind(ast.Name(id=a.arg), scope.origin(a.annotation) and scope.origin(a.annotation) + "()")
                    body = n.body if isinstance(n.body, list) else [ast.Expr(n.body)]
                    visit(body, inner, None, None, own_names)  # a closure in a method: the class's own names too
                elif isinstance(n, ast.ClassDef):
                    bases = [scope.origin(b) for b in n.bases]
                    base = next((b for b in bases if b and watched_library(b)), None)
                    if base:
                        for item in n.body:
                            if (isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and is_private(item.name)
                                    and base_has(base, item.name)):
                                report(item, f"{n.name}.{item.name} overrides a private hook of {base}",
                                       watched_library(base))
                    # self.x = <a watched object> in any method binds self.x in every method of the class
                    members = Scope(scope)
                    if base:
                        members.bound["self"] = base + "()"
                    methods = [m for m in n.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
                    bind_all([s for m in methods for s in m.body], members, base)
                    self_bound = {k: v for k, v in members.bound.items() if k.startswith("self.")}
                    # the subclass's own attributes and methods (self._cache = ..., def _helper) are dpviz's names
                    own = {item.name for item in n.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
                    own |= {t.attr for m in methods for t in ast.walk(m) if isinstance(t, ast.Attribute)
                            and isinstance(t.ctx, ast.Store) and isinstance(t.value, ast.Name) and t.value.id == "self"}
                    for item in n.body:
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            inner = Scope(scope)
                            for a in item.args.posonlyargs + item.args.args + item.args.kwonlyargs:
                                inner.bound.pop(a.arg, None)
                                if a.annotation is not None and scope.origin(a.annotation):
                                    inner.bind(ast.Name(id=a.arg), scope.origin(a.annotation) + "()")
                            visit(item.body, inner, base, self_bound, frozenset(own))
                        else:
                            visit([item], scope)

    visit(tree.body, Scope())
    if library_names:
        ours = ours | defined_private_names([tree])
        elsewhere = {name for n in ast.walk(tree) for name, origin in import_bindings(n) if not leads_to_watched(origin)}
        seen = {(line.split(":")[1], part) for line in found for part in re.findall(r"\b_\w+", line)}
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute):
                name, receiver = n.attr, n.value
            elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ATTRIBUTE_CALLS
                  and len(n.args) >= 2 and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str)):
                name, receiver = n.args[1].value, n.args[0]
            else:
                continue
            root = chain(receiver)
            if (not is_private(name) or name in ours or name not in library_names or (str(n.lineno), name) in seen
                    or (root and root[1][0] in elsewhere)):
                continue
            report(n, f"{ast.unparse(n)}: {name} is a private name {library_names[name]} defines, and dpviz does not",
                   library_names[name])
    return sorted(set(found), key=lambda line: (line.split(":")[0], int(line.split(":")[1]), line))


def walk_here(node, into_defs: bool = False):
    """The nodes of one statement that belong to its own scope: a nested def or class is yielded (when
    ``into_defs``) but not entered; its body is its own scope."""
    stack = [node]
    while stack:
        n = stack.pop()
        is_def = isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))
        if is_def and n is not node:
            if into_defs:
                yield n
            continue
        if is_def and n is node:
            if into_defs:
                yield n
            else:  # a def at the top of the body: its decorators and defaults belong here, its body does not
                for part in [*getattr(n, "decorator_list", []), *getattr(n, "bases", [])]:
                    stack.append(part)
            continue
        if not into_defs:
            yield n
        stack.extend(ast.iter_child_nodes(n))


def library_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p != PRIVATE_CALLS)


# --- the checker finds what it should, and only that ---

CAUGHT = {
    "from matplotlib import _api": "imports matplotlib._api",
    "import multiprocessing.forkserver as fs\nfs._forkserver._forkserver_pid": "fs._forkserver reaches",
    "import multiprocessing\nmultiprocessing.current_process()._inheriting": "current_process()._inheriting",
    "import multiprocessing\ngetattr(multiprocessing.current_process(), '_inheriting', False)": "getattr(..., '_inheriting')",
    "import matplotlib.pyplot as plt\nfig = plt.figure()\nfig.canvas._renderer": "fig.canvas._renderer reaches",
    "import matplotlib.pyplot as plt\ndef f():\n    fig, ax = plt.subplots()\n    ax._get_lines": "ax._get_lines reaches",
    "from matplotlib.backends.backend_agg import RendererAgg\nclass R(RendererAgg):\n    def _prepare_font(self):\n"
    "        pass": "R._prepare_font overrides a private hook",
    "from matplotlib.backends.backend_agg import RendererAgg\nclass R(RendererAgg):\n    def draw(self, prop):\n"
    "        font = self._get_font(prop)\n        return font._layout('x')": "font._layout reaches",
    "from matplotlib.backends.backend_agg import FigureCanvasAgg\nclass C:\n    def __init__(self, fig):\n"
    "        self.canvas = FigureCanvasAgg(fig)\n    def draw(self):\n        self.canvas._renderer": "self.canvas._renderer",
    "from matplotlib.text import Text\ndef f(t: Text):\n    return t._get_layout(None)": "t._get_layout reaches",
    "import ipywidgets as widgets\nw = widgets.Image()\nw._repr_keys()": "w._repr_keys reaches",
    "from PIL import Image\nimg = Image.new('RGB', (1, 1))\nimg.im._x": "img.im._x reaches",
    "import importlib\nimportlib.import_module('PIL._imaging')": "imports PIL._imaging",
    "from matplotlib import font_manager as fm\nfm.fontManager._find_fonts_by_props(None)": "fontManager._find_fonts_by_props",
}
LEFT_ALONE = [
    "import matplotlib\nmatplotlib.__version__",
    "import multiprocessing\nmultiprocessing.current_process().name",
    "import numpy as np\nnp.zeros(1)._x",  # not a watched library
    "class Mine:\n    def _helper(self):\n        return self._cache",
    "import matplotlib.pyplot as plt\ndef f(fig):\n    return fig._private_of_dpviz",  # an unbound parameter: unknown
    "import os\nos._exit(0)",
    "from matplotlib.text import Text\nclass T(Text):\n    def draw(self):\n        self._dpviz_cache = 1\n"
    "        return lambda: self._dpviz_cache",  # the class's own attribute, read in a closure
    "import ipywidgets as widgets\nclass Card(widgets.VBox):\n    def _repr_mimebundle_(self, **kw):\n"
    "        return super()._repr_mimebundle_(**kw)",  # IPython's display protocol
    # a subclass's own helper and attribute, which its base class does not have
    "from matplotlib.text import Text\nclass T(Text):\n    def _dpviz_helper(self):\n        self._dpviz_cache = 1\n"
    "        return self._dpviz_cache",
]


BY_NAME = {  # what only the name rule sees: objects whose type the walk cannot follow
    "def draw(text, renderer):\n    return text._get_layout(renderer)": "_get_layout is a private name matplotlib",
    "def f(fig):\n    return getattr(fig, '_suptitle')": "_suptitle is a private name matplotlib",
}
BY_NAME_LEFT_ALONE = [
    "def f(obj):\n    return obj._not_a_name_any_library_defines",
    "class Mine:\n    def __init__(self):\n        self._suptitle = None\n    def f(self):\n        return self._suptitle",
    "import numpy as np\nnp._get_layout",  # a module imported from elsewhere
]


@pytest.mark.parametrize("source, fragment", BY_NAME.items(), ids=range(len(BY_NAME)))
def test_the_name_rule_finds_what_the_flow_cannot_follow(source, fragment):
    found = find_private_uses(source, library_names=library_private_names())
    assert find_private_uses(source) == [] and any(fragment in line for line in found), found


@pytest.mark.parametrize("source", BY_NAME_LEFT_ALONE, ids=range(len(BY_NAME_LEFT_ALONE)))
def test_the_name_rule_leaves_dpvizs_own_and_other_names_alone(source):
    assert find_private_uses(source, library_names=library_private_names()) == []


@pytest.mark.parametrize("source, fragment", CAUGHT.items(), ids=range(len(CAUGHT)))
def test_the_checker_finds_a_private_name(source, fragment):
    found = find_private_uses(textwrap.dedent(source))
    assert any(fragment in line for line in found), (found, fragment)


@pytest.mark.parametrize("source", LEFT_ALONE, ids=range(len(LEFT_ALONE)))
def test_the_checker_leaves_public_and_unwatched_names_alone(source):
    assert find_private_uses(source) == []


# --- the library itself ---

MODULES = library_modules()


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(PACKAGE.parent)) for p in MODULES])
def test_no_module_touches_a_private_name_of_matplotlib_ipywidgets_pillow_or_multiprocessing(path):
    found = find_private_uses(path.read_text(), str(path.relative_to(PACKAGE.parent)), library_private_names(),
                              dpviz_private_names())
    assert not found, (f"{len(found)} uses of private names (use the library's public API, or move the call to "
                       f"{PRIVATE_CALLS.relative_to(PACKAGE.parent)} with its reason):\n" + "\n".join(found))


def test_every_library_module_is_read():
    assert len(MODULES) > 50 and PRIVATE_CALLS.is_file() and PRIVATE_CALLS not in MODULES
