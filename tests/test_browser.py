"""Every chapter in a real browser: JupyterLab runs it, Voilà serves chapter 06, headless Chromium looks.

nbval checks what the kernel sends; this checks what a reader sees. One JupyterLab server serves every
notebook in notebooks/ (a temporary copy, so running cells never touches the committed files) to three
pages, each loaded once (the first before any chapter, the others when their first chapter opens, while the
chapters before it run). A page opens a chapter inside the running app, clears its saved outputs and runs all
cells; the page must then show no traceback or error, every widget output must be a rendered widget (not
its text repr, which is what a missing widgets front end looks like), a slider moved with the keyboard must
change its figure, and the first self-check card must reveal its answer on a click. The chapter is then
closed and its kernel shut down, and every process under that kernel must be gone. The pages take turns:
while one chapter is checked, the next two already run in the other pages (alone, a chapter leaves a third
of two cores idle, its kernel waiting for the page and the page for the kernel; three at once leave about a
sixth, and took the module from 138 s to 105 s on a quiet 2-core machine). Each chapter is still
its own test item (parametrized), passing or failing on its own, a failure while it was started included;
they share the module-scoped server and pages. Chapter 06 gets the same checks served as an app by Voilà.
A screenshot of each chapter (its first screen; the whole chapter with DPVIZ_BROWSER_SCREENSHOTS=full), the
servers' logs and the run times (the page loads, then each chapter by phase) go to test-output/browser/.

Chromium is Debian's headless shell (``apt-get install -y chromium-headless-shell``; .ci/run installs it; Debian's
full ``chromium`` is taken where the shell is missing), driven by Playwright's Python package. The module skips,
saying so in the summary, only when no Chromium can be found.
Every server is stopped by PID on every exit path, and the test fails if any process it started
(a server, a kernel, a rank a kernel launched) is still running afterwards.

Set DPVIZ_BROWSER_NOTEBOOKS to a folder to run the same checks on other notebooks (development).
"""

from __future__ import annotations

import html
import json
import os
import re
import secrets
import shutil
import sys
import time
import urllib.error
from pathlib import Path

import pytest

from wheel_support import use_wheel_kernel
from browser_support import (
    NO_CHROMIUM,
    OUTPUT,
    PANEL_MAX_PX,
    ROOT,
    WIDGET_MIME,
    OUTPUTS_JS,
    expected_answer,
    find_chromium,
    chapter_screenshot,
    is_local,
    launched_chromium,
    http_json,
    jupyter_env,
    move_slider,
    panel_problems,
    problems_in_outputs,
    reveal_first_answer,
    saved_expectations,
    slider_figures,
    slider_panels,
    start_listening,
    unlabelled_controls,
)

NOTEBOOKS = Path(os.environ.get("DPVIZ_BROWSER_NOTEBOOKS") or ROOT / "notebooks").resolve()
CHAPTERS = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))  # whatever exists when the tests are collected
VOILA_WIDGET = "costs_widget"  # Voilà serves the chapter that displays this panel, whatever its number


def _chapter_calling(widget: str) -> str:
    """The first notebook whose code calls ``widget(``; a placeholder name (the test then skips) where none does."""
    for name in CHAPTERS:
        cells = json.loads((NOTEBOOKS / name).read_text()).get("cells", [])
        if any(c.get("cell_type") == "code" and f"{widget}(" in "".join(c.get("source", "")) for c in cells):
            return name
    return f"(no chapter calls {widget})"


VOILA_CHAPTER = _chapter_calling(VOILA_WIDGET)
PREDICTION_CHAPTER = _chapter_calling("Prediction.choice")  # where the page commits a prediction and reads the answer
MODEL_NOT_FOUND = "model not found"  # Voilà's widget manager asked for a model the page had not been sent

# The screen a room's laptop has: JupyterLab at 1366×768 with the file browser open (its default), where every
# slider panel must show its controls and its figure together.
WIDTH, HEIGHT = 1366, 768
START_TIMEOUT = 120  # s for a server to come up on a busy 2-core machine
RUN_TIMEOUT = 420  # s for one chapter's Run All (chapters launch real multi-process runs)
TARGET = 120  # s for the whole module (every chapter, both servers, the page load) on 2 cores
LAB_WORKSPACE = "dpviz-browser"  # each page's own workspace: a fresh one restores nothing
LANES = 3  # JupyterLab pages, each with at most one chapter open: the next two run while one is checked
VOILA_ROOT = "body"
VOILA_SCROLLER = "#rendered_cells"  # Voilà's page scrolls inside this panel
# Each chapter's screenshot shows its first screen at 1366×768 once Run All and the checks are over (scrolled back
# to the top); with DPVIZ_BROWSER_SCREENSHOTS=full it shows the whole chapter (the viewport grown to the chapter's
# height, up to 16000 px: every cell laid out and painted once more). The checks are the same either way.
# Whole-chapter screenshots cost about 1.5 core-seconds each on 2 cores (six of them 9, in a five-chapter run on
# 2026-12-02).
FULL_SCREENSHOTS = os.environ.get("DPVIZ_BROWSER_SCREENSHOTS", "") == "full"

