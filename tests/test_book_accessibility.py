"""Every page of the book audited by axe-core in headless Chromium: no serious or critical violation, every <img> with
an alt text, and no request to any host but the local server.

axe-core comes from npm (``npm install --no-save axe-core@4`` in the repository: node_modules/ is git-ignored;
.ci/run installs it); the module skips, saying so, where it or Chromium is missing. The site is site/ when that is
newer than every chapter and every file of book/ (``./run book`` made it from what is committed now), otherwise the
session's one fresh build into a temporary folder (conftest's ``book_build``, shared with test_book.py).
"""

from __future__ import annotations

import functools
import threading
import time
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from browser_support import find_chromium, launched_chromium

ROOT = Path(__file__).resolve().parents[1]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
SITE = ROOT / "site"
BLOCKING = ("serious", "critical")


def _fresh(site: Path) -> bool:
    index = site / "index.html"
    if not index.is_file():
        return False
    sources = [*(ROOT / "notebooks").glob("*.ipynb"), *(ROOT / "book").glob("*.py"), ROOT / "README.md"]
    return index.stat().st_mtime > max(p.stat().st_mtime for p in sources if p.exists())


@pytest.fixture(scope="module")
def site(request) -> Path:
    if _fresh(SITE):
        return SITE
    proc = request.getfixturevalue("book_build")  # conftest's: the one build test_book.py opens too
    assert proc.returncode == 0, f"book/build.py failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.site


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def audit(site):
    """Every page's axe violations, its <img> tags without alt, and its requests to other hosts."""
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium found: `apt-get install -y chromium` (.ci/run does)")
    if not AXE.is_file():
        pytest.skip(f"axe-core is not installed ({AXE} is missing): `npm install --no-save axe-core@4` (.ci/run does)")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/"
    host = urllib.parse.urlsplit(url).netloc
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html")
                   if not p.relative_to(site).parts[0].startswith("_"))
    found, start = {}, time.perf_counter()
    try:
        with launched_chromium(chromium) as browser:
            context = browser.new_context(viewport={"width": 1280, "height": 720}, service_workers="block")
            external: list[str] = []

            def route(r):
                if urllib.parse.urlsplit(r.request.url).netloc == host or r.request.url.startswith(("data:", "blob:")):
                    r.continue_()
                else:
                    external.append(r.request.url)
                    r.abort()

            context.route("**/*", route)
            for name in pages:
                before = len(external)
                page = context.new_page()
                page.goto(url + name, wait_until="load", timeout=60_000)
                page.evaluate("async () => { if (window.MathJax?.startup?.promise) await MathJax.startup.promise; }")
                page.add_script_tag(path=str(AXE))
                result = page.evaluate("""async () => {
                    const r = await axe.run(document, {resultTypes: ['violations']});
                    return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                        nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ')), count: v.nodes.length}));
                }""")
                no_alt = page.evaluate("() => [...document.images].filter(i => !i.hasAttribute('alt'))"
                                       ".map(i => (i.currentSrc || i.src).slice(0, 120))")
                found[name] = {"violations": result, "no_alt": no_alt, "external": external[before:]}
                page.close()
            context.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
    print(f"axe-core audited {len(pages)} pages in {time.perf_counter() - start:.1f} s")
    return found


def test_no_serious_or_critical_axe_violation(audit):
    problems = [f"{name}: {v['impact']} {v['id']} ({v['help']}) on {v['count']} elements, e.g. {v['nodes']}"
                for name, page in audit.items() for v in page["violations"] if v["impact"] in BLOCKING]
    assert not problems, "axe-core found:\n" + "\n".join(problems)


def test_every_book_image_has_alt_text(audit):
    problems = [f"{name}: {src}" for name, page in audit.items() for src in page["no_alt"]]
    assert not problems, "<img> without alt:\n" + "\n".join(problems)


def test_no_book_page_asks_another_host(audit):
    problems = [f"{name}: {url}" for name, page in audit.items() for url in page["external"]]
    assert not problems, "requests to other hosts (blocked):\n" + "\n".join(problems)
