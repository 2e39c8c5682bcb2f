"""Write the record-schema reference's tables from the declarations, so the two never disagree.

    python -m dpviz.docs            # rewrites the part of docs/records.md between the record markers
    python -m dpviz.docs FILE       # the same for another markdown file holding the markers

A test (tests/test_records.py) fails when docs/records.md and the declarations part ways.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dpviz import course
from dpviz.engine.schema import kinds

BEGIN, END = "<!-- record tables: written by python -m dpviz.docs -->", "<!-- end of record tables -->"


def tables() -> str:
    """Every kind's tables, in course order: by the chapter that declares the kind, then as that chapter lists them."""
    modules = [f"{c.package}.{name}" for c in course.COURSE for name in c.records]
    return "\n".join(cls.KIND.markdown() for cls in sorted(kinds().values(), key=lambda cls: modules.index(cls.__module__)))


def rewrite(readme) -> bool:
    """Put the tables between the markers of ``readme``; returns True when the file changed."""
    path = Path(readme)
    text = path.read_text()
    if BEGIN not in text or END not in text:
        raise ValueError(f"readme {str(path)!r} must hold the markers {BEGIN!r} and {END!r}.")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n\n{tables()}\n{END}{tail}"
    path.write_text(new)
    return new != text


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "docs/records.md"
    print(f"{target}: {'rewritten' if rewrite(target) else 'already in step'}")
