"""Regenerate every figure of the notes from fresh runs on this machine (what ``./run`` does).

    python -m dpviz figures            # my_figures/*.png, *.svg, manifest.json, MANIFEST.md and records/
    python -m dpviz figures --out figures   # the same into figures/: the shipped figures, for a maintainer to commit

One pass downward: for each figure group of :data:`dpviz.course.GROUPS`, its plan (records layer) says
which records it needs, the torch layer's recipe of the same name (:data:`dpviz.recipes.RECIPES`)
records them, the group draws each figure, and its claims are checked and printed. A manifest says which
run made each figure (k, b, backend, host, cores and date) and gives the caption a chapter prints under it.

The plans are recorded one after another, with nothing else running, because most of them time their
steps. Only then are the records saved into ``<out>/records/`` and the figures drawn, both spread over
one process per core: neither is timed, and compressing a record or drawing a figure uses one core.

``./run`` writes into ``my_figures/``, beside the shipped ``figures/`` and never over them: the chapters then draw
from this machine's records (:func:`dpviz.engine.paths.figure_records`), and the tests still read the shipped ones,
so ``./run`` followed by ``./run test`` passes whatever this machine's load made the timings show.
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

import matplotlib as mpl
from matplotlib.backends.backend_agg import FigureCanvasAgg

from dpviz.course import GROUPS
from dpviz.engine.svg_compare import svg_difference
from dpviz.engine.schema import provenance


def regenerate(out="my_figures", *, quick: bool = False, progress: bool = True, records=None) -> list[Path]:
    """Record fresh runs, draw every figure to ``out`` as PNG and SVG, write the manifest; prints what it did.

    With ``records`` (a folder that an earlier call saved), nothing is recorded: the figures are
    drawn again from those records, for example after a change of style. With ``progress``, each
    plan's recording time is printed as it ends.
    """
    start = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plans = {group.plan.name: group.plan for group in GROUPS}  # two groups may draw from one plan
    if records is None:
        recorded = {}
        try:
            record(plans, recorded, quick=quick, progress=progress)
        except BaseException:  # a plan failed or was interrupted: the plans already recorded are kept, as they were
            for name, stems in recorded.items():
                for stem, run in stems.items():
                    run.save(out / "records" / stem)
            raise
    else:
        recorded = {name: plan.load(records) for name, plan in plans.items()}
    recording = time.perf_counter() - start
    to_save = [(name, stem) for name in recorded for stem in recorded[name]] if records is None else []
    done, processes = _in_processes(_tasks(recorded, to_save), initargs=(recorded, out))
    written, manifest = [], {}
    for figures in (done[("draw", i)] for i in range(len(GROUPS))):
        for name, files, entry in figures:
            written.extend(out / file for file in files)
            manifest[name] = entry
    for file, text in (("manifest.json", json.dumps(manifest, indent=1, sort_keys=True) + "\n"),
                       ("MANIFEST.md", manifest_markdown(manifest))):
        if not (out / file).is_file() or (out / file).read_text() != text:
            (out / file).write_text(text)
    total = time.perf_counter() - start
    for group in GROUPS:
        if group.claims is not None:
            print(group.claims(recorded[group.plan.name]))
    cores = next(iter(next(iter(recorded.values())).values())).meta["cores"]  # every run of one ./run: one machine
    saved = f"saving {len(to_save)} records and " if to_save else ""
    kept = 2 * len(manifest) - len(written)
    print(f"wrote {len(written)} files for {len(manifest)} figures to {out}/"
          f"{f' ({kept} files left as they were: the same drawings)' if kept else ''} in {total:.1f} s "
          f"(recording {recording:.1f} s, {saved}drawing {total - recording:.1f} s in {processes} "
          f"process{'es' if processes > 1 else ''}) on {cores} cores")
    return written


def record(plans: dict, recorded: dict, *, quick: bool = False, progress: bool = True) -> None:
    """Record every plan into ``recorded``, ``{plan name: {stem: record}}``, one after another; nothing is saved here."""
    from dpviz import recipes  # torch only when recording

    recipes.warm_up()  # the fork server imports torch and the workers' modules while this process goes on
    for name, plan in plans.items():
        start = time.perf_counter()
        runs = recipes.RECIPES[name](quick=quick, progress=progress)
        plan.check_recorded(runs)  # before it joins `recorded`: a plan that fails its check is never saved
        recorded[name] = runs
        if progress:
            print(f"recorded {name}: {len(runs)} records in {time.perf_counter() - start:.1f} s", flush=True)


# --- saving and drawing: tasks shared among one process per core, once recording is over ---

_job = None  # (recorded, out) inside a drawing process: what it was forked with


def _tasks(recorded: dict, to_save: list) -> list:
    """Every group's drawing, then every record's saving, largest first: small saves even out the processes' ends."""
    sizes = {key: sum(a.nbytes for a in recorded[key[0]][key[1]].arrays.values()) for key in to_save}
    return [("draw", i) for i in range(len(GROUPS))] + [("save", *key) for key in sorted(to_save, key=sizes.get, reverse=True)]


