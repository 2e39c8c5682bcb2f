"""Chapters 06 to 10: predict, then run (issue 46). Each chapter asks a question before the cell whose run or record
is its lesson and answers it after, from that record; each answer's sentence follows the record it is given."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from dpviz.topics.accumulation.claims import SAME_GRADIENT, same_gradient_answer
from dpviz.topics.accumulation.records import figure_records, figure_stem
from dpviz.topics.bigger_batch.claims import RULE_CHOICES, lowest_loss_answer
from dpviz.topics.bigger_batch.records import LrGrid
from dpviz.topics.measuring.alpha_beta import one_call_answer
from dpviz.topics.speedup_model.claims import s2_answer
from dpviz.topics.speedup_model.figure_records import load_inputs
from dpviz.topics.whole_picture.claims import FAIR_BATCH, fair_batch_answer

ROOT = Path(__file__).resolve().parents[1]

# chapter -> (the question's cell, the lesson's cell: its run, or the figure of its record, the answer's cell)
ORDER = {
    "speedup_model": ("predict-s2", "f8f8503a", "answer-s2"),
    "measuring_an_all_reduce": ("predict-1mib", "fa9cf6f5", "answer-1mib"),
    "whole_picture": ("predict-fair-batch", "2b146ea4", "answer-fair-batch"),
    "bigger_batch_bigger_step": ("predict-rule", "847e0caa", "answer-rule"),
    "gradient_accumulation": ("predict-same-gradient", "3c16145c", "answer-same-gradient"),
}


def cells(stem: str) -> list[dict]:
    (path,) = sorted((ROOT / "notebooks").glob(f"[0-9][0-9]_{stem}.ipynb"))
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


@pytest.mark.parametrize("stem", sorted(ORDER))
def test_the_question_comes_before_the_lesson_and_its_answer_after(stem):
    ids = [c.get("id") for c in cells(stem)]
    ask, lesson, answer = (ids.index(i) for i in ORDER[stem])
    assert ask < lesson < answer
    nb = cells(stem)
    assert "Prediction." in "".join(nb[ask]["source"]) and "guess.answer(" in "".join(nb[answer]["source"])
    assert not any("guess = " in "".join(c["source"]) for c in nb[ask + 1:answer]), "a second question in between"
    saved = [o["data"]["text/plain"] for o in nb[answer]["outputs"] if "data" in o]
    assert saved and "".join(saved[0]).strip("'").startswith("No prediction was committed. The run measured ")


def test_s2_answer_says_why_from_the_record():
    inputs = load_inputs()
    s2, said, why = s2_answer(inputs.mlp, inputs.half)
    assert s2 > 0 and f"S(2) = {s2:.2f}×" in said
    assert ("per example" in why) if s2 > 2 else ("all-reduce" in why or "core" in why)
    one_core = {k: type(r)(dict(r.meta, cores=1), r.arrays) for k, r in inputs.mlp.items()}
    assert "shared 1 core" in s2_answer(one_core, inputs.half)[2]


def test_one_call_answer_is_the_median_call_of_the_record():
    bench = load_inputs().bench
    row = int(np.flatnonzero((bench.k == 2) & (bench.impl == "all_reduce"))[-1])
    measured, said, why = one_call_answer(bench, int(bench.M[row]))
    assert measured == pytest.approx(bench.median[row] * 1e3)
    assert f"{bench.fastest[row] * 1e3:.3g} ms" in said and "β =" in why
    with pytest.raises(ValueError, match="one all_reduce row"):
        one_call_answer(bench, 12345)


def _turned(vector, degrees):
    a = np.deg2rad(degrees)
    return np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]) @ vector


@pytest.mark.parametrize("degrees, choice", [(5.0, FAIR_BATCH[0]), (20.0, FAIR_BATCH[1]), (50.0, FAIR_BATCH[2])])
def test_fair_batch_answer_follows_the_angle(degrees, choice):
    full = np.array([-6.0, 2.0])
    run = SimpleNamespace(k=2, reduced_grad=_turned(full, degrees)[None, None, :].repeat(2, axis=1),
                          local_grad=np.stack([_turned(full, 40.0), _turned(full, -30.0)])[None])
    got, said, why = fair_batch_answer(run, full)
    assert got == choice and f"({degrees:.1f}° off)" in said and "40.0°" in why and "30.0°" in why


def test_lowest_loss_answer_on_the_shipped_grid_and_on_a_grid_where_linear_loses():
    mlp = LrGrid.shipped("mlp")
    choice, said, why = lowest_loss_answer(mlp, k=4)
    final = {rule: mlp.final_loss(mlp.rule_index(k=4, rule=rule)) for rule in RULE_CHOICES}
    assert choice == RULE_CHOICES[min(final, key=final.get)] and f"{final['x1']:.3g} with ×1" in why

    class Flipped:  # the shipped grid with the rules' final losses reversed
        meta, model_words = mlp.meta, mlp.model_words
        rows = {rule: i for i, rule in enumerate(RULE_CHOICES)}

        def rule_index(self, *, k, rule):
            return self.rows[rule]

        def index(self, *, k, multiplier):
            return 9

        def final_loss(self, row):
            return {0: 0.01, 1: 0.02, 2: 0.05, 9: 0.02}[row]
    choice, _, why = lowest_loss_answer(Flipped(), k=4)
    assert choice == RULE_CHOICES["x1"] and "×k did not end lowest here" in why


def test_same_gradient_answer_follows_the_record():
    run = figure_records()[figure_stem(1, 4, b=1024)]
    err = float(np.max(run.big_rel_err))
    choice, said, why = same_gradient_answer(run)
    assert choice == (SAME_GRADIENT[0] if err == 0 else SAME_GRADIENT[1]) and f"{err:.1e}" in said
    exact = type(run)(run.meta, dict(run.arrays, big_rel_err=np.zeros_like(run.big_rel_err)))
    assert same_gradient_answer(exact)[0] == SAME_GRADIENT[0]
    off = type(run)(run.meta, dict(run.arrays, big_rel_err=np.full_like(run.big_rel_err, 1e-3)))
    assert same_gradient_answer(off)[0] == SAME_GRADIENT[2] and "more than rounding" in same_gradient_answer(off)[2]
    with pytest.raises(ValueError, match="one process accumulating"):
        same_gradient_answer(figure_records()[figure_stem(2, 2)])
