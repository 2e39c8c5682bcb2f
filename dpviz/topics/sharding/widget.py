"""Chapter "shard everything"'s slider panel: memory per rank and bytes per step for k, the ZeRO stage, the model's
size and its precision, and where the model stops fitting a device.

    from dpviz.topics.sharding.widget import sharding_widget
    sharding_widget()

Left, modeled: the bytes one rank holds for parameters, gradients and optimizer state
(:func:`dpviz.topics.splitting.theory_memory.bytes_per_rank_by_part`; float32 Adam's 4 + 4 + 8 bytes per parameter, or mixed
precision's 2 + 2 + 12, the ZeRO paper's) against k, one line per stage, the chosen stage and k ringed, and the
device's memory as a dotted line: where a stage's line runs under it, the model fits. Right, modeled: the bytes
one rank sends per step at each stage (:func:`dpviz.topics.sharding.theory.bytes_sent`), in units of the gradient's M,
each bar labelled in GB. Activations and the one layer ZeRO-3 gathers at a time are left out (the chapter's
real runs measure that layer). :class:`ShardingFigure` builds everything once; a move sets new data on the lines,
the ring, the device line and the bars, over a background drawn once. No slider starts a run.
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from dpviz.engine.style import AMBER, INK, RED, REPLICA, SLATE, TEAL, open_frame
from dpviz.topics.splitting import theory_memory as memory
from dpviz.topics.sharding import theory
from dpviz.engine.slider import SliderFigure, animate, bytes_readout

KS = tuple(2 ** i for i in range(11))  # 1 to 1,024 ranks
SIZES = (("125 M", 125_000_000), ("1.5 B", 1_500_000_000), ("7.5 B", 7_500_000_000), ("13 B", 13_000_000_000),
         ("70 B", 70_000_000_000), ("175 B", 175_000_000_000))
PRECISIONS = {"fp32": memory.FP32_ADAM, "mixed": memory.MIXED_PRECISION}
PRECISION_LABELS = {"fp32": "float32 Adam: 4 + 4 + 8 B", "mixed": "mixed precision: 2 + 2 + 12 B"}
DEVICES_GB = (16, 24, 32, 40, 80, 141)
STAGE_WORDS = {0: "plain DP", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}
STAGE_STYLES = {0: dict(color=SLATE, linestyle="-", marker="o"), 1: dict(color=AMBER, linestyle="--", marker="s"),
                2: dict(color=TEAL, linestyle="-.", marker="^"), 3: dict(color=REPLICA, linestyle=":", marker="D")}
STAGE_HATCHES = {0: "", 1: "//", 2: "..", 3: "xx"}


def held_bytes(n_params: int, k: int, zero_stage: int, precision: str) -> dict:
    """Bytes one rank holds by part, and in total: parameters, gradients and optimizer state."""
    return memory.bytes_per_rank_by_part(n_params, k, zero_stage=zero_stage, part_bytes=PRECISIONS[precision])


def sent_bytes(n_params: int, k: int, zero_stage: int, precision: str) -> int:
    """Bytes one rank sends per step: the gradient and parameters travel at the gradient's precision."""
    sent = theory.bytes_sent((n_params,), k, zero_stage=zero_stage, element_bytes=PRECISIONS[precision]["grads"])
    return sum(sent.values())


def fewest_k(n_params: int, device_bytes: float, zero_stage: int, precision: str):
    """The fewest of the slider's k (powers of two) with which the stage fits the device; None if none does."""
    return next((k for k in KS if held_bytes(n_params, k, zero_stage, precision)["total"] <= device_bytes), None)


