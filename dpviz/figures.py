"""Every published figure, one ``figure_<name>`` function each, drawn from records and theory.

The chapters and ``python -m dpviz figures`` call the same functions, so no layout is
written twice::

    from dpviz.figures import load_inputs, figure_step5_replicas
    inputs = load_inputs()                                   # the records behind figures/
    fig = figure_step5_replicas(inputs.main, inputs.alone)

:func:`regenerate` (what ``./run`` does) records fresh runs on this machine through
:mod:`dpviz.runs.figure_inputs`, draws every figure into ``figures/`` as PNG and SVG, and
writes ``manifest.json`` and ``MANIFEST.md`` saying which run made each one. This module
imports no torch: only :func:`regenerate` reaches the runs, and only when it records.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure

from dpviz.data import line_data
from dpviz.plots.bench import plot_allreduce_times
from dpviz.plots.speedup import plot_speedup
from dpviz.plots.step1 import plot_loss_along
from dpviz.plots.step2 import plot_example_grads
from dpviz.plots.step3 import plot_big_average, plot_group_averages
from dpviz.plots.step4 import plot_devices
from dpviz.plots.step5 import plot_all_reduce, plot_parameter_server, plot_replica_params, plot_ring_schedule
from dpviz.plots.summary import plot_summary
from dpviz.plots.timeline import plot_timelines
from dpviz.records import BenchRecord, Run, Schedule, provenance
from dpviz.theory import landscape, timing

MLP_KS = (1, 2, 4)  # process counts whose step times feed s01 and s02


@dataclass
class Inputs:
    """Every record the figures are drawn from."""

    main: Run             # line model, k=4, all-reduce on
    alone: Run            # the same, all-reduce off
    biased: Run           # k=1, a biased grab
    mlp: dict             # {k: Run} for step times, one thread per rank
    bench: BenchRecord    # the all-reduce sweep
    ring: Schedule        # the hand-written ring's transfers
    server: Schedule      # the parameter server's transfers


def _figure(figsize, ncols=1, **kwargs):
    fig = Figure(figsize=figsize)
    axes = fig.subplots(1, ncols, **kwargs)
    return fig, axes


def figure_step1_loss(eta: float = 0.1) -> Figure:
    """Step 1: the loss along one knob of the line model on all 512 points, the red dot, the arrow and a few steps."""
    x, y = line_data()
    fig, ax = _figure((7.5, 4.8))
    plot_loss_along(landscape.step1_data(x, y, eta=eta), ax=ax)
    return fig


def figure_step2_gradients(run: Run, biased: Run) -> Figure:
    """Step 2: per-example gradients and their mean, a random grab beside a biased one."""
    x, y = line_data()
    fig, (a, b) = _figure((12, 5.2), 2)
    plot_example_grads(run, ax=a)
    plot_example_grads(biased, ax=b, reference=landscape.full_grad(x, y, biased.params[0, 0]))
    return fig


def figure_step3_average_of_averages(run: Run) -> Figure:
    """Step 3: all b·k arrows averaged at once beside the mean of the k group means."""
    fig, (a, b) = _figure((12, 5.2), 2)
    plot_big_average(run, ax=a)
    plot_group_averages(run, ax=b)
    return fig


def figure_step4_devices(run: Run) -> Figure:
    """Step 4: k device boxes, one θ, different slices, different arrows."""
    fig, ax = _figure((11, 5))
    plot_devices(run, ax=ax)
    return fig


def figure_step5_all_reduce(run: Run) -> Figure:
    """Step 5: the k arrows funnelling into the all-reduce and the one mean coming back."""
    fig, ax = _figure((11, 6))
    plot_all_reduce(run, ax=ax)
    return fig


def figure_step5_replicas(run: Run, alone: Run) -> Figure:
    """Step 5: every replica's parameters with the all-reduce, beside the same run without it."""
    fig, (a, b) = _figure((12, 4.8), 2)
    plot_replica_params(run, ax=a)
    plot_replica_params(alone, ax=b)
    return fig


def figure_step5_ring_vs_parameter_server(ring: Schedule, server: Schedule) -> Figure:
    """Step 5: the ring's transfers chunk by chunk, beside the parameter server's star."""
    fig, (a, b) = _figure((16, 6), 2, width_ratios=(1.5, 1))
    plot_ring_schedule(ring, ax=a)
    plot_parameter_server(server, ax=b)
    return fig


def figure_s01_sync_timelines(mlp: dict, bench: BenchRecord) -> Figure:
    """s01: compute and sync per step for each k, measured, beside the model fitted to this machine."""
    fig, ax = _figure((9, 4.6))
    plot_timelines(timing.machine_timelines(mlp, bench), ax=ax)
    return fig


def figure_s02_speedup(mlp: dict) -> Figure:
    """s02: speedup against k, modeled for three links, with this machine's measured points."""
    fig, ax = _figure((8, 5.5))
    t_compute = timing.measured_step_times(mlp)[1].t_compute
    curves = timing.speedup_curves(np.arange(1, 65), t_compute=t_compute, m=timing.grad_bytes(mlp[1]))
    plot_speedup(curves, measured=timing.measured_speedup(mlp), ax=ax)
    return fig


def figure_allreduce_time_vs_size(bench: BenchRecord) -> Figure:
    """Measured all-reduce time against M, with the notes' formula and the ring fitted."""
    fig, ax = _figure((8.5, 5.5))
    plot_allreduce_times(bench, ax=ax)
    return fig


def figure_summary(run: Run) -> Figure:
    """The whole story in one picture."""
    fig, ax = _figure((10, 10))
    plot_summary(run, ax=ax)
    return fig


