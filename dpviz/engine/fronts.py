"""What every torch-free front of a rank worker (a topic's ``run_*.py``) shares.

``rank_side_names`` lets a front offer some of its rank side's names (``from ...run_training import mse``) without
importing torch until one is asked for::

    __getattr__ = rank_side_names(__name__, "dpviz.topics.ground_floor.rank_training", ("mse", "batch_indices"))

``record_shipped`` is the command line of a topic that ships records for its sliders
(``python -m dpviz.topics.<topic>.run_<kind> [--out FOLDER]``): it re-records them on this machine.
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from dpviz.engine.paths import SHIPPED_DIR


def rank_side_names(front: str, rank_module: str, names: Iterable[str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``front`` that imports ``rank_module`` (and so torch) only when one of ``names``
    is asked for, and returns that name from it."""
    offered = frozenset(names)

    def __getattr__(name: str):
        if name in offered:
            return getattr(importlib.import_module(rank_module), name)
        raise AttributeError(f"module {front!r} has no attribute {name!r}")

    __getattr__.__doc__ = f"{', '.join(sorted(offered))} from {rank_module}, imported on first use."
    return __getattr__


def record_shipped(prog: str, description: str, regenerate: Callable[[str], list], argv=None) -> None:
    """Parse ``--out`` (the shipped records' folder by default), call ``regenerate(out)`` (which returns the stems it
    wrote) and say what it wrote and how long it took."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--out", default=str(SHIPPED_DIR),
                        help=f"folder to write the records into (default: the shipped folder, {SHIPPED_DIR})")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    written = regenerate(args.out)
    for stem in written:
        print(f"wrote {Path(stem).name}.npz and .json")
    print(f"wrote {len(written)} records to {Path(args.out)} in {time.perf_counter() - start:.1f} s")
