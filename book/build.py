"""Builds the dpviz book: a static HTML site of every chapter in notebooks/, from the committed outputs.

    .venv/bin/python book/build.py                 # into site/ (./run book does this)
    .venv/bin/python book/build.py --out /tmp/site --clean
    .venv/bin/python book/build.py --notebooks /tmp/x/notebooks --out /tmp/site   # chapters from another folder

It stages the sources in build/book/src: index.md (the landing page, written here from the chapter list), the
record-file reference (docs/records.md, after the chapters) and a copy of each notebooks/*.ipynb without its saved widget state (no page can run a widget; each widget shows what
it saved beside its view: a slider figure its PNG, a deck of self-check cards its answer key, each answer in a
collapsed <details>). Then Sphinx with myst-nb renders them with book/conf.py, executing
nothing, and the time it took is printed. The site needs no network when it is read: MathJax, fonts, scripts and
styles are all files inside it.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
NOTEBOOKS = ROOT / "notebooks"
REFERENCE = ROOT / "docs" / "records.md"  # the record-file reference, the last page, after the chapters
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
COLUMN_PX = 688  # the page's text column at 1280×720; a wider picture gets the full width, so it is shown 1:1


def widest_png(cell: dict) -> int:
    """The natural width in pixels of the widest PNG among a cell's saved outputs (0 if none)."""
    widest = 0
    for out in cell.get("outputs", []):
        data = out.get("data", {}).get("image/png")
        if data:
            head = base64.b64decode("".join(data)[:64])  # the PNG header: width at bytes 16-20
            widest = max(widest, int.from_bytes(head[16:20], "big"))
    return widest


def widen(nb: dict) -> None:
    """Tag every code cell whose picture is wider than the column ``full-width``: the theme then lets it run into
    the margin, where it is shown at its own size instead of scaled down until its text is too small to read."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code" and widest_png(cell) > COLUMN_PX:
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            if "full-width" not in tags:
                tags.append("full-width")

FIGURE_REPR = re.compile(r"^<(Figure|CaptionedFigure) size [\d.]+x[\d.]+ with \d+ Axes>$")


def give_alt(nb: dict) -> int:
    """Give every saved PNG output an alt text in its metadata, where myst-nb finds it for the page's <img alt>.

    dpviz's figures and slider panels save theirs (from their data); a PNG saved without one (a plain matplotlib
    Figure, or a chapter saved before dpviz wrote alt texts) gets its output's text, or says which cell drew it.
    Returns how many needed the fallback."""
    fallbacks = 0
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            if "image/png" not in out.get("data", {}):
                continue
            meta = out.setdefault("metadata", {}).setdefault("image/png", {})
            if meta.get("alt"):
                continue
            text = " ".join("".join(out["data"].get("text/plain", "")).split())
            found = re.search(r'alt="([^"]*)"', "".join(out["data"].get("text/html", "")))
            if found:
                meta["alt"] = html.unescape(found.group(1))
                continue
            fallbacks += 1
            if text and not FIGURE_REPR.match(text) and not text.startswith("<IPython"):
                meta["alt"] = text
            else:
                source = [line.strip() for line in "".join(cell.get("source", "")).splitlines() if line.strip()]
                meta["alt"] = f"Figure drawn by the cell {source[-1] if source else ''}".strip()
    return fallbacks


LANDING = """\
# dpviz: data-parallel training, one step at a time

These are the dpviz chapters as a book you can read without Jupyter. Each chapter derives one idea of
data-parallel training and then checks it on real runs: several operating-system processes that really
exchanged their gradients with `torch.distributed`. Every figure, number and formula in these pages is
the one saved in the chapter's notebook the last time it ran; nothing was run again to make them.

**Reading and projecting.** Use the table or the links at the bottom of each page to go from chapter to
chapter, and the search box to find a symbol or a word. The full-screen button and the browser's zoom make a
chapter readable on a projector.

**Sliders and self-check cards.** On these pages a slider is the picture it showed when the chapter was
saved, and a deck of self-check cards is its answer key: click a question to open its answer. To move the
sliders or start a live run, open the chapter in Jupyter (`./run` sets up dpviz, then
`.venv/bin/jupyter lab notebooks/`), or download a chapter's notebook with the button at the top of its page.

**Offline and anywhere.** The site is plain files: math rendering, fonts, scripts and styles all come from
the site itself, so it works behind a firewall, from a folder on disk (through any static web server) and on
any static host.

## The chapters

| | chapter | what the reader does |
| --- | --- | --- |
{rows}

```{{toctree}}
:hidden:
:maxdepth: 1

{toc}
```

The record files the chapters read and write are described, kind by kind, in the [record reference](records.md).
"""


def first_heading(nb: dict, level: int = 1) -> str | None:
    marks = "#" * level + " "
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for line in "".join(cell.get("source", "")).splitlines():
                if line.startswith(marks):
                    return line[len(marks):].strip()
    return None


def section_headings(nb: dict) -> list[str]:
    out = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            out += [line[3:].strip() for line in "".join(cell.get("source", "")).splitlines()
                    if line.startswith("## ")]
    return [h for h in out if h.lower() not in ("check yourself", "what to take away", "what carries over")]


def readme_descriptions() -> dict[str, str]:
    """The README's chapter table: notebook stem -> what the reader does."""
    readme = ROOT / "README.md"
    rows = re.findall(r"^\|\s*`(\d\d_\w+)`\s*\|\s*(.+?)\s*\|\s*$", readme.read_text(), re.MULTILINE) \
        if readme.exists() else []
    return dict(rows)


