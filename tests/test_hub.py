"""A real JupyterHub with an instructor and 12 students, each a Unix user of their own, and nbgrader's exchange.

The module's fixture (helpers in tests/_hub.py) does what a class does, once:

1. the instructor's course: ``python -m dpviz.grading source`` for chapter 04 (written from this checkout,
   then handed to the instructor user), then, as the instructor (``runuser``, nbgrader's command-line apps),
   ``nbgrader generate_assignment`` and ``nbgrader release_assignment`` into a shared exchange folder;
2. all 12 students at the same time, each through the hub only: the login form, a token, the hub's API to
   start their server (as their own Unix user, from share/jupyterhub_config.py), nbgrader's "fetch" on that
   server (the call its Assignments tab makes), their answer written into the solution cell through the
   server's contents API, then Run All of the release over the kernel's websocket (chapter 04: two runs
   of 4 real ranks, the figures, the widget, the check on 3 real ranks, the cards), a cell that reads and
   tries to write the course's records folder and the instructor's files, and, for five of them, nbgrader's
   "submit" on the server. Answers: the reference (s01); the sum over the ranks, not the mean (s02); a loop
   that never ends (s03); the reference with the graded check cell deleted (s04); the stub (s05 and the
   seven who do not submit);
3. every server stopped through the hub; then, as the instructor, ``nbgrader collect``, ``autograde`` and
   ``generate_feedback``; the hub and the proxy stopped; the users deleted.

While the chapters run, a watcher records every rank process (its user, and whether it descends from that
user's own server), every TCP connection a rank holds on this machine and who holds the other end, and what
each student makes in /tmp. The tests then assert on what happened. Times go to test-output/hub/timing.txt.

Skips, saying why, without root, without configurable-http-proxy (``npm install --prefix .
configurable-http-proxy@4``, as .ci/run does) or without jupyterhub (the test extra).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import statistics
import subprocess
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

import _hub
import _procevents
from dpviz import grading

pytestmark = pytest.mark.timeout(1800)  # the class on 2 busy cores; the fixture counts toward the first test

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "test-output" / "hub"
ASSIGNMENT = "04_one_group_per_device"
STUDENTS = 12
REFERENCE = grading.solution_bodies()["average_gradients"][1]
STUB = "def average_gradients(model_grads, world_size):\n"

ANSWERS = {  # student number -> (what they hand in, the solution cell's body or None for the stub, submits)
    1: ("the reference", REFERENCE, True),
    2: ("the sum, not the mean", "for g in model_grads:\n    dist.all_reduce(g)", True),
    3: ("a loop that never ends", "while True:\n    pass", True),
    4: ("the reference, graded cell deleted", REFERENCE, True),
    5: ("the stub", None, True),
}
EXPECTED = {  # student number -> (points of 2, words the feedback carries)
    1: (2, "average_gradients: correct"),
    2: (0, "which is too large. It is the sum over the ranks."),  # graded: the mistake named, not the fix
    3: (0, "look for a loop that never ends"),
    4: (2, "was deleted from the notebook handed in; nbgrader put it back to grade it. average_gradients: correct"),
    5: (0, "average_gradients: not attempted yet"),
}

PROBE = """
import glob, os
from dpviz.engine import schema
folder = os.environ["DPVIZ_RECORDS"]
record = schema.load(sorted(glob.glob(os.path.join(folder, "*.json")))[0][:-len(".json")])
print("READ", type(record).__name__)
for how in ("save", "open"):
    try:
        record.save(os.path.join(folder, "mine")) if how == "save" else open(os.path.join(folder, "mine.txt"), "w")
        print("WROTE", how)
    except OSError as e:
        print("REFUSED", how, type(e).__name__)
for path in {paths!r}:
    try:
        open(path).read(1)
        print("READABLE", path)
    except OSError:
        print("UNREADABLE", path)
