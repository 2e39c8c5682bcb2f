"""The two folders records live in: the runs shipped inside the package, and the figures' records in a checkout."""

from pathlib import Path

SHIPPED_DIR = Path(__file__).resolve().parent / "shipped_runs"  # package data: the real runs behind the sliders
FIGURES_DIR = Path(__file__).resolve().parents[2] / "figures"     # where ./run writes (a checkout only)
