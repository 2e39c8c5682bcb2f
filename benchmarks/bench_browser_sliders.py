"""Key press to new picture for every slider of every panel, in headless Chromium driving JupyterLab.

    .venv/bin/python benchmarks/bench_browser_sliders.py            # 2 to 5 min on 2 cores, by load
    .venv/bin/python benchmarks/bench_browser_sliders.py --presses 4 --only eta_widget costs_widget
    .venv/bin/python benchmarks/bench_browser_sliders.py --keep     # and append its figures to benchmarks/HISTORY.md

What it does:

1. records what no shipped record covers (bench_widgets.py's biased grab and all-reduce sweep) into a temporary
   folder, and writes there one notebook that builds every slider panel the chapters show, one cell each, as
   bench_widgets.py builds them, and last a *busy* panel whose ``update`` sleeps 300 ms;
2. starts JupyterLab on 127.0.0.1 (a token, folders of its own under the temporary folder, this environment's
   python3 kernel) and headless Chromium at 1366 × 768 with Playwright, as tests/test_browser.py does
   (tests/browser_support.py's helpers), opens the notebook and runs all its cells;
3. for every slider of every panel, focuses its handle and presses ArrowRight (ArrowLeft at the slider's right
   end) ``--presses`` times, one press after the picture of the one before is shown: the time from the keydown event
   to the panel's <img> showing the new PNG (its src changed, the image decoded, and two animation frames later:
   painted), measured in the page with ``performance.now()``. A press whose picture does not change within 3 s
   counts as "unchanged", is left out of the times, and turns the presses the other way until the picture changes;
   after each slider the panel's controls go back to where they started;
4. presses the busy panel's slider 10 times as fast as the keyboard goes, and reads from its status line which values
   its callback drew: the widgets' front end holds a control's newer values while the kernel is busy and sends only
   the newest when it is idle, so each time the callback is free it draws the newest value, and the last it draws is
   where the slider ended: never every value pressed (a queue of stale frames).

Prints the machine (cores, load average) and its references first (benchmarks/machine.py), then per panel and per
slider the median, 90th percentile and fastest press in ms against the target (DESIGN.md: median at most 150 ms, at
a load average of at most 2), then the busy check, and last the load and references again. With ``--keep`` all of
it is appended to benchmarks/HISTORY.md, under the date, the command and the commit measured.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
from machine import keep_if_asked, references  # noqa: E402
from bench_widgets import KERNEL_CELLS, WIDGETS, machine_line, record_inputs  # noqa: E402

TARGET_MEDIAN_MS = 150.0  # key press to new picture, every slider's median
TARGET_LOAD = 2.0  # ... measured at a load average of at most this
WIDTH, HEIGHT = 1366, 768  # a laptop's screen, as tests/test_browser.py's
BUSY_SLEEP_S = 0.3  # the busy panel's update takes this long
BUSY_PRESSES = 10
START_TIMEOUT = 180  # s for JupyterLab, the page or Run All, on a busy 2-core machine

SETUP_CELL = '''
import warnings
warnings.simplefilter("ignore")
RECORDS = {records!r}
MOVES = 0
PANELS, START = {{}}, {{}}

def _measure(name, sf, moves, **kwargs):
    """What bench_widgets.py's cells call: here the panel is shown, not moved."""
    PANELS[name], START[name] = sf, dict(sf.values)
    display(sf)
'''

BUSY_CELL = f'''
import time
import ipywidgets as widgets
from matplotlib.figure import Figure
from dpviz.engine.slider import SliderFigure, animate

class Busy:
    """A figure whose update takes {BUSY_SLEEP_S} s, and whose status line lists the values it drew."""

    def __init__(self):
        self.fig = Figure(figsize=(3, 1.2))
        self.label = self.fig.text(0.5, 0.5, "", ha="center", va="center", fontsize=14)
        animate(self.label)
        self.drawn = []
        self.status_line = ""

    def update(self, n):
        time.sleep({BUSY_SLEEP_S})
        self.drawn.append(n)
        self.label.set_text(f"n = {{n}}")
        self.status_line = "drawn: " + " ".join(map(str, self.drawn))