def _in_processes(tasks: list, initargs: tuple) -> tuple[dict, int]:
    """Run every task, ``{task: what it returned}``, in forked processes, one a core (in this one on one core, or off Linux)."""
    processes = min(_cores(), len(tasks))
    if processes < 2 or not sys.platform.startswith("linux"):  # fork is safe with matplotlib and numpy on Linux
        _start(*initargs)
        return {task: _run(task) for task in tasks}, 1
    # Forked, a process starts with the records, matplotlib and the glyphs already loaded: nothing is pickled to it.
    with multiprocessing.get_context("fork").Pool(processes, initializer=_start, initargs=initargs) as pool:
        return dict(zip(tasks, pool.imap(_run, tasks, chunksize=1))), processes


def _cores() -> int:
    # dpviz.engine.launch.cpu_count's rule, written here again: drawing from saved records imports nothing of
    # the launcher (tests/test_cli.py holds it to that).
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _start(recorded: dict, out: Path) -> None:
    global _job
    _job = (recorded, out)


def _run(task: tuple):
    recorded, out = _job
    if task[0] == "save":
        _, name, stem = task
        return recorded[name][stem].save(out / "records" / stem)
    return draw_group(GROUPS[task[1]], recorded, out)


def draw_group(group, recorded: dict, out: Path) -> list[tuple[str, list[str], dict]]:
    """Draw one group's figures to ``out`` as PNG and SVG: ``[(figure name, the files written, its manifest entry)]``.

    A figure whose SVG there is already the same drawing (:func:`dpviz.engine.svg_compare.svg_difference`) is left
    as it is, PNG included: regenerating an unchanged figure writes nothing."""
    drawn = []
    for name, (fig, sources) in group.draw(recorded[group.plan.name]).items():
        FigureCanvasAgg(fig)  # the PNG is Agg's, whatever backend the process was given
        files = [f"{name}.png", f"{name}.svg"]
        images = {}
        for file in files:
            with mpl.rc_context({"svg.hashsalt": name}):  # stable element ids: an unchanged figure, an unchanged file
                buffer = io.BytesIO()
                fig.savefig(buffer, format=file[-3:], dpi=110, bbox_inches="tight",
                            metadata={"Date": None} if file.endswith("svg") else None)
                images[file] = buffer.getvalue()
        unchanged = all((out / f).is_file() for f in files) and svg_difference(
            (out / files[1]).read_text(), images[files[1]].decode()) is None
        if not unchanged:  # the same drawing made on another machine differs in a last digit: kept as it was
            for file in files:
                (out / file).write_bytes(images[file])
        drawn.append((name, [] if unchanged else files, {"files": files, "caption": fig.caption,
                                                          "made_from": [provenance(s) for s in sources]}))
    return drawn


def manifest_markdown(manifest: dict) -> str:
    lines = ["# Figures and the runs that made them", "",
             "Regenerate with `./run` (or `python -m dpviz figures`). Each figure is drawn from data recorded on the",
             "machine named below, at the date given; the records themselves are in `records/`",
             "(`dpviz.topics.speedup_model.figure_records.load_inputs()` and each plan's `load()` read them). The caption is the line",
             "printed under the figure in its chapter.", "", "| figure | caption | made from |", "| --- | --- | --- |"]
    for name, entry in manifest.items():
        made = "<br>".join(s.get("describe") or s.get("source") for s in entry["made_from"])
        lines.append(f"| [{name}]({name}.png) | {entry['caption'].replace('|', '&#124;')} | {made} |")
    return "\n".join(lines) + "\n"
