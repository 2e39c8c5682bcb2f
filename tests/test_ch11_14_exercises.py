"""Chapters 11 to 14, "Your turn" (issue 46, item 5): a right answer is accepted however a student writes it.

* Each chapter imports ``numpy as np`` and ``math``, so a reference answer written with them runs in the chapter's own
  namespace (a student tries it in a cell before checking it) and passes its checker.
* ``check_owned_shard`` accepts every layout that gives the k ranks k different whole chunks of the padded layer
  (dpviz's ring keeps chunk (r + 1) mod k, torch's FSDP chunk r, any other order works) and rejects overlaps, gaps,
  wrong sizes and strided slices, each in a sentence.
* ``check_bubble`` explains an answer written with ``//`` (integer division).
"""

from __future__ import annotations

import ast
import json
import linecache
from pathlib import Path

import pytest

import dpviz.exercises as ex

ROOT = Path(__file__).resolve().parents[1]
STEMS = ("waiting", "splitting_the_model", "shard_everything", "cheaper_sync")

# (chapter, function name, a call a student would try in a cell, a right answer written with np and math)
ANSWERS = [
    ("waiting", "wait_times", "wait_times([0.1, 0.3])", '''
def wait_times(compute):
    compute = np.asarray(compute, dtype=float)
    return np.max(compute) - compute
'''),
    ("waiting", "staleness", "staleness([0.01, 0.02])", '''
def staleness(t_grad):
    t = np.asarray(t_grad, dtype=float)
    return np.array([math.fsum(t[i] / t[j] for j in range(len(t)) if j != i) for i in range(len(t))])
'''),
    ("splitting_the_model", "bubble", "bubble(4, 8)", '''
def bubble(p, m):
    return np.float64(p - 1) / (m + p - 1) if math.isfinite(m) else 0.0
'''),
    ("shard_everything", "owned_shard", "owned_shard(np.arange(1.0, 8.0), 0, 3)", '''
def owned_shard(layer, rank, k):
    size = math.ceil(len(layer) / k)
    padded = np.pad(np.asarray(layer), (0, size * k - len(layer)))
    return padded[rank * size:(rank + 1) * size]
'''),
    ("shard_everything", "step_bytes", "step_bytes(4, 6080, 3)", '''
def step_bytes(k, M, zero_stage):
    passes = 3 if zero_stage == 3 else 2
    return passes * math.prod([k - 1, M]) / k
'''),
    ("cheaper_sync", "powersgd_bytes", "powersgd_bytes(32, 16, 2)", '''
def powersgd_bytes(rows, cols, r):
    r = int(np.min([rows, cols, r]))
    return 4 * ((rows + cols) * r if 2 * (rows + cols) * r < rows * cols else math.prod([rows, cols]))
'''),
    ("cheaper_sync", "slow_link_bytes", "slow_link_bytes(8, 4, 1e6)", '''
def slow_link_bytes(k, g, M):
    G = k // g
    return 2 * (G - 1) / G * M / g if not math.isclose(G, 1) else np.float64(0.0)
'''),
]


def chapter(stem: str) -> Path:
    found = sorted((ROOT / "notebooks").glob(f"[0-9][0-9]_{stem}.ipynb"))
    assert len(found) == 1, found
    return found[0]


def import_cell(stem: str) -> str:
    """The chapter's first code cell, the one that imports what the chapter uses."""
    cells = json.loads(chapter(stem).read_text(encoding="utf-8"))["cells"]
    return "".join(next(c for c in cells if c["cell_type"] == "code")["source"])


def chapter_namespace(stem: str) -> dict:
    """What a student's cell sees after the chapter's import cell ran (without the fork server and the magic)."""
    lines = [line for line in import_cell(stem).splitlines()
             if not line.startswith("%") and "warm_up" not in line]
    namespace: dict = {"__name__": "__main__"}
    exec(compile("\n".join(lines), f"<{stem} imports>", "exec"), namespace)
    return namespace


def define(source: str, name: str, namespace: dict):
    """Define ``name`` in ``namespace`` the way a notebook cell does: IPython keeps the cell's text in linecache."""
    filename = f"<cell {name} {abs(hash(source))}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


