"""The prose names a figure's panels by their titles, never by where they sit (issue 46, item 1).

A figure that is restacked (side by side to top and bottom, a grid transposed) keeps its panels' titles, so a
sentence that names a panel by its title stays true, and one that says "left" or "the top row" goes false
without anyone noticing. Two checks:

1. **Position words.** Every chapter's Markdown is scanned for phrases that locate a panel by position
   ("Left, …", "the right column", "the bottom panel", "(left)", "Above, … below, …"). Each use that does
   not locate a panel (a cell above, a ring's right-hand neighbour, bars inside one panel) is listed in
   ``ALLOWED`` with its chapter and the reason; anything else fails.
2. **Titles.** Where the prose names panels, it quotes words of their titles in straight double quotes.
   For each such cell in ``NAMED``, the figure (or slider panel) it describes is drawn from the records the
   chapter uses, its Axes titles are read, and every quoted name must be part of one of them. A renamed
   panel fails here; a restacked one does not, and ``test_a_restacked_figure_keeps_its_prose_true`` shows it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Callable

import matplotlib.pyplot as plt
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
RECORDS = ROOT / "figures" / "records"
NOT_SCANNED = {"question_bank"}  # cards, no figure of its own


def chapter_path(stem: str) -> Path:
    """A chapter's notebook by the name after its number, so that renumbering the course moves nothing here."""
    found = sorted(NOTEBOOKS.glob(f"[0-9][0-9]_{stem}.ipynb"))
    assert len(found) == 1, f"no single notebook named NN_{stem}.ipynb: {found}"
    return found[0]


