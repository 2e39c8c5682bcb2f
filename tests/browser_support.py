"""Helpers for tests/test_browser.py: find Chromium, run a server we own, and read a page.

Everything here serves one test module. A :class:`Server` is a process this test started (JupyterLab
or Voilà) in its own process group, with its output in a log file; it remembers every descendant
it has been seen with (kernels, the ranks a kernel launched) so that :meth:`Server.stop` can tell
whether any of them outlived it. Kernels are started by jupyter_client in sessions of their own,
so stopping the server's process group alone would not reach them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "test-output" / "browser"  # git-ignored: screenshots, server logs, timing.txt

# Debian's headless shell first (apt-get install -y chromium-headless-shell): the same Blink without the full browser
# around it. Five chapters and Voila took 124 and 130 machine core-seconds with it against 135 and 139 with the full
# Chromium on 2026-12-03 (two runs each, taking turns; 119 in a third run with the shell, which also polled less), the
# browser process alone 6 against 11.
CHROMIUM_PATHS = ("/usr/bin/chromium-headless-shell", "/usr/bin/chromium", "chromium-headless-shell", "chromium",
                  "chromium-browser")
NO_CHROMIUM = (f"no Chromium found (looked for {', '.join(CHROMIUM_PATHS)}, in that order). Install it with "
               "`apt-get install -y chromium-headless-shell` (.ci/run does)")
CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
STDERR_MIME = "application/vnd.jupyter.stderr"

# What an output looks like when the widgets front end is missing: the widget's Python repr ...
WIDGET_REPR = re.compile(
    r"\b(VBox|HBox|Box|GridBox|Tab|Accordion|\w*Slider|Button|ToggleButtons?|Dropdown|Checkbox|Image|Output|"
    r"HTML|Label|Play|RadioButtons|SelectionSlider|Text|FloatText|IntText)\("
    r"(children|value|description|layout|options|outputs|index|min|max|format)="
)
# ... or a message from the widget manager, or the static fallback dpviz's decks carry for GitHub.
WIDGET_FAILURE_TEXT = ("Error displaying widget", "Loading widget...", "Answers: run this notebook in JupyterLab or Voil")

TRACEBACK = "Traceback (most recent call last)"
# A line that names an exception, as IPython's short tracebacks and ``logging.exception`` print it.
ERROR_LINE = re.compile(r"^\s*(\w+\.)*\w*(Error|Exception|Interrupt)\b(:|\s*$)", re.MULTILINE)


def find_chromium() -> str | None:
    """The Chromium executable: the first of CHROMIUM_PATHS that exists (absolute, or on PATH); None where none does."""
    for name in CHROMIUM_PATHS:
        path = name if os.path.isabs(name) else shutil.which(name)
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


@contextmanager
def launched_chromium(path: str):
    """Headless Chromium driven by Playwright; afterwards no Chromium or Playwright driver process may be left."""
    from playwright.sync_api import sync_playwright

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()
    started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    psutil.wait_procs(started, timeout=15)
    left = [f"{p.pid} {p.name()}" for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    for p in started:
        if p.is_running():
            p.kill()
    assert not left, f"browser processes still running after Chromium was closed (killed now): {left}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url: str, *, method: str = "GET", token: str = "", timeout: float = 10):
    """GET (or DELETE ...) a Jupyter REST endpoint; the decoded JSON, or None for an empty reply."""
    request = urllib.request.Request(url, method=method)
    if token:
        request.add_header("Authorization", f"token {token}")
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        body = reply.read()
    return json.loads(body) if body.strip() else None


def jupyter_env(base: Path) -> dict:
    """The environment for a server of ours: config, data, runtime, settings and IPython folders under ``base``.

    The widgets front end is still found: JupyterLab and Voilà look for extensions in
    ``sys.prefix/share/jupyter`` (the virtual environment), not only in JUPYTER_DATA_DIR.
    """
    dirs = {
        "JUPYTER_CONFIG_DIR": base / "config",
        "JUPYTER_DATA_DIR": base / "data",
        "JUPYTER_RUNTIME_DIR": base / "runtime",
        "JUPYTERLAB_SETTINGS_DIR": base / "config" / "lab" / "user-settings",
        "JUPYTERLAB_WORKSPACES_DIR": base / "workspaces",
        "IPYTHONDIR": base / "ipython",
    }
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update({k: str(v) for k, v in dirs.items()})
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_CONFIG_PATH", None)
    return env


class ServerExited(RuntimeError):
    """A server of ours exited while we waited for it to come up; ``log`` is all it printed."""

    def __init__(self, message: str, log: str):
        super().__init__(message)
        self.log = log


def start_listening(name: str, cmd_for_port, ready_for_port, *, cwd: Path, env: dict, log: Path, timeout: float,
                    attempts: int = 3) -> tuple["Server", int, re.Match]:
    """Starts a server on a free port and waits until its log shows ``ready_for_port(port)`` (a regex) and the
    port accepts connections (the port the matched line names, if it names one). Returns the server, its port and
    the log's match.

    :func:`free_port` only says a port was free a moment ago: another process (any socket's ephemeral port) can
    take it before the server binds it. A server that then exits saying the port is in use is started again on a
    new port, up to ``attempts`` times in all; any other failure is raised at once, with the server's log.
    """
    for attempt in range(1, attempts + 1):
        port = free_port()
        server = Server(name, cmd_for_port(port), cwd=cwd, env=env, log=log)
        try:
            found = server.wait_for_log(ready_for_port(port), timeout)
            logged = re.search(r"127\.0\.0\.1:(\d+)", found.group(0))  # a server may have moved to another port
            port = int(logged.group(1)) if logged else port
            server.wait_listening(port, timeout)
            return server, port, found
        except ServerExited as exited:
            server.stop()
            if attempt == attempts or "already in use" not in exited.log:
                raise
        except BaseException:
            server.stop()
            raise
    raise AssertionError("unreachable")


class ProcessTree:
    """A process and every descendant it has been seen with, remembered so that one outliving it can still be found
    (a kernel's ranks, or a server's kernels, which jupyter_client starts in sessions of their own)."""

    def __init__(self, pid: int, *, with_root: bool):
        self.pid = pid
        self.seen: dict[int, psutil.Process] = {}  # every process ever seen in this tree
        if with_root:  # the root is one of the processes that must be gone (a kernel; not a server we stop ourselves)
            try:
                self.seen[pid] = psutil.Process(pid)
            except psutil.NoSuchProcess:
                pass

    def remember_children(self) -> None:
        """Notes every live descendant now."""
        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for child in children:
            self.seen.setdefault(child.pid, child)

    def wait_children_gone(self, timeout: float = 30) -> list[str]:
        """Waits for every process seen so far to exit; kills, by PID, those still running at the deadline and
        returns them, described, for the test to report."""
        self.remember_children()
        deadline = time.monotonic() + timeout
        while self.survivors() and time.monotonic() < deadline:
            time.sleep(0.1)
            self.remember_children()
        return _kill_all(self.survivors())

    def survivors(self) -> list[psutil.Process]:
        """Processes ever seen that still run (``is_running`` compares start times, so a reused PID is not one)."""
        alive = []
        for p in self.seen.values():
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.NoSuchProcess:
                pass
        return alive


class Server(ProcessTree):
    """A server process this test started, in a new session, with stdout and stderr in ``log``."""

    def __init__(self, name: str, cmd: list[str], *, cwd: Path, env: dict, log: Path):
        self.name = name
        self.log = log
        self.cmd = cmd
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        super().__init__(self.proc.pid, with_root=False)

    def kernel_tree(self, kernel_id: str) -> ProcessTree | None:
        """The process tree of the server's kernel ``kernel_id`` (jupyter_client names its connection file
        ``kernel-<id>.json`` on the kernel's command line), or None if no such process runs."""
        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return None
        for child in children:
            try:
                if any(arg.endswith(f"kernel-{kernel_id}.json") for arg in child.cmdline()):
                    tree = ProcessTree(child.pid, with_root=True)
                    tree.remember_children()
                    return tree
            except psutil.Error:
                continue
        return None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    def wait_for_log(self, pattern: str, timeout: float) -> re.Match:
        """Waits until the log shows ``pattern`` (a regex); fails at once if the server exits first."""
        regex = re.compile(pattern)
        return self._wait_until(lambda: regex.search(self.log_text()), f"log {pattern!r}", timeout, poll=0.25)

    def wait_listening(self, port: int, timeout: float) -> None:
        """Waits until something accepts TCP connections on 127.0.0.1:``port``; fails at once, with the log's tail,
        if the server exits first.

        A log line is not enough: Jupyter Server (2.x) logs its URL before its event loop binds the port, so a
        request sent the moment the URL appears can be refused, and a port another process took in the meantime
        only shows as an exit a moment later.
        """
        def accepts() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return True
            except OSError:
                return False

        self._wait_until(accepts, f"listen on port {port}", timeout, poll=0.05)

    def _wait_until(self, check, what: str, timeout: float, *, poll: float):
        """``check()``'s first true value, asked every ``poll`` s; ServerExited if the server exits first,
        TimeoutError after ``timeout`` s, each with the log's tail and ``what`` the server did not do."""
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            if found:
                return found
            if self.proc.poll() is not None:
                raise ServerExited(f"{self.name} exited with code {self.proc.returncode} before it did {what}; "
                                   f"its log ends:\n{self.log_tail()}", self.log_text())
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} did not {what} within {timeout:.0f} s; its log ends:\n"
                                   f"{self.log_tail()}")
            time.sleep(poll)

    def stop(self, *, grace: float = 20) -> list[str]:
        """Stops the server and everything it started; returns a description of each process that had to be killed
        after the server itself was gone (an empty list is a clean stop).

        SIGTERM to the process group (a Jupyter server then shuts its kernels down), wait, SIGKILL to the group;
        then descendants seen earlier that run in other sessions (kernels, their ranks) get ``grace`` seconds to
        exit on their own before each is killed by PID.
        """
        self.remember_children()
        if self.proc.poll() is None:
            _signal_group(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                _signal_group(self.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        else:
            _signal_group(self.pid, signal.SIGKILL)  # helpers of a server that died on its own
        deadline = time.monotonic() + grace
        while self.survivors() and time.monotonic() < deadline:
            time.sleep(0.25)
        return _kill_all(self.survivors())


def _kill_all(processes: list[psutil.Process]) -> list[str]:
    """Kills each process (one we started, found by PID); returns their descriptions."""
    left = []
    for p in processes:
        left.append(_describe(p))
        try:
            p.kill()
            p.wait(timeout=10)
        except (psutil.NoSuchProcess, psutil.TimeoutExpired):
            pass
    return left


def _describe(p: psutil.Process) -> str:
    try:
        return f"{p.pid} {' '.join(p.cmdline())[:160]}"
    except psutil.Error:
        return str(p.pid)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def saved_expectations(path: Path) -> dict:
    """What the committed notebook says the page must show once it has run.

    ``widget_outputs``: outputs carrying a widget view; ``slider`` / ``cards``: whether the notebook
    displays a slider / a deck of self-check cards (from its saved widget state or its source);
    ``cards_chapter``: the chapter (topic or number) named in ``show_cards(...)``, if any; ``code_cells``: non-empty code cells.
    """
    nb = json.loads(path.read_text())
    cells = nb.get("cells", [])
    code = [c for c in cells if c.get("cell_type") == "code"]
    source = "\n".join("".join(c.get("source", "")) for c in code)
    widget_outputs = sum(1 for c in code for o in c.get("outputs", []) if WIDGET_MIME in o.get("data", {}))
    state = nb.get("metadata", {}).get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    models = {m.get("model_name", "") for m in state.get("state", {}).values()} if isinstance(state, dict) else set()
    slider = any(m.endswith("SliderModel") for m in models) or bool(
        re.search(r"Slider\(|SliderFigure\(|\b(?!card_)\w+_widget\(", source))
    chapter = re.search(r"show_cards\(\s*[\"']([a-z_]+|\d\d)[\"']", source)
    cards = bool(chapter) or "deck(" in source or "card_widget(" in source
    if not widget_outputs and (slider or cards):
        widget_outputs = 1  # outputs not saved: at least one widget must show
    return {
        "widget_outputs": widget_outputs,
        "slider": slider,
        "cards": cards,
        "cards_chapter": chapter.group(1) if chapter else None,
        "code_cells": sum(1 for c in code if "".join(c.get("source", "")).strip()),
    }


# JavaScript run in the page. ``root`` is a CSS selector for the part of the page that holds the chapter.
OUTPUTS_JS = """
(root) => [...document.querySelectorAll(root + ' .jp-OutputArea-output')].map(o => {
  const widget = !!o.querySelector('.jupyter-widgets');
  // Voilà leaves the mime type off a widget's output: a rendered widget there counts as a widget output
  const mime = o.getAttribute('data-mime-type') || (widget ? 'application/vnd.jupyter.widget-view+json' : '');
  // an Output widget nests output areas: the innermost one holds the text, once
  const leaf = !o.querySelector('.jp-OutputArea-output');
  return {mime, widget, leaf, text: (o.innerText || '').slice(0, 4000)};
})
"""


def problems_in_outputs(outputs: list[dict]) -> dict[str, list[str]]:
    """Sorts the page's outputs into errors and widgets that did not render. Warnings on stderr are not errors."""
    errors, unrendered = [], []
    for o in outputs:
        text = o["text"]
        if o["leaf"] and (TRACEBACK in text or (o["mime"] == STDERR_MIME and ERROR_LINE.search(text))):
            errors.append(text[:1500])
        if o["mime"] == WIDGET_MIME and not o["widget"]:
            unrendered.append(f"a widget output with no widget in it: {text[:200]!r}")
        if o["mime"] != WIDGET_MIME or not o["widget"]:
            if WIDGET_REPR.search(text) or any(t in text for t in WIDGET_FAILURE_TEXT):
                unrendered.append(f"{o['mime'] or 'output'}: {text[:300]!r}")
        elif any(t in text for t in WIDGET_FAILURE_TEXT[:2]):
            unrendered.append(f"{o['mime']}: {text[:300]!r}")
    return {"errors": errors, "unrendered": unrendered}


def slider_figures(page, root: str) -> int:
    """How many outputs under ``root`` hold both a slider and an image (a SliderFigure)."""
    return page.evaluate(
        """(root) => [...document.querySelectorAll(root + ' .jp-OutputArea-output')]
             .filter(o => o.querySelector('.widget-slider .noUi-handle') && o.querySelector('img')).length""",
        root,
    )


# The tallest slider panel (status, controls, figure) that a 1366×768 screen shows whole in JupyterLab, under its
# menu, tab and toolbar rows.
PANEL_MAX_PX = 650


def slider_panels(page, root: str) -> list[dict]:
    """Every SliderFigure under ``root`` as laid out now: the widget function its cell calls (from the cell's source;
    empty where the page shows none, as Voilà), its box's height and width, and its image's shown and natural width."""
    return page.evaluate(
        """(root) => [...document.querySelectorAll(root + ' .jp-OutputArea-output')]
             .filter(o => o.querySelector('.widget-slider .noUi-handle') && o.querySelector('img'))
             .map(o => {
               const panel = o.querySelector('.jupyter-widgets') || o;
               const img = o.querySelector('img');
               const box = panel.getBoundingClientRect();
               const cell = o.closest('.jp-Cell');
               const source = cell ? (cell.querySelector('.cm-content')?.innerText || '') : '';
               const called = source.match(/\\b(\\w+_widget)\\(/);
               return {widget: called ? called[1] : '', height: box.height, width: box.width,
                       shown: img.getBoundingClientRect().width, natural: img.naturalWidth,
                       natural_height: img.naturalHeight};
             })""",
        root,
    )


def panel_problems(panels: list[dict], *, max_height: float | None = PANEL_MAX_PX) -> list[str]:
    """What is wrong with the panels :func:`slider_panels` measured: an image scaled up (blurred), or a panel taller
    than ``max_height`` (None: height not judged)."""
    problems = []
    for i, p in enumerate(panels):
        name = f"slider panel {i + 1}" + (f" ({p['widget']})" if p["widget"] else "")
        if not p["natural"]:
            problems.append(f"{name}: its image has not loaded")
            continue
        if p["shown"] > p["natural"] + 0.5:
            problems.append(f"{name}: its {p['natural']} px image is shown {p['shown']:.0f} px wide, scaled up "
                            f"{p['shown'] / p['natural']:.2f}× (blurred)")
        if max_height is not None and p["height"] > max_height:
            problems.append(f"{name}: {p['height']:.0f} px tall, more than the {max_height} px a 1366×768 screen "
                            f"shows with its controls (image {p['natural']}×{p['natural_height']} px)")
    return problems


def move_slider(page, root: str, index: int, *, presses: int = 3, timeout: float = 30, snapshot: Path | None = None) -> dict:
    """Focuses the first slider handle of the ``index``-th SliderFigure under ``root`` and presses ArrowRight
    ``presses`` times (ArrowLeft if the slider is already at its right end); waits until the figure's <img>
    changes. Returns the readout, the image source and the live region's words (what a screen reader says after
    the move) before and after, and whether the image changed; if it did not, a screenshot of the figure goes to
    ``snapshot``."""
    figure = page.locator(f"{root} .jp-OutputArea-output").filter(
        has=page.locator(".widget-slider .noUi-handle")).filter(has=page.locator("img")).nth(index)
    handle = figure.locator(".widget-slider .noUi-handle").first
    image = figure.locator("img").first
    readout = figure.locator(".widget-slider .widget-readout").first
    spoken = figure.locator("[aria-live]").first  # the picture in words, for a screen reader

    def now() -> dict:
        return {"src": image.get_attribute("src"), "readout": readout.inner_text() if readout.count() else "",
                "spoken": spoken.text_content() if spoken.count() else ""}

    handle.scroll_into_view_if_needed()
    before = now()
    at_max = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
    key = "ArrowLeft" if at_max else "ArrowRight"
    tabs = tab_to(page, figure, handle)
    for _ in range(presses):
        page.keyboard.press(key)
        page.wait_for_timeout(50)
    deadline = time.monotonic() + timeout
    after = dict(before)
    while time.monotonic() < deadline:
        after = now()
        if after["src"] != before["src"] and after["spoken"] != before["spoken"]:
            break
        page.wait_for_timeout(100)
    changed = after["src"] != before["src"]
    if not changed and snapshot is not None:  # keep what the figure looked like, for the report
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        figure.screenshot(path=str(snapshot))
    return {"key": key, "before": before, "after": after, "changed": changed, "tabs": tabs}


def tab_to(page, panel, target, *, presses: int = 12) -> int | None:
    """Reaches ``target`` (a locator) with the Tab key as a keyboard user would: focus goes to the start of ``panel``
    (made focusable for this, outside the tab order), then Tab is pressed until ``target`` has the focus. Returns
    how many presses it took, or None if ``presses`` did not reach it (the target is not in the tab order)."""
    panel.evaluate("el => { el.tabIndex = -1; el.focus(); }")
    for n in range(1, presses + 1):
        page.keyboard.press("Tab")
        if target.evaluate("el => el === document.activeElement || el.contains(document.activeElement)"):
            return n
    return None


# Every control of a slider panel with the words that name it: its ipywidgets description, shown as its label.
UNLABELLED_JS = """
(root) => [...document.querySelectorAll(root + ' .widget-slider, ' + root + ' .widget-dropdown, ' + root +
             ' .widget-toggle-buttons, ' + root + ' .widget-checkbox')]
  .filter(c => !(c.querySelector('.widget-label')?.innerText || '').trim())
  .map(c => c.className + ': ' + (c.innerText || '').slice(0, 80))
"""


def unlabelled_controls(page, root: str) -> list[str]:
    """The controls under ``root`` that show no label (an ipywidgets control without a description)."""
    return page.evaluate(UNLABELLED_JS, root)


def is_local(url: str, host: str) -> bool:
    """Whether a request goes to ``host`` (the test's own server, ``127.0.0.1:port``) or stays in the page."""
    from urllib.parse import urlsplit

    return url.startswith(("data:", "blob:", "about:")) or urlsplit(url).netloc == host


def reveal_first_answer(page, root: str, *, timeout: float = 30) -> dict:
    """Clicks the first "Show answer" button under ``root``; returns the button's new label and the answer shown."""
    # A handle, not a locator: once clicked, the button no longer says "Show answer" and a locator would move on.
    button = page.locator(f"{root} button", has_text="Show answer").first.element_handle()
    button.scroll_into_view_if_needed()
    card = button.evaluate_handle("b => b.parentElement")  # the card: question, button, answer
    button.click()
    deadline = time.monotonic() + timeout
    label, answer = "", ""
    while time.monotonic() < deadline:
        label = button.inner_text().strip()
        answer = card.evaluate(
            """(card) => { const kids = [...card.children]; const a = kids[kids.length - 1];
                           return a && a.offsetParent !== null ? a.innerText : ''; }""")
        if label == "Hide answer" and answer.strip():
            break
        page.wait_for_timeout(200)
    return {"label": label, "answer": answer.strip()}


def expected_answer(chapter: str | None) -> str | None:
    """The first card's answer for ``chapter`` as dpviz writes it, whitespace folded; None without a chapter."""
    if chapter is None:
        return None
    from dpviz.topics.question_bank.bank import cards_for

    cards = cards_for(chapter)
    return " ".join(cards[0].answer_text().split()) if cards else None


def chapter_screenshot(page, path: Path, *, scroller: str, width: int, full: bool) -> None:
    """The chapter's first screen as the reader's window shows it (``scroller`` back at its top), or with ``full``
    the whole chapter (:func:`full_screenshot`)."""
    if full:
        full_screenshot(page, path, scroller=scroller, width=width)
        return
    # Back at the top, the cells there are laid out and painted a frame or more later (JupyterLab's windowing
    # skips the cells off screen): wait, frame by frame, until the first cell stands at the top with a height.
    page.evaluate(
        """async (sel) => {
             const s = document.querySelector(sel);
             if (!s) return;
             s.scrollTop = 0;
             const frame = () => new Promise(done => requestAnimationFrame(() => done()));
             for (let i = 0; i < 60; i++) {
               await frame();
               const cell = s.querySelector('.jp-Cell'), top = s.getBoundingClientRect().top;
               const box = cell ? cell.getBoundingClientRect() : null;
               if (!box || (box.height > 0 && Math.abs(box.top - top) < 200)) break;
             }
             await frame();
           }""",
        scroller,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))


def full_screenshot(page, path: Path, *, scroller: str, width: int, max_height: int = 16000) -> None:
    """A screenshot of the whole chapter: the viewport grows to the height of ``scroller``'s content first
    (JupyterLab scrolls inside the page, so Playwright's full_page alone would show one screen)."""
    height = page.evaluate(
        """(sel) => { const s = document.querySelector(sel);
                      if (!s) return document.documentElement.scrollHeight;
                      s.scrollTop = 0;
                      const cells = s.querySelectorAll('.jp-Cell');  // stop at the last cell, not the blank after it
                      const last = cells[cells.length - 1];
                      const bottom = last ? last.getBoundingClientRect().bottom
                                          : s.getBoundingClientRect().top + s.scrollHeight;
                      return Math.ceil(bottom + 40); }""",
        scroller,
    )
    page.set_viewport_size({"width": width, "height": int(min(max(height, 600), max_height))})
    page.wait_for_timeout(300)
    page.evaluate("(sel) => { const s = document.querySelector(sel); if (s) s.scrollTop = 0; }", scroller)
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
