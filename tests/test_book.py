"""The book (``./run book``): a static site of every chapter, built from the committed outputs, read in Chromium.

The site is built into a temporary folder with book/build.py (Sphinx + myst-nb, nothing executed), served by
Python's http.server on 127.0.0.1, and every page is opened in Debian's headless Chromium through Playwright.
Every request to another host is blocked and counted as a failure: the site must work with no network. The
checks: no console error, no failed or external request; every image loads; every internal link (and its
#anchor) resolves; formulas are typeset by MathJax (no raw ``$…$`` or ``\\(…\\)`` left, no MathJax error);
each chapter shows one image per PNG its notebook saved (the widgets' saved pictures among them), its
self-check decks as answer keys (every card of the bank on its chapter's page, its answer in a collapsed
``<details>`` that a click opens), and the note on opening it in Jupyter; previous/next links follow the chapter
order; the search page finds a word. The build time is printed in the summary; a screenshot of each page's first screen
goes to test-output/book/, and one of an answer key (a card collapsed, then one clicked open) to
test-output/book/answer-key-*.png. Only a missing Chromium skips the browser part, saying so.

Every <img> has an alt text, and the same visit audits the page with axe-core: no serious or critical violation.
Each page is opened once, at a projector's 1280×720, for all of these checks. axe-core comes from npm
(``npm install --no-save axe-core@4`` in the repository: node_modules/ is git-ignored; .ci/run installs it); without
it only the audit's tests skip, saying so.

The answer keys are the ``text/html`` the decks of dpviz.engine.quiz save beside their widget views, so the
answer-key checks pass on chapters saved since the decks carry them: a chapter saved before shows its widget's
older fallback, and the checks name it as one to execute and save again.
"""

from __future__ import annotations

import functools
import html
import json
import os
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from browser_support import NO_CHROMIUM, find_chromium, launched_chromium
from dpviz.topics.question_bank.bank import ALL_CARDS

ROOT = Path(__file__).resolve().parents[1]
# the chapters to build: notebooks/, or a copy executed elsewhere (DPVIZ_BOOK_NOTEBOOKS=/tmp/x/notebooks)
NOTEBOOK_DIR = Path(os.environ.get("DPVIZ_BOOK_NOTEBOOKS", ROOT / "notebooks")).resolve()
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
OUTPUT = ROOT / "test-output" / "book"  # git-ignored: screenshots and the build's report
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
AXE_BLOCKING = ("serious", "critical")  # the impacts that fail the audit
AXE_JS = """async () => {
  const r = await axe.run(document, {resultTypes: ['violations']});
  return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                 nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ')), count: v.nodes.length}));
}"""
RAW_TEX = re.compile(r"\$[^$\s][^$]{0,300}?\$|\\\(|\\\)|\\\[|\\\]")


class _Summary:
    """Lines for pytest's terminal summary: the build time, and what was opened."""

    def __init__(self):
        self.lines: list[str] = []

    def pytest_terminal_summary(self, terminalreporter):
        if self.lines:
            terminalreporter.section("book (test-output/book/)")
            for line in self.lines:
                terminalreporter.write_line(line)


@pytest.fixture(scope="module")
def summary(request):
    report = _Summary()
    request.config.pluginmanager.register(report, "dpviz-book-summary")
    yield report
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (OUTPUT / "summary.txt").write_text("\n".join(report.lines) + "\n")


@pytest.fixture(scope="module")
def site(book_build, summary) -> Path:
    """A full build (``--clean``) into a temporary folder, as ``./run book`` makes it (conftest's, once a session)."""
    proc = book_build
    assert proc.returncode == 0, f"book/build.py failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    built = [line for line in proc.stdout.splitlines() if line.startswith("book:")]
    summary.lines.append((built[-1] if built else "book: built") + f" [{proc.wall:.1f} s with interpreter start]")
    if proc.stderr.strip():
        summary.lines.append("build messages:\n" + proc.stderr.strip())
    return proc.site


def test_site_has_a_page_for_every_notebook(site):
    pages = {p.stem for p in site.glob("*.html")}
    missing = [nb.stem for nb in NOTEBOOKS if nb.stem not in pages]
    assert not missing, f"notebooks without a page in the site: {missing}"
    assert {"index", "search", "genindex", "records"} <= pages  # records: the record-file reference (docs/records.md)
    landing = (site / "index.html").read_text()
    for nb in NOTEBOOKS:
        assert f'href="{nb.stem}.html"' in landing, f"the landing page's chapter table does not link {nb.stem}"
    assert (site / "_static" / "mathjax" / "tex-chtml.js").is_file(), "MathJax is not inside the site"
    assert (site / "searchindex.js").is_file()