# Settings for our JupyterLab only: no news or update toasts over the page, and the windowing a student gets
# (JupyterLab 4.6's default, named so that a later default cannot change it): every cell stays in the DOM, where the
# checks and the full screenshot need it, and the browser skips laying out and painting the cells off screen. The
# "none" mode (every cell laid out at every output) cost 127-142 core-seconds for five chapters and Voila here (three
# runs), this one 110-131 (four runs, taking turns with those).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false", "checkForUpdates": False, "doNotDisturbMode": True},
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "contentVisibility"},
}


class _Timing:
    """Collects per-chapter times and prints them, with the total, in pytest's terminal summary."""

    def __init__(self):
        self.start = time.monotonic()
        self.end = self.start  # when the last chapter finished: the summary is printed later, after other tests
        self.rows: list[tuple[str, float, str]] = []
        self.skipped: str | None = None
        self.processes: dict[str, tuple] = {}  # server -> (processes seen in its tree, those left running)

    def add(self, name: str, seconds: float, outcome: str, phases: dict | None = None) -> None:
        if phases:
            outcome += "  (" + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()) + ")"
        self.rows.append((name, seconds, outcome))
        self.end = time.monotonic()
        self.write()

    def lines(self) -> list[str]:
        if self.skipped:
            return [f"browser test SKIPPED: {self.skipped}"]
        total = self.end - self.start
        out = [f"{name:<52} {seconds:7.1f} s  {outcome}" for name, seconds, outcome in self.rows]
        out.append(f"{'total (browser, servers, all chapters)':<52} {total:7.1f} s  (target <= {TARGET} s on 2 cores)")
        for server, (seen, left) in self.processes.items():
            state = f"{len(left)} STILL RUNNING after it stopped (killed)" if left else "none left running"
            out.append(f"{server}: {seen} processes seen under it (kernels, ranks, helpers), {state}")
        return out

    def write(self) -> None:
        OUTPUT.mkdir(parents=True, exist_ok=True)
        (OUTPUT / "timing.txt").write_text("\n".join(self.lines()) + "\n")

    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.section("browser test (test-output/browser/)")
        for line in self.lines():
            terminalreporter.write_line(line)


@pytest.fixture(scope="module")
def timing(request):
    report = _Timing()
    request.config.pluginmanager.register(report, "dpviz-browser-timing")
    yield report
    report.write()


@pytest.fixture(scope="module")
def chromium(timing):
    path = find_chromium()
    if path is None:
        timing.skipped = f"{NO_CHROMIUM}; nothing was checked in a browser."
        timing.write()
        pytest.skip(timing.skipped)
    return path


@pytest.fixture(scope="module")
def browser(chromium):
    """Headless Chromium driven by Playwright; afterwards no Chromium or Playwright driver process may be left."""
    with launched_chromium(chromium) as b:
        yield b


