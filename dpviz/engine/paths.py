"""Where records live: ``dpviz/records/``, the package's data folder (records only, no code).

It holds the runs shipped inside the package (``shipped_runs``), the table the published record of
"measuring an all-reduce" is built from (``published_allreduce.csv``), and the figures' records.
``FIGURE_RECORDS`` is ``records/figure_runs``: the shipped figures' records, in a checkout a link to
``figures/records`` and in an installed wheel a copy of them, so the chapters read the same records either way.

``./run`` records this machine's runs into ``my_figures/records`` (:data:`MY_FIGURES`), never over the shipped ones,
and from then on a chapter draws a figure from them (:func:`figure_records`). The tests set ``DPVIZ_RECORDS=shipped``:
what they assert of the shipped records never depends on what ``./run`` recorded on a busy machine.
"""

import os
from pathlib import Path

RECORDS_DIR = Path(__file__).resolve().parents[1] / "records"   # the package's data folder
SHIPPED_DIR = RECORDS_DIR / "shipped_runs"                        # package data: the real runs behind the sliders
FIGURE_RECORDS = Path(__file__).parents[1] / "records" / "figure_runs"  # package data: the records behind the figures
FIGURES_DIR = Path(__file__).resolve().parents[2] / "figures"     # the shipped figures (a checkout only)
MY_FIGURES = Path(__file__).resolve().parents[2] / "my_figures"   # where ./run writes this machine's figures and records


def figure_records(stems) -> Path:
    """The folder one plan's records are read from: this machine's (``my_figures/records``, or the folder
    ``DPVIZ_RECORDS`` names) when it holds every one of ``stems``, else the shipped ones; ``DPVIZ_RECORDS=shipped``
    reads the shipped ones always. A plan is read from one folder whole: its timings are compared across k."""
    chosen = os.environ.get("DPVIZ_RECORDS", "")
    if chosen == "shipped":
        return FIGURE_RECORDS
    mine = Path(chosen) if chosen else MY_FIGURES / "records"
    if all((mine / f"{stem}.json").is_file() for stem in stems):
        return mine
    return FIGURE_RECORDS