@pytest.mark.parametrize("stem", STEMS)
def test_every_chapter_imports_numpy_as_np_and_math(stem):
    tree = ast.parse("\n".join(line for line in import_cell(stem).splitlines() if not line.startswith("%")))
    imported = {(alias.name, alias.asname) for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    assert ("numpy", "np") in imported and ("math", None) in imported, f"{stem} imports {sorted(imported)}"


@pytest.mark.parametrize("stem, name, trial, source", ANSWERS, ids=[a[1] for a in ANSWERS])
def test_an_answer_written_with_np_and_math_runs_in_the_chapter_and_passes(stem, name, trial, source):
    namespace = chapter_namespace(stem)
    fn = define(source, name, namespace)
    eval(trial, namespace)                      # what a student tries first: no NameError for np or math
    verdict = getattr(ex, f"check_{name}")(fn)
    assert verdict.passed, verdict


def test_a_namespace_without_numpy_would_fail_the_same_answer():
    """The test above can fail: without the chapter's imports, the same answer raises NameError when tried."""
    stem, name, trial, source = ANSWERS[2]
    namespace = {"__name__": "__main__"}
    define(source, name, namespace)
    with pytest.raises(NameError, match="'(np|math)' is not defined"):
        eval(trial, namespace)


# --- owned_shard: every correct layout, and only those ---------------------------------------------------------

LAYOUTS = {  # name -> (source, words the verdict must hold)
    "ring": ('''
def owned_shard(layer, rank, k):
    padded = np.concatenate([layer, np.zeros(-len(layer) % k)])
    size = len(padded) // k
    chunk = (rank + 1) % k
    return padded[chunk * size:(chunk + 1) * size]
''', "chunk (r + 1) mod k on rank r"),
    "fsdp": ('''
def owned_shard(layer, rank, k):
    padded = np.pad(layer, (0, -len(layer) % k))
    return np.split(padded, k)[rank]
''', "chunk r on rank r, as torch's FSDP"),
    "reversed": ('''
def owned_shard(layer, rank, k):
    padded = np.pad(layer, (0, -len(layer) % k))
    return np.split(padded, k)[k - 1 - rank]
''', "in an order of your own"),
}

WRONG_LAYOUTS = {  # name -> (source, words the verdict must hold)
    "overlap": ('''
def owned_shard(layer, rank, k):
    padded = np.pad(layer, (0, -len(layer) % k))
    return np.split(padded, k)[0]
''', "keep chunk 0, and no rank keeps"),
    "gap, unpadded": ('''
def owned_shard(layer, rank, k):
    return np.array_split(layer, k)[rank]
''', "Pad the layer with zeros"),
    "gap, cut short": ('''
def owned_shard(layer, rank, k):
    size = len(layer) // k
    return layer[rank * size:(rank + 1) * size]
''', "Pad the layer with zeros"),
    "wrong size": ('''
def owned_shard(layer, rank, k):
    padded = np.pad(layer, (0, -len(layer) % k))
    size = len(padded) // k
    return padded[rank * size:(rank + 1) * size + 1]
''', "A chunk has 3 values"),
    "strided": ('''
def owned_shard(layer, rank, k):
    padded = np.pad(layer, (0, -len(layer) % k))
    return padded[rank::k]
''', "takes every 4th value"),
    "not a vector": ('''
def owned_shard(layer, rank, k):
    return None
''', "It must return a vector"),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_owned_shard_accepts_every_layout_of_one_different_chunk_per_rank(name):
    source, words = LAYOUTS[name]
    verdict = ex.check_owned_shard(define(source, "owned_shard", {"np": __import__("numpy")}))
    assert verdict.passed and words in verdict, verdict


@pytest.mark.parametrize("name", sorted(WRONG_LAYOUTS))
def test_owned_shard_rejects_overlaps_gaps_and_wrong_sizes_in_a_sentence(name):
    source, words = WRONG_LAYOUTS[name]
    verdict = ex.check_owned_shard(define(source, "owned_shard", {"np": __import__("numpy")}))
    assert not verdict.passed and words in verdict, verdict


def test_owned_shard_is_not_attempted_while_it_is_the_stub():
    stub = define('def owned_shard(layer, rank, k):\n    """The chunk."""\n    raise NotImplementedError\n',
                  "owned_shard", {})
    assert ex.check_owned_shard(stub).status == "not attempted"


# --- bubble: integer division explained ---------------------------------------------------------------------


@pytest.mark.parametrize("source", [
    "def bubble(p, m):\n    return (p - 1) // (m + p - 1)\n",
    "def bubble(p, m):\n    return 1 - m // (m + p - 1)\n",
    "def bubble(p, m):\n    return (p - 1) // m\n",
], ids=["(p-1)//(m+p-1)", "1-m//(m+p-1)", "(p-1)//m"])
def test_bubble_explains_integer_division_in_one_sentence(source):
    verdict = ex.check_bubble(define(source, "bubble", {}))
    assert not verdict.passed, verdict
    assert "`//`" in verdict and "integer division" in verdict and "divide with `/`" in verdict, verdict
    assert "for p = 4 stages and m = 8 micro-batches" in verdict, verdict