@pytest.fixture(scope="module")
def served_copy(tmp_path_factory):
    """A temporary copy of the notebooks folder alone: the servers' root, so no run writes into the repository,
    and a chapter that reads anything else of the checkout fails here (its kernel is the wheel's, see ``lab``).

    Only for a development folder (DPVIZ_BROWSER_NOTEBOOKS) is what its notebooks read from beside it (a quoted
    "../figures/records" in a code cell) copied to the same place beside the copy, so relative paths resolve.
    """
    base = tmp_path_factory.mktemp("browser")
    copy = base / "notebooks"
    shutil.copytree(NOTEBOOKS, copy, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    if not os.environ.get("DPVIZ_BROWSER_NOTEBOOKS"):
        return copy
    for relative in sorted(sibling_paths(copy)):
        source, target = NOTEBOOKS.parent / relative, base / relative
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        elif source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return copy


def sibling_paths(folder: Path) -> set[str]:
    """Paths the notebooks in ``folder`` name as quoted "../<path>" strings in their code cells."""
    found = set()
    for path in folder.glob("*.ipynb"):
        for cell in json.loads(path.read_text()).get("cells", []):
            if cell.get("cell_type") == "code":
                source = "".join(cell.get("source", ""))
                found.update(m.rstrip("/") for m in re.findall(r"[\"']\.\./([\w./-]+)[\"']", source)
                             if ".." not in m)
    return found


@pytest.fixture(scope="module")
def lab(served_copy, tmp_path_factory, browser, timing, wheel_python):
    """JupyterLab on 127.0.0.1 with a token and folders of its own; stopped (and checked) on every exit path.

    Its ``python3`` kernel is the built wheel's environment (conftest's ``wheel_python``), so every chapter runs
    here as a student's install runs it, from the package alone; each chapter's test checks the kernel's python.
    """
    base = tmp_path_factory.mktemp("lab")
    env = jupyter_env(base)
    use_wheel_kernel(env, wheel_python)
    labconfig = Path(env["JUPYTER_CONFIG_DIR"]) / "labconfig"
    labconfig.mkdir(parents=True, exist_ok=True)
    (labconfig / "default_setting_overrides.json").write_text(json.dumps(LAB_SETTINGS, indent=1))
    (Path(env["JUPYTER_CONFIG_DIR"]) / "jupyter_lab_config.json").write_text(
        json.dumps({"LabApp": {"news_url": None}}))
    token = secrets.token_hex(16)

    def cmd(port: int) -> list[str]:
        return [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={served_copy}", "--ServerApp.terminals_enabled=False",
                "--ServerApp.allow_root=True",  # CI runs as root
                "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: the page opens and closes chapters with its commands
                "--KernelManager.shutdown_wait_time=1.0"]  # a kernel that has not exited 1 s after being asked is killed

    # The URL in the log comes before the port is bound (start_listening waits for both).
    server, port, _ = start_listening("JupyterLab", cmd, lambda port: rf"http://127\.0\.0\.1:{port}/lab",
                                      cwd=served_copy, env=env, log=OUTPUT / "jupyterlab.log", timeout=START_TIMEOUT)
    server.url, server.token = f"http://127.0.0.1:{port}", token
    server.kernel_python = str(wheel_python)
    try:
        http_json(f"{server.url}/api/status", token=token)
        yield server
    finally:
        try:
            shutdown_kernels(server)
        finally:
            left = server.stop()
        timing.processes["JupyterLab"] = (len(server.seen), left)
        assert server.proc.returncode is not None
        assert not left, f"processes JupyterLab started were still running after it stopped (killed now): {left}"


EXTERNAL: dict[str, list[str]] = {"JupyterLab": [], "Voilà": []}  # requests a page made to another host


class LabPage:
    """One of the JupyterLab pages that chapters are opened in, one at a time, without loading the page again.

    JupyterLab runs with ``--LabApp.expose_app_in_browser``, so the page has the app as ``window.jupyterapp``
    and this drives it through its own commands: ``docmanager:open`` a chapter, ``notebook:clear-all-cell-outputs``
    and ``notebook:run-all-cells`` on it (the commands the Edit and Run menus call), then shut its kernel down and
    close it. The page is loaded again only if it stopped answering (a crash), in a fresh workspace.
    """

    def __init__(self, context, server, timing, lane: int):
        self.context, self.server, self.timing, self.lane = context, server, timing, lane
        self.page = None
        self.widget = ""  # the id of the open chapter's panel
        self.loads = 0
        self.errors: list[str] = []  # JavaScript errors on the page since the current chapter began

    def load(self, why: str = "once, before the first chapter; chapters open in it in turn") -> None:
        """Loads JupyterLab (in a workspace of its own: nothing restored, no '?reset' reload), waits until the app
        has restored its layout, the file browser open beside the chapter (JupyterLab's default)."""
        start = time.monotonic()
        if self.page is not None and not self.page.is_closed():
            self.page.close()
        self.page = self.context.new_page()
        self.page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
        self.page.on("pageerror", lambda err: self.errors.append(str(err)))
        self.loads += 1
        self.page.goto(f"{self.server.url}/lab/workspaces/{LAB_WORKSPACE}-{self.lane}-{self.loads}"
                       f"?token={self.server.token}",
                       timeout=START_TIMEOUT * 1000)
        self.page.wait_for_function("() => !!window.jupyterapp", timeout=START_TIMEOUT * 1000)
        self.page.evaluate("async () => { await window.jupyterapp.restored; }")
        self.timing.add(f"JupyterLab page {self.lane + 1} load ({why})", time.monotonic() - start, "loaded")

    def ensure(self, name: str) -> None:
        """Loads the page for its first chapter, or again if it no longer answers (a crash while an earlier chapter
        ran)."""
        if self.page is None:
            self.load(f"once, for {name}; chapters open in it in turn")
            return
        try:
            alive = not self.page.is_closed() and self.page.evaluate("() => !!window.jupyterapp")
        except Exception:
            alive = False
        if not alive:
            self.load(f"again: the page stopped answering before {name}")

    def open(self, name: str) -> str:
        """Opens notebook ``name`` (a path under the server's root) in the app, with its kernel, as the current tab;
        returns a CSS selector for its panel once the kernel is idle."""
        # The command is started, not awaited in the page, and Python polls for the notebook's context to be ready:
        # a page function awaiting it failed once in a clean-clone run on 2 cores ("Resulting promise was garbage
        # collected": the page dropped the promise still pending; why, it did not say).
        self.page.evaluate("(path) => { window.jupyterapp.commands.execute('docmanager:open', "
                           "{path, factory: 'Notebook'}); }", name)
        widget = self.page.wait_for_function(
            """(path) => {
                 const app = window.jupyterapp;
                 const w = [...app.shell.widgets('main')].find(w => w.context && w.context.path === path);
                 if (!w || !w.context.isReady) return null;
                 app.shell.activateById(w.id);
                 return w.id;
               }""", arg=name, timeout=START_TIMEOUT * 1000).json_value()
        self.widget = widget
        root = f".jp-NotebookPanel[id='{widget}']"
        self.page.wait_for_selector(f"{root} .jp-Notebook-ExecutionIndicator[data-status='idle']",
                                    timeout=START_TIMEOUT * 1000)
        return root

    def command(self, command: str) -> None:
        """Starts one of JupyterLab's notebook commands on the open chapter (not awaited: Run All takes minutes,
        and the page is watched for its end instead)."""
        self.page.evaluate("([command, id]) => { window.jupyterapp.commands.execute(command, {widgetId: id}); }",
                           [command, self.widget])

    def close_notebooks(self) -> int:
        """Dismisses any dialog, shuts down the kernel of every open notebook (through its session, as the Kernel
        menu does) and closes it unsaved (the served copy is thrown away); returns how many were open. Leaves the page
        to be loaded again if it does not answer."""
        if self.page is None:  # it never loaded
            return 0
        try:
            closed = self.page.evaluate(
                """async () => {
                     for (const b of document.querySelectorAll('.jp-Dialog .jp-mod-reject')) b.click();
                     const app = window.jupyterapp;
                     const docs = [...app.shell.widgets('main')].filter(w => w.context && w.sessionContext);
                     for (const w of docs) {
                       w.context.model.dirty = false;  // no 'save your work?' dialog
                       await Promise.race([w.sessionContext.shutdown(),
                                           new Promise(done => setTimeout(done, 30000))]);
                       w.dispose();
                     }
                     return docs.length;
                   }""")
            self.page.wait_for_function("() => !document.querySelector('.jp-NotebookPanel')", timeout=30_000)
            self.page.set_viewport_size({"width": WIDTH, "height": HEIGHT})  # the full screenshot grew it
            return closed
        except Exception as err:  # the REST API and the PID checks that follow still stop every kernel
            print(f"could not close the notebook in the page ({err}); the page will be loaded again")
            self.page.close()
            return 0


class Chapter:
    """A chapter opened in one of the pages: where it is, its kernel and that kernel's processes, and its times."""

    def __init__(self, name: str, lane: LabPage):
        self.name, self.lane = name, lane
        self.start = time.monotonic()
        self.clock = self.start
        self.phases: dict[str, float] = {}
        self.root = self.kernel = None
        self.tree = None  # the kernel's ProcessTree
        self.error: str | None = None  # what went wrong while it was being started

    def lap(self, phase: str) -> None:
        now = time.monotonic()
        self.phases[phase] = now - self.clock
        self.clock = now


class Lanes:
    """The JupyterLab pages, each with at most one chapter open. :meth:`start` opens a chapter in a free page and
    starts its Run All without waiting for it; each chapter's test starts the next selected chapters this way (as
    many as there are free pages) before it waits for its own, so they run while it is checked, screenshotted and
    closed."""

    def __init__(self, pages: list[LabPage], server, order: list[str]):
        self.pages, self.server, self.order = pages, server, order
        self.open: dict[str, Chapter] = {}

    def start(self, name: str) -> Chapter:
        """The chapter ``name``, started now in a free page unless it already was. A failure while starting it is
        kept on the chapter (its own test reports it), not raised into the test that asked for it early."""
        if name in self.open:
            return self.open[name]
        busy = {chapter.lane for chapter in self.open.values()}
        lane = next(page for page in self.pages if page not in busy)
        chapter = self.open[name] = Chapter(name, lane)
        try:
            lane.ensure(name)  # the same page as before, unless a chapter left it broken
            lane.errors.clear()
            chapter.root = lane.open(name)
            chapter.kernel = one_kernel(self.server, name, open_names=set(self.open))
            chapter.tree = self.server.kernel_tree(chapter.kernel)
            if chapter.tree is None:
                raise AssertionError(f"no process runs kernel {chapter.kernel} of {name}")
            chapter.lap("open")
            # The committed outputs and execution counts are on the page until cleared: clear them so that
            # everything judged below comes from this run.
            lane.command("notebook:clear-all-cell-outputs")
            lane.page.wait_for_function(
                """(root) => !document.querySelector(root + ' .jp-OutputArea-output') &&
                     [...document.querySelectorAll(root + ' .jp-CodeCell .jp-InputPrompt')]
                       .every(p => !/\\d/.test(p.textContent))""", arg=chapter.root, timeout=30_000)
            lane.command("notebook:run-all-cells")
        except Exception as err:
            chapter.error = f"{type(err).__name__}: {err}"
        return chapter

    def start_next(self, name: str) -> None:
        """Starts the selected chapters after ``name``, in order, while a page is free for them."""
        for later in self.order[self.order.index(name) + 1:] if name in self.order else []:
            if len(self.open) >= len(self.pages):
                break
            if later not in self.open:
                self.start(later)

    def close(self, chapter: Chapter) -> list[str]:
        """Shuts the chapter's kernel down (through its session, as the Kernel menu does; then through the REST API
        if the page could not) and closes it; returns the processes of its kernel that were still running after
        that and had to be killed."""
        try:
            if chapter.tree is not None:
                chapter.tree.remember_children()
            chapter.lane.close_notebooks()
        finally:
            del self.open[chapter.name]
            if chapter.kernel is not None:
                shutdown_kernels(self.server, kernel=chapter.kernel)
            left = chapter.tree.wait_children_gone() if chapter.tree is not None else []
        return left


@pytest.fixture(scope="module")
def lanes(request, browser, lab, timing):
    """The JupyterLab pages (a browser context each) shared by every chapter; the first loaded here, each other one
    when its first chapter opens."""
    order = [item.callspec.params["name"] for item in request.session.items
             if getattr(item, "originalname", "") == "test_chapter_in_jupyterlab" and hasattr(item, "callspec")]
    host = lab.url.split("/")[2]
    contexts, pages = [], []
    try:
        for lane in range(LANES):
            context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
            context.on("request", lambda r: None if is_local(r.url, host) else EXTERNAL["JupyterLab"].append(r.url))
            contexts.append(context)
            pages.append(LabPage(context, lab, timing, lane))
        pages[0].load()  # the others load when their first chapter opens, while the first one's runs
        yield Lanes(pages, lab, order)
    finally:
        for context in contexts:
            context.close()


def shutdown_kernels(server, *, kernel: str | None = None) -> None:
    """Asks JupyterLab to shut down every session and kernel (REST API), or only those of kernel id ``kernel``,
    after noting their processes."""
    server.remember_children()
    if server.proc.poll() is not None:
        return
    try:
        for session in http_json(f"{server.url}/api/sessions", token=server.token) or []:
            if kernel is None or session["kernel"]["id"] == kernel:
                http_json(f"{server.url}/api/sessions/{session['id']}", method="DELETE", token=server.token,
                          timeout=30)
        for found in http_json(f"{server.url}/api/kernels", token=server.token) or []:
            if kernel is None or found["id"] == kernel:
                http_json(f"{server.url}/api/kernels/{found['id']}", method="DELETE", token=server.token, timeout=30)
    except OSError as err:  # the server's stop, next, still shuts down what is left
        print(f"could not shut kernels down through the REST API: {err}")


def _screenshot_name(name: str, app: str) -> Path:
    return OUTPUT / f"{Path(name).stem}.{app}.png"


def _failure_screenshot(page, name: str, app: str) -> None:
    """Best effort: the page as it was when a check failed (the failure itself is what gets reported)."""
    try:
        page.screenshot(path=str(_screenshot_name(name, f"{app}-failed")), full_page=True)
    except Exception:
        pass


def _check_page(page, root: str, expect: dict, name: str, app: str, *, widget_wait: float = 60) -> list[str]:
    """The checks both apps share; returns what went wrong, in words. Widget views get up to ``widget_wait`` s
    to render."""
    tag = "voila" if app.startswith("Voil") else "jupyterlab"
    failures = []
    page.wait_for_timeout(100)  # widget views render just after their output arrives (the loop below waits for them)
    deadline = time.monotonic() + widget_wait
    while True:  # widget views render asynchronously: give them time before judging
        outputs = page.evaluate(OUTPUTS_JS, root)
        rendered = sum(1 for o in outputs if o["mime"] == WIDGET_MIME and o["widget"])
        found = problems_in_outputs(outputs)
        if (rendered >= expect["widget_outputs"] and not found["unrendered"]) or time.monotonic() > deadline:
            break
        if found["errors"] and time.monotonic() > deadline - widget_wait + 3:
            break  # both apps stop at a cell's error: the widgets of the cells after it will not come
        if any(MODEL_NOT_FOUND in u for u in found["unrendered"]) and time.monotonic() > deadline - widget_wait + 5:
            break  # a view whose model never came stays an error: waiting longer changes nothing
        page.wait_for_timeout(200)
    failures += [f"error output:\n{e}" for e in found["errors"]]
    failures += [f"widget not rendered: {u}" for u in found["unrendered"]]
    if rendered < expect["widget_outputs"]:
        failures.append(f"{rendered} rendered widget outputs; the saved notebook has {expect['widget_outputs']} "
                        "(without the widgets front end, jupyterlab_widgets, in the server's environment, widgets "
                        "show as text or a static image)")
    n_sliders = page.locator(f"{root} .widget-slider").count()
    n_buttons = page.locator(f"{root} button.jupyter-button, {root} .widget-toggle-button").count()
    if expect["slider"] and not n_sliders:
        failures.append("the notebook displays a slider but the page has none")
    has_cards = page.locator(f"{root} button", has_text="Show answer").count() > 0
    if expect["cards"] and not has_cards:
        failures.append("the notebook displays self-check cards but the page has no 'Show answer' button")

    # Each panel as a room's laptop shows it, before any move: image not scaled up, and (in JupyterLab at
    # 1366×768) controls and figure within one screen.
    panels = slider_panels(page, root)
    failures += panel_problems(panels, max_height=PANEL_MAX_PX if tag == "jupyterlab" else None)
    if panels:
        print(f"{name} in {app}: slider panels " + ", ".join(
            f"{p['widget'] or i + 1} {p['height']:.0f} px tall, image {p['shown']:.0f}/{p['natural']} px"
            for i, p in enumerate(panels)))
    for i in range(slider_figures(page, root)):
        moved = move_slider(page, root, i, snapshot=OUTPUT / f"{Path(name).stem}.{tag}.slider{i + 1}-unchanged.png")
        if moved["tabs"] is None:
            failures.append(f"slider figure {i + 1}: Tab from the start of its panel never reached its first slider")
        if not moved["changed"]:
            failures.append(f"slider figure {i + 1}: {moved['key']} x3 left the figure unchanged "
                            f"(readout {moved['before']['readout']!r} -> {moved['after']['readout']!r})")
        elif not moved["after"]["spoken"].startswith("The picture now") or \
                moved["after"]["spoken"] == moved["before"]["spoken"]:
            failures.append(f"slider figure {i + 1}: its text alternative (the aria-live region) did not follow "
                            f"the move: {moved['before']['spoken'][:100]!r} -> {moved['after']['spoken'][:100]!r}")
    failures += [f"a control without a label (ipywidgets description): {c}" for c in unlabelled_controls(page, root)]
    if expect["slider"] and not slider_figures(page, root):
        failures.append("no output holds both a slider and a figure")

    if expect["cards"] and has_cards:
        shown = reveal_first_answer(page, root)
        want = expected_answer(expect["cards_chapter"])
        if shown["label"] != "Hide answer" or not shown["answer"]:
            failures.append(f"clicking 'Show answer' showed no answer (button now {shown['label']!r})")
        elif want and " ".join(html.unescape(shown["answer"]).split()) != want:
            failures.append(f"the first card's answer reads {shown['answer'][:200]!r}, dpviz computes {want[:200]!r}")
    # A callback that failed while the slider moved writes its traceback under the figure: look again.
    after = problems_in_outputs(page.evaluate(OUTPUTS_JS, root))
    failures += [f"error output after moving sliders and clicking:\n{e}" for e in after["errors"]
                 if e not in found["errors"]]
    print(f"{name} in {app}: {rendered} widget outputs rendered, {n_sliders} sliders, {n_buttons} buttons")
    return failures


def _predict_then_answer(page, root: str, widget_id: str, *, timeout: float = 60) -> list[str]:
    """As a student: picks the first answer of the chapter's first prediction, commits it, runs the cell that
    answers it (the first code cell after it calling ``.answer(``) again, and reads the sentence it prints."""
    box = page.locator(f"{root} .jp-OutputArea-output").filter(has_text="Predict first.").filter(
        has=page.locator("input[type=radio]")).first
    if not box.count():
        return ["the chapter has a Prediction.choice but the page shows no prediction with choices"]
    box.scroll_into_view_if_needed()
    box.locator("input[type=radio]").first.check()
    box.get_by_role("button", name="Commit my prediction").click()
    try:
        box.get_by_text("Committed:").wait_for(timeout=timeout * 1000)
    except Exception:
        return ["clicking 'Commit my prediction' did not commit the chosen answer"]
    index = page.evaluate(
        """([root, start]) => {
             const cells = [...document.querySelector(root).querySelectorAll('.jp-Cell')];
             const asked = cells.findIndex(c => (c.querySelector('.jp-OutputArea')?.textContent || '')
                                                 .includes('Predict first.'));
             return cells.findIndex((c, i) => i > asked && c.classList.contains('jp-CodeCell') &&
                                    (c.querySelector('.cm-content')?.textContent || '').includes('.answer('));
           }""", [root, 0])
    if index < 0:
        return ["no code cell after the prediction calls .answer("]
    page.evaluate("""([id, index]) => {
                       const app = window.jupyterapp;
                       const w = [...app.shell.widgets('main')].find(w => w.id === id);
                       w.content.activeCellIndex = index;
                       app.commands.execute('notebook:run-cell');
                     }""", [widget_id, index])
    cell = page.locator(f"{root} .jp-Cell").nth(index)
    try:
        cell.locator(".jp-OutputArea-output").filter(has_text="You predicted").wait_for(timeout=timeout * 1000)
    except Exception:
        shown = cell.locator(".jp-OutputArea").text_content() or ""
        return [f"after a committed prediction its answer cell shows {shown[:200]!r}, not 'You predicted ...'"]
    print(f"prediction answered: {cell.locator('.jp-OutputArea').text_content()[:160]!r}")
    return []


def kernel_pythons(pid: int) -> set[str]:
    """The python executables of the ipykernel processes that are process ``pid`` or run under it (argv[0] of each)."""
    import psutil

    found = set()
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return found
    for process in processes:
        try:
            argv = process.cmdline()
        except psutil.Error:
            continue
        if "ipykernel_launcher" in argv[1:3]:
            found.add(argv[0])
    return found


def one_kernel(server, name: str, *, open_names: set[str], settle: float = 0.3, timeout: float = 60) -> str:
    """The id of the one kernel JupyterLab runs for notebook ``name``, once that has held for ``settle`` s.
    Fails unless, within ``timeout`` s, JupyterLab has exactly one session for each chapter of ``open_names``
    (``name`` among them) and no other, and exactly one kernel for each of those sessions and no other."""
    deadline, last, since = time.monotonic() + timeout, None, time.monotonic()
    while True:
        try:
            sessions = http_json(f"{server.url}/api/sessions", token=server.token) or []
            kernels = http_json(f"{server.url}/api/kernels", token=server.token) or []
        except urllib.error.HTTPError as err:  # jupyter_server answers 500 while a kernel is half started
            if err.code < 500 or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
            continue
        now = sorted((s["path"], s["kernel"]["id"]) for s in sessions), sorted(k["id"] for k in kernels)
        if now != last:
            last, since = now, time.monotonic()
        paths = [path for path, _ in now[0]]
        ok = sorted(paths) == sorted(open_names) and now[1] == sorted(kernel for _, kernel in now[0])
        if ok and time.monotonic() - since >= settle:
            return dict(now[0])[name]
        if time.monotonic() > deadline:
            raise AssertionError(f"expected one session for each open chapter ({sorted(open_names)}), each with its "
                                 f"own kernel, and nothing else; JupyterLab has sessions {now[0]} and kernels {now[1]}")
        time.sleep(0.1)


def _wait_for_run_all(page, root: str, timeout: float) -> dict:
    """Waits until Run All has ended: the kernel idle and no cell queued or running, or a dialog (a dead
    kernel) shown; returns the last state seen (how many non-empty code cells show an execution count). It reads
    textContent, not innerText: innerText would make the page lay itself out at every poll, ten times a second."""
    state_js = """(root) => {
      const panel = document.querySelector(root);
      if (!panel) return null;
      const cells = [...panel.querySelectorAll('.jp-CodeCell')].filter(
        c => (c.querySelector('.cm-content')?.textContent || '').trim() !== '');
      const prompts = cells.map(c => (c.querySelector('.jp-InputPrompt')?.textContent || '').trim());
      const ind = panel.querySelector('.jp-Notebook-ExecutionIndicator');
      return {cells: cells.length, done: prompts.filter(p => /^\\[\\d+\\]:?$/.test(p)).length,
              busy: prompts.filter(p => p.startsWith('[*')).length,
              status: ind ? ind.getAttribute('data-status') : '',
              dialog: document.querySelector('.jp-Dialog')?.innerText || ''};
    }"""
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        state = page.evaluate(state_js, root)
        if state:
            if state["dialog"]:
                return state
            # Run All marks every queued cell [*] at once, so nothing busy after a cell ran means it has ended
            # (all ran, or an error stopped it).
            if state["done"] > 0 and not state["busy"] and state["status"] == "idle":
                page.wait_for_timeout(200)
                again = page.evaluate(state_js, root)
                if again == state:
                    return state
        page.wait_for_timeout(100)
    raise TimeoutError(f"Run All did not finish within {timeout:.0f} s; last state {state}")


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", CHAPTERS or [pytest.param(None, marks=pytest.mark.skip(
    reason=f"no notebooks in {NOTEBOOKS} yet"))])