# ----------------------------------------------------------------------------------------------- the browser


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def chromium():
    path = find_chromium()
    if path is None:
        pytest.skip(f"{NO_CHROMIUM}; the site was built but no page was opened.")
    return path


@pytest.fixture(scope="module")
def server(site):
    """http.server on 127.0.0.1 (a thread of this process), serving the site; its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser(chromium):
    """Headless Chromium; afterwards no Chromium or Playwright driver process may be left."""
    with launched_chromium(chromium) as b:
        yield b


@dataclass
class Visit:
    """What one page did and showed in the browser."""

    url: str
    console_errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # failed requests and HTTP errors
    external: list[str] = field(default_factory=list)  # requests to another host (blocked)
    images: list[dict] = field(default_factory=list)
    output_images: int = 0  # images inside cell outputs
    links: list[str] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    math: dict = field(default_factory=dict)
    text: str = ""
    note: str = ""  # the "open this chapter in Jupyter" admonition
    answer_keys: list[dict] = field(default_factory=list)  # each card of a deck's answer key, as loaded
    prev: str | None = None
    next: str | None = None
    axe: list[dict] | None = None  # axe-core's violations on the page (None: not audited, axe-core missing)


PAGE_JS = """
async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  await document.fonts.ready;  // the fonts MathJax asked for have loaded or failed
  const imgs = [...document.images];
  for (const img of imgs) { img.loading = 'eager'; try { await img.decode(); } catch (e) {} }
  const main = document.querySelector('main') || document.body;
  const math = [...main.querySelectorAll('.math')];
  const clean = main.cloneNode(true);
  clean.querySelectorAll('pre, code, script, style, textarea, mjx-container, .highlight').forEach(e => e.remove());
  const note = document.querySelector('.open-in-jupyter');
  const prev = document.querySelector('a.left-prev'), next = document.querySelector('a.right-next');
  // each card of an answer key as the page loaded it: open or not, its summary, and the text it hides
  const keys = [...main.querySelectorAll('.dpviz-answer-key details')].map(d => {
    const c = d.cloneNode(true);
    c.querySelectorAll('.math, mjx-container, script').forEach(e => e.remove());
    const s = c.querySelector(':scope > summary');
    const summary = s ? s.textContent : null;
    if (s) s.remove();
    return {open: d.open, summary, answer: c.textContent,
            deck: (d.closest('.dpviz-answer-key').querySelector('h1,h2,h3,h4') || {}).textContent || ''};
  });
  return {
    answerKeys: keys,
    images: imgs.map(i => ({src: i.currentSrc || i.src, ok: i.complete && i.naturalWidth > 0,
                            natural: i.naturalWidth, shown: i.getBoundingClientRect().width,
                            output: !!i.closest('.cell_output'), alt: i.getAttribute('alt')})),
    outputImages: main.querySelectorAll('.cell_output img').length,
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    ids: [...document.querySelectorAll('[id]')].map(e => e.id)
         .concat([...document.querySelectorAll('a[name]')].map(a => a.name)),
    math: {
      elements: math.length,
      typeset: main.querySelectorAll('mjx-container').length,
      untypeset: math.filter(m => !m.querySelector('mjx-container')).map(m => m.textContent.slice(0, 120)),
      errors: [...main.querySelectorAll('mjx-merror')].map(e => e.getAttribute('data-mjx-error') || e.textContent),
    },
    text: clean.innerText,
    note: note ? note.innerText : '',
    prev: prev ? prev.href : null,
    next: next ? next.href : null,
  };
}
"""


def page_names(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                  if not p.relative_to(site).parts[0].startswith("_"))


def open_page(context, url: str, host: str, shot: Path | None, *, axe: Path | None = None) -> Visit:
    """Opens ``url`` in a new page of ``context`` and reads what it shows; with ``axe`` (axe.min.js), audits it too."""
    visit = Visit(url)
    page = context.new_page()
    page.on("console", lambda m: visit.console_errors.append(f"{m.text} ({m.location.get('url', '')})")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: visit.console_errors.append(f"uncaught: {e}"))
    page.on("requestfailed", lambda r: None if r.url.split("/")[2] != host else
            visit.failed.append(f"{r.url}: {r.failure}"))
    page.on("response", lambda r: visit.failed.append(f"{r.url}: HTTP {r.status}") if r.status >= 400 else None)
    try:
        page.goto(url, wait_until="load", timeout=60_000)
        found = page.evaluate(PAGE_JS)
        if shot is not None:
            page.screenshot(path=str(shot))  # the first screen: title, note, the start of the text
        if axe is not None:  # after the reading above: the audit adds a script, and the page is what it showed
            page.add_script_tag(path=str(axe))
            visit.axe = page.evaluate(AXE_JS)
    finally:
        page.close()
    visit.images, visit.output_images, visit.links = found["images"], found["outputImages"], found["links"]
    visit.ids, visit.math, visit.text, visit.note = set(found["ids"]), found["math"], found["text"], found["note"]
    visit.prev, visit.next = found["prev"], found["next"]
    visit.answer_keys = found["answerKeys"]
    return visit


@pytest.fixture(scope="module")
def visits(browser, server, site, summary) -> dict[str, Visit]:
    """Every HTML page of the site opened once at 1280×720 (a projector), read and audited by axe-core (where it is
    installed); requests to any other host are blocked and recorded."""
    host = urllib.parse.urlsplit(server).netloc
    OUTPUT.mkdir(parents=True, exist_ok=True)
    axe = AXE if AXE.is_file() else None
    context = browser.new_context(viewport={"width": 1280, "height": 720}, service_workers="block")
    blocked: list[str] = []

    def route(r):
        if urllib.parse.urlsplit(r.request.url).netloc == host or r.request.url.startswith(("data:", "blob:")):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    out, start = {}, time.perf_counter()
    try:
        for name in page_names(site):
            before = len(blocked)
            out[name] = open_page(context, server + name, host, OUTPUT / (name.replace("/", "_") + ".png"), axe=axe)
            out[name].external = blocked[before:]
    finally:
        context.close()
    audited = "each audited by axe-core" if axe else f"none audited: axe-core is not installed ({AXE} is missing)"
    summary.lines.append(f"opened {len(out)} pages in headless Chromium in {time.perf_counter() - start:.1f} s, "
                         f"{audited} (screenshots in test-output/book/)")
    return out


def test_no_console_error_and_no_failed_or_external_request(visits):
    problems = {name: v.console_errors + v.failed + [f"external (blocked): {u}" for u in v.external]
                for name, v in visits.items()}
    problems = {k: v for k, v in problems.items() if v}
    assert not problems, "pages with console errors or failed requests:\n" + json.dumps(problems, indent=1)


def audited(visits) -> dict[str, Visit]:
    """The visits axe-core audited; skips the test, saying why, where it could not run."""
    if not AXE.is_file():
        pytest.skip(f"axe-core is not installed ({AXE} is missing): `npm install --no-save axe-core@4` (.ci/run does)")
    return visits


def test_no_serious_or_critical_axe_violation(visits):
    unaudited = [name for name, visit in audited(visits).items() if visit.axe is None]
    assert not unaudited, f"pages axe-core did not audit: {unaudited}"
    problems = [f"{name}: {v['impact']} {v['id']} ({v['help']}) on {v['count']} elements, e.g. {v['nodes']}"
                for name, visit in visits.items() for v in visit.axe if v["impact"] in AXE_BLOCKING]
    assert not problems, "axe-core found:\n" + "\n".join(problems)


def test_every_book_image_has_alt_text_that_describes_it(visits):
    """An alt text is words about the picture: not missing, not empty, not the image's own file name (docutils'
    fallback when myst-nb passes none on), not a bare figure repr."""
    problems = []
    for name, visit in visits.items():
        for image in visit.images:
            alt = (image["alt"] or "").strip()
            file_name = image["src"].rsplit("/", 1)[-1]
            if not alt or file_name in alt or alt.endswith((".png", ".svg", ".jpg")) or alt.startswith("<Figure"):
                problems.append(f"{name}: {image['src'][-80:]} has alt {alt[:80]!r}")
            elif image["output"] and len(alt.split()) < 5:
                problems.append(f"{name}: a saved figure's alt says too little: {alt!r}")
    assert not problems, "<img> whose alt text is not a description:\n" + "\n".join(problems)
    assert sum(len(v.images) for v in visits.values()) > 0


def test_every_image_loads(visits):
    broken = {name: [i["src"] for i in v.images if not i["ok"]] for name, v in visits.items()}
    broken = {k: v for k, v in broken.items() if v}
    assert not broken, f"images that did not load: {broken}"
    assert sum(len(v.images) for v in visits.values()) > 0


def test_output_pictures_are_never_scaled_below_the_column(visits):
    """A chapter's figure or slider picture is shown 1:1, or, when its natural width is at most the 688-px column,
    no narrower than the column allows: the text sizes tests/test_figure_text.py and test_widget_panels.py measure
    hold on the page (the book tags wider pictures full-width)."""
    scaled = [f"{name}: {image['src'][-40:]} {image['natural']} px shown at {image['shown']:.0f} px"
              for name, visit in visits.items() for image in visit.images
              if image["output"] and image["natural"] > 0 and image["shown"] < min(image["natural"], 688) - 1]
    assert not scaled, "\n".join(scaled)
    too_wide = [f"{name}: {image['natural']} px shown at {image['shown']:.0f} px"
                for name, visit in visits.items() for image in visit.images
                if image["output"] and image["natural"] > 688 and image["shown"] < image["natural"] - 1]
    assert not too_wide, "pictures wider than the column must be shown 1:1 (full-width):\n" + "\n".join(too_wide)


def test_every_internal_link_resolves(visits, server, site):
    bad = []
    checked = 0
    for name, v in visits.items():
        for href in v.links:
            if not href.startswith(server):
                continue  # an external link may exist in the text; it is never fetched by the page itself
            parts = urllib.parse.urlsplit(href[len(server):])
            path = urllib.parse.unquote(parts.path) or "index.html"
            target = site / path
            if target.is_dir():
                target, path = target / "index.html", path.rstrip("/") + "/index.html"
            checked += 1
            if not target.is_file():
                bad.append(f"{name}: {href} (no file {path})")
            elif parts.fragment and path in visits and urllib.parse.unquote(parts.fragment) not in visits[path].ids:
                bad.append(f"{name}: {href} (no element with id {parts.fragment!r} in {path})")
    assert not bad, "internal links that do not resolve:\n" + "\n".join(bad)
    assert checked > 0


def built_from(site: Path, nb: Path) -> dict:
    """The copy of ``nb`` the site was built from (book/build.py stages it beside the site), so a chapter that
    someone saves again while the test runs is compared with what was built, not with its newer version."""
    return json.loads((site.parent / "work" / "src" / nb.name).read_text())


def test_formulas_are_typeset(visits, site):
    """MathJax typeset every formula: each math element holds its rendering, no MathJax error, no raw TeX left."""
    assert sum(v.math["typeset"] for v in visits.values()) > 0, "no page has any typeset formula"
    problems = {}
    for name, v in visits.items():
        raw = RAW_TEX.findall(v.text)
        found = v.math["untypeset"] + [f"MathJax error: {e}" for e in v.math["errors"]] + \
            [f"raw TeX in the text: {r[:80]!r}" for r in raw]
        if found:
            problems[name] = found
    assert not problems, "formulas not rendered as math:\n" + json.dumps(problems, indent=1, ensure_ascii=False)
    for nb in NOTEBOOKS:
        source = "".join("".join(c.get("source", "")) for c in built_from(site, nb)["cells"]
                         if c.get("cell_type") == "markdown")
        if "$" in source:
            assert visits[f"{nb.stem}.html"].math["typeset"] > 0, f"{nb.stem} has $math$ but no typeset formula"


def saved_outputs(nb: dict) -> tuple[int, list[str]]:
    """The number of PNG outputs the notebook saved, and its self-check decks' titles (from their answer keys)."""
    pngs, decks = 0, []
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            pngs += "image/png" in data
            if WIDGET_VIEW in data and "dpviz-answer-key" in "".join(data.get("text/html", "")):
                heading = re.search(r"<h\d>(.+?)</h\d>", "".join(data["text/html"]), re.DOTALL)
                if heading and "$" not in heading.group(1):
                    decks.append(html.unescape(re.sub(r"<[^>]+>", "", heading.group(1))).strip())
    return pngs, decks


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _readable(text: str) -> str:
    """A card's text as the page's answer key reads once its formulas are set aside (MathJax redraws them)."""
    return _squash(re.sub(r"(?<!\\)\$[^$\n]+?(?<!\\)\$", " ", text))