"""


def _answer(nb: dict, number: int) -> dict:
    """The fetched release with this student's answer in the solution cell (and the check cell gone for s04)."""
    _, body, _ = ANSWERS.get(number, ("the stub", None, False))
    cells = []
    for cell in nb["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id == "check_average_gradients" and number == 4:
            continue  # deleted
        if grade_id == "average_gradients" and body is not None:
            stub = "".join(cell["source"])
            head = stub[:stub.index(grading.STUB_LINE)]  # the def line, the docstring and the body's indent
            cell["source"] = head + textwrap.indent(body, "    ").lstrip(" ") + "\n"
        cells.append(cell)
    return {**nb, "cells": cells}


class Watcher(threading.Thread):
    """Every rank a student's server starts, from the kernel's process events (none is missed, however short
    its life; tests/_procevents.py), and, sampled every 0.3 s while the chapters run: the ranks' TCP peers on
    this machine and what the students make in /tmp."""

    def __init__(self, course: _hub.Course):
        super().__init__(daemon=True)
        self.course = course
        self.uids = {s.uid for s in course.students}
        self.stop = threading.Event()
        self.events = _procevents.ProcessEvents(prefix="dpviz-rank-")
        self.servers: dict[int, int] = {}  # a student's server pid -> its uid, every one seen
        self.sampled: set[int] = set()  # rank pids the sampling saw as well (a check on the events)
        self.peers: list[tuple[int, int, str]] = []  # (a rank's uid, the other end's uid, what the other end is)
        self.tmp: dict[str, tuple[int, int]] = {}  # /tmp entry -> (owner uid, mode)

    @property
    def ranks(self) -> dict[int, tuple[int, bool]]:
        """Each student rank's pid -> (its uid, whether its ancestors hold its user's server)."""
        return {pid: (uid, any(self.servers.get(a) == uid for a in ancestors))
                for pid, (uid, ancestors) in self.events.named.items() if uid in self.uids}

    def run(self):
        self.events.start()
        while not self.stop.is_set():
            try:
                self.sample()
            except Exception:  # a process ending between two looks: the next sample sees the rest
                pass
            self.stop.wait(0.3)
        self.servers.update({p.pid: uid for uid, p in self.course.server_processes().items()})
        self.events.stop()

    def sample(self):
        self.servers.update({p.pid: uid for uid, p in self.course.server_processes().items()})
        rank_pids = {}
        for p in psutil.process_iter(["name", "uids"]):
            try:
                if p.info["name"].startswith("dpviz-rank-") and p.info["uids"].real in self.uids:
                    rank_pids[p.pid] = p.info["uids"].real
                    self.sampled.add(p.pid)
            except psutil.Error:
                continue
        if rank_pids:
            connections = psutil.net_connections(kind="tcp")
            # the other end of a connection is the socket whose own address is this one's remote, and back
            ends = {(tuple(c.laddr), tuple(c.raddr)): c.pid for c in connections if c.pid and c.raddr}
            for c in connections:
                if c.pid in rank_pids and c.raddr and c.status == psutil.CONN_ESTABLISHED:
                    peer = ends.get((tuple(c.raddr), tuple(c.laddr)))
                    if peer is not None:
                        try:
                            other = psutil.Process(peer)
                            self.peers.append((rank_pids[c.pid], other.uids().real,
                                               f"{c.laddr} -> {c.raddr}: pid {peer} {' '.join(other.cmdline())[:80]}"))
                        except psutil.Error:
                            pass
        for entry in _hub.temporary_entries(self.uids):
            try:
                st = entry.lstat()
                self.tmp[entry.name] = (st.st_uid, st.st_mode & 0o777)
            except OSError:
                pass


def _student(course: _hub.Course, s: _hub.Student, number: int, probe_paths: list[str], results: dict) -> None:
    out = {"number": number, "error": None}
    results[s.name] = out
    try:
        start = time.perf_counter()
        s.log_in()
        out["login"] = time.perf_counter() - start
        out["server"] = s.start_server()
        fetched = s.assignments("fetch", ASSIGNMENT)
        out["fetched"] = any(a["assignment_id"] == ASSIGNMENT and a["status"] == "fetched"
                             for a in fetched["value"])
        path = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
        nb = _answer(s.read_notebook(path), number)
        s.save_notebook(path, nb)
        s.open(path)
        out["kernel_pid"] = s.kernel_pid()
        out["run"] = s.run_all(_hub.code_cells(nb))
        out["probe"] = s.execute(PROBE.format(paths=probe_paths))
        if ANSWERS.get(number, (None, None, False))[2]:
            submitted = s.assignments("submit", ASSIGNMENT)
            out["submitted"] = submitted.get("success", True) if isinstance(submitted, dict) else True
        out["total"] = time.perf_counter() - start
    except Exception as e:  # noqa: BLE001 - reported by the tests
        out["error"] = f"{type(e).__name__}: {e}"


def _instructor(course: _hub.Course, *args: str, timings: dict) -> None:
    start = time.perf_counter()
    done = course.run_as(course.instructor, [str(_hub.ENV_BIN / "nbgrader"), *args, "--log-level", "WARN"],
                         env=course.nbgrader_env(), cwd=course.users.home(course.instructor) / "dpviz-course",
                         timeout=900)
    timings[f"nbgrader {' '.join(args)} (instructor)"] = time.perf_counter() - start
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def classroom():
    reason = _hub.why_not() or _procevents.why_not()
    if reason:
        pytest.skip(reason)
    begin = time.perf_counter()
    records = sorted((ROOT / "figures" / "records").glob("waiting_sync.*"))  # a small record for the course folder
    solutions_dir = ROOT / "instructor"
    solutions_mode = solutions_dir.stat().st_mode & 0o777
    try:
        course = _hub.Course(STUDENTS, records=records)
    except RuntimeError as e:
        pytest.skip(f"no hub here: {e}")
    timings = dict(course.timings)
    results: dict = {}
    state = {"course": course, "results": results, "timings": timings, "python": course.python_note}
    try:
        # 1. the instructor's course, private to the instructor, released through the exchange
        home = course.users.home(course.instructor)
        course_dir = home / "dpviz-course"
        grading.write_course(course_dir, chapters=["04"])  # from this checkout, then the instructor's
        subprocess.run(["chown", "-R", f"{course.instructor}:", str(course_dir)], check=True)
        course_dir.chmod(0o700)  # the source version holds the answers
        solutions_dir.chmod(solutions_mode & 0o700)  # as the README has a course do: the checkout's answers too
        _instructor(course, "generate_assignment", ASSIGNMENT, timings=timings)
        _instructor(course, "release_assignment", ASSIGNMENT, timings=timings)

        # 2. the class, all at once
        probe_paths = [str(solutions_dir / "solutions.py"),
                       str(course_dir / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")]
        state["uids"] = {s.name: s.uid for s in course.students}
        watcher = Watcher(course)
        watcher.start()
        start = time.perf_counter()
        threads = [threading.Thread(target=_student, args=(course, s, n, probe_paths, results))
                   for n, s in enumerate(course.students, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(1500)
        timings["the class: login to submit, 12 students at once"] = time.perf_counter() - start
        watcher.stop.set()
        watcher.join()
        state["watcher"] = watcher
        state["records_after"] = sorted(p.name for p in course.records.iterdir())

        # 3. every server stopped through the hub; nothing of the students may run on
        start = time.perf_counter()
        stops = [threading.Thread(target=s.stop_server) for s in course.students]
        for t in stops:
            t.start()
        for t in stops:
            t.join(300)
        timings["servers stopped"] = time.perf_counter() - start
        student_uids = {s.uid for s in course.students}
        end = time.monotonic() + 15
        while time.monotonic() < end and _hub.processes_of(student_uids):
            time.sleep(0.5)
        state["left_running"] = [f"{p.pid} {p.username()} {' '.join(p.cmdline())[:100]}"
                                 for p in _hub.processes_of(student_uids)]
        state["servers_after"] = course.servers_running()
        state["tmp_after"] = sorted(e.name for e in _hub.temporary_entries(student_uids))

        # 4. the instructor collects and grades
        _instructor(course, "collect", ASSIGNMENT, timings=timings)
        _instructor(course, "autograde", ASSIGNMENT, timings=timings)
        _instructor(course, "generate_feedback", ASSIGNMENT, timings=timings)
        from nbgrader.api import Gradebook

        grades = {}
        with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}", "dpviz") as gb:
            for s in course.students:
                try:
                    submission = gb.find_submission(ASSIGNMENT, s.name)
                    grades[s.name] = (submission.score, submission.max_score, submission.needs_manual_grade)
                except Exception:  # noqa: BLE001 - not handed in
                    pass
        state["grades"] = grades
        state["feedback"] = {}
        for s in course.students:
            page = course_dir / "feedback" / s.name / ASSIGNMENT / f"{ASSIGNMENT}.html"
            if page.exists():
                state["feedback"][s.name] = " ".join(html.unescape(re.sub(r"<[^>]+>", "", page.read_text())).split())
        looping = course.students[2].name  # s03, whose answer never returns
        autograded = course_dir / "autograded" / looping / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        state["looping_check"] = next(
            (c for c in json.loads(autograded.read_text())["cells"]
             if c["metadata"].get("nbgrader", {}).get("grade_id") == "check_average_gradients"), None) \
            if autograded.exists() else None
        state["instructor_left"] = [p.pid for p in _hub.processes_of({course.users.uid(course.instructor)})]
    finally:
        solutions_dir.chmod(solutions_mode)
        OUTPUT.mkdir(parents=True, exist_ok=True)
        if course.log_path.exists():
            shutil.copy(course.log_path, OUTPUT / "hub.log")
        uids = course.users.uids()
        state["left_at_close"] = course.close()
        state["left_after_close"] = [p.pid for p in _hub.processes_of(uids)]
        timings["the whole test"] = time.perf_counter() - begin
        runs = [r["run"]["seconds"] for r in results.values() if r.get("run")]
        lines = [f"{t:7.1f} s  {what}" for what, t in timings.items()]
        if runs:
            lines.append(f"Run All of the release through the hub, {len(runs)} students at once: "
                         f"median {statistics.median(runs):.1f} s, slowest {max(runs):.1f} s")
        for name, r in sorted(results.items()):
            lines.append(f"  {name}: login {r.get('login', 0):.1f} s, server {r.get('server', 0):.1f} s, "
                         f"Run All {r.get('run', {}).get('seconds', 0):.1f} s; "
                         f"{ANSWERS.get(r['number'], ('the stub',))[0]}" + (f"; {r['error']}" if r["error"] else ""))
        lines.append(state["python"])
        lines.append(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        (OUTPUT / "timing.txt").write_text("\n".join(lines) + "\n")
        print("\n" + "\n".join(lines))
    yield state  # everything is stopped and removed by now: the tests read what was seen


def _by_number(classroom, number: int) -> dict:
    return next(r for r in classroom["results"].values() if r["number"] == number)


def test_every_student_logs_in_starts_a_server_and_fetches_the_release(classroom):
    results = classroom["results"]
    assert len(results) == STUDENTS
    failed = {name: r["error"] for name, r in results.items() if r["error"]}
    assert not failed, f"{failed} (the hub's log: test-output/hub/hub.log)"
    assert all(r["fetched"] for r in results.values())


def test_every_release_runs_top_to_bottom_whatever_its_answer(classroom):
    """Run All of the release with the stub, a wrong answer, a loop or a deleted check cell: no cell stops it,
    and each check prints its verdict."""
    for name, r in classroom["results"].items():
        run = r["run"]
        assert run["error"] is None, (name, run["error"])
        printed = "".join(run["texts"])
        assert "All 4 local gradients differ" in printed or "rank 3 takes rows" in printed, name
        if r["number"] != 4:
            assert "average_gradients" in printed, name
    assert "not attempted yet" in " ".join("".join(_by_number(classroom, 7)["run"]["texts"]).split())
    assert "look for a loop that never ends" in " ".join("".join(_by_number(classroom, 3)["run"]["texts"]).split())


def test_each_students_ranks_are_their_own(classroom):
    """Every rank runs as the student whose server started it, and every TCP connection a rank holds on this
    machine (gloo's pairs, the rendezvous) ends at a process of the same student."""
    watcher = classroom["watcher"]
    uids = set(classroom["uids"].values())
    assert not watcher.events.lost, "the kernel dropped process events: the ranks seen may be incomplete"
    missed = watcher.sampled - set(watcher.events.named)
    assert not missed, f"ranks the sampling saw but the kernel's events did not report: {sorted(missed)}"
    seen = {uid for uid, _ in watcher.ranks.values()}
    assert seen == uids, f"students none of whose ranks started: uids {sorted(uids - seen)}"
    strays = [pid for pid, (uid, own) in watcher.ranks.items() if not own]
    assert not strays, f"ranks that descend from no server of their own user: {strays}"
    assert watcher.peers, "no rank connection was seen"
    crossed = [(a, b, what) for a, b, what in watcher.peers if a != b]
    assert not crossed, f"a rank connected to another user's process: {crossed[:5]}"


def test_what_a_student_makes_in_tmp_is_theirs_alone_and_goes_with_the_server(classroom):
    watcher = classroom["watcher"]
    readable = {name: oct(mode) for name, (uid, mode) in watcher.tmp.items() if mode & 0o077}
    assert not readable, f"entries in /tmp other users can read or enter: {readable}"
    assert any(name.startswith("dpviz-launch-") for name in watcher.tmp), "no run folder was seen in /tmp"
    left = [name for name in classroom["tmp_after"] if name.startswith("dpviz-launch-")]
    assert not left, f"run folders left in /tmp after the servers stopped: {left}"


def test_a_student_reads_the_course_records_but_cannot_write_them_nor_read_the_answers(classroom):
    for name, r in classroom["results"].items():
        printed = r["probe"]["text"]
        assert r["probe"]["error"] is None, (name, r["probe"]["error"])
        assert "READ " in printed, (name, printed)
        assert "WROTE" not in printed and printed.count("REFUSED") == 2, (name, printed)
        assert "READABLE" not in printed.replace("UNREADABLE", ""), (name, printed)
    assert classroom["records_after"] == sorted(p.name for p in (ROOT / "figures" / "records").glob("waiting_sync.*"))


def test_nothing_is_left_running_when_the_servers_stop(classroom):
    assert classroom["servers_after"] == []
    assert classroom["left_running"] == []
    assert classroom["instructor_left"] == []  # autograde's kernels and ranks
    assert classroom["left_at_close"] == [] and classroom["left_after_close"] == []


def test_the_exchange_grades_are_right(classroom):
    grades = classroom["grades"]
    names = {r["number"]: name for name, r in classroom["results"].items()}
    assert set(grades) == {names[n] for n in ANSWERS}, "only the five who submitted are graded"
    for number, (points, _) in EXPECTED.items():
        score, max_score, manual = grades[names[number]]
        assert (score, max_score, manual) == (points, 2, False), (number, ANSWERS[number][0], grades[names[number]])


def test_the_feedback_carries_the_checkers_sentence(classroom):
    names = {r["number"]: name for name, r in classroom["results"].items()}
    for number, (_, words) in EXPECTED.items():
        page = classroom["feedback"].get(names[number], "")
        assert words in page, (number, ANSWERS[number][0])


def test_the_looping_answer_ends_at_the_checkers_limit(classroom):
    """Graded 0 by the checker's own limit on a rank's call, with its verdict; not by nbgrader's cell timeout."""
    check = classroom["looping_check"]
    printed = " ".join(" ".join("".join(o.get("text", "")) for o in check["outputs"]
                                if o["output_type"] == "stream").split())
    assert "after the 10 s a rank gives one call: look for a loop that never ends" in printed
    assert [o["ename"] for o in check["outputs"] if o["output_type"] == "error"] == ["AssertionError"]