def test_chapter_in_jupyterlab(name, lab, lanes, timing, served_copy):
    expect = saved_expectations(served_copy / name)
    _screenshot_name(name, "jupyterlab-failed").unlink(missing_ok=True)  # an earlier run's, now misleading
    chapter = lanes.start(name)  # started already while the chapter before it was checked, unless it is the first
    lanes.start_next(name)  # the next chapters run in the other pages while this one is checked
    lane, page, root = chapter.lane, chapter.lane.page, chapter.root
    outcome = "failed"
    left = []
    try:
        assert chapter.error is None, f"{name} in JupyterLab: opening it and starting Run All failed: {chapter.error}"
        state = _wait_for_run_all(page, root, RUN_TIMEOUT)
        chapter.lap("run all")
        chapter.tree.remember_children()  # the kernel and anything it launched
        lab.remember_children()
        failures = []
        if one_kernel(lab, name, open_names=set(lanes.open), settle=0) != chapter.kernel:
            failures.append(f"the notebook's kernel changed during Run All (was {chapter.kernel}): JupyterLab "
                            "started another")
        pythons = kernel_pythons(chapter.tree.pid)
        if pythons != {lab.kernel_python}:
            failures.append(f"the chapter's kernel ran {sorted(pythons) or 'no python'}, not the wheel's environment "
                            f"{lab.kernel_python}")
        if state["dialog"]:
            failures.append(f"JupyterLab showed a dialog: {state['dialog'][:500]!r}")
        if state["done"] < state["cells"]:
            failures.append(f"only {state['done']} of {state['cells']} code cells ran")
        # After an error stopped Run All, the widgets of the cells that never ran will not come: judge at once.
        failures += _check_page(page, root, expect, name, "JupyterLab",
                                widget_wait=60 if state["done"] >= state["cells"] else 3)
        if name == PREDICTION_CHAPTER:
            failures += _predict_then_answer(page, root, lane.widget)
        chapter.lap("checks")
        chapter_screenshot(page, _screenshot_name(name, "jupyterlab"), scroller=root + " .jp-WindowedPanel-outer",
                           width=WIDTH, full=FULL_SCREENSHOTS)
        chapter.lap("screenshot")
        if failures and lane.errors:
            failures.append("JavaScript errors on the page: " + "; ".join(e[:300] for e in lane.errors[:5]))
        assert not failures, f"{name} in JupyterLab:\n" + "\n".join(failures)
        outcome = "passed"
    finally:
        if outcome == "failed" and page is not None:
            _failure_screenshot(page, name, "jupyterlab")
        lab.remember_children()
        left = lanes.close(chapter)
        chapter.lap("close, kernel shutdown" if outcome == "passed" else "to failure, close, kernel shutdown")
        timing.add(f"{name} (JupyterLab)", time.monotonic() - chapter.start, outcome, chapter.phases)
    assert not left, f"after {name}'s kernel was shut down, these processes were still running: {left}"


