"""The speedup model's figures: s01's sync timelines and s02's speedup curves, from the derivation's records."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from dpviz.topics.speedup_model import claims as cost_claims
from dpviz.engine.layout import caption, lift_notes, new_figure, title_of, wrap_titles
from dpviz.topics.speedup_model.plots_speedup import GIDS as speedup_gids
from dpviz.topics.speedup_model.plots_speedup import plot_speedup
from dpviz.topics.speedup_model.plots_timeline import plot_timelines
from dpviz.topics.speedup_model.records import BenchRecord
from dpviz.topics.ground_floor import timing
from dpviz.topics.ground_floor.links import SPEED_ORDER


def figure_s01_sync_timelines(mlp: dict, bench: BenchRecord) -> Figure:
    """S01: compute and sync per step for each k, measured with the same threads per rank, beside the model fitted here.

    The title is :func:`dpviz.topics.speedup_model.claims.s01_title`: compute shrinks as 1/k where the measured rows with a
    core per rank show it (with fewer than two such rows, or on a busy machine, it says what they show), and the
    sync does not shrink where every row drawn shows it (a modeled row prices the exchange alone and can come
    out below a measured one, which also waited; then the title says that instead).
    """
    threads = cost_claims.threads_per_rank(mlp)  # k = 1 with other threads than k = 2 is not its baseline
    times = timing.measured_step_times(mlp)
    run = mlp[min(mlp)]
    meta, cores = run.meta, int(run.meta["cores"])
    rows = timing.machine_timelines(mlp, bench)
    title = cost_claims.s01_title(times, rows, cores=cores)  # only what the claims found on these rows
    fit = bench.fit("ring")
    modeled = [row.k for row in rows if row.source == timing.MODELED]
    ks = ", ".join(map(str, sorted(mlp)))
    note = (f"{timing.MEASURED}: MLP {meta['depth']}×{meta['width']} ({meta['n_params']:,} parameters), global batch "
            f"{times[min(times)].global_batch} split over k = {ks} ranks, {threads} intra-op thread per rank at every k, "
            f"median of steps 2-{run.steps} over ranks; {meta['backend']} on {meta['host']}, {cores} cores, "
            f"{str(meta['date'])[:10]}")
    if modeled:
        note += (f"\n{timing.MODELED} (hatched): k = {', '.join(map(str, modeled))}, T_compute from k = 1, "
                 f"M = {timing.grad_bytes(run):,} bytes, ring with α = {fit.alpha * 1e6:.3g} µs, "
                 f"β = {fit.beta / 1e9:.3g} GB/s fitted to this machine's all-reduce times (the fastest call at each size)")
    fig, ax = new_figure((6.6, 4.4))
    plot_timelines(rows, ax=ax, title=title, note=note, fontsize=10)
    alt = (f"Horizontal stacked bars, one per k ({', '.join(str(row.k) for row in rows)}): compute then sync time of "
           f"one training step, " + "; ".join(f"k = {row.k} {row.source} {row.t_compute * 1e3:.3g} ms compute + "
                                               f"{row.t_comm * 1e3:.3g} ms sync" for row in rows) + f". {title_of(fig, ax)}")
    return caption(wrap_titles(fig), lift_notes(fig), alt=alt)


def figure_s01_modeled(rows, *, note: str) -> Figure:
    """Figure s01 from the cost model alone: ``rows`` are ``timing.timeline_rows(...)``, ``note`` says what was
    assumed (T_compute, M, the link); every bar is hatched as modeled, and ``note`` goes under the figure."""
    fig, ax = new_figure((9, 4.6))
    plot_timelines(rows, ax=ax, note=note)
    return caption(fig, lift_notes(fig))


def figure_s02_speedup(mlp: dict, bench: BenchRecord) -> Figure:
    """S02: speedup against k for three links and for this machine's fitted link, all for the measured runs' workload.

    Every curve uses the runs' own T_compute (their k = 1 step) and M (their gradient), so the measured
    points sit on the dash-dotted curve of this machine's fitted α, β, not on another workload's curve.
    The title's claim (a slower link peels away from S = k sooner) is asserted on the curves drawn.
    """
    cost_claims.threads_per_rank(mlp)
    ks = np.arange(1, 65)
    workload = timing.measured_workload(mlp)
    curves = timing.speedup_curves(ks, t_compute=workload.t_compute, M=workload.M)
    here = timing.link_from_fit(bench.fit("ring"), name="this machine, fitted",
                                measured_on=f"{bench.meta.get('host')}, {bench.meta.get('cores')} cores")
    own = timing.speedup_curves(ks, t_compute=workload.t_compute, M=workload.M, links=[here])
    fig, ax = new_figure((6.6, 5.6))
    plot_speedup(curves, measured=timing.measured_speedup(mlp), measured_model=own, ax=ax, fontsize=10)
    ax.set_title(ax.get_title(loc="left"), fontsize=11, loc="left")
    drawn = {line.get_gid().split(":", 1)[1]: line for line in ax.lines
             if (line.get_gid() or "").startswith(speedup_gids["link"] + ":")}
    cost_claims.slower_peels_sooner(drawn[SPEED_ORDER[0]].get_xdata(),
                                    {name: drawn[name].get_ydata() for name in SPEED_ORDER})
    measured = timing.measured_speedup(mlp)
    alt = (f"Line chart of speedup S against k devices, 1 to {ks[-1]}: a dashed ideal line S = k and one modeled "
           f"curve per link ({', '.join(SPEED_ORDER)}), the slower ones bending away from S = k sooner, and this "
           f"machine's measured points ({_speedup_words(measured)}) on the curve of its fitted link. {title_of(fig, ax)}")
    return caption(wrap_titles(fig), [*lift_notes(fig), f"Runs of {run_dates(mlp, bench)}"], alt=alt)


def _speedup_words(measured) -> str:
    """The measured speedups as ``S(2) = 1.8, S(4) = 2.1``, whatever form ``timing.measured_speedup`` returns."""
    return ", ".join(f"S({k}) = {s:.2g}" for k, s in zip(measured.k.tolist(), measured.speedup.tolist()) if k > 1)


def run_dates(mlp: dict, bench: BenchRecord) -> str:
    """When and where the runs behind a figure were recorded, in words: ``vm, 2 cores, 2026-11-30``."""
    meta = bench.meta
    dates = sorted({str(r.meta["date"])[:10] for r in [*mlp.values(), bench]})
    return f"{meta.get('backend')} on {meta.get('host')}, {meta.get('cores')} cores, {', '.join(dates)}"
