"""The chapter's sliders: the straggler's delay d, which rank is slow, and k, over straggler sweeps recorded for real.

    from dpviz.topics.waiting.records_straggler import shipped_straggler
    from dpviz.topics.waiting.widget import straggler_widget
    straggler_widget(shipped_straggler())        # {k: StragglerRecord}

:class:`StragglerFigure` draws two timelines one above the other, built once: on top the steps a
real run recorded with that (k, d, slow rank); under it the same steps as the model of
:func:`dpviz.topics.waiting.theory.straggler_step` draws them, from the run's own median compute and
all-reduce times. With more ranks than cores the measurement includes the ranks taking turns on
the CPU, which the model leaves out; the figure says so when it happens.

``update(k=, delay=, slow_rank=)`` sets new segments, titles and hand-drawn time ticks on the
artists already there (all of them animated); what changes with k alone (the rank labels shown, the
note on oversubscription) is in the background, one per k, drawn once when the widget is built.
No slider starts a run: every (k, d, rank) it offers is a setting of a shipped record.
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory, offset_copy

from dpviz.engine.checks import check_choice, check_int, check_real
from dpviz.topics.waiting.plots_straggler import StragglerBars, legend_handles, measured_segments, modeled_segments
from dpviz.engine.style import INK, SLATE
from dpviz.topics.waiting import theory as waiting
from dpviz.engine.slider import SliderFigure, TimeTicks, animate

STEPS_SHOWN = 3


def _check_sweeps(sweeps: dict) -> dict:
    if not sweeps:
        raise ValueError("sweeps must hold at least one StragglerRecord, keyed by k; got an empty dict.")
    for k, sweep in sweeps.items():
        if getattr(sweep, "KIND", None) is None or sweep.KIND.name != "straggler" or sweep.k != k:
            raise ValueError(f"sweeps must map each k to a straggler record with that k; got {sweep!r} under k={k!r}.")
    return dict(sorted(sweeps.items()))


class StragglerFigure:
    """Measured (top) and modeled (bottom) straggler timelines for up to ``max(sweeps)`` ranks; see the module docstring."""

    def __init__(self, sweeps: dict, *, steps: int = STEPS_SHOWN, figsize=(11.5, 6.2), fontsize: float = 12):
        self.sweeps = _check_sweeps(sweeps)
        self.steps = check_int("steps", steps, low=1, high=20)
        slots = max(self.sweeps)
        self.status_line = ""
        self._median_cache = {}  # k -> the medians of its record (_medians)
        self.fig = fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        self.ax_measured, self.ax_modeled = fig.subplots(2, 1)
        fig.subplots_adjust(left=0.13, right=0.98, top=0.88, bottom=0.16, hspace=0.32)
        self.bars, self.ticks, self.rank_labels, self.titles = {}, {}, {}, {}
        for name, ax in (("measured", self.ax_measured), ("modeled", self.ax_modeled)):
            self.bars[name] = StragglerBars(ax, slots=slots, fontsize=fontsize, one_path=True)
            ax.tick_params(axis="y", left=False, labelleft=False)
            ax.spines["left"].set_visible(False)  # the bars start on it, and are redrawn over it on every move
            self.ticks[name] = TimeTicks(ax, fontsize=fontsize - 1, nbins=6, count=9, below_points=6, mark_size=4,
                                         labelled=name == "modeled")
            if name == "modeled":
                ax.set_xlabel("time (ms), the same scale in both", fontsize=fontsize - 1, loc="right")
                ax.xaxis.labelpad = 16
            left_of_axis = offset_copy(blended_transform_factory(ax.transAxes, ax.transData), fig=fig, x=-8, units="points")
            self.rank_labels[name] = [ax.text(0, r, f"rank {r}", transform=left_of_axis, ha="right", va="center",
                                              fontsize=fontsize - 1, color=INK, clip_on=False) for r in range(slots)]
            self.titles[name] = ax.set_title("", fontsize=fontsize, loc="left")
        self.note = self.ax_measured.text(0.99, 1.02, "", transform=self.ax_measured.transAxes, ha="right", va="bottom",
                                          fontsize=fontsize - 2, color=SLATE)
        # The headline stays put (the status line above the figure carries the numbers): each text redrawn on a
        # move costs about a millisecond.
        fig.text(0.01, 0.985, "One rank sleeps d per step: every rank's step takes as long as the slowest rank's",
                 ha="left", va="top", fontsize=fontsize + 1, color=INK, weight="bold")
        fig.legend(handles=legend_handles(), loc="lower center", ncol=4, fontsize=fontsize - 2, frameon=False)
        animate(*[a for name in self.bars for a in (*self.bars[name].artists(), *self.ticks[name].artists(),
                                                     self.titles[name])])

    def options(self) -> tuple[list, list]:
        """The ks and the delays (seconds) every sweep offers."""
        delays = sorted(set.intersection(*(set(np.round(s.delay, 9).tolist()) for s in self.sweeps.values())))
        return list(self.sweeps), delays

    def layouts(self) -> list[dict]:
        """One set of values per background: the rank labels and the note change with k alone."""
        return [{"k": k, "slow_rank": 0} for k in self.sweeps]

    def _medians(self, k: int) -> dict:
        """The record's medians for k ranks, taken once: a move only picks a setting's (each is a few ms to take)."""
        if k not in self._median_cache:
            sweep = self.sweeps[k]
            self._median_cache[k] = dict(wait=sweep.measured_wait(), step=sweep.median_step(),
                                         compute=sweep.median_compute(), transfer=sweep.median_transfer())
        return self._median_cache[k]

    def update(self, *, k: int, delay: float, slow_rank: int) -> int:
        k = check_choice("k", k, tuple(self.sweeps))
        sweep = self.sweeps[k]
        delay = check_real("delay", delay, low=0.0)
        slow_rank = check_int("slow_rank", slow_rank, low=0, high=k - 1)
        s = sweep.setting(delay, slow_rank)
        medians = self._medians(k)
        measured, end_measured = measured_segments(sweep, s, steps=self.steps)
        step = waiting.straggler_step(medians["compute"], [delay if r == slow_rank else 0.0 for r in range(k)],
                                      medians["transfer"])
        modeled, end_modeled = modeled_segments(step, steps=self.steps)
        end_ms = max(end_measured, end_modeled) * 1e3 * 1.04
        for name, segments in (("measured", measured), ("modeled", modeled)):
            self.bars[name].show(segments)
            self.ticks[name].set(end_ms)
            if self.bars[name].ax.get_ylim() != (k - 0.4, -0.6):  # k's rows; setting limits costs
                self.bars[name].ax.set_ylim(k - 0.4, -0.6)
            for r, label in enumerate(self.rank_labels[name]):
                label.set_visible(r < k)
        wait = float(medians["wait"][s])
        measured_step = float(medians["step"][s])
        modeled_wait = float(step.wait.max())
        self.titles["measured"].set_text(f"measured: others waited {wait * 1e3:.1f} ms, a step took {measured_step * 1e3:.1f} ms")
        self.titles["modeled"].set_text(f"modeled: others wait {modeled_wait * 1e3:.1f} ms, a step takes {step.t_step * 1e3:.1f} ms")
        self.note.set_text(f"k = {k} ranks on {sweep.meta['cores']} cores: they take turns on the CPU; the model does not"
                           if sweep.oversubscribed else "")
        headline = f"k = {k}, rank {slow_rank} sleeps d = {delay * 1e3:g} ms per step"
        self.status_line = (f"<b>{html.escape(headline)}</b>: the others waited {wait * 1e3:.1f} ms (median, measured), "
                        f"{modeled_wait * 1e3:.1f} ms modeled. {html.escape(self.note.get_text())}<br>"
                        f"model: compute {medians['compute'] * 1e3:.2g} ms and all-reduce "
                        f"{medians['transfer'] * 1e3:.2g} ms, the run's medians, with the slow rank d late<br>"
                        f"record: {html.escape(sweep.describe())}")
        return k  # the background's layout key


def straggler_widget(sweeps: dict, *, k: int | None = None, delay: float = 0.05, slow_rank: int = 1) -> SliderFigure:
    """Sliders for k, the delay d and the slow rank over ``sweeps`` ({k: StragglerRecord}, e.g. ``shipped_straggler()``)."""
    figure = StragglerFigure(sweeps)
    ks, delays = figure.options()
    k = ks[0] if k is None else check_choice("k", k, ks)
    delay = check_real("delay", delay, low=0.0)
    if not any(np.isclose(delay, d) for d in delays):
        raise ValueError(f"delay must be one of the recorded delays {[f'{d:g}' for d in delays]} s; got {delay:g}.")
    slow_rank = check_int("slow_rank", slow_rank, low=0, high=k - 1)
    controls = {
        "k": widgets.SelectionSlider(options=ks, value=k, description="k (ranks)", continuous_update=True),
        "delay": widgets.SelectionSlider(options=[(f"{d * 1e3:g} ms", d) for d in delays],
                                         value=min(delays, key=lambda d: abs(d - delay)), description="delay d",
                                         continuous_update=True),
        "slow_rank": widgets.IntSlider(value=slow_rank, min=0, max=max(ks) - 1, description="slow rank",
                                       continuous_update=True),
    }

    def linked(name: str, values: dict) -> dict:
        """A rank must exist: a smaller k pulls the slow rank down, a higher slow rank pushes k up."""
        if name == "k" and values["slow_rank"] >= values["k"]:
            return {"slow_rank": values["k"] - 1}
        if name == "slow_rank" and values["slow_rank"] >= values["k"]:
            return {"k": min(kk for kk in ks if kk > values["slow_rank"])}
        return {}

    return SliderFigure(figure, controls, linked=linked, repeat_frames=True)