def chapter_page(chapter: str) -> str | None:
    """The page of the chapter numbered ``chapter`` ("03" -> 03_average_of_averages.html)."""
    pages = [nb.stem for nb in NOTEBOOKS if nb.stem.startswith(f"{chapter}_")]
    return f"{pages[0]}.html" if len(pages) == 1 else None


def test_every_card_answer_is_on_its_chapter_page_in_a_collapsed_details(visits):
    """Each card of dpviz's bank is a <details> of an answer key on its chapter's page: closed when the page loads,
    its question the summary, its answer (numeric ones filled in) the text it hides."""
    missing, opened, stale = [], [], []
    for card in ALL_CARDS:
        page = chapter_page(card.chapter)
        assert page in visits, f"{card.key}: no page for chapter {card.chapter} (pages: {sorted(visits)})"
        keys = visits[page].answer_keys
        if not keys:
            stale.append(page)
            continue
        question, answer = _readable(card.question_text()), _readable(card.answer_text())
        found = [k for k in keys if k["summary"] is not None and question in _squash(k["summary"])
                 and answer in _squash(k["answer"])]
        if not found:
            missing.append(f"{page}: {card.key}")
        opened += [f"{page}: {card.key}" for k in found if k["open"]]
    stale = sorted(set(stale))
    assert not stale, ("chapters whose pages show no answer key (saved before the decks carried one; execute and "
                       "save them again): " + ", ".join(stale))
    assert not missing, "cards whose answer is not in a <details> on their chapter's page:\n" + "\n".join(missing)
    assert not opened, "answer keys open when the page loads (the answer must wait for a click):\n" + "\n".join(opened)


