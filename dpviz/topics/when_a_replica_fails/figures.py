"""The chapter's figures, drawn from its shipped records (:mod:`dpviz.topics.when_a_replica_fails.run_shipped`):
the loss through failures and restarts beside the unfailed run; the loss of a group that shrank and regrew; what each checkpoint interval lost, measured,
beside the model and Young/Daly's τ*; DiLoCo's loss and bytes beside local SGD's and plain data parallelism's.

The chapter's notebook calls each ``figure_*`` once; every title is a claim checked on the record it draws."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from dpviz.engine.layout import WIDTH, caption, legend_below, measured_lines, new_figure, title_of, wrap_titles
from dpviz.topics.when_a_replica_fails import claims, theory
from dpviz.topics.when_a_replica_fails.plots import (plot_carry_on_loss, plot_diloco_bytes, plot_diloco_loss,
                                                     plot_restart_loss, plot_young_daly)
from dpviz.topics.when_a_replica_fails.records import MODE_NAMES, MODES


def figure_restart(record) -> Figure:
    """The loss of every step through the failures over the unfailed run's; the redone steps shaded."""
    fig, ax = new_figure((WIDTH, 4.2))
    plot_restart_loss(record, ax=ax)
    ax.set_title(claims.restart_title(record), fontsize=11, loc="left")
    fig.subplots_adjust(left=0.1, right=0.98, top=0.82, bottom=0.3)
    legend_below(ax, gap=0.5, ncol=2)  # the kills' lines run the Axes' height: no room for a legend inside
    kills = "; ".join(f"Rank {int(r)} killed at step {int(s)}, restarted from step {int(c)} ({int(n)} "
                      f"step{'' if n == 1 else 's'} redone)"
                      for r, s, c, n in zip(record.kill_rank, record.kill_step, record.checkpoint_step,
                                            record.lost_steps))
    alt = (f"Line chart of the loss at each of {record.meta['steps']} steps: the unfailed run as a line, the run "
           f"through failures as dots on it. {kills}. {title_of(fig, ax)}")
    return caption(wrap_titles(fig), measured_lines([record]), alt=alt)


def young_daly_model(record) -> tuple:
    """(C from 1 to twice the largest recorded C, the modeled ms lost at each, τ* in steps), from the record's measured δ, step
    time and mean failures per run (:func:`dpviz.topics.when_a_replica_fails.theory.expected_waste`)."""
    every = np.arange(1, min(2 * int(record.every.max()), record.meta["steps"]) + 1)  # up to twice the largest C run
    seconds = theory.expected_waste(record.meta["steps"], every, record.meta["step_seconds"],
                                    record.meta["save_seconds"], float(np.mean(record.failures)))
    return every, 1e3 * seconds, record.young_daly_check().interval_steps()


def figure_young_daly(record) -> Figure:
    """Measured milliseconds lost to checkpoints and redone work at each C, beside the model and τ*."""
    every, modeled, tau = young_daly_model(record)
    fig, ax = new_figure((WIDTH, 4.6))
    plot_young_daly(record, every, modeled, tau, ax=ax)
    ax.set_title(claims.young_daly_title(record), fontsize=11, loc="left")
    fig.subplots_adjust(left=0.14, right=0.98, top=0.82, bottom=0.3)
    legend_below(ax, gap=0.55, ncol=2)  # τ* may fall anywhere along the axis
    lost = ", ".join(f"C = {int(e)}: {1e3 * w:.1f} ms" for e, w in zip(record.every, record.waste))
    alt = (f"Stacked bars, one per checkpoint interval C, of the milliseconds lost to checkpoints and to work done "
           f"again: {lost}; a dashed modeled curve beside them and a vertical line at Young/Daly's τ* = {tau:.1f} "
           f"steps. {title_of(fig, ax)}")
    model = (f"Modeled: δ = {1e3 * record.meta['save_seconds']:.2f} ms per save and "
             f"{1e3 * record.meta['step_seconds']:.2f} ms per step as measured, {np.mean(record.failures):g} failures")
    return caption(wrap_titles(fig), measured_lines([record]) + [model], alt=alt)


def figure_diloco(record) -> Figure:
    """The whole data set's loss every H steps (top) and the bytes each rank sent per step (bottom), per way to sync."""
    fig, (top, bottom) = new_figure((WIDTH, 6.2), nrows=2, gridspec_kw={"height_ratios": (3, 1.6)})
    plot_diloco_loss(record, ax=top)
    plot_diloco_bytes(record, ax=bottom)
    top.set_title(claims.diloco_title(record), fontsize=11, loc="left")
    bottom.set_title("Bytes per step", fontsize=10, loc="left")
    fig.subplots_adjust(left=0.24, right=0.97, top=0.9, bottom=0.09, hspace=0.5)
    sent = record.bytes_per_step()
    alt = (f"Two panels. Line chart of the whole data set's loss after every H = {record.meta['H']} steps: "
           + ", ".join(f"{MODE_NAMES[m]} from {record.full_loss[i, 0]:.3f} to {record.full_loss[i, -1]:.4f}"
                       for i, m in enumerate(MODES))
           + ". Bars of bytes per step: " + ", ".join(f"{MODE_NAMES[m]} {sent[m]:,.1f}" for m in MODES)
           + f". {title_of(fig, top)}")
    return caption(wrap_titles(fig), measured_lines([record]), alt=alt)


def figure_carry_on(record) -> Figure:
    """The loss of every step through the shrink and the regrow over the unfailed run's; the smaller group shaded."""
    fig, ax = new_figure((WIDTH, 4.2))
    plot_carry_on_loss(record, ax=ax)
    ax.set_title(claims.carry_on_title(record), fontsize=11, loc="left")
    fig.subplots_adjust(left=0.1, right=0.98, top=0.82, bottom=0.3)
    legend_below(ax, gap=0.5, ncol=3)
    m = record.meta
    alt = (f"Line chart of the loss at each of {m['steps']} steps: {m['k']} ranks without a failure as a line, the "
           f"run through the failure as dots, equal to it up to step {m['kill_step'] - 1}; steps {m['kill_step']} to "
           f"{m['regrow_at'] - 1} taken by {m['k'] - 1} ranks, shaded, then {m['k']} again. {title_of(fig, ax)}")
    return caption(wrap_titles(fig), measured_lines([record]), alt=alt)
