"""A figure plan: the records one chapter's published figures are drawn from, by stem, with their settings.

    from dpviz.topics.accumulation.records import FIGURE_PLAN
    FIGURE_PLAN.stems                       # the record stems ./run saves in my_figures/records/
    FIGURE_PLAN.settings_for(quick=True)    # {stem: the settings its recipe records it with}
    records = FIGURE_PLAN.load()            # {stem: record}: ./run's when there, else the shipped figures/records/

A plan sits in its chapter's records module (``dpviz/topics/<topic>/records.py``, ``FIGURE_PLAN``). The chapter's
line in :mod:`dpviz.course` says which recorder makes a plan's records; the chapter's ``figures.py`` ends with
the figure group that draws from them. numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dpviz.engine.paths import figure_records
from dpviz.engine.schema import load


@dataclass(frozen=True, eq=False)
class FigurePlan:
    """The records behind one chapter's figures."""

    name: str                                              # the chapter's topic, e.g. "accumulation"
    settings: Mapping[str, Mapping]                        # stem -> keyword settings the record is made with
    quick: Mapping[str, Mapping] = field(default_factory=dict)  # stem -> settings that replace those under --quick

    @property
    def stems(self) -> tuple[str, ...]:
        return tuple(self.settings)

    def settings_for(self, *, quick: bool = False) -> dict[str, dict]:
        """Each stem's settings, with the quick ones laid over them when ``quick``."""
        return {stem: {**value, **(self.quick.get(stem, {}) if quick else {})} for stem, value in self.settings.items()}

    def load(self, folder=None) -> dict:
        """The plan's records, ``{stem: record}``, from ``folder`` (default: this machine's from ``./run`` when it
        recorded them all, else the shipped ones: :func:`dpviz.engine.paths.figure_records`)."""
        folder = Path(folder) if folder is not None else figure_records(self.stems)
        for stem in self.stems:
            if not (folder / stem).with_suffix(".json").is_file():
                raise FileNotFoundError(f"path {str(folder / stem)!r}.json does not exist; record the figures with "
                                        "`python -m dpviz figures` (./run).")
        return {stem: load(folder / stem) for stem in self.stems}

    def check_recorded(self, records: Mapping) -> None:
        """Raise if a recipe returned other stems than the plan declares."""
        if set(records) != set(self.stems):
            raise RuntimeError(f"the recipe for plan {self.name!r} returned records {sorted(records)}; "
                               f"the plan declares {sorted(self.stems)}.")
