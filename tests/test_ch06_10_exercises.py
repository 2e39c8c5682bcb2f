"""Chapters 06 to 10, "Your turn": a right answer written as a student would, with ``np`` or ``math``, runs in the
chapter's own namespace and passes its checker; typical wrong answers get the sentence that names the mistake.

The namespace is what the chapter's code cells import (only their import statements are run), so a chapter that
forgets ``import numpy as np`` or ``import math`` fails here, the way a student's cell would fail with NameError.
"""

from __future__ import annotations

import ast
import json
import linecache
import re
from pathlib import Path

import pytest

import dpviz.exercises as ex
from dpviz.engine.verdict import FAILED

ROOT = Path(__file__).resolve().parents[1]

# chapter (the notebook's name after its number) -> (checker, a right answer as a student writes it, a call to try)
ANSWERS = {
    "speedup_model": [
        ("check_t_comm_ring", "def t_comm_ring(k, M, alpha, beta):\n"
                              "    return 2 * (k - 1) * alpha + 2 * (k - 1) / k * M / beta\n", "t_comm_ring(4, 1e8, 1e-5, 1e9)"),
        ("check_speedup", "def speedup(t_compute, k, t_comm):\n"
                          "    return t_compute / (t_compute / k + t_comm)\n", "speedup(1.0, 4, 0.1)"),
        ("check_speedup", "def speedup(t_compute, k, t_comm):\n"
                          "    return np.divide(k, 1 + k * t_comm / t_compute)\n", "speedup(1.0, 4, 0.1)"),
    ],
    "measuring_an_all_reduce": [
        ("check_bus_bandwidth", "def bus_bandwidth(M, seconds, k):\n"
                                "    return np.float64(M) / seconds * 2 * (k - 1) / k\n", "bus_bandwidth(1e6, 1e-3, 4)"),
    ],
    "whole_picture": [
        ("check_data_parallel_step", "def data_parallel_step(theta, rank_grads, eta):\n"
                                     "    return np.asarray(theta) - eta * np.mean(rank_grads, axis=0)\n",
         "data_parallel_step([1.0, 2.0], [[1.0, 0.0], [0.0, 1.0]], 0.1)"),
    ],
    "bigger_batch_bigger_step": [
        ("check_lr_for_k", "def lr_for_k(lr_base, k, rule):\n"
                           "    return lr_base * (k if rule == 'linear' else math.sqrt(k))\n", "lr_for_k(0.1, 9, 'sqrt')"),
        ("check_lr_for_k", "def lr_for_k(lr_base, k, rule):\n"
                           "    return lr_base * (k if rule == 'linear' else np.sqrt(k))\n", "lr_for_k(0.1, 9, 'sqrt')"),
        ("check_warmup_lr", "def warmup_lr(lr, step, warmup):\n"
                            "    return lr * min(1.0, (step + 1) / warmup) if warmup else lr\n", "warmup_lr(0.4, 0, 5)"),
    ],
    "gradient_accumulation": [
        ("check_accumulated_gradient", "def accumulated_gradient(micro_grads):\n"
                                       "    return np.mean(micro_grads, axis=0)\n",
         "accumulated_gradient([[1.0, 2.0], [3.0, 4.0]])"),
    ],
}


def chapter(stem: str) -> Path:
    (path,) = sorted((ROOT / "notebooks").glob(f"[0-9][0-9]_{stem}.ipynb"))
    return path


def chapter_namespace(stem: str) -> dict:
    """What the chapter's code cells import, run in a fresh namespace: its import statements and nothing else."""
    namespace: dict = {"__name__": "chapter"}
    for cell in json.loads(chapter(stem).read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        text = "\n".join(line for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.parse(text).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                exec(compile(ast.Module([node], []), "<chapter imports>", "exec"), namespace)
    return namespace


def define(source: str, namespace: dict):
    """Define the function in ``source`` the way a notebook cell does (IPython keeps the cell's text in linecache)."""
    filename = f"<cell {abs(hash(source))}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[re.match(r"def (\w+)", source)[1]]


@pytest.mark.parametrize("stem, checker, source, call",
                         [(stem, *answer) for stem, answers in ANSWERS.items() for answer in answers],
                         ids=lambda v: v if isinstance(v, str) and "\n" not in v and "(" not in v else None)
def test_a_right_answer_with_np_or_math_runs_in_the_chapter_and_passes(stem, checker, source, call):
    namespace = chapter_namespace(stem)
    fn = define(source, namespace)
    eval(call, namespace)  # as a student tries it in the notebook: a missing import is a NameError here
    verdict = getattr(ex, checker)(fn)
    assert verdict.passed, verdict


def test_the_chapters_bind_np_and_math_where_their_answers_and_hints_use_them():
    for stem, answers in ANSWERS.items():
        namespace = chapter_namespace(stem)
        for name in ("np", "math"):
            if any(f"{name}." in source for _, source, _ in answers):
                assert name in namespace, f"{stem} never imports {name}, which its answers use"
    assert "math" in chapter_namespace("bigger_batch_bigger_step")  # its hint says math.sqrt


WRONG = [  # a student's wrong answer, written with def, and the words of the sentence that names the mistake
    ("check_speedup", "def speedup(t_compute, k, t_comm):\n    return t_compute / (t_compute / k + t_comm / k)\n",
     "You divided T_comm by k too"),
    ("check_speedup", "def speedup(t_compute, k, t_comm):\n    return k * t_compute / (t_compute + t_comm)\n",
     "You divided T_comm by k too"),
    ("check_speedup", "def speedup(t_compute, k, t_comm):\n    return (t_compute / k) / (t_compute / k + t_comm)\n",
     "That is the efficiency E = S/k"),
    ("check_speedup", "def speedup(t_compute, k, t_comm):\n    return 1 / (1 / k + t_comm)\n",
     "The top of the fraction is one rank's step time, T_compute, not 1"),
    ("check_lr_for_k", "def lr_for_k(lr_base, k, rule):\n    return lr_base * (k if rule == 'linear' else k**1/2)\n",
     "`k**1/2` is `(k**1)/2`"),
]


@pytest.mark.parametrize("checker, source, words", WRONG, ids=[w[:30] for _, _, w in WRONG])
def test_a_typical_mistake_gets_its_sentence(checker, source, words):
    verdict = getattr(ex, checker)(define(source, {"np": __import__("numpy"), "math": __import__("math")}))
    assert verdict.status == FAILED and words in verdict and "expected" in verdict, verdict
