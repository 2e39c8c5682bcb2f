"""Voilà: how long after the request the chapter that displays the costs panel is usable, cold and preheated.

    .venv/bin/python benchmarks/bench_voila.py              # three requests each way
    .venv/bin/python benchmarks/bench_voila.py --requests 5

"Usable" is what a student needs to start: the page has loaded and every slider panel of the chapter (a slider
and its figure) is on the page, drawn. Two ways of serving are measured, each with dpviz's Voilà template
(nothing from a CDN):

* cold: ``voila CHAPTER`` — each request starts a kernel and runs the chapter, then sends the page;
* preheated: ``voila CHAPTER --preheat_kernel=True --pool_size=1`` — Voilà keeps one kernel that has already run
  the chapter, hands it to the next request and starts the next one in the background. The benchmark waits for
  the pool to refill (the kernel's CPU quiet) before each request, as a class that arrives over a minute would.

Prints each request's time, the median against the target (5 s), met or missed, the load average before and
after, and benchmarks/machine.py's references (a numpy product on one thread, the interpreter on a fixed loop)
measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from browser_support import CHROMIUM_ARGS, NO_CHROMIUM, find_chromium, jupyter_env, slider_figures, start_listening  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
import machine  # noqa: E402
from machine import references  # noqa: E402

TARGET_S = 5.0
CHAPTER = "06_speedup_model.ipynb"
MODES = {"cold": [], "preheated": ["--preheat_kernel=True", "--pool_size=1"]}


def expected_panels(notebook: Path) -> int:
    """How many slider panels the chapter's saved outputs hold (a widget output beside the panel's image)."""
    import json

    cells = json.loads(notebook.read_text())["cells"]
    return sum(1 for c in cells if c["cell_type"] == "code" and "_widget(" in "".join(c["source"])
               and any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in c.get("outputs", [])))


def wait_quiet(server_pid: int, *, quiet_s: float = 2.0, timeout: float = 120.0) -> float:
    """Waits until the server's kernels have used under 5 % of a core for ``quiet_s`` s; returns the seconds waited."""
    start = time.monotonic()
    quiet_since = None
    while time.monotonic() - start < timeout:
        procs = psutil.Process(server_pid).children(recursive=True)
        before = sum(p.cpu_times().user + p.cpu_times().system for p in procs if p.is_running())
        time.sleep(0.5)
        after = sum(p.cpu_times().user + p.cpu_times().system for p in procs if p.is_running())
        busy = (after - before) / 0.5 > 0.05 or not procs
        quiet_since = None if busy else (quiet_since or time.monotonic())
        if quiet_since and time.monotonic() - quiet_since >= quiet_s:
            break
    return time.monotonic() - start


def measure(mode: str, requests: int, browser, panels: int, work: Path) -> list[float]:
    """Seconds from each request to a usable page, serving the chapter ``mode``'s way."""
    env = jupyter_env(work / mode)
    env["JUPYTER_PATH"] = str(ROOT / "share" / "jupyter")
    token = secrets.token_hex(16)
    served = work / "chapters"

    def cmd(port: int) -> list[str]:
        return [sys.executable, "-m", "voila", str(served / CHAPTER), "--no-browser", f"--port={port}",
                "--Voila.ip=127.0.0.1", f"--token={token}", "--template=dpviz", *MODES[mode]]

    server, _, found = start_listening("Voilà", cmd, lambda port: r"Voilà is running at:\s*\n\s*(http://\S+)",
                                       cwd=served, env=env, log=work / f"voila-{mode}.log", timeout=120)
    url = found.group(1).split("?")[0].rstrip("/")
    times = []
    try:
        for i in range(requests):
            waited = wait_quiet(server.pid) if mode == "preheated" else 0.0
            context = browser.new_context(viewport={"width": 1366, "height": 768})
            page = context.new_page()
            start = time.monotonic()
            page.goto(f"{url}/?token={token}", wait_until="load", timeout=180_000)
            loaded = time.monotonic() - start
            page.wait_for_function(
                """([n]) => [...document.querySelectorAll('body .jp-OutputArea-output')]
                     .filter(o => o.querySelector('.widget-slider .noUi-handle') && o.querySelector('img')
                                  && o.querySelector('img').naturalWidth > 0).length >= n""",
                arg=[panels], timeout=180_000, polling=50)
            times.append(time.monotonic() - start)
            found_panels = slider_figures(page, "body")
            context.close()
            print(f"  {mode:9s} request {i + 1}: usable after {times[-1]:5.2f} s (page loaded at {loaded:.2f} s; "
                  f"{found_panels} slider panels"
                  + (f"; waited {waited:.1f} s for the pool to refill before it)" if mode == "preheated" else ")"),
                  flush=True)
            time.sleep(1.0)  # Voilà shuts the closed page's kernel down
    finally:
        left = server.stop()
        if left:
            print(f"  processes left after Voilà stopped (killed): {left}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3, help="requests per way of serving (default 3)")
    args = parser.parse_args()
    if not 1 <= args.requests <= 20:
        parser.error(f"--requests must be from 1 to 20; got {args.requests}")
    chromium = find_chromium()
    if chromium is None:
        sys.exit(f"bench_voila: {NO_CHROMIUM}")
    from playwright.sync_api import sync_playwright

    load_before = os.getloadavg()
    reference = references()
    panels = expected_panels(ROOT / "notebooks" / CHAPTER)
    results = {}
    with tempfile.TemporaryDirectory(prefix="dpviz-bench-voila-") as tmp, sync_playwright() as p:
        work = Path(tmp)
        (work / "chapters").mkdir()
        (work / "chapters" / CHAPTER).write_bytes((ROOT / "notebooks" / CHAPTER).read_bytes())
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            for mode in MODES:
                results[mode] = measure(mode, args.requests, browser, panels, work)
        finally:
            browser.close()
    load_after = os.getloadavg()
    print(f"\n{CHAPTER} in Voilà, {panels} slider panels, {args.requests} requests each way:")
    for mode, times in results.items():
        median = statistics.median(times)
        print(f"  {mode:9s} median {median:5.2f} s, fastest {min(times):5.2f} s, slowest {max(times):5.2f} s"
              f"  (target ≤ {TARGET_S:.0f} s: {'met' if median <= TARGET_S else 'missed'})")
    print(f"load average (1, 5, 15 min) before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; {os.cpu_count()} cores")
    print(f"before: {reference}")


if __name__ == "__main__":
    machine.keep_if_asked(__file__)  # --keep: append what it prints to HISTORY.md
    main()
