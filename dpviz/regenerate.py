"""Regenerate every figure of the notes from fresh runs on this machine (what ``./run`` does).

    python -m dpviz figures            # figures/*.png, figures/*.svg, figures/manifest.json, figures/MANIFEST.md

One pass downward: for each figure group of :data:`dpviz.figures.GROUPS`, its plan (records layer) says
which records it needs, the torch layer's recipe of the same name (:data:`dpviz.runs.recipes.RECIPES`)
records them into ``figures/records/``, the group draws each figure, and its claims are checked and
printed. A manifest says which run made each figure (k, b, backend, host, cores and date) and gives the
caption a chapter prints under it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import matplotlib as mpl

from dpviz.figures import GROUPS
from dpviz.records import provenance
from dpviz.widgets.agg import FastCanvas


def regenerate(out="figures", *, quick: bool = False, progress: bool = True, records=None) -> list[Path]:
    """Record fresh runs, draw every figure to ``out`` as PNG and SVG, write the manifest; prints what it did.

    With ``records`` (a folder that an earlier call saved), nothing is recorded: the figures are
    drawn again from those records, for example after a change of style.
    """
    start = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plans = {group.plan.name: group.plan for group in GROUPS}  # two groups may draw from one plan
    if records is None:
        from dpviz.runs.recipes import RECIPES  # torch only when recording

        recorded = {}
        for name, plan in plans.items():
            recorded[name] = RECIPES[name](quick=quick, progress=progress)
            plan.check_recorded(recorded[name])
            for stem, record in recorded[name].items():
                record.save(out / "records" / stem)
    else:
        recorded = {name: plan.load(records) for name, plan in plans.items()}
    recording = time.perf_counter() - start
    written, manifest = [], {}
    for group in GROUPS:
        for name, (fig, sources) in group.draw(recorded[group.plan.name]).items():
            FastCanvas(fig)  # the PNG is Agg's, its text drawn from layouts and glyphs kept across the figures
            for suffix in ("png", "svg"):
                path = out / f"{name}.{suffix}"
                with mpl.rc_context({"svg.hashsalt": name}):  # stable element ids: an unchanged figure, an unchanged file
                    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Date": None} if suffix == "svg" else None)
                written.append(path)
            manifest[name] = {"files": [f"{name}.png", f"{name}.svg"], "caption": fig.caption,
                              "made_from": [provenance(s) for s in sources]}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    (out / "MANIFEST.md").write_text(manifest_markdown(manifest))
    total = time.perf_counter() - start
    for group in GROUPS:
        if group.claims is not None:
            print(group.claims(recorded[group.plan.name]))
    cores = next(iter(next(iter(recorded.values())).values())).meta["cores"]  # every run of one ./run: one machine
    print(f"wrote {len(written)} files for {len(manifest)} figures to {out}/ in {total:.1f} s "
          f"(recording {recording:.1f} s, drawing {total - recording:.1f} s) on {cores} cores")
    return written


def manifest_markdown(manifest: dict) -> str:
    lines = ["# Figures and the runs that made them", "",
             "Regenerate with `./run` (or `python -m dpviz figures`). Each figure is drawn from data recorded on the",
             "machine named below, at the date given; the records themselves are in `records/`",
             "(`dpviz.records.figure_set.load_inputs()` and each plan's `load()` read them). The caption is the line",
             "printed under the figure in its chapter.", "", "| figure | caption | made from |", "| --- | --- | --- |"]
    for name, entry in manifest.items():
        made = "<br>".join(s.get("describe") or s.get("source") for s in entry["made_from"])
        lines.append(f"| [{name}]({name}.png) | {entry['caption'].replace('|', '&#124;')} | {made} |")
    return "\n".join(lines) + "\n"
