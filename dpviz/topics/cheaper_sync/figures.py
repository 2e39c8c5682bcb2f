"""A cheaper sync's figures: compression's bytes, error and loss; local SGD's loss and drift; two levels' bytes per
link; each method's modeled speedup beside the ring's, over this machine's measured times; each method's speedup
measured here, against a one-rank run of the same workload.

Records: :data:`dpviz.topics.cheaper_sync.records_compression.FIGURE_PLAN` (a compression run, a local-SGD run and its one-rank
run, a two-level all-reduce run), by stem. The modeled workload is :mod:`dpviz.topics.cheaper_sync.records_compression`'s ``PRICED_*``.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from dpviz import course
from dpviz.topics.cheaper_sync import claims
from dpviz.engine.figure_group import FigureGroup
from dpviz.engine.layout import caption, figure, legend_below, lift_notes, title_of, wrap_titles
from dpviz.topics.waiting.figures import panel_places
from dpviz.topics.cheaper_sync.plots import (
    hook_label,
    plot_drift,
    plot_hook_bytes,
    plot_hook_error,
    plot_hook_loss,
    plot_link_bytes,
    plot_local_loss,
    plot_measured_speedups,
    plot_speedups,
    plot_times,
)
from dpviz.engine.style import LAVENDER
from dpviz.topics.cheaper_sync import records_compression as compression
from dpviz.topics.cheaper_sync.records_compression import FIGURE_PLAN
from dpviz.topics.cheaper_sync.records_hierarchical import METHODS
from dpviz.topics.ground_floor.links import SPEED_ORDER

METHOD_LABELS = {"all_reduce": "dist.all_reduce", "two_level": "two levels (hand-written)",
                 "flat_ring": "flat ring (hand-written)"}


def _cores(record) -> str:
    if record.oversubscribed:
        return f"{record.k} ranks shared {record.meta['cores']} cores, so the times include waiting for a core"
    return ""


def figure_cheaper_sync_bytes(rec) -> Figure:
    """Bytes per step each hook sent, and its averaged gradient's error against the exact average."""
    fig = figure((6.8, 8.4))
    top, bottom = fig.subplots(2, 1, height_ratios=(1, 1.2))
    fig.subplots_adjust(left=0.24, right=0.97, top=0.87, bottom=0.2, hspace=0.55)
    plot_hook_bytes(rec, ax=top, title="Bytes handed to dist.all_reduce per step (counted)")
    plot_hook_error(rec, ax=bottom, title="Averaged gradient against the exact average, per compressed step")
    legend_below(bottom, gap=0.55, ncol=2, fontsize=9)
    fig.suptitle(claims.compression_title(rec), fontsize=12, x=0.01, y=0.99, ha="left", va="top")
    modes = ", ".join(hook_label(m) for m in rec.mode)
    first, second = panel_places(top, bottom)
    alt = [f"{first}, horizontal bars of the bytes each rank sent per step under each comm hook ({modes}), of a "
           f"{int(rec.meta['message_bytes']):,}-byte gradient. {second}, on a log scale, the relative error of each "
           "compressing hook's averaged gradient against the exact average at every compressed step", title_of(fig)]
    return caption(wrap_titles(fig), [f"Measured: {rec.describe()}", *lift_notes(fig)], alt=alt)


def figure_cheaper_sync_loss(rec) -> Figure:
    """Loss against steps under each hook, and its gap to the plain all-reduce's."""
    fig = figure((6.8, 8.4))
    top, bottom = fig.subplots(2, 1, height_ratios=(1, 1))
    fig.subplots_adjust(left=0.15, right=0.97, top=0.88, bottom=0.2, hspace=0.5)
    plot_hook_loss(rec, ax=top, title="Loss against steps, same θ0, same batches")
    top.get_legend().remove()  # one legend, under the lower panel, for both
    plot_hook_loss(rec, gap=True, ax=bottom, title="The same, minus the plain all-reduce's loss")
    legend_below(bottom, gap=0.55, ncol=2, fontsize=9)
    fig.suptitle(claims.compression_loss_title(rec), fontsize=12, x=0.01, y=0.99, ha="left", va="top")
    first, second = panel_places(top, bottom)
    alt = [f"{first}, line charts of the loss over {rec.steps} steps under each comm hook, lying on one another. "
           f"{second}, each compressing hook's loss minus the plain all-reduce's loss, step by step", title_of(fig)]
    return caption(wrap_titles(fig), [f"Measured: {rec.describe()}", *lift_notes(fig)], alt=alt)