def test_a_click_opens_an_answer(browser, server, visits):
    """On the question bank's page an answer is hidden until its question is clicked; screenshots at 1280×720
    of one card collapsed and then open go to test-output/book/answer-key-*.png."""
    page_name = chapter_page(ALL_CARDS[-1].chapter)
    if not visits[page_name].answer_keys:
        pytest.fail(f"{page_name} shows no answer key: execute and save its notebook again")
    context = browser.new_context(viewport={"width": 1280, "height": 720}, service_workers="block")
    try:
        page = context.new_page()
        page.goto(server + page_name, wait_until="load")
        first = page.locator(".dpviz-answer-key details").first
        answer = first.locator(":scope > :not(summary)").first
        first.scroll_into_view_if_needed()
        page.evaluate("() => window.scrollBy(0, -120)")
        assert not answer.is_visible(), "the answer shows before its question is clicked"
        page.screenshot(path=str(OUTPUT / "answer-key-collapsed.png"))
        first.locator("summary").click()
        answer.wait_for(state="visible", timeout=5_000)
        assert first.evaluate("d => d.open")
        page.screenshot(path=str(OUTPUT / "answer-key-open.png"))
        first.locator("summary").click()
        answer.wait_for(state="hidden", timeout=5_000)
    finally:
        context.close()


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_chapter_shows_its_saved_outputs_and_how_to_open_it(visits, site, nb):
    """Each saved PNG is an image (a widget shows its saved PNG, not a widget placeholder), each deck shows its
    answer key under its title, and the note names the notebook to open in Jupyter."""
    v = visits[f"{nb.stem}.html"]
    pngs, decks = saved_outputs(built_from(site, nb))
    assert v.output_images == pngs, (f"{nb.stem}: the notebook saved {pngs} PNG outputs (widgets' pictures among "
                                     f"them) but the page shows {v.output_images} images in its outputs")
    for title in decks:
        assert title in v.text, f"{nb.stem}: the self-check deck {title!r} is not on the page"
    for failure in ("Loading widget", "Error displaying widget", "Widget Javascript not detected"):
        assert failure not in v.text, f"{nb.stem}: the page shows {failure!r}"
    assert "Open this chapter in Jupyter" in v.note and f"notebooks/{nb.name}" in v.note, \
        f"{nb.stem}: no note on how to open it in Jupyter (found {v.note!r})"


