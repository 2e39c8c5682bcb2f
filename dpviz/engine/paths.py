"""Where records live: ``dpviz/records/``, the package's data folder (records only, no code).

It holds the runs shipped inside the package (``shipped_runs``), the table the published record of
"measuring an all-reduce" is built from (``published_allreduce.csv``), and the figures' records.
``FIGURE_RECORDS`` is ``records/figure_runs``: in a checkout a link to ``figures/records``,
where ``./run`` writes them, and in an installed wheel a copy of them, so the chapters read the same
records either way, without a checkout.
"""

from pathlib import Path

RECORDS_DIR = Path(__file__).resolve().parents[1] / "records"   # the package's data folder
SHIPPED_DIR = RECORDS_DIR / "shipped_runs"                        # package data: the real runs behind the sliders
FIGURE_RECORDS = Path(__file__).parents[1] / "records" / "figure_runs"  # package data: the records behind the figures
FIGURES_DIR = Path(__file__).resolve().parents[2] / "figures"     # where ./run writes the figures (a checkout only)