def figure_cheaper_sync_local_sgd(rec) -> Figure:
    """Local SGD: loss against examples and against all-reduces, and the replicas' drift between averages."""
    fig = figure((6.8, 11.2))
    a, b, c = fig.subplots(3, 1, height_ratios=(1, 1, 1.1))
    fig.subplots_adjust(left=0.14, right=0.97, top=0.9, bottom=0.12, hspace=0.75)
    plot_local_loss(rec, x="examples", ax=a, title="Loss against examples")
    a.get_legend().remove()
    plot_local_loss(rec, x="all_reduces", ax=b, title="Loss against all-reduces (after each one)")
    legend_below(b, gap=0.55, ncol=2, fontsize=9)
    plot_drift(rec, ax=c, title=claims.drift_title(rec))
    legend_below(c, gap=0.55, ncol=2, fontsize=9)
    fig.suptitle(claims.local_sgd_title(rec), fontsize=12, x=0.01, y=0.995, ha="left", va="top")
    H = ", ".join(str(int(h)) for h in rec.period)
    first, second, third = panel_places(a, b, c)
    alt = [f"{first} and {second.lower()}, line charts of the mean loss of plain data parallelism and of local SGD at "
           f"H = {H}, against examples seen and against all-reduces made. {third}, the replicas' drift after every step, a "
           "sawtooth that rises during the local steps and drops to zero at each average, one line per H",
           title_of(fig)]
    return caption(wrap_titles(fig), [f"Measured: {rec.describe()}", *lift_notes(fig)], alt=alt)


def _priced_rows() -> dict:
    return {name: claims.priced_rows(name, k=compression.PRICED_K, group_size=compression.PRICED_GROUP, rank=compression.PRICED_RANK,
                                     period=compression.PRICED_PERIOD, t_compute=compression.PRICED_T_COMPUTE, M=compression.PRICED_M,
                                     shapes=compression.PRICED_SHAPES)
            for name in SPEED_ORDER}


def figure_cheaper_sync_two_levels(hier, comp) -> Figure:
    """Bytes per link in two levels against the flat ring; then every method priced, and what was timed here."""
    rows = _priced_rows()
    fig = figure((6.8, 13.0))
    a, b, c = fig.subplots(3, 1, height_ratios=(0.8, 2.6, 1.3))
    fig.subplots_adjust(left=0.3, right=0.95, top=0.9, bottom=0.05, hspace=0.42)
    plot_link_bytes(hier, ax=a, title=claims.two_levels_title(hier))
    legend_below(a, gap=0.5, ncol=2, fontsize=9)
    M_gb = compression.PRICED_M / 1e9
    plot_speedups(rows, k=compression.PRICED_K, ax=b,
                  title=f"Modeled: {compression.PRICED_LAYERS} layers of {compression.PRICED_WIDTH}×{compression.PRICED_WIDTH} "
                        f"(M = {M_gb:.2f} GB); two levels: NVLink inside groups of {compression.PRICED_GROUP}")
    t = np.median(hier.seconds, axis=0)
    step = np.median(comp.t_step, axis=(1, 2))
    labels = [f"step, {hook_label(m)}" for m in comp.mode] + [METHOD_LABELS[m] for m in METHODS]
    plot_times(labels, list(step) + list(t), ax=c,
               xlabel="median ms, measured here (shared memory, not a network)",
               title=f"Measured here: a step per hook (k = {comp.k}); an all-reduce of "
                     f"{int(hier.meta['timed_size']):,} values (k = {hier.k})")
    fig.suptitle(claims.priced_title(rows, k=compression.PRICED_K), fontsize=12, x=0.01, y=0.995, ha="left", va="top")
    first, second, third = panel_places(a, b, c)
    alt = [f"{first}, bars of the bytes sent inside groups and between groups by the two-level all-reduce and the flat "
           f"ring over k = {hier.k} ranks. {second}, the modeled speedup S on k = {compression.PRICED_K} for the plain ring, "
           "fp16, PowerSGD, local SGD and two levels, one group of bars per link preset (NVLink, 100 Gb "
           f"InfiniBand, 10 Gb Ethernet). {third}, bars of the median times measured on this machine", title_of(fig)]
    notes = [f"Measured: {hier.describe()}", comp.describe(), _cores(hier), _cores(comp),
             f"Modeled: T_compute = {compression.PRICED_T_COMPUTE:g} s on one device, α and β of dpviz.topics.ground_floor.links",
             *lift_notes(fig)]
    return caption(wrap_titles(fig), [n for n in notes if n], alt=alt)