@pytest.fixture
def voila(chromium, served_copy, tmp_path_factory, timing, wheel_python):
    """Voilà serving chapter 06 from the temporary copy, on the wheel's kernel; stopped (and checked) on every exit path."""
    notebook = served_copy / VOILA_CHAPTER
    if not notebook.exists():
        pytest.skip(f"{VOILA_CHAPTER} is not in {NOTEBOOKS} yet, so there is nothing for Voilà to serve")
    env = jupyter_env(tmp_path_factory.mktemp("voila"))
    env["JUPYTER_PATH"] = str(ROOT / "share" / "jupyter")  # dpviz's Voilà template: the lab one, nothing from a CDN
    use_wheel_kernel(env, wheel_python)
    token = secrets.token_hex(16)

    def cmd(port: int) -> list[str]:
        return [sys.executable, "-m", "voila", str(notebook), "--no-browser", f"--port={port}",
                "--Voila.ip=127.0.0.1", f"--token={token}", "--show_tracebacks=True", "--template=dpviz"]

    # Voilà runs the notebook in a new kernel for every request: wait for its log line and its port, never poll
    # the page. (Voilà moves to another port by itself if this one is taken; start_listening reads it from the log.)
    server, _, found = start_listening("Voilà", cmd, lambda port: r"Voilà is running at:\s*\n\s*(http://\S+)",
                                       cwd=served_copy, env=env, log=OUTPUT / "voila.log", timeout=START_TIMEOUT)
    try:
        server.url = found.group(1).split("?")[0].rstrip("/")
        server.token = token
        yield server
    finally:
        left = server.stop()
        timing.processes["Voilà"] = (len(server.seen), left)
        assert not left, f"processes Voilà started were still running after it stopped (killed now): {left}"


