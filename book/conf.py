"""Sphinx configuration of the dpviz book: every chapter notebook as a static HTML page.

book/build.py stages the sources (index.md, written from the chapter list, and a copy of each notebook) in a
build folder and runs Sphinx with this file. Nothing is executed: the pages show the outputs saved in the
notebooks. Everything a page loads comes from the site itself (see ``OFFLINE`` below), so the book reads the
same behind a firewall, from a USB stick or on any static host.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

from docutils import nodes

project = "dpviz"
author = "the dpviz authors"
copyright = ""  # no licence has been chosen yet: no copyright line in the footer

extensions = ["myst_nb"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "chapters.json"]
master_doc = "index"

# --- notebooks: the committed outputs, never re-executed
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
nb_output_stderr = "remove"  # warnings the chapters print while recording ("ranks share 2 cores") stay in Jupyter
# A widget shows as what it saved beside its view: a slider figure's PNG, a deck's answer key as HTML (text/html,
# each answer in a collapsed <details>; myst-nb ranks text/html above the rest once the widget view is off).
# A dpviz figure sends its PNG twice, as image/png and inside an <img alt> as text/html (for JupyterLab): the book
# takes the image/png, with the alt from its output metadata, so Sphinx writes it to _images like any other figure.
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None), ("html", "image/png", 25)]
nb_ipywidgets_js = {}  # no require.js and no html-manager from a CDN: no widget is live on a static page

# --- offline: MathJax 3 from the sphinx-mathjax-offline wheel, copied into _static/mathjax by build_finished
mathjax_path = "mathjax/tex-chtml.js"
# the parts of MathJax 3 that tex-chtml.js loads (fonts, TeX extensions on demand, menu, accessibility, speech)
MATHJAX_PARTS = ("tex-chtml.js", "input", "output/chtml", "output/chtml.js", "a11y", "ui", "sre", "adaptors")

# --- the theme: Jupyter Book's, whose fonts and icons ship in the wheel
html_theme = "sphinx_book_theme"
html_title = "dpviz: data-parallel training, one step at a time"
html_theme_options = {
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "use_download_button": True,  # the chapter's .ipynb, to open in Jupyter
    "use_fullscreen_button": True,  # for projecting
    "use_repository_button": False,
    "use_issues_button": False,
    "use_edit_page_button": False,
    "show_toc_level": 2,
}
# light by default (white figures, projectors); the reader can switch. Unset, the theme logs a console error.
html_context = {"default_mode": "light"}
html_last_updated_fmt = None
html_show_sphinx = False
html_static_path: list[str] = []

OPEN_IN_JUPYTER = ".venv/bin/jupyter lab notebooks/{name}.ipynb"


def mathjax_source() -> Path:
    """The MathJax 3 folder inside the installed sphinx-mathjax-offline package."""
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    folder = Path(spec.origin).parent / "static" / "mathjax" if spec and spec.origin else None
    if folder is None or not (folder / "tex-chtml.js").is_file():
        raise RuntimeError("MathJax is missing: the book serves MathJax from the sphinx-mathjax-offline package. "
                           "Install the book tools with `.venv/bin/python -m pip install -e '.[book]'` "
                           "(./run book does this).")
    return folder


def copy_mathjax(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    source, target = mathjax_source(), Path(app.outdir) / "_static" / "mathjax"
    for part in MATHJAX_PARTS:
        src, dst = source / part, target / part
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)


SEARCH_BUTTON_LABEL = ' aria-label="Search" data-bs-placement'


def fix_search_button(app, exception) -> None:
    """The theme's search button is labelled "Search" while it shows "Search Ctrl+K": its accessible name hides part
    of what it shows (axe-core: label-content-name-mismatch, serious). Without the aria-label its name is its text."""
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        if SEARCH_BUTTON_LABEL in text:
            page.write_text(text.replace(SEARCH_BUTTON_LABEL, " data-bs-placement"), encoding="utf-8")


def chapters(app) -> dict:
    """What book/build.py wrote about each chapter (title, whether it has sliders or cards)."""
    path = Path(app.srcdir) / "chapters.json"
    return json.loads(path.read_text()) if path.exists() else {}


def add_open_in_jupyter(app, doctree) -> None:
    """Puts a note under each chapter's title: the widgets are pictures here; Jupyter makes them move."""
    info = chapters(app).get(app.env.docname)
    if not info:
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None:
        return
    said = []
    if info["sliders"]:
        said.append("The sliders on this page are the pictures saved when the chapter last ran.")
    if info.get("cards"):
        said.append("Click a self-check question to open its answer.")
    said.append("Open this chapter in Jupyter to move the sliders and run it live: " if info["sliders"]
                else "Open this chapter in Jupyter to run it live: ")
    lead = " ".join(said)
    note = nodes.admonition(classes=["tip", "open-in-jupyter"])
    note += nodes.title(text="Open this chapter in Jupyter")
    para = nodes.paragraph()
    para += nodes.Text(lead)
    para += nodes.literal(text=OPEN_IN_JUPYTER.format(name=app.env.docname))
    para += nodes.Text(" (from a clone of dpviz, after ./run has set it up), or download the notebook with the "
                       "button at the top of the page.")
    note += para
    section.insert(1, note)


def image_alts(srcdir: Path) -> dict[str, str]:
    """{name myst-nb gives a saved PNG (the SHA-256 of its bytes): the alt text build.py put in its output's metadata}.

    myst-nb takes an image's width and height from the output's metadata but not its alt, and a cell-level alt
    would give every picture of a cell the same words: each image is matched to its own alt by its bytes instead."""
    alts = {}
    for path in sorted(Path(srcdir).glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8")).get("cells", []):
            for out in cell.get("outputs", []):
                png, alt = out.get("data", {}).get("image/png"), out.get("metadata", {}).get("image/png", {}).get("alt")
                if png and alt:
                    data = base64.b64decode("".join(png) if isinstance(png, list) else png)
                    alts[hashlib.sha256(data).hexdigest()] = alt
    return alts


def give_images_their_alt(app, doctree, docname) -> None:
    """Sets each saved figure's <img alt> to the words that describe it, not the file name docutils falls back to."""
    alts = getattr(app, "dpviz_image_alts", None)
    if alts is None:
        alts = app.dpviz_image_alts = image_alts(app.srcdir)
    for image in doctree.findall(nodes.image):
        alt = alts.get(Path(image["uri"]).stem)
        if alt and not image.get("alt"):
            image["alt"] = alt


def setup(app):
    mathjax_source()  # fail at once, with the install command, where MathJax is missing
    app.connect("doctree-read", add_open_in_jupyter)
    app.connect("doctree-resolved", give_images_their_alt)
    app.connect("build-finished", copy_mathjax)
    app.connect("build-finished", fix_search_button)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
