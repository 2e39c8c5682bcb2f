"""Chapter 02 in Jupyter Notebook 7, in headless Chromium: Run All, then its slider moved with the keyboard.

Notebook 7 is JupyterLab's parts in another shell, with one difference that matters here: its page takes key
presses before the page's elements do (JupyterLab lets an element see them first), so an arrow key on a focused
slider handle is Notebook 7's "select another cell" and never reaches the slider. What a keyboard user can do
there instead is what this test does: Tab to the number beside the slider (an editable field, where Notebook 7
leaves keys alone), type a value and press Enter. (A slider over a list of values, ipywidgets' SelectionSlider,
has a readout that takes no typing: in Notebook 7 it moves by mouse only.) The test asserts that this moves the picture, changes the words a
screen reader is given, and leaves the selected cell where it was; what the arrow key did is written to
test-output/browser/notebook7.txt, not asserted, since it is Notebook 7's to change.

Skips, saying so, where no Chromium or no Notebook 7 is installed. The server, its kernel and every rank are
stopped by PID, and the test fails if any is left.
"""

from __future__ import annotations

import importlib.util
import secrets
import shutil
import sys
import time

import pytest

from browser_support import (
    NO_CHROMIUM,
    OUTPUTS_JS,
    OUTPUT,
    ROOT,
    find_chromium,
    jupyter_env,
    launched_chromium,
    problems_in_outputs,
    start_listening,
    tab_to,
)
from test_browser import START_TIMEOUT, _wait_for_run_all  # the same Run All watch as JupyterLab's

CHAPTER = "02_mini_batch.ipynb"  # its b slider is numeric: its readout takes a typed value (a list slider's does not)
WIDTH, HEIGHT = 1366, 768
ROOT_SELECTOR = ".jp-NotebookPanel"

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory):
    if find_chromium() is None:
        pytest.skip(f"{NO_CHROMIUM}; Notebook 7 was not opened in a browser.")
    if importlib.util.find_spec("notebook") is None:
        pytest.skip("Notebook 7 (the notebook package, the lab extra) is not installed here.")
    base = tmp_path_factory.mktemp("notebook7")
    served = base / "notebooks"
    served.mkdir()
    shutil.copy2(ROOT / "notebooks" / CHAPTER, served / CHAPTER)
    env = jupyter_env(base)
    token = secrets.token_hex(16)

    def cmd(port: int) -> list[str]:
        return [sys.executable, "-m", "jupyter", "notebook", "--no-browser", "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={served}", "--ServerApp.terminals_enabled=False",
                "--ServerApp.allow_root=True", "--JupyterNotebookApp.expose_app_in_browser=True",
                "--KernelManager.shutdown_wait_time=1.0"]

    server, port, _ = start_listening("Notebook 7", cmd, lambda port: rf"http://127\.0\.0\.1:{port}/tree",
                                      cwd=served, env=env, log=OUTPUT / "notebook7.log", timeout=START_TIMEOUT)
    server.url, server.token = f"http://127.0.0.1:{port}", token
    try:
        yield server
    finally:
        left = server.stop()
        assert not left, f"processes Notebook 7 started were still running after it stopped (killed now): {left}"


def _active_cell(page) -> int:
    return page.evaluate("() => window.jupyterapp.shell.currentWidget.content.activeCellIndex")


