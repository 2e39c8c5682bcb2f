"""The two folders records live in: the runs shipped inside the package, and the figures' records.

``FIGURE_RECORDS`` is the package's ``records/figure_runs``: in a checkout a link to ``figures/records``,
where ``./run`` writes them, and in an installed wheel a copy of them, so the chapters read the same
records either way, without a checkout.
"""

from pathlib import Path

SHIPPED_DIR = Path(__file__).resolve().parent / "shipped_runs"  # package data: the real runs behind the sliders
FIGURE_RECORDS = Path(__file__).parent / "figure_runs"            # package data: the records behind the figures
FIGURES_DIR = Path(__file__).resolve().parents[2] / "figures"     # where ./run writes the figures (a checkout only)