def chapters() -> list[Path]:
    return [p for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")) if p.stem[3:] not in NOT_SCANNED]


@cache
def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def markdown(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in cells(path) if c["cell_type"] == "markdown"]


# ---------------------------------------------------------------------------------------------------- position words

# Each pattern matches a phrase that says where a panel sits. They are kept narrow on purpose: "the cell below" or
# "the figure below" place a figure among the cells, not a panel within a figure, and are not listed.
POSITION = [
    re.compile(r"(?:^|(?<=[.!?:]\s)|(?<=\n))(?:Left|Right|Middle|Top|Bottom|Above|Below|Underneath)\s*[,:]"),
    re.compile(r"[;,]\s+(?:left|right|middle|top|bottom|above|below|underneath)\s*[,:]", re.I),
    re.compile(r"\((?:left|right|middle|top|bottom|above|below)\b", re.I),
    re.compile(r"\b(?:left|right|middle|top|bottom|upper|lower|centre|center)(?:-hand)?\s+"
               r"(?:panel|column|row|plot|chart|graph|half|subplot|axes|side|bar|corner)s?\b", re.I),
    re.compile(r"\bpanels?\s+(?:above|below|under|underneath|beneath|beside|to the (?:left|right))\b", re.I),
    re.compile(r"\b(?:on|in|at)\s+the\s+(?:left|right|top|bottom)\b", re.I),
    re.compile(r"\b(?:top|bottom|foot|head) of the (?:figure|picture)\b", re.I),
    re.compile(r"\bside by side\b", re.I),
    re.compile(r"\bunderneath\b", re.I),
]

# Math and code spans are blanked before the scan (LaTeX's \left, a variable named `left`), keeping every offset.
SPANS = re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$|`[^`\n]*`", re.S)


@dataclass(frozen=True)
class Allowed:
    chapter: str   # the notebook's name after its number
    text: str      # the words around the match, exactly as in the cell
    why: str


ALLOWED = [
    Allowed("ground_floor", "Below, PyTorch's autograd", "the cell below"),
    Allowed("one_step", "Below, $w$ slides", "the cell below"),
    Allowed("one_step", "high on the left wall", "the two walls of one valley, in a one-panel figure"),
    Allowed("one_step", "lands higher on the right wall than it started\non the left",
            "the two walls of one valley, in a one-panel figure"),
    Allowed("average_of_averages", "the left side is a new name for the right", "the two sides of :="),
    Allowed("one_group_per_device", "Below, 4 ranks each take", "the cell below"),
    Allowed("one_group_per_device", "the grey arrow at the bottom",
            "inside each rank's box of a one-panel diagram, and true of every box"),
    Allowed("one_group_per_device", "the machine named at the bottom of the figure",
            "the caption line under the figure"),
    Allowed("all_reduce", "at the top go into the", "the rows of a one-panel diagram: ranks in, all-reduce, ranks out"),
    Allowed("all_reduce", "every rank at\nthe bottom",
            "the rows of a one-panel diagram: ranks in, all-reduce, ranks out"),
    Allowed("all_reduce", "Below, both hand-written collectives", "the cell below"),
    Allowed("splitting_the_model", "Below, $k = 2$ real ranks", "the cell below"),
    Allowed("shard_everything", "in the lane at the bottom", "a lane inside each panel, named so in the legend"),
    Allowed("speedup_model", "They run side by side", "k processes computing at the same time"),
    Allowed("gradient_accumulation", "instead of side by side by $k$ processes",
            "k processes computing at the same time"),
    Allowed("waiting", "the right-hand side being what s01 assumes", "the right side of an inequality"),
    Allowed("waiting", "The live run at the top of the chapter", "a cell at the top of the chapter"),
    Allowed("splitting_the_model", "join the blocks in the right direction", "right as in correct"),
    Allowed("cheaper_sync", "the slider panel below moves them",
            "the slider panel is the next cell, not a panel of a figure"),
]


def blanked(text: str) -> str:
    return SPANS.sub(lambda m: "§" * len(m.group()), text)


def position_phrases(stem: str, text: str, allow=None) -> list[tuple[str, bool]]:
    """Every position phrase in ``text``, each with whether an ``ALLOWED`` entry of chapter ``stem`` covers it."""
    allowed = [(m.start(), m.end()) for a in (ALLOWED if allow is None else allow) if a.chapter == stem
               for m in re.finditer(re.escape(a.text), text)]
    found = {}
    scan = blanked(text)
    for pattern in POSITION:
        for m in pattern.finditer(scan):
            covered = any(lo <= m.start() and m.end() <= hi for lo, hi in allowed)
            found[m.span()] = (text[max(0, m.start() - 50):m.end() + 50].replace("\n", " "), covered)
    return [found[span] for span in sorted(found)]


@pytest.mark.parametrize("path", chapters(), ids=lambda p: p.stem)
def test_no_sentence_locates_a_panel_by_position(path):
    stem = path.stem[3:]
    bad = [context for text in markdown(path) for context, covered in position_phrases(stem, text) if not covered]
    assert not bad, (f"{path.name} says where a panel sits; name it by its title instead (the panel \"…\"), or, "
                     "if the words do not locate a panel, add them to ALLOWED with the reason:\n  " + "\n  ".join(bad))


def test_every_allowed_phrase_is_in_its_chapter_and_covers_a_match():
    for a in ALLOWED:
        texts = [text for text in markdown(chapter_path(a.chapter)) if a.text in text]
        assert texts, f"{a.chapter} no longer says {a.text!r}: drop it from ALLOWED"
        only_this = [Allowed(a.chapter, a.text, a.why)]
        covered = [c for text in texts for _, c in position_phrases(a.chapter, text, only_this)]
        assert any(covered), f"{a.chapter}: {a.text!r} holds no position phrase: drop it from ALLOWED"


def test_the_scan_catches_the_sentences_that_went_stale():
    stale = ["Left, the random grab; right, the biased one: the figure the notes draw.",
             "The top row has the sync, the bottom row does not; in each column one optimizer.",
             "The figure's left column shows this machine.",
             "Against examples (left), the run lies on top of the one-rank run.",
             "Loss against steps. Above, the curves lie on top of one another; below, the differences.",
             "The red ring marks the chosen run on the right-hand panel.",
             "Both runs side by side.",
             "Top: the line model at ×64. Middle: every method priced. Bottom: rates past the wall."]
    for sentence in stale:
        assert any(not covered for _, covered in position_phrases("mini_batch", sentence)), sentence
    fine = ['In the panel "random grab", the random grab; in "biased grab", the biased one.',
            "The cell below starts two ranks, and the figure below draws what they recorded.",
            "Each rank sends to its right-hand neighbour, one chunk per round; read the timeline left to right."]
    for sentence in fine:
        assert not position_phrases("mini_batch", sentence), sentence


# ------------------------------------------------------------------------------------------------------------ titles

QUOTED = re.compile(r'"([^"]+)"')  # a name may break across the cell's lines


def panel_titles(fig) -> list[str]:
    """The titles of ``fig``'s Axes, every location, with their line breaks read as spaces."""
    return [" ".join(ax.get_title(loc=loc).split()) for ax in fig.axes for loc in ("left", "center", "right")
            if ax.get_title(loc=loc).strip()]


def unknown_names(text: str, titles: list[str], not_titles=()) -> list[str]:
    """The quoted names in ``text`` that are part of no title in ``titles`` (``not_titles``: other quotations)."""
    return [name for name in quoted(text) if name not in not_titles and not any(name in t for t in titles)]


def quoted(text: str) -> list[str]:
    return [" ".join(name.split()) for name in QUOTED.findall(text)]


_DRAWN: dict = {}        # figure name -> Figure
_GROUPS_DRAWN: set = set()


@pytest.fixture(scope="module", autouse=True)
def _forget_drawn_figures():
    yield
    _DRAWN.clear()
    _GROUPS_DRAWN.clear()
    plt.close("all")


def group_figure(name: str):
    """The published figure ``name``, drawn by its chapter's group from the records behind figures/."""
    from dpviz import course
    for group in course.GROUPS:
        if name in _DRAWN:
            break
        if group.name not in _GROUPS_DRAWN:
            _GROUPS_DRAWN.add(group.name)
            _DRAWN.update({n: fig for n, (fig, _) in group.draw(group.plan.load(RECORDS)).items()})
    return _DRAWN[name]


def figure(name: str) -> Callable:
    return lambda: group_figure(name)


def slider(build: Callable) -> Callable:
    return lambda: build().fig


def speedup():
    from dpviz.topics.ground_floor.widget import speedup_widget
    return speedup_widget(k=8, ratio=0.05)


def average():
    from dpviz.topics.one_group_per_device import shipped
    from dpviz.topics.average_of_averages.widget import average_widget
    return average_widget(shipped.grid_runs()[(4, 16)])


def costs():
    from dpviz.topics.speedup_model.figure_records import load_inputs
    from dpviz.topics.speedup_model.widget import costs_widget
    inputs = load_inputs(RECORDS)
    return costs_widget(measured_bench=inputs.bench, measured_runs=inputs.mlp)


def lr():
    from dpviz.topics.bigger_batch.records import LrGrid
    from dpviz.topics.bigger_batch.widget import lr_widget
    return lr_widget({m: LrGrid.shipped(m) for m in ("line", "mlp")})


def straggler():
    from dpviz.topics.waiting.records_straggler import shipped_straggler
    from dpviz.topics.waiting.widget import straggler_widget
    return straggler_widget(shipped_straggler(), k=2, delay=0.05, slow_rank=1)


def pipeline():
    from dpviz.topics.splitting.records_pipeline import shipped_grid
    from dpviz.topics.splitting.widget import pipeline_widget
    return pipeline_widget(shipped_grid())


def sharding():
    from dpviz.topics.sharding.widget import sharding_widget
    return sharding_widget()


def saved_output(stem: str, marker: str) -> Callable:
    """For a figure a cell still builds by hand from a live run: the alt text saved with the chapter's output,
    which ``dpviz.engine.layout`` writes from the figure's own titles ("Panel 1, <title>: …")."""
    def titles():
        for cell in cells(chapter_path(stem)):
            if cell["cell_type"] == "code" and marker in "".join(cell["source"]):
                saved = ["".join(o["data"]["text/plain"]) for o in cell["outputs"] if "image/png" in o.get("data", {})]
                assert saved, f"the cell of {stem} holding {marker!r} has no saved figure"
                return saved
        raise AssertionError(f"no code cell of {stem} holds {marker!r}")
    return titles


@dataclass(frozen=True)
class Named:
    chapter: str                 # the notebook's name after its number
    marker: str                  # words that find the Markdown cell
    draw: tuple                  # what the cell describes: each returns a Figure, or the titles of a saved output
    not_titles: tuple = field(default=())   # quotations in the cell that are not panel names

    def titles(self) -> list[str]:
        found = []
        for draw in self.draw:
            got = draw()
            found += [" ".join(t.split()) for t in got] if isinstance(got, list) else panel_titles(got)
        return found


NAMED = [
    Named("ground_floor", "Try it: sliders for $k$ and $T_{comm}/T_{compute}$", (slider(speedup),)),
    Named("mini_batch", "the figure the source notes draw at this point", (figure("step2_gradients"),)),
    Named("average_of_averages", "The same step as a picture", (figure("step3_average_of_averages"),)),
    Named("average_of_averages", "Try it: sliders for $k$ and $b$", (slider(average),)),
    Named("average_of_averages", "Each group mean is labelled with its size",
          (saved_output("average_of_averages", "Plain mean of unequal groups"),)),
    Named("one_group_per_device", "the knob $w$ of every replica after every step", (figure("step5_replicas"),)),
    Named("all_reduce", "The two schedules as recorded", (figure("step5_ring_vs_parameter_server"),)),
    Named("all_reduce", "These runs are 20 steps long", (saved_output("all_reduce", "drift_runs()"),)),
    Named("speedup_model", "Try it: sliders for $k$, $\\alpha$", (slider(costs),),
          not_titles=("this machine, fitted", "notes")),
    Named("measuring_an_all_reduce", "Which formula fits this machine", (figure("allreduce_time_vs_size"),)),
    Named("measuring_an_all_reduce", "in the all-reduce figure above draw them", (figure("allreduce_time_vs_size"),)),
    Named("whole_picture", "disagree with each other by a wide",
          (saved_output("whole_picture", "figure_shard_or_batch("),)),
    Named("whole_picture", "the mean each rank normalised each hidden unit with",
          (saved_output("whole_picture", "figure_batchnorm(bn"),)),
    Named("bigger_batch_bigger_step", "Four runs per panel", (figure("lr_loss_curves"),)),
    Named("bigger_batch_bigger_step", "run lies on top of the one-rank run",
          (figure("lr_loss_curves"), figure("lr_linear_rule"))),
    Named("bigger_batch_bigger_step", "Where the rule breaks, and what warm-up does", (figure("lr_warmup"),)),
    Named("bigger_batch_bigger_step", "Pick a model, $k$, a rule and a warm-up", (slider(lr),),
          not_titles=("η multiplier", "free")),
    Named("gradient_accumulation", "## The communication saved", (figure("accumulation_sync"),)),
    Named("waiting", "one row per rank. Rank 0's row", (figure("waiting_straggler"),)),
    Named("waiting", "Sliders: $d$, the slow rank, and $k$", (slider(straggler),)),
    Named("waiting", "### What overlap buys on this machine", (figure("waiting_overlap"),)),
    Named("splitting_the_model", "The two measured steps as Gantt charts", (figure("pipeline_gantt"),)),
    Named("splitting_the_model", "Slider: $p$, $m$ and the schedule", (slider(pipeline),)),
    Named("splitting_the_model", "### Against data parallelism", (figure("tensor_parallel_split"),)),
    Named("shard_everything", "Slider: when does a model fit?", (slider(sharding),)),
    Named("cheaper_sync", "Loss against steps beside the uncompressed training", (figure("cheaper_sync_loss"),)),
    Named("cheaper_sync", "The recorded run, with a larger input", (figure("cheaper_sync_two_levels"),)),
]


def named_cell(case: Named) -> str:
    found = [text for text in markdown(chapter_path(case.chapter)) if case.marker in text]
    assert len(found) == 1, f"{case.chapter}: {len(found)} Markdown cells hold {case.marker!r}"
    return found[0]


@pytest.mark.parametrize("case", NAMED, ids=lambda c: f"{c.chapter}:{c.marker[:30]}")
def test_every_panel_the_prose_names_is_a_title_of_its_figure(case):
    text = named_cell(case)
    names = [n for n in quoted(text) if n not in case.not_titles]
    assert names, f"{case.chapter}: the cell holding {case.marker!r} names no panel by its title any more"
    titles = case.titles()
    missing = unknown_names(text, titles, case.not_titles)
    assert not missing, (f"{case.chapter}: the prose names panels {missing} that its figure does not have; "
                         f"the figure's titles are {titles}")


def test_every_cell_that_names_a_panel_is_checked():
    """A quoted panel name anywhere in the chapters belongs to a cell in NAMED, so that its figure is drawn."""
    mentions = re.compile(r'\bpanels?\s+(?:titled\s+|whose title starts\s+)?"|"[^"\n]+"\s+panels?\b')
    checked = {(c.chapter, named_cell(c)) for c in NAMED}
    for path in chapters():
        for text in markdown(path):
            if mentions.search(blanked(text)):
                assert (path.stem[3:], text) in checked, f"{path.name}: add this cell to NAMED:\n{text[:200]}"


def test_a_restacked_figure_keeps_its_prose_true_and_a_renamed_panel_fails():
    from matplotlib.figure import Figure

    from dpviz.topics.mini_batch.figures import figure_step2_gradients
    from dpviz.engine.schema import load

    case = next(c for c in NAMED if c.chapter == "mini_batch")
    text = named_cell(case)
    fig = figure_step2_gradients(load(RECORDS / "line_k4"), load(RECORDS / "line_k1_biased"))
    assert isinstance(fig, Figure)
    top, bottom = fig.axes[:2]
    assert top.get_position().y0 > bottom.get_position().y1, "the figure is drawn stacked"
    # side by side instead: the sentences still hold, because they name each panel by its title
    top.set_position([0.05, 0.1, 0.4, 0.8])
    bottom.set_position([0.55, 0.1, 0.4, 0.8])
    assert not unknown_names(text, panel_titles(fig))
    assert any(not covered for _, covered in position_phrases("mini_batch", "Left, the random grab; right, the other."))
    # a panel renamed: the prose's name for it no longer fits, and the check says which
    top.set_title("Mini-batch of b = 8, a fair sample")
    assert unknown_names(text, panel_titles(fig)) == ["random grab"]
    plt.close(fig)
