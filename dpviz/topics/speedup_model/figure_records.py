"""The records behind the derivation's published figures (Steps 1 to 6, s01, s02, the all-reduce sweep, the summary).

    from dpviz.topics.speedup_model.figure_records import load_inputs
    inputs = load_inputs()            # inputs.mlp[2] is the k=2 MLP run behind figure s01

:data:`FIGURE_PLAN` declares them (stems and settings); :class:`DerivationRecords` names them for the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpviz.topics.speedup_model.records import BenchRecord
from dpviz.engine.plan import FigurePlan
from dpviz.topics.ground_floor.records import Run
from dpviz.topics.all_reduce.records import Schedule

MLP_KS = (1, 2, 4)  # process counts whose step times feed s01 and s02

# The runs behind s01 and s02. Every k runs with the same intra-op threads per rank (one), so k = 1 is a fair
# baseline: with more threads it would be a different machine. The model and batch are large enough that one
# rank's compute (about 100 ms a step at k = 1 on 2 cores) dwarfs the all-reduce of the 282 kB gradient, so
# splitting it pays at k = 2 unless other work takes the cores (benchmarks/bench_speedup.py measures S(2) with
# this workload). The exchange itself takes under a ms, but a rank that waits for it on a small virtual machine
# can be woken a scheduler tick late (about 4 ms; benchmarks/bench_allreduce.py --wakeup), so T_comm per step is
# often 3-5 ms: with the 2×64 MLP (15 ms of compute) that alone held S(2) to 1.2-1.45. A bigger batch would
# also do, but at 65536 examples the float32 sums of the k shards drifted from the one big batch's by 1.4e-5,
# more than the 1e-5 (GRAD_TOLERANCE) that run.check() allows.
MLP_WORKLOAD = dict(model="mlp", width=256, depth=2, global_batch=16384, dataset_size=16384, steps=12, threads=1)
# One process on the examples one of two ranks holds: its time per example against the k = 1 and k = 2 runs'
# says whether a measured S(2) above 2 comes from the smaller batch per process (dpviz.topics.speedup_model.claims.speedup_at_two).
HALF_WORKLOAD = {**MLP_WORKLOAD, "global_batch": MLP_WORKLOAD["global_batch"] // 2}

SCHEDULE_ELEMENTS = 12  # a tensor of 12 float32: 4 chunks of 3 for k = 4

RUN_FILES = {"synced": "line_k4", "unsynced": "line_k4_no_all_reduce", "biased": "line_k1_biased"}

FIGURE_PLAN = FigurePlan(
    name="derivation",
    settings={
        "line_k4": dict(k=4, b=8, steps=5),                                  # dpviz.topics.ground_floor.run_training.record_run
        "line_k4_no_all_reduce": dict(k=4, b=8, steps=5, all_reduce=False),
        "line_k1_biased": dict(k=1, b=16, steps=1, sampling="biased"),
        **{f"mlp_k{k}": dict(k=k, **MLP_WORKLOAD) for k in MLP_KS},
        "mlp_k1_half": dict(k=1, **HALF_WORKLOAD),
        # the all-reduce sweep: message sizes log-spaced from 1 KiB to 16 MiB (low, high, count), 10 calls each
        "bench": dict(ks=(2, 4), size_range=(1 << 10, 16 << 20, 7), impls=("all_reduce",), repeats=10),
        "schedule_ring": dict(k=4, n_elements=SCHEDULE_ELEMENTS),             # one launch records both schedules
        "schedule_parameter_server": dict(k=4, n_elements=SCHEDULE_ELEMENTS),
    },
    quick={"bench": dict(size_range=(1 << 12, 4 << 20, 4), repeats=5)},
)


@dataclass
class DerivationRecords:
    """Every record the derivation's figures are drawn from."""

    synced: Run           # line model, k=4, all-reduce on
    unsynced: Run         # the same, all-reduce off
    biased: Run           # k=1, a biased grab
    mlp: dict             # {k: Run} for step times, one thread per rank
    half: Run             # k=1 on half the MLP runs' global batch: the examples one of two ranks holds
    bench: BenchRecord    # the all-reduce sweep
    ring: Schedule        # the hand-written ring's transfers
    server: Schedule      # the parameter server's transfers

    @classmethod
    def from_records(cls, records: dict) -> "DerivationRecords":
        """Name the records of :data:`FIGURE_PLAN`, given by stem."""
        return cls(mlp={k: records[f"mlp_k{k}"] for k in MLP_KS}, half=records["mlp_k1_half"], bench=records["bench"],
                   ring=records["schedule_ring"], server=records["schedule_parameter_server"],
                   **{attr: records[stem] for attr, stem in RUN_FILES.items()})


def load_inputs(folder=None) -> DerivationRecords:
    """The records ``python -m dpviz figures`` saved: ``load_inputs().mlp[2]`` is the k=2 MLP run behind figure s01."""
    return DerivationRecords.from_records(FIGURE_PLAN.load(folder))