def test_previous_and_next_links_follow_the_chapters(visits, server):
    order = ["index.html"] + [f"{nb.stem}.html" for nb in NOTEBOOKS] + ["records.html"]  # the reference is last
    wrong = []
    for i, name in enumerate(order):
        v = visits[name]
        want_prev = server + order[i - 1] if i > 0 else None
        want_next = server + order[i + 1] if i + 1 < len(order) else None
        if (v.prev and v.prev.split("#")[0]) != want_prev or (v.next and v.next.split("#")[0]) != want_next:
            wrong.append(f"{name}: previous {v.prev} next {v.next}; expected {want_prev} and {want_next}")
    assert not wrong, "\n".join(wrong)


def test_search_finds_a_chapter(browser, server):
    """The search page, served from the site, lists the all-reduce chapter for the word all-reduce."""
    host = urllib.parse.urlsplit(server).netloc
    context = browser.new_context(service_workers="block")
    errors: list[str] = []
    context.route("**/*", lambda r: r.continue_() if urllib.parse.urlsplit(r.request.url).netloc == host
                  else (errors.append(f"external: {r.request.url}"), r.abort()))
    try:
        page = context.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
        page.goto(server + "search.html?q=all-reduce", wait_until="load")
        page.wait_for_selector("#search-results li a", timeout=30_000)
        hits = page.eval_on_selector_all("#search-results li a", "as => as.map(a => a.href)")
    finally:
        context.close()
    assert not errors, f"the search page logged errors: {errors}"
    assert any("05_all_reduce.html" in h for h in hits), f"searching 'all-reduce' did not list chapter 05: {hits}"