def test_chapter_02_runs_in_notebook_7_and_its_slider_moves_from_the_keyboard(notebook7):
    report = []
    with launched_chromium(find_chromium()) as browser:
        page = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(f"{err} at {(err.stack or '')[:300]}"))
        start = time.monotonic()
        page.goto(f"{notebook7.url}/notebooks/{CHAPTER}?token={notebook7.token}", timeout=START_TIMEOUT * 1000)
        page.wait_for_function(
            """() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
                       const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
                       return !!k && k.status === 'idle'; }""", timeout=START_TIMEOUT * 1000)
        report.append(f"page and kernel ready in {time.monotonic() - start:.1f} s")
        # Notebook 7.6's own start-up can throw in its shortcuts settings (a plugin it has not loaded); reported,
        # not held against the chapter, which has not run yet
        report += [f"JavaScript error while the page loaded: {e}" for e in errors]
        errors.clear()
        start = time.monotonic()
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        state = _wait_for_run_all(page, ROOT_SELECTOR, 300)
        report.append(f"Run All: {state['done']} of {state['cells']} cells in {time.monotonic() - start:.1f} s")
        assert not state["dialog"], f"a dialog stopped Run All: {state['dialog']}"
        assert state["done"] == state["cells"], f"Run All stopped early: {state}"
        outputs = page.evaluate(OUTPUTS_JS, ROOT_SELECTOR)
        problems = problems_in_outputs(outputs)
        assert not any(problems.values()), f"what Notebook 7 shows after Run All: {problems}"
        assert not errors, f"JavaScript errors on the page while the chapter ran: {errors}"

        figure = page.locator(f"{ROOT_SELECTOR} .jp-OutputArea-output").filter(
            has=page.locator(".widget-slider .noUi-handle")).filter(has=page.locator("img")).first
        figure.wait_for(timeout=60_000)
        figure.scroll_into_view_if_needed()
        image, spoken = figure.locator("img").first, figure.locator("[aria-live]").first
        handle = figure.locator(".widget-slider .noUi-handle").first
        readout = figure.locator(".widget-slider .widget-readout").first

        # the arrow key on the focused handle: recorded, since Notebook 7 takes it first
        src = image.get_attribute("src")
        tab_to(page, figure, handle)
        cell = _active_cell(page)
        page.keyboard.press("ArrowRight")
        page.wait_for_timeout(1500)
        report.append(f"ArrowRight on the focused slider handle: picture "
                      f"{'changed' if image.get_attribute('src') != src else 'unchanged'}, selected cell "
                      f"{cell} -> {_active_cell(page)}")

        # the number beside the slider, typed: Notebook 7 leaves keys in an editable field to it
        figure.scroll_into_view_if_needed()
        src, words = image.get_attribute("src"), spoken.text_content()
        low, high = float(handle.get_attribute("aria-valuemin")), float(handle.get_attribute("aria-valuemax"))
        now = float(handle.get_attribute("aria-valuenow"))
        target = now + 1 if now + 1 <= high else low
        tabs = tab_to(page, figure, readout)
        assert tabs is not None, "Tab never reached the number beside the slider"
        cell = _active_cell(page)  # the slider's own cell, once the focus is in it
        report.append("focused: " + page.evaluate(
            "() => { const a = document.activeElement; const nb = a.closest('.jp-Notebook');"
            " return a.tagName + '.' + a.className + ' editable=' + a.isContentEditable + ' read-write='"
            " + a.matches(':read-write') + ' notebook=' + (nb ? nb.className : 'none'); }"))
        page.keyboard.press("Control+A")
        page.keyboard.type(f"{target:g}")
        page.keyboard.press("Enter")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (image.get_attribute("src") == src or spoken.text_content() == words):
            page.wait_for_timeout(100)
        report.append(f"typed {target:g} into the readout after {tabs} Tab presses: value now "
                      f"{handle.get_attribute('aria-valuenow')}, picture "
                      f"{'changed' if image.get_attribute('src') != src else 'unchanged'}")
        OUTPUT.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT / "notebook7-02.png"))
        (OUTPUT / "notebook7.txt").write_text("\n".join(report) + "\n")
        assert float(handle.get_attribute("aria-valuenow")) == target, report[-1]
        assert image.get_attribute("src") != src, "the picture did not change after the typed value"
        assert spoken.text_content() != words, "the words for a screen reader did not follow the move"
        assert _active_cell(page) == cell, "the keys moved the selection to another cell"
        page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.shutdown(); }")