def figure_cheaper_sync_measured(comp, local, local_k1) -> Figure:
    """S measured here for every hook and every H against one rank's step; the step times it comes from."""
    rows = claims.measured_rows(comp, local, local_k1)
    k = comp.k
    fig = figure((6.8, 10.2))
    top, bottom = fig.subplots(2, 1, height_ratios=(1.25, 1.15))
    fig.subplots_adjust(left=0.32, right=0.95, top=0.9, bottom=0.05, hspace=0.55)
    plot_measured_speedups(rows, k=k, ax=top,
                           title=f"S = k · T_step(1) / T_step(k), b = {comp.meta['b']} per rank (measured)")
    legend_below(top, gap=0.5, ncol=1, fontsize=9)
    prefix = {"DDP comm hook": "DDP", "hand-written loop": "loop"}
    labels = ["k = 1, forward and backward"] + [f"{prefix[row['family']]}, {row['label']}" for row in rows]
    plot_times(labels, [rows[0]["t_one"]] + [row["t_step"] for row in rows], ax=bottom, color=LAVENDER,
               xlabel="median ms per step, measured here (forward, backward, sync)",
               title=f"T_step: one rank, then k = {k} ranks")
    fig.suptitle(claims.measured_title(comp, local, local_k1), fontsize=12, x=0.01, y=0.995, ha="left", va="top")
    hooks = ", ".join(row["label"] for row in rows if row["family"] == "DDP comm hook")
    first, second = panel_places(top, bottom)
    alt = [f"{first}, horizontal bars of the speedup S measured on this machine with k = {k} ranks for each DDP comm hook "
           f"({hooks}) and for plain data parallelism and local SGD at each H in a hand-written loop, a dashed line "
           f"at the ideal S = k, and hollow diamonds where {course.ref('speedup_model')}'s formula, fed the measured "
           "one-rank step and "
           f"all-reduce, puts S. {second}, bars of the median step times they come from, the one-rank step first",
           title_of(fig)]
    notes = [f"Measured: {comp.describe()}", local.describe(), local_k1.describe(), _cores(comp), _cores(local),
             "Modeled: the diamonds, S = k·T_step(1)/(T_step(1) + T_comm), T_comm measured", *lift_notes(fig)]
    return caption(wrap_titles(fig), [n for n in notes if n], alt=alt)


def draw(records: dict) -> dict:
    """Each figure of the group as (Figure, the records it came from)."""
    comp, local = records["cheaper_sync_compression"], records["cheaper_sync_local_sgd"]
    local_k1, hier = records["cheaper_sync_local_sgd_k1"], records["cheaper_sync_hierarchical"]
    return {
        "cheaper_sync_bytes": (figure_cheaper_sync_bytes(comp), [comp]),
        "cheaper_sync_loss": (figure_cheaper_sync_loss(comp), [comp]),
        "cheaper_sync_local_sgd": (figure_cheaper_sync_local_sgd(local), [local]),
        "cheaper_sync_two_levels": (figure_cheaper_sync_two_levels(hier, comp), [hier, comp]),
        "cheaper_sync_measured": (figure_cheaper_sync_measured(comp, local, local_k1), [comp, local, local_k1]),
    }


GROUP = FigureGroup(name="cheaper_sync", plan=FIGURE_PLAN, draw=draw, claims=claims.figure_claims)
