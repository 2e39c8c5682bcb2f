"""Chapters 11 to 14 (issue 46, items 1, 2 and 4): what they say of their records is printed from them, and they
say each idea once.

* Chapter 13's step times: ZeRO-2 sends plain data parallelism's bytes and is still slower, so the sentence does not
  blame the bytes; it counts the ring collectives per step and says what ZeRO-3's 1.5× of the bytes can explain.
* Chapter 13's peaks: at k = 2 one rank's peak rises from ZeRO-1 to ZeRO-3 (the gathered layer is 65 % of this
  model), at k = 4 it falls; the chapter prints it and the memory figure's alt text follows the data.
* Word counts: chapters 11 and 12 well under 3,000 words of Markdown (every whitespace-separated word, tables
  included), 13 and 14 at most 2,200.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from dpviz.topics.sharding import claims, theory
from dpviz.topics.sharding.records import FIGURE_PLAN

ROOT = Path(__file__).resolve().parents[1]
LIMITS = {"waiting": 2800, "splitting_the_model": 2800, "shard_everything": 2200, "cheaper_sync": 2200}


@pytest.fixture(scope="module")
def runs():
    return FIGURE_PLAN.load()


def test_step_times_do_not_blame_the_bytes_when_equal_bytes_took_longer(runs):
    run = runs["sharding_k2"]
    line = claims.step_time_claims(run)
    medians = [float(np.median(run.step_seconds[run.index(s)])) for s in range(4)]
    for s in (1, 2, 3):
        assert f"({medians[s] / medians[0]:.2f}×)" in line
    assert "sent exactly plain data parallelism's 6,080 B per step and still took" in line
    assert "the bytes do not explain these times" in line
    assert "Ring collectives per step, by stage: plain 2, ZeRO-1 6, ZeRO-2 6, ZeRO-3 9 (3 layers)" in line
    assert "1.5× the bytes explains at most 1.5× of its communication" in line
    assert "is the slowest: it sends 1.5 times the bytes" not in line
    # where equal bytes were not slower, nothing is said of them
    faster = copy.deepcopy(run)
    for s in (1, 2):
        faster.step_seconds[faster.index(s)] = faster.step_seconds[faster.index(0)] * 0.9
    assert "do not explain" not in claims.step_time_claims(faster)


def test_rings_per_step_counts_what_the_ranks_call():
    assert [theory.rings_per_step(s, 3) for s in range(4)] == [2, 6, 6, 9]
    assert [theory.rings_per_step(s, 1) for s in range(4)] == [2, 2, 2, 3]
    with pytest.raises(ValueError, match="^layers "):
        theory.rings_per_step(3, 0)


def test_the_peaks_rise_at_k2_and_fall_at_k4_and_the_chapter_says_so(runs):
    k2, k4 = claims.peaks_over_stages(runs.values())
    assert k2.startswith("k = 2, one rank's peak: plain 24,320 B, ZeRO-1 18,240 B, ZeRO-2 19,168 B, ZeRO-3 20,096 B")
    assert "rises from ZeRO-1 to ZeRO-2 and ZeRO-3" in k2 and "992 of the model's 1,520 parameters (65%)" in k2
    assert "7,936 B more" in k2
    assert k4.endswith("lower at every stage than at the one before.")


def test_the_memory_figures_alt_text_follows_the_data(runs):
    from dpviz.topics.sharding.figures import figure_sharding_memory

    alt = figure_sharding_memory(runs.values()).alt
    assert "At k = 2 the peaks, plain to ZeRO-3, are 24,320, 18,240, 19,168, 20,096 B: the bars rise" in alt
    assert "At k = 4 the peaks, plain to ZeRO-3, are 24,320, 15,200, 14,608, 14,016 B: each bar lower" in alt
    assert "each stage's bar is lower than the one before, and lower again" not in alt
    alone = figure_sharding_memory([runs["sharding_k4"]]).alt      # k = 4 alone: nothing rises
    assert "rise" not in alone


def test_chapter_13_prints_the_peaks_from_the_record():
    found = sorted((ROOT / "notebooks").glob("[0-9][0-9]_shard_everything.ipynb"))
    nb = json.loads(found[0].read_text(encoding="utf-8"))
    printed = ["".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
               and "peaks_over_stages" in "".join(c["source"]) for o in c["outputs"]]
    assert any("it rises from ZeRO-1 to ZeRO-2 and ZeRO-3" in text for text in printed), printed
    prose = " ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert "two thirds" not in prose and "lower than the one before" not in prose


@pytest.mark.parametrize("stem", sorted(LIMITS))
def test_chapters_11_to_14_stay_short(stem):
    found = sorted((ROOT / "notebooks").glob(f"[0-9][0-9]_{stem}.ipynb"))
    nb = json.loads(found[0].read_text(encoding="utf-8"))
    words = sum(len("".join(c["source"]).split()) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert words <= LIMITS[stem], f"{found[0].name} has {words} words of Markdown (at most {LIMITS[stem]:,})"


@pytest.mark.parametrize("stem, phrase", [
    ("shard_everything", "$k-1$ steps of passing chunks to the right"),   # the ring's two phases: chapter 05's
    ("waiting", "Floating-point addition is not associative, so"),       # non-associativity: chapter 05's
    ("cheaper_sync", "$$S = \\frac{T_\\text{compute}}{T_\\text{compute}/k + T_\\text{comm}},$$"),  # S: chapter 06's
])
def test_an_idea_derived_earlier_is_not_derived_again(stem, phrase):
    found = sorted((ROOT / "notebooks").glob(f"[0-9][0-9]_{stem}.ipynb"))
    nb = json.loads(found[0].read_text(encoding="utf-8"))
    prose = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert phrase not in prose


# --- alt text that says where a panel sits reads it from the layout ------------------------------------------------


def test_panel_places_follow_the_layout_when_a_figure_is_restacked():
    from matplotlib.figure import Figure

    from dpviz.topics.waiting.figures import panel_places

    fig = Figure(figsize=(6, 6))
    top, bottom = fig.subplots(2, 1)
    assert panel_places(top, bottom) == ["Top", "Bottom"]
    top.set_position([0.05, 0.1, 0.4, 0.8])        # restacked side by side
    bottom.set_position([0.55, 0.1, 0.4, 0.8])
    assert panel_places(top, bottom) == ["Left", "Right"]
    grid = Figure(figsize=(6, 6)).subplot_mosaic([["a", "b"], ["c", "c"]])
    assert panel_places(grid["a"], grid["b"], grid["c"]) == ["Top left", "Top right", "Bottom"]
    three = Figure(figsize=(6, 6)).subplots(3, 1)
    assert panel_places(*three) == ["Top", "Middle", "Bottom"]


def test_the_alt_texts_of_chapters_11_to_14_take_their_place_words_from_the_layout():
    import re

    for topic in ("waiting", "splitting", "cheaper_sync"):
        source = (ROOT / "dpviz" / "topics" / topic / "figures.py").read_text(encoding="utf-8")
        typed = re.findall(r'''["'](?:Top|Bottom|Middle|Below|Above|Left|Right)(?: two panels)?,''', source)
        assert not typed, f"{topic}/figures.py types where a panel sits: {typed}"
    from dpviz.topics.cheaper_sync import records_compression as plan
    from dpviz.topics.cheaper_sync.figures import figure_cheaper_sync_bytes

    fig = figure_cheaper_sync_bytes(plan.FIGURE_PLAN.load()["cheaper_sync_compression"])
    assert fig.alt.startswith("Top, horizontal bars") and ". Bottom, on a log scale" in fig.alt
