"""Each chapter's Run All as a student measures it: in JupyterLab, in headless Chromium, one chapter at a time.

    .venv/bin/python benchmarks/bench_browser_runall.py                   # every chapter: 3 to 8 min on 2 cores
    .venv/bin/python benchmarks/bench_browser_runall.py 06 10_gradient    # chapters whose names start so
    .venv/bin/python benchmarks/bench_browser_runall.py --keep            # and append the figures to HISTORY.md

A copy of notebooks/ (and a link to figures/, for the pictures the prose shows) is served by a JupyterLab of its own
on 127.0.0.1, with dpviz from this checkout, and opened in Chromium at 1366 × 768 (tests/browser_support.py's
helpers and benchmarks/bench_browser_sliders.py's start, as tests/test_browser.py does). For each chapter in turn:
open it, wait for its kernel to start and read idle (timed: "kernel"), then run JupyterLab's "Run All Cells" and wait
until every cell has run, nothing is queued and the kernel is idle (timed: "Run All", the student's clock: from the
click to the last cell done, the live runs, widgets and figures included), then close it and shut its kernel down.

Printed per chapter: the kernel start, Run All, whether a cell raised, and the load average when it ended; then
the chapters over the target (DESIGN.md: Run All ≤ 10 s a chapter on 2 cores, at a load of 4 or less), the
machine's references and the load before and after (benchmarks/machine.py). Nothing is asserted; the exit
status is 1 when a chapter raised or did not finish.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
from machine import describe, keep_if_asked, load  # noqa: E402
from bench_browser_sliders import HEIGHT, START_TIMEOUT, WIDTH, one_kernel, open_notebook, start_lab  # noqa: E402

TARGET = 10.0  # s for one chapter's Run All, as a student measures it (DESIGN.md)
TARGET_LOAD = 4.0  # ... at a load average of at most this
RUN_TIMEOUT = 300  # s for one chapter's Run All before it counts as not finished

# Read with textContent (innerText would lay the page out at every poll): code cells with source, how many show an
# execution count, how many are queued or running ([*]), the kernel's status and any dialog (a dead kernel).
STATE_JS = """(root) => {
  const panel = document.querySelector(root);
  if (!panel) return null;
  const cells = [...panel.querySelectorAll('.jp-CodeCell')].filter(
    c => (c.querySelector('.cm-content')?.textContent || '').trim() !== '');
  const prompts = cells.map(c => (c.querySelector('.jp-InputPrompt')?.textContent || '').trim());
  const ind = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  return {cells: cells.length, done: prompts.filter(p => /^\\[\\d+\\]:?$/.test(p)).length,
          busy: prompts.filter(p => p.startsWith('[*')).length,
          status: ind ? ind.getAttribute('data-status') : '',
          errors: panel.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').length,
          raised: [...panel.querySelectorAll('.jp-OutputArea-output')].some(o => (o.textContent || '').includes('Traceback')),
          dialog: document.querySelector('.jp-Dialog')?.textContent || ''};
}"""


def run_all(page, widget: str, root: str, timeout: float) -> tuple[float, dict]:
    """Clicks Run All (the command its menu item runs) and waits until it has ended: seconds and the last state."""
    started = ("(root) => [...document.querySelectorAll(root + ' .jp-InputPrompt')]"
               ".some(p => /[*0-9]/.test(p.textContent))")
    begin = time.perf_counter()
    for attempt in range(5):  # a Run All asked for the moment the kernel reads idle can come to nothing: ask again
        page.evaluate("(id) => { window.jupyterapp.commands.execute('notebook:run-all-cells', {widgetId: id}); }",
                      widget)
        try:
            page.wait_for_function(started, arg=root, timeout=15_000)
            break
        except Exception:
            if attempt == 4:
                raise
    deadline = begin + timeout
    state = None
    while time.perf_counter() < deadline:
        state = page.evaluate(STATE_JS, root)
        if state and (state["dialog"] or (state["done"] > 0 and not state["busy"] and state["status"] == "idle")):
            end = time.perf_counter()
            page.wait_for_timeout(200)  # Run All marks every queued cell [*] at once: still nothing busy means it ended
            again = page.evaluate(STATE_JS, root)
            if again == state:
                return end - begin, state
        page.wait_for_timeout(50)
    raise TimeoutError(f"Run All did not finish within {timeout:.0f} s; last state {state}")


def close_chapter(page, url: str, token: str, widget: str) -> None:
    """Closes the chapter's tab and shuts every kernel down, so the next chapter starts as a student's would."""
    import browser_support as bs

    page.evaluate("(id) => { const w = [...window.jupyterapp.shell.widgets('main')].find(w => w.id === id);"
                  " if (w) { w.context.model.dirty = false; w.dispose(); } }", widget)
    for session in bs.http_json(f"{url}/api/sessions", token=token) or []:
        bs.http_json(f"{url}/api/sessions/{session['id']}", method="DELETE", token=token)
    deadline = time.monotonic() + 30
    while (bs.http_json(f"{url}/api/kernels", token=token) or []) and time.monotonic() < deadline:
        time.sleep(0.2)


def measure(chromium: str, base: Path, names: list[str], timeout: float = START_TIMEOUT) -> list[dict]:
    import shutil

    import browser_support as bs

    folder = base / "notebooks"
    shutil.copytree(ROOT / "notebooks", folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (base / "figures").symlink_to(ROOT / "figures")  # the prose's pictures, at ../figures as in the checkout
    rows = []
    with bs.launched_chromium(chromium) as browser:
        server, url, token = start_lab(folder, base / "lab", timeout)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            page.goto(f"{url}/lab/workspaces/bench-runall?token={token}", timeout=timeout * 1000)
            page.wait_for_function("() => !!window.jupyterapp", timeout=timeout * 1000)
            page.evaluate("async () => { await window.jupyterapp.restored; }")
            for name in names:
                row = {"chapter": Path(name).stem, "kernel": None, "run_all": None, "outcome": ""}
                try:
                    begin = time.perf_counter()
                    widget, root = open_notebook(page, name, timeout)
                    one_kernel(url, token, timeout)
                    page.wait_for_selector(f"{root} .jp-Notebook-ExecutionIndicator[data-status='idle']",
                                           timeout=timeout * 1000)
                    row["kernel"] = time.perf_counter() - begin
                    row["run_all"], state = run_all(page, widget, root, RUN_TIMEOUT)
                    row["outcome"] = ("a dialog: " + state["dialog"][:200] if state["dialog"] else
                                      "a cell raised" if state["raised"] else
                                      f"{state['done']} of {state['cells']} cells ran")
                    close_chapter(page, url, token, widget)
                except Exception as err:  # one chapter's failure is reported, and the others still run
                    row["outcome"] = f"not finished: {type(err).__name__}: {str(err)[:300]}"
                row["load"] = os.getloadavg()[0]
                rows.append(row)
                print(line(row), flush=True)
            page.close()
        finally:
            left = server.stop()
            if left:
                print(f"processes JupyterLab left running (killed): {left}", file=sys.stderr)
    return rows


def line(row: dict) -> str:
    kernel = f"{row['kernel']:6.1f} s" if row["kernel"] is not None else "     - "
    run = f"{row['run_all']:6.1f} s" if row["run_all"] is not None else "     - "
    over = "   OVER TARGET" if row["run_all"] is not None and row["run_all"] > TARGET else ""
    return f"{row['chapter']:34s} {kernel} {run}   load {row.get('load', 0):4.1f}   {row['outcome']}{over}"


def main(argv=None) -> int:
    argv = keep_if_asked(__file__, argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="name prefixes of the chapters to run (default: all)")
    args = parser.parse_args(argv)
    names = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    if args.chapters:
        names = [n for n in names if any(n.startswith(c) for c in args.chapters)]
        if not names:
            parser.error(f"no chapter's name starts with {' or '.join(args.chapters)}.")

    import browser_support as bs

    chromium = bs.find_chromium()
    if chromium is None:
        print(bs.NO_CHROMIUM, file=sys.stderr)
        return 2
    print(describe(), flush=True)
    print(f"Run All in JupyterLab + Chromium {WIDTH}x{HEIGHT}, one chapter at a time (target <= {TARGET:g} s a chapter "
          f"at a load <= {TARGET_LOAD:g})")
    print(f"{'chapter':34s} {'kernel':>8s} {'Run All':>8s}")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dpviz-bench-runall-") as tmp:
        rows = measure(chromium, Path(tmp), names)
    over = [r["chapter"] for r in rows if r["run_all"] is not None and r["run_all"] > TARGET]
    failed = [r["chapter"] for r in rows if r["run_all"] is None or not r["outcome"].endswith("cells ran")]
    print(f"\n{len(rows) - len(over) - len(failed)} of {len(rows)} chapters within the {TARGET:g} s target"
          + (f"; over it: {', '.join(over)}" if over else "") + (f"; failed: {', '.join(failed)}" if failed else ""))
    print(describe())
    print(f"total {time.perf_counter() - start:.0f} s (load average now {load()})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