SliderFigure(Busy(), {{"n": widgets.IntSlider(0, min=0, max=50, description="n")}})
'''

# The page: the panels are the outputs that hold a slider handle and an image (tests/browser_support.py's rule).
PANELS_JS = """(root) => [...document.querySelectorAll(root + ' .jp-OutputArea-output')]
  .filter(o => o.querySelector('.widget-slider .noUi-handle') && o.querySelector('img'))"""

# Arms the measure of one press: the time from the handle's keydown to the panel's image showing a new picture.
ARM_JS = """([root, panel, slider, timeout]) => {
  const out = (%s)(root)[panel];
  const img = out.querySelector('img');
  const handle = out.querySelectorAll('.widget-slider .noUi-handle')[slider];
  const before = img.src;
  window.__press = new Promise((resolve) => {
    let t0 = null;
    handle.addEventListener('keydown', () => { t0 = performance.now(); }, {once: true, capture: true});
    const seen = new MutationObserver(async () => {
      if (img.src === before) return;
      seen.disconnect();
      try { await img.decode(); } catch (e) {}
      requestAnimationFrame(() => requestAnimationFrame(() => resolve(t0 === null ? null : performance.now() - t0)));
    });
    seen.observe(img, {attributes: true, attributeFilter: ['src']});
    setTimeout(() => { seen.disconnect(); resolve(null); }, timeout);
  });
}""" % PANELS_JS

SLIDERS_JS = """([root, panel]) => [...(%s)(root)[panel].querySelectorAll('.widget-slider')].map(s => ({
  label: (s.querySelector('.widget-label')?.textContent || '').trim(),
  now: s.querySelector('.noUi-handle').getAttribute('aria-valuenow'),
  max: s.querySelector('.noUi-handle').getAttribute('aria-valuemax'),
  min: s.querySelector('.noUi-handle').getAttribute('aria-valuemin')}))""" % PANELS_JS

STATUS_JS = """([root, panel]) =>
  ((%s)(root)[panel].querySelector('.widget-html')?.textContent || '').trim()""" % PANELS_JS


def write_notebook(folder: Path, widgets: list[str], records: Path) -> Path:
    import nbformat

    cells = [nbformat.v4.new_code_cell(SETUP_CELL.format(records=str(records)).strip())]
    cells += [nbformat.v4.new_code_cell(textwrap.dedent(KERNEL_CELLS[w]).strip()) for w in widgets]
    cells.append(nbformat.v4.new_code_cell(BUSY_CELL.strip()))
    notebook = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}})
    path = folder / "sliders.ipynb"
    nbformat.write(notebook, path)
    return path


def start_lab(folder: Path, base: Path, timeout: float = START_TIMEOUT):
    """JupyterLab serving ``folder``, with a token and settings of its own; returns (server, url, token)."""
    import browser_support as bs

    env = bs.jupyter_env(base)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))  # dpviz from this checkout
    labconfig = Path(env["JUPYTER_CONFIG_DIR"]) / "labconfig"
    labconfig.mkdir(parents=True, exist_ok=True)
    (labconfig / "default_setting_overrides.json").write_text(json.dumps({
        "@jupyterlab/apputils-extension:notification": {
            "fetchNews": "false", "checkForUpdates": False, "doNotDisturbMode": True},
        "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},  # every panel laid out, on screen or not
    }))
    token = secrets.token_hex(16)

    def cmd(port: int) -> list[str]:
        return [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={folder}", "--ServerApp.terminals_enabled=False", "--ServerApp.allow_root=True",
                "--LabApp.expose_app_in_browser=True", "--KernelManager.shutdown_wait_time=1.0"]

    server, port, _ = bs.start_listening("JupyterLab", cmd, lambda port: rf"http://127\.0\.0\.1:{port}/lab",
                                         cwd=folder, env=env, log=base / "jupyterlab.log", timeout=timeout)
    return server, f"http://127.0.0.1:{port}", token


def open_notebook(page, name: str, timeout: float) -> tuple[str, str]:
    """Opens notebook ``name`` in the JupyterLab on ``page`` and makes it the active tab; returns its panel's widget
    id and a CSS selector of its panel."""
    page.evaluate("(path) => { window.jupyterapp.commands.execute('docmanager:open', {path, factory: 'Notebook'}); }",
                  name)
    widget = page.wait_for_function(
        """(path) => {
             const app = window.jupyterapp;
             const w = [...app.shell.widgets('main')].find(w => w.context && w.context.path === path);
             if (!w || !w.context.isReady) return null;
             app.shell.activateById(w.id);
             return w.id;
           }""", arg=name, timeout=timeout * 1000).json_value()
    return widget, f".jp-NotebookPanel[id='{widget}']"


def open_and_run(page, url: str, token: str, name: str, panels: int, timeout: float = START_TIMEOUT) -> str:
    """Opens notebook ``name`` in JupyterLab, runs all its cells, waits until ``panels`` slider panels show; each
    step may take ``timeout`` s (building the panels four times that)."""
    page.goto(f"{url}/lab/workspaces/bench-sliders?token={token}", timeout=timeout * 1000)
    page.wait_for_function("() => !!window.jupyterapp", timeout=timeout * 1000)
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    widget, root = open_notebook(page, name, timeout)
    one_kernel(url, token, timeout)
    page.wait_for_selector(f"{root} .jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=timeout * 1000)
    started = ("(root) => [...document.querySelectorAll(root + ' .jp-InputPrompt')]"
               ".some(p => /[*0-9]/.test(p.textContent))")
    for attempt in range(5):  # a Run All asked for the moment the kernel reads idle can come to nothing: ask again
        page.evaluate("(id) => { window.jupyterapp.commands.execute('notebook:run-all-cells', {widgetId: id}); }",
                      widget)
        try:
            page.wait_for_function(started, arg=root, timeout=15_000)
            break
        except Exception:
            if attempt == 4:
                raise
    shown = ("(root) => [(" + PANELS_JS + ")(root).length, [...document.querySelectorAll(root + ' img')]"
             ".every(i => i.complete && i.naturalWidth), document.querySelector('.jp-Dialog')?.innerText || '']")
    deadline = time.monotonic() + 4 * timeout
    while True:  # polled from here: the page may be busy for a while, and a dialog (a dead kernel) ends the wait
        count, loaded, dialog = page.evaluate(shown, root)
        if count >= panels and loaded or dialog:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count} of {panels} panels shown after {4 * timeout:.0f} s")
        time.sleep(0.5)
    if dialog:
        raise RuntimeError(f"JupyterLab shows a dialog: {dialog[:500]}")
    page.wait_for_selector(f"{root} .jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=timeout * 1000)
    errors = page.evaluate("(root) => [...document.querySelectorAll(root + ' .jp-OutputArea-output')]"
                           ".map(o => o.innerText || '').filter(t => t.includes('Traceback'))", root)
    if errors:
        raise RuntimeError("a panel failed to build:\n" + errors[0][:3000])
    return root


def one_kernel(url: str, token: str, timeout: float, settle: float = 1.0) -> None:
    """Waits until JupyterLab has one session and one kernel, the same for ``settle`` s: a notebook opened the moment
    the page is up can have its first kernel replaced (its websocket refused), and cells run on that one never
    return (tests/test_browser.py waits the same way)."""
    import urllib.error

    import browser_support as bs

    deadline, last, since = time.monotonic() + timeout, None, time.monotonic()
    while True:
        try:
            sessions = bs.http_json(f"{url}/api/sessions", token=token) or []
            kernels = bs.http_json(f"{url}/api/kernels", token=token) or []
        except urllib.error.HTTPError as err:  # jupyter_server answers 500 while a kernel is half started
            if err.code < 500 or time.monotonic() > deadline:
                raise
            sessions = kernels = None
        now = None if sessions is None else ([s["kernel"]["id"] for s in sessions], [k["id"] for k in kernels])
        if now != last:
            last, since = now, time.monotonic()
        if now is not None and len(now[1]) == 1 and now[0] == now[1] and time.monotonic() - since >= settle:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"JupyterLab did not settle on one kernel in {timeout:.0f} s: sessions' kernels and "
                               f"kernels {now}")
        time.sleep(0.2)


def press(page, root: str, panel: int, slider: int, key: str, timeout_ms: float = 3000) -> float | None:
    """Press ``key`` on a slider's handle; ms from the keydown to the new picture painted, or None if unchanged."""
    handle = page.locator(f"{root} .jp-OutputArea-output").filter(
        has=page.locator(".widget-slider .noUi-handle")).filter(has=page.locator("img")).nth(panel).locator(
        ".widget-slider .noUi-handle").nth(slider)
    page.evaluate(ARM_JS, [root, panel, slider, timeout_ms])
    handle.focus()
    page.keyboard.press(key)
    return page.evaluate("() => window.__press")


def measure_sliders(page, root: str, widgets: list[str], presses: int) -> list[dict]:
    rows = []
    for panel, widget in enumerate(widgets):
        page.locator(f"{root} .jp-OutputArea-output").filter(has=page.locator(".widget-slider .noUi-handle")).filter(
            has=page.locator("img")).nth(panel).scroll_into_view_if_needed()
        sliders = page.evaluate(SLIDERS_JS, [root, panel])
        for slider, info in enumerate(sliders):
            times, unchanged, turned = [], 0, False
            direction = "ArrowRight"
            for _ in range(presses):
                state = page.evaluate(SLIDERS_JS, [root, panel])[slider]
                if state["now"] == state["max"]:
                    direction = "ArrowLeft"
                elif direction == "ArrowLeft" and state["now"] == state["min"]:
                    direction = "ArrowRight"
                ms = press(page, root, panel, slider, direction)
                if ms is None:  # a value the picture does not show (b past what a record holds): the other way,
                    unchanged += 1  # and on that way until the picture changes
                    if not turned:
                        direction, turned = ("ArrowLeft" if direction == "ArrowRight" else "ArrowRight"), True
                else:
                    turned = False
                    times.append(ms)
                page.wait_for_timeout(150)  # the kernel idle again, and the page
            rows.append(dict(widget=widget, control=info["label"] or f"slider {slider + 1}", ms=times,
                             unchanged=unchanged))
            # every slider of a panel starts where the panel did: one moved before can leave another's presses
            # showing nothing new (b past what k groups of the record hold)
            in_kernel(page, f"PANELS[{widget!r}].set(**START[{widget!r}])")
            page.wait_for_timeout(300)
            print(f"  {widget} {rows[-1]['control']}: {len(times)} presses measured", file=sys.stderr, flush=True)
    return rows


def in_kernel(page, code: str) -> None:
    """Run ``code`` in the open notebook's kernel, silently, as JupyterLab's own requests do."""
    page.evaluate("""async (code) => {
      const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
      await kernel.requestExecute({code, silent: true, store_history: false}).done;
    }""", code)


def busy_check(page, root: str, panel: int) -> dict:
    """Presses the busy panel's slider BUSY_PRESSES times, as fast as the keyboard goes; returns the values its
    callback drew, in order (``drawn``), where the slider ended (``final``) and how long the presses took (``span``,
    s)."""
    handle = page.locator(f"{root} .jp-OutputArea-output").filter(
        has=page.locator(".widget-slider .noUi-handle")).filter(has=page.locator("img")).nth(panel).locator(
        ".widget-slider .noUi-handle").first
    handle.scroll_into_view_if_needed()
    handle.focus()
    start = page.evaluate(STATUS_JS, [root, panel])
    begin = time.perf_counter()
    for _ in range(BUSY_PRESSES):
        page.keyboard.press("ArrowRight")
    span = time.perf_counter() - begin
    deadline = time.monotonic() + BUSY_PRESSES * BUSY_SLEEP_S + 30
    status, still = start, 0
    while time.monotonic() < deadline and still < 3:  # the same for 1.5 s: the kernel is done
        page.wait_for_timeout(500)
        now = page.evaluate(STATUS_JS, [root, panel])
        still = still + 1 if now == status and now != start else 0
        status = now
    return dict(drawn=[int(v) for v in status.removeprefix("drawn:").split()], span=span,
                final=round(float(page.evaluate(SLIDERS_JS, [root, panel])[0]["now"])))


def measure(chromium: str, base: Path, widgets: list[str], presses: int,
            timeout: float = START_TIMEOUT) -> tuple[list[dict], dict]:
    """In JupyterLab served from a folder under ``base``: every slider of the panels ``widgets`` pressed ``presses``
    times (:func:`measure_sliders`' rows), then the busy check (:func:`busy_check`'s). ``timeout``: seconds for
    JupyterLab to start, the page to load, the notebook to open (and four times that for the panels to be built).
    A failure says what JupyterLab logged last."""
    import browser_support as bs

    folder, records = base / "notebooks", base / "records"
    folder.mkdir()
    records.mkdir()
    if {"batch_widget", "costs_widget"} & set(widgets):
        record_inputs(records)
    name = write_notebook(folder, widgets, records).name
    with bs.launched_chromium(chromium) as browser:  # which checks that nothing it saw start outlives it
        begin = time.perf_counter()
        server, url, token = start_lab(folder, base / "lab", timeout)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            try:
                root = open_and_run(page, url, token, name, len(widgets) + 1, timeout)
            except Exception as err:
                raise RuntimeError(f"{err}\nJupyterLab's log ends:\n{server.log_tail(30)}") from err
            print(f"JupyterLab up and every panel built in {time.perf_counter() - begin:.1f} s", flush=True)
            rows = measure_sliders(page, root, widgets, presses)
            busy = busy_check(page, root, len(widgets))
            page.close()
        finally:
            left = server.stop()  # and its kernel
            if left:
                print(f"processes JupyterLab left running (killed): {left}", file=sys.stderr)
    return rows, busy


def only_the_newest(busy: dict) -> bool:
    """Whether the busy panel's callback drew, after its first value, only the newest value each time it was free:
    values in the order pressed, the last the one the slider ended on, and no more draws than the presses' span
    leaves room for (a queue of stale frames draws every value pressed)."""
    drawn, room = busy["drawn"][1:], 2 + int(busy["span"] / BUSY_SLEEP_S)
    return drawn == sorted(set(drawn)) and drawn[-1:] == [busy["final"]] and len(drawn) <= room


def summary(widget: str, control: str, ms: list[float], unchanged: int) -> str:
    if not ms:
        return f"  {widget:<19} {control:<28} {0:7d} {'-':>8} {'-':>8} {'-':>8} {unchanged:9d}  MISSED (no picture)"
    median = statistics.median(ms)
    p90 = statistics.quantiles(ms, n=10)[-1] if len(ms) > 1 else ms[0]
    verdict = "met" if median <= TARGET_MEDIAN_MS else "MISSED"
    return (f"  {widget:<19} {control:<28} {len(ms):7d} {median:6.0f}ms {p90:6.0f}ms {min(ms):6.0f}ms "
            f"{unchanged:9d}  {verdict}")


def main(argv=None) -> int:
    argv = keep_if_asked(__file__, argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=8, help="key presses per slider (default 8)")
    parser.add_argument("--only", nargs="+", choices=WIDGETS, default=list(WIDGETS), help="panels to measure")
    parser.add_argument("--keep", action="store_true", help="append what this run prints to benchmarks/HISTORY.md")
    args = parser.parse_args(argv)

    import browser_support as bs

    chromium = bs.find_chromium()
    if chromium is None:
        print(bs.NO_CHROMIUM, file=sys.stderr)
        return 2
    print(machine_line(), flush=True)
    print(references(5), flush=True)
    start = time.perf_counter()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="dpviz-bench-browser-") as tmp:
        rows, busy = measure(chromium, Path(tmp), args.only, args.presses)
    load_after = os.getloadavg()[0]

    print(f"\nkey press to new picture, Chromium + JupyterLab, {WIDTH}x{HEIGHT} "
          f"(target: every slider's median <= {TARGET_MEDIAN_MS:.0f} ms at a load <= {TARGET_LOAD:.0f})")
    print(f"  {'widget':<19} {'slider':<28} {'presses':>7} {'median':>8} {'p90':>8} {'best':>8} {'unchanged':>9}  "
          "target")
    for widget in args.only:
        mine = [row for row in rows if row["widget"] == widget]
        print(summary(widget, "all sliders", [t for row in mine for t in row["ms"]],
                      sum(row["unchanged"] for row in mine)))
        for row in mine:
            print(summary("", row["control"], row["ms"], row["unchanged"]))
    missed = [f"{row['widget']} {row['control']}" for row in rows
              if not row["ms"] or statistics.median(row["ms"]) > TARGET_MEDIAN_MS]
    print(f"\ntarget met by {len(rows) - len(missed)} of {len(rows)} sliders"
          + (f"; missed by {', '.join(missed)}" if missed else ""))
    newest = only_the_newest(busy)
    print(f"busy callback ({BUSY_SLEEP_S * 1e3:.0f} ms a move), {BUSY_PRESSES} presses in {busy['span'] * 1e3:.0f} ms, "
          f"the slider at {busy['final']}: it drew {' '.join(map(str, busy['drawn']))}: "
          + ("each time it was free, only the newest value (no queue of stale frames)" if newest else
             "STALE FRAMES QUEUED"))
    if max(load_before, load_after) > TARGET_LOAD:
        print(f"note: load average {max(load_before, load_after):.2f} above the target's {TARGET_LOAD:.0f}: "
              "these times are a busy machine's")
    print(machine_line())
    print(references(5))
    print(f"total {time.perf_counter() - start:.0f} s")
    return 0 if newest else 1


if __name__ == "__main__":
    sys.exit(main())
