"""Every test and every chapter under nbval reads the shipped records (figures/records, dpviz/records/shipped_runs),
never what ``./run`` recorded on this machine into my_figures/: what the tests assert of the shipped records, and the
outputs nbval compares, do not depend on how busy this machine was when ``./run`` ran (dpviz.engine.paths)."""

import os

os.environ["DPVIZ_RECORDS"] = "shipped"  # set before any kernel starts: nbval's kernels inherit it
