"""A figure group: one chapter's published figures, the plan of records they are drawn from, and its claims."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from dpviz.engine.plan import FigurePlan


@dataclass(frozen=True)
class FigureGroup:
    """One chapter's figures.

    ``./run`` records the plan's records (the recipe of the same name, :mod:`dpviz.recipes`), saves each as
    ``figures/records/<stem>``, and calls ``draw({stem: record})``, which returns ``{figure name:
    (Figure, [records it came from])}``. ``claims({stem: record})`` (from the chapter's ``claims.py``) asserts
    what the chapter says of those records and returns the sentence it verified, printed after drawing.
    """

    name: str                                    # the chapter's topic
    plan: FigurePlan                             # the records, by stem (records layer)
    draw: Callable[[dict], dict]
    claims: Callable[[dict], str] | None = None
