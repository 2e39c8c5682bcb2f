"""Chapters 11 to 14 (issue 46, item 3): predict, then run.

Each chapter asks a question in a :class:`dpviz.engine.predict.Prediction` before the cell whose run (or recorded
result) is the lesson, and answers it after, from the record: "you predicted X; the run measured Y", with a
reason computed from the record when the two differ. The answers' helpers are checked on the shipped records, and a
tampered record makes them raise where the claim they stand on asserts.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest

from dpviz.engine.predict import Prediction

ROOT = Path(__file__).resolve().parents[1]

# chapter -> (the lesson cell's marker, the names of its predictions)
LESSONS = {
    "waiting": ("record_live(", ("guess",)),
    "splitting_the_model": ("record_pipelines(configs)", ("guess",)),
    "shard_everything": ("record_sharding(k=2)", ("adam_guess", "peak_guess")),
    "cheaper_sync": ("figure_cheaper_sync_bytes(comp)", ("guess",)),
}


def cells(stem: str) -> list[dict]:
    found = sorted((ROOT / "notebooks").glob(f"[0-9][0-9]_{stem}.ipynb"))
    assert len(found) == 1, found
    return json.loads(found[0].read_text(encoding="utf-8"))["cells"]


def where(cells_, pattern: str) -> list[int]:
    return [i for i, c in enumerate(cells_) if c["cell_type"] == "code" and re.search(pattern, "".join(c["source"]))]


def saved_text(cell: dict) -> str:
    return "".join("".join(o.get("data", {}).get("text/plain", "")) + "".join(o.get("text", ""))
                   for o in cell.get("outputs", []))


@pytest.mark.parametrize("stem", sorted(LESSONS))
def test_a_prediction_comes_before_the_lesson_and_its_answer_after(stem):
    marker, names = LESSONS[stem]
    nb = cells(stem)
    lesson = where(nb, re.escape(marker))
    assert len(lesson) == 1, f"{stem}: {len(lesson)} cells hold {marker!r}"
    for name in names:
        asked = where(nb, rf"\b{name} = Prediction\.(number|choice)\(")
        answered = where(nb, rf"\b{name}\.answer\(")
        assert len(asked) == 1 and len(answered) == 1, f"{stem}: {name} asked in {asked}, answered in {answered}"
        assert asked[0] < lesson[0] < answered[0], f"{stem}: {name} asked at {asked}, lesson at {lesson}, answered at {answered}"
        shown = saved_text(nb[asked[0]])
        assert shown.startswith("Predict first:"), f"{stem}: the saved question reads {shown[:80]!r}"
        said = saved_text(nb[answered[0]])
        assert said.startswith("No prediction was committed. The run measured"), f"{stem}: {said[:120]!r}"


def commit_and_answer(guess: Prediction, value, answer: dict):
    guess.commit(value)
    return str(guess.answer(**answer))


def test_the_straggler_answer_is_the_median_step_and_says_why_it_is_longer_than_d():
    from dpviz.topics.waiting.claims import straggler_step_answer
    from dpviz.topics.waiting.records_straggler import shipped_straggler

    sweep = shipped_straggler()[2]
    answer = straggler_step_answer(sweep, delay=0.05)
    steps = sweep.median_step()
    assert answer["measured"] == pytest.approx(1e3 * np.median(steps[np.isclose(sweep.delay, 0.05)]))
    guess = Prediction.number("How long?", low=0, high=200, step=1, unit="ms")
    far = commit_and_answer(guess, 5, answer)
    assert far.startswith("You predicted 5 ms; the run measured") and "the step grew by" in far
    near = commit_and_answer(guess, round(answer["measured"]), answer)
    assert near.endswith("as you said.") and "grew" not in near
    with pytest.raises(ValueError, match="^delay "):
        straggler_step_answer(sweep, delay=0.03)


def test_the_idle_share_answer_is_the_measured_mean_and_splits_the_difference_from_the_bubble():
    from dpviz.topics.splitting.claims import idle_share_answer
    from dpviz.topics.splitting.records_pipeline import shipped_grid

    run = shipped_grid()[(2, 4, "gpipe")]
    answer = idle_share_answer(run)
    assert answer["measured"] == pytest.approx(100 * run.idle_fraction().mean())
    assert f"(p−1)/(m+p−1) = {run.bubble():.0%}" in answer["why"] and "replayed with free hand-offs" in answer["why"]
    guess = Prediction.number("Idle?", low=0, high=100, step=1, unit="%")
    assert "You predicted 20%" in commit_and_answer(guess, 20, answer)


def test_the_zero3_answers_come_from_the_bytes_the_ranks_held():
    from dpviz.topics.sharding import claims
    from dpviz.topics.sharding.records import FIGURE_PLAN

    runs = FIGURE_PLAN.load()
    k2, k4 = runs["sharding_k2"], runs["sharding_k4"]
    assert claims.adam_state_answer(k2)["measured"] == 50.0 and claims.adam_state_answer(k4)["measured"] == 25.0
    low2, low4 = claims.lowest_peak_answer(k2), claims.lowest_peak_answer(k4)
    assert low2["measured"] == "ZeRO-1" and "above ZeRO-1's 18,240 B" in low2["why"] and "65%" in low2["why"]
    assert low4["measured"] == "ZeRO-3" and "above" not in low4["why"]
    guess = Prediction.choice("Lowest?", list(claims.STAGE_WORDS.values()))
    assert "You predicted “ZeRO-3”; the run measured ZeRO-1" in commit_and_answer(guess, "ZeRO-3", low2)
    tampered = copy.deepcopy(k2)
    tampered.memory[tampered.index(3), 0, 2, 2] += 4
    for answer in (claims.adam_state_answer, claims.lowest_peak_answer):
        with pytest.raises(AssertionError, match="ZeRO stage 3"):
            answer(tampered)


def test_the_powersgd_answer_is_the_counted_ratio_and_names_what_went_whole():
    from dpviz.topics.cheaper_sync import records_compression as plan
    from dpviz.topics.cheaper_sync.claims import powersgd_bytes_answer

    comp = plan.FIGURE_PLAN.load()["cheaper_sync_compression"]
    answer = powersgd_bytes_answer(comp, "powersgd_r2")
    i = comp.index("powersgd_r2")
    sent = int(comp.sent_bytes[i][comp.compressed_steps("powersgd_r2")][0, 0])
    assert answer["measured"] == pytest.approx(int(comp.meta["message_bytes"]) / sent)
    assert "32×16 and 32×32 matrices" in answer["why"] and f"{sent // 4:,} values of 4 bytes" in answer["why"]
    with pytest.raises(ValueError, match="^mode "):
        powersgd_bytes_answer(comp, "fp16")
    tampered = copy.deepcopy(comp)
    tampered.sent_bytes[i, -1, 0] += 4
    with pytest.raises(AssertionError, match="bytes counted"):
        powersgd_bytes_answer(tampered, "powersgd_r2")
