"""The set of records behind the published figures in ``figures/``: what they are, and saving and loading them.

    from dpviz.records.figure_set import load_inputs
    inputs = load_inputs()            # inputs.mlp[2] is the k=2 MLP run behind figure s01
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dpviz.records.bench import BenchRecord
from dpviz.records.run import Run
from dpviz.records.schedule import Schedule

FIGURES_DIR = Path(__file__).resolve().parents[2] / "figures"
MLP_KS = (1, 2, 4)  # process counts whose step times feed s01 and s02


@dataclass
class Inputs:
    """Every record the figures are drawn from."""

    main: Run             # line model, k=4, all-reduce on
    alone: Run            # the same, all-reduce off
    biased: Run           # k=1, a biased grab
    mlp: dict             # {k: Run} for step times, one thread per rank
    bench: BenchRecord    # the all-reduce sweep
    ring: Schedule        # the hand-written ring's transfers
    server: Schedule      # the parameter server's transfers


RUN_FILES = {"main": "line_k4", "alone": "line_k4_no_all_reduce", "biased": "line_k1_biased"}


def save_inputs(inputs: Inputs, folder) -> None:
    """Keep the records behind the figures beside them, so chapters and readers can load the same data."""
    folder = Path(folder)
    for attr, name in RUN_FILES.items():
        getattr(inputs, attr).save(folder / name)
    for k, run in inputs.mlp.items():
        run.save(folder / f"mlp_k{k}")
    inputs.bench.save(folder / "bench")
    for sched in (inputs.ring, inputs.server):
        sched.save(folder / f"schedule_{sched.impl}")


def load_inputs(folder=FIGURES_DIR / "records") -> Inputs:
    """The records ``python -m dpviz figures`` saved: ``load_inputs().mlp[2]`` is the k=2 MLP run behind figure s01."""
    folder = Path(folder)
    runs = {attr: Run.load(folder / name) for attr, name in RUN_FILES.items()}
    return Inputs(
        mlp={k: Run.load(folder / f"mlp_k{k}") for k in MLP_KS},
        bench=BenchRecord.load(folder / "bench"),
        ring=Schedule.load(folder / "schedule_ring"),
        server=Schedule.load(folder / "schedule_parameter_server"),
        **runs,
    )