class ShardingFigure:
    """Memory per rank against k (left) and bytes per step by stage (right), modeled; ``update`` refills them."""

    def __init__(self, *, figsize=(11.5, 4.7)):
        self.fig = Figure(figsize=figsize)
        self.mem_ax, self.bytes_ax = self.fig.subplots(1, 2, width_ratios=(1.5, 1))
        self.fig.subplots_adjust(left=0.075, right=0.985, top=0.88, bottom=0.3, wspace=0.25)
        ax = self.mem_ax
        self.lines = {s: ax.plot(KS, np.ones(len(KS)), ms=5, linewidth=2, label=STAGE_WORDS[s], **STAGE_STYLES[s])[0]
                      for s in STAGE_STYLES}
        self.device = ax.axhline(80, color=INK, linestyle=(0, (1, 1.5)), linewidth=2.2)
        (self.ring,) = ax.plot([], [], "o", ms=17, markerfacecolor="none", markeredgecolor=RED, markeredgewidth=2.5,
                               zorder=6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(KS, [str(k) for k in KS])
        ax.set_xlim(0.8, KS[-1] * 1.25)
        ax.set_ylim(5e-3, 5e3)
        ax.set_xlabel("k (ranks)", fontsize=11)
        ax.set_ylabel("GB per rank (θ, g, optimizer)", fontsize=11)
        ax.set_title("Memory per rank, modeled, against k", fontsize=12, loc="left")
        ax.grid(True, which="major", color="#e6e6e6", linewidth=0.8)
        handles = [*self.lines.values(), Line2D([], [], color=INK, linestyle=(0, (1, 1.5)), linewidth=2.2,
                                                label="device memory"),
                   Line2D([], [], marker="o", ms=12, markerfacecolor="none", markeredgecolor=RED, markeredgewidth=2.5,
                          linestyle="none", label="chosen k and stage")]
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=10, frameon=False)
        bx = self.bytes_ax
        self.bars = bx.bar(range(4), [1] * 4, width=0.65, color=[STAGE_STYLES[s]["color"] for s in STAGE_STYLES],
                           edgecolor=INK, linewidth=0.8)
        for bar, s in zip(self.bars, STAGE_STYLES):
            bar.set_hatch(STAGE_HATCHES[s] or None)
        self.labels = [bx.text(i, 0, "", ha="center", va="bottom", fontsize=10) for i in range(4)]
        bx.set_xticks(range(4), [STAGE_WORDS[s] for s in STAGE_STYLES], fontsize=10)
        bx.set_ylim(0, 3.6)
        bx.set_ylabel("sent per rank per step, in M", fontsize=11)
        bx.set_title("Bytes per step, modeled (M: the gradient)", fontsize=12, loc="left")
        open_frame(bx)
        animate(*self.lines.values(), self.device, self.ring, *self.bars, *self.labels)
        self.status_line = ""

    def update(self, *, k: int, zero_stage: int, n_params: int, precision: str, device_gb: float):
        for s, line in self.lines.items():
            y = [held_bytes(n_params, j, s, precision)["total"] / 1e9 for j in KS]
            if not np.array_equal(line.get_ydata(orig=True), y):  # a line keeps its path on the log axes drawn
                line.set_ydata(y)
            line.set_linewidth(3.2 if s == zero_stage else 1.6)
        self.device.set_ydata([device_gb, device_gb])
        held = held_bytes(n_params, k, zero_stage, precision)
        self.ring.set_data([k], [held["total"] / 1e9])
        M = n_params * PRECISIONS[precision]["grads"]
        for s, (bar, label) in enumerate(zip(self.bars, self.labels)):
            sent = sent_bytes(n_params, k, s, precision)
            bar.set_height(sent / M)
            bar.set_linewidth(2.6 if s == zero_stage else 0.8)
            label.set_position((s, sent / M + 0.05))
            label.set_text(bytes_readout(sent))
        fits = held["total"] <= device_gb * 1e9
        first = fewest_k(n_params, device_gb * 1e9, zero_stage, precision)
        plain = sent_bytes(n_params, k, 0, precision)
        sent = sent_bytes(n_params, k, zero_stage, precision)
        ratio = f"{sent / plain:g}× plain DP's" if plain else "nothing at k = 1"
        where = (f"fits from k = {first}" if first is not None else f"fits at no k up to {KS[-1]:,}")
        self.status_line = (
            f"<b>{STAGE_WORDS[zero_stage]}, k = {k}, {n_params / 1e9:g} B parameters, "
            f"{PRECISION_LABELS[precision]}</b>: {bytes_readout(held['total'])} per rank (θ "
            f"{bytes_readout(held['params'])}, g {bytes_readout(held['grads'])}, optimizer "
            f"{bytes_readout(held['optimizer'])}; activations aside): {'fits' if fits else '<b>does not fit</b>'} "
            f"a {device_gb:g} GB device; {STAGE_WORDS[zero_stage]} {where}. It sends {bytes_readout(sent)} per step, "
            f"{ratio}.")
        return None


def sharding_widget(*, k: int = 64, zero_stage: int = 0, n_params: int = 7_500_000_000, precision: str = "mixed",
                    device_gb: float = 80) -> SliderFigure:
    """Sliders for k, the ZeRO stage, the model's size, its precision and the device's memory; all modeled."""
    sizes = [n for _, n in SIZES]
    if k not in KS or zero_stage not in STAGE_WORDS or n_params not in sizes or precision not in PRECISIONS \
            or device_gb not in DEVICES_GB:
        raise ValueError(f"k, zero_stage, n_params, precision and device_gb must be among the sliders' values: k in "
                         f"{list(KS)}, zero_stage in 0 to 3, n_params in {sizes}, precision in {list(PRECISIONS)}, "
                         f"device_gb in {list(DEVICES_GB)}; got k={k}, zero_stage={zero_stage}, n_params={n_params}, "
                         f"precision={precision!r}, device_gb={device_gb}.")
    style = {"description_width": "initial"}
    controls = {
        "k": widgets.SelectionSlider(options=KS, value=k, description="k (ranks)", style=style),
        "n_params": widgets.SelectionSlider(options=SIZES, value=n_params, description="parameters", style=style),
        "device_gb": widgets.SelectionSlider(options=DEVICES_GB, value=device_gb, description="device memory (GB)",
                                             style=style),
        "zero_stage": widgets.ToggleButtons(options=[(w, s) for s, w in STAGE_WORDS.items()], value=zero_stage,
                                            description="stage", style=style),
        "precision": widgets.ToggleButtons(options=[(w, p) for p, w in PRECISION_LABELS.items()], value=precision,
                                           description="precision", style=style),
    }
    return SliderFigure(ShardingFigure(), controls, repeat_frames=True)


__all__ = ["ShardingFigure", "sharding_widget"]
