"""Regenerate every figure of the notes from fresh runs on this machine.

    python -m dpviz figures            # or ./run: figures/*.png, figures/*.svg, figures/manifest.json

Each figure is drawn by one dpviz plot function from data recorded here and now:
real runs of k processes, the all-reduce benchmark, the hand-written ring's
schedule. ``manifest.json`` (and ``MANIFEST.md``, for people) says which run
made each figure: k, b, backend, host, cores and date.
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from tqdm.auto import tqdm

from dpviz import landscape, schedule, timing
from dpviz.bench import BenchConfig, log_sizes, run_sweep
from dpviz.data import line_data
from dpviz.launch import cpu_count
from dpviz.plots.bench import plot_allreduce_times
from dpviz.plots.speedup import plot_speedup
from dpviz.plots.step1 import plot_loss_along
from dpviz.plots.step2 import plot_example_grads
from dpviz.plots.step3 import plot_big_average, plot_group_averages
from dpviz.plots.step4 import plot_devices
from dpviz.plots.step5 import plot_all_reduce, plot_parameter_server, plot_replica_params, plot_ring_schedule
from dpviz.plots.summary import plot_summary
from dpviz.plots.timeline import plot_timelines
from dpviz.training import record_run

MLP_KS = (1, 2, 4)  # process counts whose step times feed s01 and s02
# one thread per rank, so k=1 is a fair baseline; a batch big enough that compute is worth splitting
MLP = dict(model="mlp", width=64, depth=2, global_batch=4096, dataset_size=4096, steps=6, threads=1)
SCHEDULE_ELEMENTS = 12  # a tensor of 12 float32: 4 chunks of 3 for k = 4


@dataclass
class Inputs:
    """Everything the figures are drawn from, recorded fresh."""

    main: object      # Run: line model, k=4, all-reduce on
    alone: object     # Run: the same, all-reduce off
    biased: object    # Run: k=1, a biased grab
    mlp: dict         # {k: Run} for step times
    bench: object     # BenchRecord
    ring: dict        # schedule.record_schedule(..., impl="ring")
    server: dict      # schedule.record_schedule(..., impl="parameter_server")


def record_inputs(*, quick: bool = False, progress: bool = True) -> Inputs:
    """Record every run the figures need; a progress bar follows the stages."""
    sizes = log_sizes(1 << 12, 4 << 20, 4) if quick else log_sizes(1 << 10, 16 << 20, 7)
    stages = [
        ("line model, k=4", lambda: record_run(k=4, b=8, steps=5)),
        ("line model, k=4, all-reduce off", lambda: record_run(k=4, b=8, steps=5, all_reduce=False)),
        ("line model, k=1, biased grab", lambda: record_run(k=1, b=16, steps=1, sampling="biased")),
        *[(f"MLP, k={k}", lambda k=k: record_run(k=k, **MLP)) for k in MLP_KS],
        ("all-reduce sweep", lambda: run_sweep(
            BenchConfig(ks=(2, 4), sizes=sizes, impls=("all_reduce",), repeats=3 if quick else 5), progress=False)),
        ("ring schedule, k=4", lambda: schedule.record_schedule(4, SCHEDULE_ELEMENTS, impl="ring")),
        ("parameter-server schedule, k=4", lambda: schedule.record_schedule(4, SCHEDULE_ELEMENTS, impl="parameter_server")),
    ]
    done = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # k > cores: every figure that shows such a time says so itself
        for name, make in tqdm(stages, desc="recording", unit="run", disable=not progress):
            done.append(make())
    main, alone, biased, *rest = done
    mlp = dict(zip(MLP_KS, rest[: len(MLP_KS)]))
    bench, ring, server = rest[len(MLP_KS):]
    return Inputs(main, alone, biased, mlp, bench, ring, server)


def draw_all(inputs: Inputs) -> dict:
    """Each figure as (Figure, the records it came from); one plot call per panel."""
    run, figs = inputs.main, {}
    x, y = line_data()

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    plot_loss_along(landscape.step1_data(x, y, eta=0.1), ax=ax)
    figs["step1_loss"] = (fig, ["line model in one process, all 512 points"])

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 5.2))
    plot_example_grads(run, ax=a)
    plot_example_grads(inputs.biased, ax=b, reference=landscape.full_grad(x, y, inputs.biased.params[0, 0]))
    figs["step2_gradients"] = (fig, [run, inputs.biased])

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 5.2))
    plot_big_average(run, ax=a)
    plot_group_averages(run, ax=b)
    figs["step3_average_of_averages"] = (fig, [run])

    fig, ax = plt.subplots(figsize=(11, 5))
    plot_devices(run, ax=ax)
    figs["step4_devices"] = (fig, [run])

    fig, ax = plt.subplots(figsize=(11, 6))
    plot_all_reduce(run, ax=ax)
    figs["step5_all_reduce"] = (fig, [run])

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.8))
    plot_replica_params(run, ax=a)
    plot_replica_params(inputs.alone, ax=b)
    figs["step5_replicas"] = (fig, [run, inputs.alone])

    fig, (a, b) = plt.subplots(1, 2, figsize=(16, 6), width_ratios=(1.5, 1))
    plot_ring_schedule(inputs.ring, ax=a)
    plot_parameter_server(inputs.server, ax=b)
    figs["step5_ring_vs_parameter_server"] = (fig, [inputs.ring, inputs.server])

    fig, ax = plt.subplots(figsize=(9, 4.6))
    plot_timelines(timing.machine_timelines(inputs.mlp, inputs.bench), ax=ax)
    figs["s01_sync_timelines"] = (fig, [*inputs.mlp.values(), inputs.bench])

    fig, ax = plt.subplots(figsize=(8, 5.5))
    t_compute = timing.measured_step_times(inputs.mlp)[1].t_compute
    curves = timing.speedup_curves(np.arange(1, 65), t_compute=t_compute, m=timing.grad_bytes(inputs.mlp[1]))
    plot_speedup(curves, measured=timing.measured_speedup(inputs.mlp), ax=ax)
    figs["s02_speedup"] = (fig, [*inputs.mlp.values()])

    fig, ax = plt.subplots(figsize=(8.5, 5.5))
    plot_allreduce_times(inputs.bench, ax=ax)
    figs["allreduce_time_vs_size"] = (fig, [inputs.bench])

    fig, ax = plt.subplots(figsize=(10, 10))
    plot_summary(run, ax=ax)
    figs["summary"] = (fig, [run])
    return figs


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
        (folder / f"schedule_{sched['impl']}.json").write_text(json.dumps(sched, default=_plain, indent=1) + "\n")


def load_inputs(folder="figures/records") -> Inputs:
    """The records :func:`regenerate` saved: ``load_inputs().mlp[2]`` is the k=2 MLP run behind figure s01."""
    from dpviz.bench import BenchRecord
    from dpviz.record import Run

    folder = Path(folder)
    runs = {attr: Run.load(folder / name) for attr, name in RUN_FILES.items()}
    mlp = {k: Run.load(folder / f"mlp_k{k}") for k in MLP_KS}
    schedules = []
    for impl in ("ring", "parameter_server"):
        path = folder / f"schedule_{impl}.json"
        if not path.is_file():
            raise FileNotFoundError(f"path {str(path)!r} does not exist; run `python -m dpviz figures` to record it.")
        sched = json.loads(path.read_text())
        for key in ("bytes_sent", "bytes_received", "inputs", "results", "all_reduce"):
            sched[key] = np.asarray(sched[key])
        schedules.append(sched)
    return Inputs(mlp=mlp, bench=BenchRecord.load(folder / "bench"), ring=schedules[0], server=schedules[1], **runs)


def provenance(source) -> dict:
    """What made a figure: a run, a benchmark, a schedule, or a plain description."""
    if isinstance(source, str):
        return {"source": source}
    meta = source["meta"] if isinstance(source, dict) else source.meta
    keys = ("k", "b", "model", "optimizer", "all_reduce", "sampling", "threads_per_rank", "ks", "backend", "device",
            "host", "cores", "torch_version", "date")
    entry = {key: meta[key] for key in keys if key in meta}
    if isinstance(source, dict):
        entry.update(kind=f"{source['impl']} schedule", k=source["k"], message_bytes=source["message_bytes"])
    elif hasattr(source, "describe"):
        entry["describe"] = source.describe()
    return entry


def regenerate(out="figures", *, quick: bool = False, progress: bool = True, records=None) -> list[Path]:
    """Record fresh runs, draw every figure to ``out`` as PNG and SVG, write the manifest; prints what it did.

    With ``records`` (a folder that an earlier call saved), nothing is recorded: the figures are
    drawn again from those records, for example after a change of style.
    """
    start = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if records is None:
        inputs = record_inputs(quick=quick, progress=progress)
        save_inputs(inputs, out / "records")
    else:
        inputs = load_inputs(records)
    recorded = time.perf_counter() - start
    written, manifest = [], {}
    for name, (fig, sources) in draw_all(inputs).items():
        for suffix in ("png", "svg"):
            path = out / f"{name}.{suffix}"
            with plt.rc_context({"svg.hashsalt": name}):  # stable element ids: an unchanged figure, an unchanged file
                fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Date": None} if suffix == "svg" else None)
            written.append(path)
        plt.close(fig)
        manifest[name] = {"files": [f"{name}.png", f"{name}.svg"], "made_from": [provenance(s) for s in sources]}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True, default=_plain) + "\n")
    (out / "MANIFEST.md").write_text(manifest_markdown(manifest))
    total = time.perf_counter() - start
    print(verified(inputs))
    print(f"wrote {len(written)} files for {len(manifest)} figures to {out}/ in {total:.1f} s "
          f"(recording {recorded:.1f} s, drawing {total - recorded:.1f} s) on {cpu_count()} cores")
    return written


def verified(inputs: Inputs) -> str:
    """The claims checked on the runs behind the figures, as lines for the terminal."""
    lines = [f"line model, k=4: {inputs.main.check()}"]
    differ = int((~inputs.alone.replicas_identical()).sum())
    lines.append(f"all-reduce off: replicas differ in {differ} of {inputs.alone.steps + 1} recorded states")
    for k, run in inputs.mlp.items():
        lines.append(f"MLP, k={k}: {run.check()}")
    for sched in (inputs.ring, inputs.server):
        assert sched["equal"], f"the hand-written {sched['impl']} differs from dist.all_reduce"
        lines.append(f"{sched['impl']} by hand, k={sched['k']}: bit-identical to dist.all_reduce")
    fits = inputs.bench.fits()
    lines.append("all-reduce fits (median relative error): " + ", ".join(f"{f}: {fit.median_rel_err:.0%}" for f, fit in fits.items()))
    return "\n".join(lines)


def manifest_markdown(manifest: dict) -> str:
    lines = ["# Figures and the runs that made them", "",
             "Regenerate with `./run` (or `python -m dpviz figures`). Each figure is drawn from data recorded on the",
             "machine named below, at the date given; the records themselves are in `records/`",
             "(`dpviz.figures.load_inputs()` loads them).", "", "| figure | made from |", "| --- | --- |"]
    for name, entry in manifest.items():
        made = "<br>".join(s.get("describe") or s.get("source") or _short(s) for s in entry["made_from"])
        lines.append(f"| [{name}]({name}.png) | {made} |")
    return "\n".join(lines) + "\n"


def _short(entry: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in entry.items() if k in ("kind", "k", "ks", "backend", "host", "cores", "date"))


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (tuple, set)):
        return list(value)
    raise TypeError(f"cannot write {type(value).__name__} to the manifest")
