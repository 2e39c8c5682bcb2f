"""Bring the notebooks in line with :data:`dpviz.course.COURSE` after a chapter was inserted, moved or removed.

    python -m dpviz.renumber            # rename the notebooks, rewrite the chapter numbers their prose gives
    python -m dpviz.renumber --dry-run  # say what it would do, change nothing

The library asks :mod:`dpviz.course` for every number, but a notebook's prose is text: "chapter NN measures it",
"chapters NN to MM", a link to ``NN_measuring_an_all_reduce.ipynb``. This reads the numbers the notebook files carry
now (``notebooks/NN_<name>.ipynb``), compares them with each chapter's place in the course, and then

1. rewrites, in every notebook's Markdown cells and in ``README.md``, each chapter number that changed: in a
   chapter's heading ("# NN · Title"), after "chapter"/"chapters" (with the lists and ranges that follow: "NN and MM", "NN to MM") and in notebook stems
   (``NN_measuring_an_all_reduce``), all at once, so that n → n + 1 and n + 1 → n + 2 never run into each other;
2. renames the notebook files;
3. lists the renamed notebooks and those whose saved outputs print a number that changed: run those again
   (``jupyter nbconvert --to notebook --execute --inplace ...``), since nbval compares the outputs.

To insert a chapter: add its line to ``COURSE``, save its notebook under a number no other notebook has
(``99_<name>.ipynb``), and run this. A notebook whose name is not a chapter of the course, a chapter without a
notebook, or two notebooks with one number stop it before anything is written, with one sentence.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from dpviz import course

ROOT = Path(__file__).resolve().parent.parent
STEM = re.compile(r"^(\d\d)_(\w+)$")
JOINER = r"(?:,\s*|\s+and\s+|\s+or\s+|\s*[–-]\s*|\s+to\s+)"
CHAPTERS = re.compile(rf"(\b[Cc]hapters?\s+)(\d\d(?:{JOINER}\d\d)*)\b")


class RenumberError(ValueError):
    """The notebooks and the course disagree in a way a rename cannot settle."""


def plan(folder: Path) -> dict[str, str]:
    """{old number: new number} for every chapter whose notebook's number differs from its place in the course."""
    by_name = {c.notebook: c for c in course.COURSE}
    found = {}
    for path in sorted(folder.glob("*.ipynb")):
        match = STEM.match(path.stem)
        if not match:
            continue
        number, name = match.groups()
        if name not in by_name:
            raise RenumberError(f"{path.name} is not a chapter of the course: add its line to dpviz/course.py "
                                "(the name after the number is the chapter's notebook) or move it out of "
                                f"{folder}.")
        if name in found:
            raise RenumberError(f"two notebooks are saved for the chapter '{name}': {found[name][1].name} and "
                                f"{path.name}; keep one.")
        clash = next((other.name for n, other in found.values() if n == number), None)
        if clash:
            raise RenumberError(f"{clash} and {path.name} carry the same number: save the new chapter's notebook "
                                "under a number no other notebook has (99, say), and run this again.")
        found[name] = (number, path)
    missing = [c.stem for c in course.COURSE if c.notebook not in found]
    if missing:
        raise RenumberError(f"the course lists {', '.join(missing)} but {folder} has no notebook for "
                            f"{'it' if len(missing) == 1 else 'them'}: save it under its name there first.")
    return {found[c.notebook][0]: c.number for c in course.COURSE if found[c.notebook][0] != c.number}


def rewrite(text: str, numbers: dict[str, str]) -> str:
    """``text`` with every chapter number in ``numbers`` replaced by its new one, in one pass."""
    names = "|".join(re.escape(c.notebook) for c in course.COURSE)

    def in_list(match: re.Match) -> str:
        return match.group(1) + re.sub(r"\d\d", lambda n: numbers.get(n.group(0), n.group(0)), match.group(2))

    text = CHAPTERS.sub(in_list, text)
    # a chapter's own heading, "# NN · Title"
    text = re.sub(r"^(#+ )(\d\d)( · )", lambda m: m.group(1) + numbers.get(m.group(2), m.group(2)) + m.group(3), text,
                  flags=re.M)
    return re.sub(rf"\b(\d\d)_({names})\b", lambda m: numbers.get(m.group(1), m.group(1)) + "_" + m.group(2), text)


def _outputs_name(nb: dict, old: set[str]) -> bool:
    words = re.compile(rf"\b[Cc]hapters?\s+(?:\d\d{JOINER})*({'|'.join(sorted(old))})\b")
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            texts = [output.get("text", "")] + list(output.get("data", {}).values())
            if any(words.search(t if isinstance(t, str) else "".join(t)) for t in texts if isinstance(t, (str, list))):
                return True
    return False


def renumber(folder: Path = ROOT / "notebooks", readme: Path | None = ROOT / "README.md", *,
             dry_run: bool = False) -> dict:
    """Do what the module docstring says; returns {"numbers", "renamed", "rerun", "rewritten"} (file names)."""
    numbers = plan(folder)
    done = {"numbers": numbers, "renamed": [], "rerun": [], "rewritten": []}
    if not numbers:
        return done
    for path in sorted(folder.glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        changed = False
        for cell in nb.get("cells", []):
            if cell.get("cell_type") != "markdown":
                continue
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            new = rewrite(source, numbers)
            if new != source:
                cell["source"] = new.splitlines(keepends=True)
                changed = True
        match = STEM.match(path.stem)
        target = folder / f"{numbers.get(match.group(1), match.group(1))}_{match.group(2)}.ipynb" if match else path
        if changed:
            done["rewritten"].append(path.name)
        if target != path or _outputs_name(nb, set(numbers)):
            done["rerun"].append(target.name)
        if target != path:
            done["renamed"].append((path.name, target.name))
        if not dry_run and changed:
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if readme is not None and readme.exists():
        text = readme.read_text(encoding="utf-8")
        new = rewrite(text, numbers)
        if new != text:
            done["rewritten"].append(readme.name)
            if not dry_run:
                readme.write_text(new, encoding="utf-8")
    if not dry_run:
        # two steps, through names no notebook has, so that n -> n + 1 never overwrites the n + 1 still to move
        moves = [(folder / a, folder / b) for a, b in done["renamed"]]
        for old, new in moves:
            old.rename(old.with_name(f".renumber-{new.name}"))
        for old, new in moves:
            old.with_name(f".renumber-{new.name}").rename(new)
    return done


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpviz.renumber", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks", help="the notebooks' folder")
    args = parser.parse_args(argv)
    try:
        done = renumber(args.notebooks, dry_run=args.dry_run)
    except RenumberError as error:
        print(f"python -m dpviz.renumber: {error}", file=sys.stderr)
        return 2
    if not done["numbers"]:
        print("Every notebook already carries its chapter's number: nothing to do.")
        return 0
    would = "would " if args.dry_run else ""
    print("Numbers: " + ", ".join(f"{a} → {b}" for a, b in sorted(done["numbers"].items())))
    for a, b in done["renamed"]:
        print(f"{would}rename {a} → {b}")
    for name in done["rewritten"]:
        print(f"{would}rewrite the chapter numbers in {name}")
    if done["rerun"]:
        print("Then run these again, so that their saved outputs print the new numbers:")
        print("  jupyter nbconvert --to notebook --execute --inplace "
              + " ".join(f"{args.notebooks.name}/{n}" for n in done["rerun"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
