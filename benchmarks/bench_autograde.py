"""Grading a class with nbgrader: autograde N handed-in copies of a chapter, as an instructor would, and time it.

    sudo .venv/bin/python benchmarks/bench_autograde.py                        # N = 1 4 16; chapters 06 and 15
    sudo .venv/bin/python benchmarks/bench_autograde.py --students 1 4 --chapters 15 --keep

For each chapter: a course folder written by ``python -m dpviz.grading source`` (its config: the confined kernel
and the regrade of every check, :mod:`dpviz.exercises.regrade`), ``nbgrader generate_assignment``, then N students
who each hand in the reference solutions, and one ``nbgrader autograde`` of them all. Timed: the wall clock, and
the CPU time the whole machine was busy meanwhile (Linux's /proc/stat through psutil: autograde and everything under
it, kernels in their namespaces, fresh processes and ranks included, which no account of reaped children sees; on a
quiet machine little else). Every student must get full points, or the run says so and stops.

Prints, per chapter and N: wall seconds, CPU seconds per student (the target: at most 20 s of one core at load at
most 2, DESIGN.md "grading") and the load; then, modeled from the CPU per student of the largest N, how long a
class of 30 takes on 2 and on 16 cores if the cores are kept busy (30 x CPU per student / cores; one autograde per
student in parallel: nbgrader autograde ASSIGNMENT --student NAME). Run as root, the way a class's server grades:
as another user, student code is not confined and the figures are not the class's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import machine  # noqa: E402
from machine import describe, load

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TARGET = 20.0  # CPU seconds of one core per student's chapter, at load <= 2 (DESIGN.md, "grading")
CLASS = 30


def busy_cpu() -> float:
    """Seconds of CPU the machine has spent busy since it booted, over all cores."""
    import psutil

    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def nbgrader(course: Path, *args: str) -> None:
    done = subprocess.run([str(BIN / "nbgrader"), *args, "--log-level", "ERROR"], cwd=course, capture_output=True,
                          text=True, env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"})
    if done.returncode != 0:
        raise SystemExit(f"nbgrader {' '.join(args)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def grade(chapter: str, students: int) -> tuple[float, float]:
    """Wall and CPU seconds of one autograde of ``students`` copies of ``chapter``'s reference solutions."""
    from dpviz import grading
    from nbgrader.api import Gradebook

    course = Path(tempfile.mkdtemp(prefix="dpviz-bench-autograde-"))
    try:
        grading.write_course(course, chapters=[chapter])
        assignment = next((course / "source").iterdir()).name
        nbgrader(course, "generate_assignment", assignment)
        source = json.loads((course / "source" / assignment / f"{assignment}.ipynb").read_text())
        release = json.loads((course / "release" / assignment / f"{assignment}.ipynb").read_text())
        answers = {c["metadata"]["nbgrader"]["grade_id"]: c["source"] for c in source["cells"]
                   if c["metadata"].get("nbgrader", {}).get("solution")}
        for cell in release["cells"]:
            grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
            if grade_id in answers:
                cell["source"] = answers[grade_id]
        for s in range(students):
            folder = course / "submitted" / f"student{s:02d}" / assignment
            folder.mkdir(parents=True)
            (folder / f"{assignment}.ipynb").write_text(json.dumps(release))
        cpu, start = busy_cpu(), time.perf_counter()
        nbgrader(course, "autograde", assignment)
        wall, cpu = time.perf_counter() - start, busy_cpu() - cpu
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            for s in range(students):
                sub = gb.find_submission(assignment, f"student{s:02d}")
                if sub.score != sub.max_score:
                    raise SystemExit(f"student{s:02d} got {sub.score} of {sub.max_score} for the reference answers")
        return wall, cpu
    finally:
        shutil.rmtree(course, ignore_errors=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", nargs="+", type=int, default=[1, 4, 16])
    parser.add_argument("--chapters", nargs="+", default=["06", "15"])
    args = parser.parse_args(argv)
    if os.getuid() != 0:
        print("not root: student code is not confined, so these are not a class server's figures")
    print(describe())
    print(f"target: at most {TARGET:g} s of one core per student's chapter, at load <= 2")
    for chapter in args.chapters:
        runs = {}
        for n in args.students:
            before = load()
            wall, cpu = grade(chapter, n)
            runs[n] = (wall, cpu)
            flag = "" if cpu / n <= TARGET else "   OVER TARGET"
            print(f"chapter {chapter}, {n:2d} students: {wall:6.1f} s wall, {cpu / n:5.1f} s of CPU per student "
                  f"(load {before} before, {load()} after){flag}", flush=True)
        first, last = min(runs), max(runs)
        per_student = runs[last][1] / last
        if last > first:  # what one more student costs, past the start every autograde pays once
            per_student = (runs[last][1] - runs[first][1]) / (last - first)
            print(f"chapter {chapter}: each student past the first {first} costs {per_student:.1f} s of CPU and "
                  f"{(runs[last][0] - runs[first][0]) / (last - first):.1f} s of wall")
        for cores in (2, 16):
            print(f"chapter {chapter}: a class of {CLASS} on {cores} cores, modeled ({CLASS} x {per_student:.1f} s of "
                  f"CPU / {cores} cores): {CLASS * per_student / cores / 60:.1f} min")


if __name__ == "__main__":
    machine.keep_if_asked(__file__)  # --keep: append what it prints to HISTORY.md
    main()