@pytest.mark.timeout(900)
def test_chapter_06_in_voila(voila, browser, timing, served_copy, wheel_python):
    """The chapter that displays the costs panel, served by Voilà (one request, one kernel).

    Under load, Voilà's page once drew "Error displaying widget: model not found" for every widget of the run:
    its widget manager asked the kernel for the models before it had them. That page load is a failure of the
    page, not of the chapter; it is loaded again, once, in a fresh context (a new request and kernel), and the
    retry is reported. Anything else fails at once.
    """
    start = time.monotonic()
    expect = saved_expectations(served_copy / VOILA_CHAPTER)
    _screenshot_name(VOILA_CHAPTER, "voila-failed").unlink(missing_ok=True)
    outcome, loads, note = "failed", 0, ""
    context = page = None
    try:
        while True:
            loads += 1
            context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
            host = voila.url.split("/")[2]
            context.on("request", lambda r: None if is_local(r.url, host) else EXTERNAL["Voilà"].append(r.url))
            page = context.new_page()
            # One request: Voilà executes every cell, then the page's widget manager draws the widgets.
            page.goto(f"{voila.url}/?token={voila.token}", wait_until="load", timeout=RUN_TIMEOUT * 1000)
            page.wait_for_selector(".jp-OutputArea-output", timeout=RUN_TIMEOUT * 1000)
            voila.remember_children()
            failures = _check_page(page, VOILA_ROOT, expect, VOILA_CHAPTER, "Voilà")
            pythons = kernel_pythons(voila.pid)
            if pythons != {str(wheel_python)}:
                failures.append(f"Voilà's kernel ran {sorted(pythons) or 'no python'}, not the wheel's environment "
                                f"{wheel_python}")
            lost = any(MODEL_NOT_FOUND in f for f in failures)
            if not (lost and loads == 1):
                break
            note = f"; loaded twice: the first page said {MODEL_NOT_FOUND!r}"
            print(f"{VOILA_CHAPTER} in Voilà: the page said {MODEL_NOT_FOUND!r}; loading it again")
            _failure_screenshot(page, VOILA_CHAPTER, "voila-model-not-found")
            context.close()
        if EXTERNAL["Voilà"]:
            failures.append("the page asked other hosts (a classroom firewall breaks it): " + ", ".join(EXTERNAL["Voilà"][:10]))
        kernels = voila.log_text().count("Kernel started")
        if kernels != loads:
            failures.append(f"Voilà started {kernels} kernels for {loads} page load(s) (one per request: was it "
                            "polled?)")
        chapter_screenshot(page, _screenshot_name(VOILA_CHAPTER, "voila"), scroller=VOILA_SCROLLER, width=WIDTH,
                           full=FULL_SCREENSHOTS)
        voila.remember_children()
        assert not failures, f"{VOILA_CHAPTER} in Voilà:\n" + "\n".join(failures)
        outcome = "passed"
    finally:
        if outcome == "failed" and page is not None:
            _failure_screenshot(page, VOILA_CHAPTER, "voila")
        if context is not None:
            context.close()  # closing the page ends its kernel's websocket; the server's stop shuts the kernel down
        timing.add(f"{VOILA_CHAPTER} (Voilà)", time.monotonic() - start, outcome + note)


def test_jupyterlab_asked_no_other_host(lanes):
    """Every request of the JupyterLab pages, from their loads through every chapter, went to the local server."""
    assert not EXTERNAL["JupyterLab"], ("JupyterLab's pages asked other hosts (a classroom firewall breaks it): "
                                        + ", ".join(sorted(set(EXTERNAL["JupyterLab"]))[:20]))
