"""Regenerate every figure of the notes from fresh runs on this machine (what ``./run`` does).

    python -m dpviz figures            # figures/*.png, figures/*.svg, figures/manifest.json, figures/MANIFEST.md

Records every run the figures need (:mod:`dpviz.runs.figure_inputs`), saves the records in
``figures/records/``, draws each figure with its ``dpviz.figures.figure_<name>`` function,
and writes a manifest saying which run made each figure: k, b, backend, host, cores and date.
"""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path

import matplotlib as mpl

from dpviz.figures import GROUPS, FigureGroup, draw_all
from dpviz.records import load, provenance
from dpviz.records.figure_set import Inputs, load_inputs, save_inputs


def regenerate(out="figures", *, quick: bool = False, progress: bool = True, records=None) -> list[Path]:
    """Record fresh runs, draw every figure to ``out`` as PNG and SVG, write the manifest; prints what it did.

    With ``records`` (a folder that an earlier call saved), nothing is recorded: the figures are
    drawn again from those records, for example after a change of style.
    """
    start = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if records is None:
        from dpviz.runs.figure_inputs import record_inputs  # torch only when recording

        inputs = record_inputs(quick=quick, progress=progress)
        save_inputs(inputs, out / "records")
        chapters = {group.name: _record_group(group, out / "records", quick, progress) for group in GROUPS}
    else:
        inputs = load_inputs(records)
        chapters = {group.name: {stem: load(Path(records) / stem) for stem in group.stems} for group in GROUPS}
    recorded = time.perf_counter() - start
    written, manifest = [], {}
    drawn = draw_all(inputs)
    for group in GROUPS:
        drawn.update(group.draw(chapters[group.name]))
    for name, (fig, sources) in drawn.items():
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
    for group in GROUPS:
        if group.verify is not None:
            print(group.verify(chapters[group.name]))
    print(f"wrote {len(written)} files for {len(manifest)} figures to {out}/ in {total:.1f} s "
          f"(recording {recorded:.1f} s, drawing {total - recorded:.1f} s) on {inputs.main.meta['cores']} cores")
    return written


def _record_group(group: FigureGroup, folder: Path, quick: bool, progress: bool) -> dict:
    """Run a chapter group's recording function (in dpviz.runs) and save what it returns under ``folder``."""
    module, function = group.record.split(":")
    records = getattr(importlib.import_module(module), function)(quick=quick, progress=progress)
    if set(records) != set(group.stems):
        raise RuntimeError(f"{group.record} returned records {sorted(records)}; group {group.name!r} declares {sorted(group.stems)}.")
    for stem, record in records.items():
        record.save(folder / stem)
    return records


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