def draw_all(inputs: Inputs) -> dict:
    """Each published figure as (Figure, the records it came from)."""
    mlp = [*inputs.mlp.values()]
    return {
        "step1_loss": (figure_step1_loss(), ["line model in one process, all 512 points (numpy)"]),
        "step2_gradients": (figure_step2_gradients(inputs.main, inputs.biased), [inputs.main, inputs.biased]),
        "step3_average_of_averages": (figure_step3_average_of_averages(inputs.main), [inputs.main]),
        "step4_devices": (figure_step4_devices(inputs.main), [inputs.main]),
        "step5_all_reduce": (figure_step5_all_reduce(inputs.main), [inputs.main]),
        "step5_replicas": (figure_step5_replicas(inputs.main, inputs.alone), [inputs.main, inputs.alone]),
        "step5_ring_vs_parameter_server": (figure_step5_ring_vs_parameter_server(inputs.ring, inputs.server),
                                           [inputs.ring, inputs.server]),
        "s01_sync_timelines": (figure_s01_sync_timelines(inputs.mlp, inputs.bench), [*mlp, inputs.bench]),
        "s02_speedup": (figure_s02_speedup(inputs.mlp), mlp),
        "allreduce_time_vs_size": (figure_allreduce_time_vs_size(inputs.bench), [inputs.bench]),
        "summary": (figure_summary(inputs.main), [inputs.main]),
    }


RUN_FILES = {"main": "line_k4", "alone": "line_k4_no_all_reduce", "biased": "line_k1_biased"}


def save_inputs(inputs: Inputs, folder) -> None:
    """Keep the records behind the figures beside them, so chapters and readers can load the same data."""
    folder = Path(folder)
    for attr, name in RUN_FILES.items():
        getattr(inputs, attr).save(folder / name)
    for k, run in inputs.mlp.items():
        run.save(folder / f"mlp_k{k}")
    inputs.bench.save(folder / "bench")
    for sched in (inputs.ring, inputs.server):
        sched.save(folder / f"schedule_{sched.impl}")


def load_inputs(folder="figures/records") -> Inputs:
    """The records :func:`regenerate` saved: ``load_inputs().mlp[2]`` is the k=2 MLP run behind figure s01."""
    folder = Path(folder)
    runs = {attr: Run.load(folder / name) for attr, name in RUN_FILES.items()}
    return Inputs(
        mlp={k: Run.load(folder / f"mlp_k{k}") for k in MLP_KS},
        bench=BenchRecord.load(folder / "bench"),
        ring=Schedule.load(folder / "schedule_ring"),
        server=Schedule.load(folder / "schedule_parameter_server"),
        **runs,
    )


def regenerate(out="figures", *, quick: bool = False, progress: bool = True, records=None) -> list[Path]:
    """Record fresh runs, draw every figure to ``out`` as PNG and SVG, write the manifest; prints what it did.

    With ``records`` (a folder that an earlier call saved), nothing is recorded: the figures are
    drawn again from those records, for example after a change of style.
    """
    start = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if records is None:
        from dpviz.runs.figure_inputs import record_inputs  # the torch side, only when recording

        inputs = record_inputs(quick=quick, progress=progress)
        save_inputs(inputs, out / "records")
    else:
        inputs = load_inputs(records)
    recorded = time.perf_counter() - start
    written, manifest = [], {}
    for name, (fig, sources) in draw_all(inputs).items():
        for suffix in ("png", "svg"):
            path = out / f"{name}.{suffix}"
            with mpl.rc_context({"svg.hashsalt": name}):  # stable element ids: an unchanged figure, an unchanged file
                fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Date": None} if suffix == "svg" else None)
            written.append(path)
        manifest[name] = {"files": [f"{name}.png", f"{name}.svg"], "made_from": [provenance(s) for s in sources]}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    (out / "MANIFEST.md").write_text(manifest_markdown(manifest))
    total = time.perf_counter() - start
    print(verified(inputs))
    print(f"wrote {len(written)} files for {len(manifest)} figures to {out}/ in {total:.1f} s "
          f"(recording {recorded:.1f} s, drawing {total - recorded:.1f} s) on {inputs.main.meta['cores']} cores")
    return written


def verified(inputs: Inputs) -> str:
    """The claims checked on the runs behind the figures, as lines for the terminal."""
    lines = [f"line model, k=4: {inputs.main.check()}"]
    differ = int((~inputs.alone.replicas_identical()).sum())
    lines.append(f"all-reduce off: replicas differ in {differ} of {inputs.alone.steps + 1} recorded states")
    for k, run in inputs.mlp.items():
        lines.append(f"MLP, k={k}: {run.check()}")
    for sched in (inputs.ring, inputs.server):
        assert sched.equal, f"the hand-written {sched.impl} differs from dist.all_reduce"
        lines.append(f"{sched.impl} by hand, k={sched.k}: bit-identical to dist.all_reduce")
    fits = inputs.bench.fits()
    lines.append("all-reduce fits (median relative error): " + ", ".join(f"{f}: {fit.median_rel_err:.0%}" for f, fit in fits.items()))
    return "\n".join(lines)


def manifest_markdown(manifest: dict) -> str:
    lines = ["# Figures and the runs that made them", "",
             "Regenerate with `./run` (or `python -m dpviz figures`). Each figure is drawn from data recorded on the",
             "machine named below, at the date given; the records themselves are in `records/`",
             "(`dpviz.figures.load_inputs()` loads them).", "", "| figure | made from |", "| --- | --- |"]
    for name, entry in manifest.items():
        made = "<br>".join(s.get("describe") or s.get("source") for s in entry["made_from"])
        lines.append(f"| [{name}]({name}.png) | {made} |")
    return "\n".join(lines) + "\n"