def describe_chapter(path: Path, nb: dict) -> dict:
    code = "\n".join("".join(c.get("source", "")) for c in nb.get("cells", []) if c.get("cell_type") == "code")
    state = nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {})
    models = {m.get("model_name", "") for m in state.get("state", {}).values()} if isinstance(state, dict) else set()
    title = first_heading(nb) or path.stem
    number = re.match(r"(\d+)", path.stem)
    return {
        "title": title,
        "number": number.group(1) if number else "",
        "name": re.sub(r"^\d+\s*·\s*", "", title),
        "sliders": any(m.endswith("SliderModel") for m in models) or "SliderFigure(" in code,
        "cards": "show_cards(" in code or any(WIDGET_VIEW in o.get("data", {}) for c in nb.get("cells", [])
                                               for o in c.get("outputs", [])),
    }


def write_if_changed(path: Path, text: str) -> None:
    """Writes only a changed file, so that Sphinx rebuilds only the pages whose source changed."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def stage(src: Path, notebooks: list[Path]) -> dict:
    """Writes index.md, chapters.json and the stripped notebook copies into ``src``; returns the chapter info."""
    src.mkdir(parents=True, exist_ok=True)
    keep = {p.name for p in notebooks}
    for old in src.glob("*.ipynb"):  # a chapter removed from notebooks/ leaves the book too
        if old.name not in keep:
            old.unlink()
    info, rows, descriptions = {}, [], readme_descriptions()
    for path in notebooks:
        nb = json.loads(path.read_text())
        info[path.stem] = describe_chapter(path, nb)
        nb.get("metadata", {}).pop("widgets", None)
        widen(nb)
        give_alt(nb)
        write_if_changed(src / path.name, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        what = descriptions.get(path.stem) or " · ".join(section_headings(nb)) or info[path.stem]["title"]
        rows.append(f"| {info[path.stem]['number']} | [{info[path.stem]['name']}]({path.name}) | {what} |")
    write_if_changed(src / "chapters.json", json.dumps(info, indent=1, ensure_ascii=False) + "\n")
    write_if_changed(src / REFERENCE.name, REFERENCE.read_text())
    write_if_changed(src / "index.md", LANDING.format(rows="\n".join(rows),
                                                      toc="\n".join([*(p.stem for p in notebooks), REFERENCE.stem])))
    return info


def build(out: Path, *, work: Path, notebooks: Path = NOTEBOOKS, clean: bool = False, jobs: str = "1",
          quiet: bool = True) -> dict:
    """Stages the chapters of the folder ``notebooks`` and builds the site into ``out``; returns {"chapters",
    "seconds", "warnings", "status"}."""
    try:
        import myst_nb  # noqa: F401
        import sphinx_book_theme  # noqa: F401
        from sphinx.cmd.build import build_main
    except ImportError as error:
        raise RuntimeError(f"the book tools are not installed ({error}): `./run book` installs them, or "
                           "`.venv/bin/python -m pip install -e '.[book]'`") from None

    start = time.perf_counter()
    folder, notebooks = notebooks, sorted(notebooks.glob("*.ipynb"))
    if not notebooks:
        raise SystemExit(f"no notebooks in {folder}: nothing to put in the book")
    if clean:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
    src, doctrees, log = work / "src", work / "doctrees", work / "warnings.log"
    stage(src, notebooks)
    args = ["-b", "html", "-c", str(BOOK), "-d", str(doctrees), "-j", jobs, "-w", str(log), str(src), str(out)]
    status = build_main((["-q"] if quiet else []) + args)
    warnings = [line for line in log.read_text().splitlines() if "WARNING" in line or "ERROR" in line] \
        if log.exists() else []
    return {"chapters": [p.stem for p in notebooks], "seconds": time.perf_counter() - start,
            "warnings": warnings, "status": status}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "site", help="the site's folder (default: site/)")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "book",
                        help="staged sources and Sphinx's cache (default: build/book/)")
    parser.add_argument("--notebooks", type=Path, default=NOTEBOOKS,
                        help="the folder of chapter notebooks to build from (default: notebooks/)")
    parser.add_argument("--clean", action="store_true", help="remove the site and the cache first: a full build")
    parser.add_argument("-j", "--jobs", default="1", help="Sphinx processes (a number or 'auto'; default 1)")
    parser.add_argument("--verbose", action="store_true", help="show Sphinx's progress")
    args = parser.parse_args(argv)
    try:
        result = build(args.out.resolve(), work=args.work.resolve(), notebooks=args.notebooks.resolve(),
                       clean=args.clean, jobs=args.jobs, quiet=not args.verbose)
    except RuntimeError as error:  # book/conf.py: a missing tool, said in one sentence
        print(f"book: {error}", file=sys.stderr)
        return 1
    for line in result["warnings"]:
        print(line, file=sys.stderr)
    if result["status"]:
        print(f"book: Sphinx failed (exit {result['status']}); see the messages above", file=sys.stderr)
        return result["status"]
    print(f"book: {len(result['chapters'])} chapters into {args.out} in {result['seconds']:.1f} s "
          f"({len(result['warnings'])} warnings); open {args.out / 'index.html'} in a browser, or serve the folder: "
          f"`.venv/bin/python -m http.server -d {args.out}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
