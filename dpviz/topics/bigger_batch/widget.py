"""The chapter's sliders: k, the learning-rate rule (×1, ×√k, ×k or a free multiplier) and the warm-up.

    from dpviz.topics.bigger_batch.records import LrGrid
    from dpviz.topics.bigger_batch.widget import lr_widget
    lr_widget({"line": LrGrid.shipped("line"), "mlp": LrGrid.shipped("mlp")})

Every curve is a run of the shipped grids (no slider starts a run): loss against examples seen
on the left, against optimizer steps on the right, the run on one rank at η as the reference.
Picking a rule sets the multiplier to what the rule gives for the chosen k; moving the
multiplier yourself makes the rule "free". The model menu switches grids: the axes, the
reference and the note change with it, so each model keeps a background of its own.
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dpviz import course
from dpviz.engine.checks import check_choice, check_int
from dpviz.topics.bigger_batch.plots import LossCurves
from dpviz.topics.bigger_batch import theory as lr_rules
from dpviz.engine.slider import MIN_POINTS, SliderFigure, animate, at_least, keep_off_legend

RULES = (*lr_rules.RULES, "free")
RULE_OPTIONS = [(lr_rules.RULE_LABELS[r], r) for r in lr_rules.RULES] + [("free ×", "free")]
MODEL_NAMES = {"line": "line model", "mlp": "MLP"}


def _check_grids(grids: dict) -> tuple[list, list, list]:
    if not isinstance(grids, dict) or not grids:
        raise ValueError("grids must be a dict of at least one LrGrid, keyed by model (\"line\", \"mlp\"); got "
                         f"{type(grids).__name__} {grids!r:.60}.")
    first = next(iter(grids.values()))
    axes = [first.meta[name] for name in ("ks", "multipliers", "warmups")]
    for model, grid in grids.items():
        if grid.meta["model"] != model:
            raise ValueError(f"grids[{model!r}] must be a grid of the {model} model; got one of the {grid.meta['model']} model.")
        if [grid.meta[name] for name in ("ks", "multipliers", "warmups")] != axes:
            raise ValueError("grids must share their k, multipliers and warm-ups, so that one set of sliders fits all.")
        if 1 not in grid.meta["ks"] or not np.isclose(grid.meta["multipliers"], 1.0).any():
            raise ValueError(f"grids[{model!r}] must hold the k = 1 run at multiplier 1, the reference every curve is drawn against.")
    ks, multipliers = axes[0], axes[1]
    for k in ks:
        for rule in lr_rules.RULES:
            if not np.isclose(multipliers, lr_rules.multiplier(rule, k), rtol=1e-9, atol=0).any():
                raise ValueError(f"grids must hold the multiplier of every rule for every k; {lr_rules.RULE_LABELS[rule]} "
                                 f"at k={k} is missing.")
    return axes


def _snap(multipliers, value: float) -> float:
    """The grid's multiplier equal to ``value`` (the rules' √k is stored to float precision)."""
    return float(multipliers[int(np.argmin(np.abs(np.log(multipliers) - np.log(value))))])


class RulesFigure:
    """The chapter-09 slider figure, built once; ``update(model=, k=, rule=, multiplier=, warmup=)`` refills it."""

    def __init__(self, grids: dict, *, figsize=(11.5, 5.2)):
        self.grids = grids
        self.multipliers = np.array(next(iter(grids.values())).meta["multipliers"], dtype=float)
        self.fig = fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, 2)
        fig.subplots_adjust(left=0.075, right=0.985, top=0.92, bottom=0.2, wspace=0.18)
        self.curves = LossCurves(fig, axes)
        at_least(fig, MIN_POINTS)  # before the legend's hole below, which depends on its text size
        self.curves.note.set_wrap(True)  # the grid's long description takes two lines at 9 pt
        animate(*self.curves.changing_artists())
        # drawn over the cached background, which holds the legend: keep them out of its box, as under a drawn legend
        keep_off_legend(axes[1], self.curves.chosen[1], self.curves.plain[1], self.curves.blowup[1])
        self.status_line = ""
        self._model = None

    def layouts(self) -> list[dict]:
        """One background per model: the axes, the reference curve and the note change with it."""
        return [{"model": model} for model in self.grids]

    def multiplier_for(self, *, k: int, rule: str, multiplier: float) -> float:
        """The multiplier a rule gives for k ranks (the free rule keeps ``multiplier``), as stored in the grid."""
        return _snap(self.multipliers, multiplier if rule == "free" else lr_rules.multiplier(rule, k))

    def update(self, *, model: str, k: int, rule: str, multiplier: float, warmup: int):
        grid = self.grids[model]
        if model != self._model:
            self.curves.show_grid(grid)
            self._model = model
        m = self.multiplier_for(k=k, rule=rule, multiplier=multiplier)
        row = grid.index(k=k, multiplier=m, warmup=warmup)
        plain = grid.index(k=k, multiplier=m, warmup=0) if warmup else None
        self.curves.show_run(grid, row, plain)
        self.status_line = self._caption(grid, row)
        return model

    def _caption(self, grid, row: int) -> str:
        ref = grid.index(k=1, multiplier=1.0)
        k, steps = int(grid.k[row]), int(grid.steps[row])
        rate = grid.meta["base_lr"] * grid.multiplier[row]
        head = (f"<b>{html.escape(grid.model_short)}, k = {k}, {grid.rule_words(row)}: η = {rate:.3g}"
                f"{f', warm-up {grid.warmup[row]} steps' if grid.warmup[row] else ''}</b>")
        if grid.diverged(row):
            what = f"diverged at step {int(grid.diverged_at[row])} of {steps}"
        else:
            what = f"loss {grid.final_loss(row):.3g} after {grid.meta['examples']:,} examples in {steps} steps"
        return (f"{head}: {what}. Reference, k = 1 at η = {grid.meta['base_lr']:g}: "
                f"{grid.final_loss(ref):.3g} in {int(grid.steps[ref])} steps.")


def lr_widget(grids: dict, *, model: str = "line", k: int = 4, rule: str = "linear", warmup: int = 0,
              figsize=(11.5, 5.2)) -> SliderFigure:
    """Sliders for the model, k, the rule (or a free multiplier) and the warm-up over ``grids`` ({model: LrGrid})."""
    ks, multipliers, warmups = _check_grids(grids)
    check_choice("model", model, tuple(grids))
    k = check_int("k", k, low=1)
    if k not in ks:
        raise ValueError(f"k must be one of the grid's {ks}; got {k}.")
    check_choice("rule", rule, RULES)
    if warmup not in warmups:
        raise ValueError(f"warmup must be one of the grid's warm-ups {warmups}; got {warmup!r}.")
    figure = RulesFigure(grids, figsize=figsize)
    start = figure.multiplier_for(k=k, rule=rule if rule != "free" else "x1", multiplier=1.0)
    style = {"description_width": "initial"}
    controls = {
        "model": widgets.ToggleButtons(options=[(MODEL_NAMES.get(m, m), m) for m in grids], value=model, description="model",
                                       style=style),
        "k": widgets.SelectionSlider(options=ks, value=k, description="k (ranks)", style=style),
        "rule": widgets.ToggleButtons(options=RULE_OPTIONS, value=rule, description="rule", style=style),
        "multiplier": widgets.SelectionSlider(options=[(f"×{m:.3g}", float(m)) for m in multipliers], value=start,
                                              description="η multiplier", style=style),
        "warmup": widgets.SelectionSlider(options=warmups, value=warmup, description="warm-up steps", style=style),
    }

    def linked(name: str, values: dict) -> dict:
        """A rule (or a new k under a rule) sets the multiplier; a multiplier no rule gives makes the rule free."""
        if name in ("k", "rule") and values["rule"] != "free":
            return {"multiplier": figure.multiplier_for(k=values["k"], rule=values["rule"], multiplier=1.0)}
        if name == "multiplier" and values["rule"] != "free":
            wanted = figure.multiplier_for(k=values["k"], rule=values["rule"], multiplier=1.0)
            if not np.isclose(values["multiplier"], wanted, rtol=1e-9, atol=0):
                return {"rule": "free"}
        return {}

    return SliderFigure(figure, controls, linked=linked,
                        title=f"<b>{course.Ref('bigger_batch')}</b>: pick k, a learning-rate rule and a warm-up; "
                              "every curve is a real run.",
                        repeat_frames=True)
