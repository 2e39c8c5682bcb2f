"""Compare two SVG files as drawings: the same elements, attributes and text, every number equal within a tolerance.

    from dpviz.engine.svg_compare import svg_difference
    svg_difference(committed.read_text(), drawn.read_text())   # None, or where they first differ

matplotlib writes coordinates with six decimals, so the same figure drawn on another machine can differ
in a last digit (a quiver arrowhead, say) and is still the same picture; a bar, a line or a label that
moved is not. Two numbers match when ``|a - b| <= ATOL + RTOL * max(|a|, |b|)``:

* ``ATOL = 1e-3`` SVG user units, that is points (1/72 inch). A last printed digit is 1e-6, and one float32
  step of a coordinate under 1000 pt is 6e-5, so both pass; a pixel of the 110-dpi PNGs is 0.65 pt, so
  anything a reader could see (a bar a tenth of a pixel taller) fails.
* ``RTOL = 1e-6`` covers the few numbers that are not coordinates and can be large (font units).

Tag names, attribute names, the words and punctuation between numbers (path commands, colours, glyph
names), element text and comments (matplotlib writes each label's text as a comment) must be equal.
The ids matplotlib makes from a hash of the content (``m`` or ``p`` and ten hex digits, for markers and
clip paths) change with the last digit of what they name, so they are compared by the order they are defined in.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

ATOL = 1e-3  # SVG user units (points)
RTOL = 1e-6

HASHED_ID = re.compile(r"[mp][0-9a-f]{10}")
TOKEN = re.compile(
    r"(?P<colour>#[0-9a-fA-F]{3,8}\b)|(?P<word>[A-Za-z_][\w.-]*)|(?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|(?P<other>.)",
    re.S,
)


def parse(text: str) -> ET.Element:
    return ET.fromstring(text, parser=ET.XMLParser(target=ET.TreeBuilder(insert_comments=True)))


def hashed_ids(root: ET.Element) -> dict[str, str]:
    """matplotlib's content-hashed ids, each named by the order it is defined in: {"pac6452aa29": "hashed-id-0"}."""
    names = {}
    for element in root.iter():
        ident = element.get("id")
        if ident and HASHED_ID.fullmatch(ident) and ident not in names:
            names[ident] = f"hashed-id-{len(names)}"
    return names


def tokens(text: str, ids: dict[str, str]) -> list[tuple[str, str]]:
    """``text`` as (kind, token) pairs, kind "number" or "text"; hashed ids replaced by their order."""
    found = []
    for match in TOKEN.finditer(text):
        kind, token = match.lastgroup, match.group()
        if kind == "number":
            found.append(("number", token))
        else:
            found.append(("text", ids.get(token, token)))
    return found


def close(a: float, b: float) -> bool:
    return abs(a - b) <= ATOL + RTOL * max(abs(a), abs(b))


def value_difference(expected: str, actual: str, ids_expected: dict, ids_actual: dict) -> str | None:
    """Where two attribute values first differ, or None if they match within the tolerance."""
    a, b = tokens(expected, ids_expected), tokens(actual, ids_actual)
    numbers = 0
    for i, ((kind_a, tok_a), (kind_b, tok_b)) in enumerate(zip(a, b)):
        numbers += kind_a == "number"
        if kind_a != kind_b or (kind_a == "text" and tok_a != tok_b):
            return f"{tok_a!r} drawn as {tok_b!r} ({context(a, i)})"
        if kind_a == "number" and not close(float(tok_a), float(tok_b)):
            return (f"number {numbers} is {tok_a}, drawn as {tok_b} (off by {abs(float(tok_a) - float(tok_b)):.3g}; "
                    f"{context(a, i)})")
    if len(a) != len(b):
        count_a, count_b = (sum(kind == "number" for kind, _ in toks) for toks in (a, b))
        return f"{count_a} numbers, drawn with {count_b} ({context(a, min(len(a), len(b)))})"
    return None


def context(toks: list, i: int, width: int = 8) -> str:
    """The tokens around token ``i``, with the token in [brackets], on one line."""
    def text(part):
        return "".join(token for _, token in part)

    before, here, after = text(toks[max(0, i - width):i]), text(toks[i:i + 1]), text(toks[i + 1:i + 1 + width])
    return " ".join(f"…{before}[{here}]{after}…".split())


def local(tag) -> str:
    if not isinstance(tag, str):  # a comment
        return "comment()"
    return tag.rsplit("}", 1)[-1]


def step(element: ET.Element, parent: ET.Element | None) -> str:
    name = local(element.tag)
    if element.get("id"):
        return f"{name}[@id={element.get('id')!r}]"
    same = [child for child in (parent if parent is not None else [element]) if local(child.tag) == name]
    return f"{name}[{same.index(element) + 1}]"


def element_difference(a: ET.Element, b: ET.Element, where: str, ids_a: dict, ids_b: dict) -> str | None:
    if local(a.tag) != local(b.tag):
        return f"{where}: a <{local(a.tag)}> drawn as <{local(b.tag)}>"
    if a.tag is ET.Comment:
        return None if a.text == b.text else f"{where}: comment {a.text!r} drawn as {b.text!r}"
    keys_a, keys_b = set(a.attrib), set(b.attrib)
    if keys_a != keys_b:
        return f"{where}: attributes {sorted(keys_a - keys_b)} missing, {sorted(keys_b - keys_a)} added"
    for key in a.attrib:
        difference = value_difference(a.attrib[key], b.attrib[key], ids_a, ids_b)
        if difference:
            return f"{where} @{local(key)}: {difference}"
    if (a.text or "").strip() != (b.text or "").strip():
        return f"{where}: text {(a.text or '').strip()!r} drawn as {(b.text or '').strip()!r}"
    children_a, children_b = list(a), list(b)
    first = next((difference for child_a, child_b in zip(children_a, children_b)
                  if (difference := element_difference(child_a, child_b, f"{where}/{step(child_a, a)}", ids_a, ids_b))),
                 None)
    if len(children_a) != len(children_b):
        if first:
            return f"{where}: {len(children_a)} children, drawn with {len(children_b)}; the first that differs: {first}"
        extra = (children_a[len(children_b):] or children_b[len(children_a):])[0]
        return (f"{where}: {len(children_a)} children, drawn with {len(children_b)}; "
                f"unmatched: <{local(extra.tag)}> {extra.get('id') or ''}").rstrip()
    return first


def svg_difference(expected: str, actual: str) -> str | None:
    """Where the SVG ``actual`` first differs from ``expected`` as a drawing, or None if it is the same one."""
    a, b = parse(expected), parse(actual)
    return element_difference(a, b, local(a.tag), hashed_ids(a), hashed_ids(b))
