"""Record, on this machine, every run the published figures are drawn from (the torch side of ``./run``).

    from dpviz.runs.figure_inputs import record_inputs
    inputs = record_inputs()          # a dpviz.records.figure_set.Inputs of fresh records

:func:`dpviz.regenerate.regenerate` calls this, then draws.
"""

from __future__ import annotations

import warnings

from tqdm.auto import tqdm

from dpviz.records.figure_set import MLP_KS, Inputs
from dpviz.runs.bench import BenchConfig, log_sizes, run_sweep
from dpviz.runs.schedule import record_schedules
from dpviz.runs.training import record_run

# The runs behind s01 and s02. Every k runs with the same intra-op threads per rank (one), so k = 1 is a fair
# baseline: with more threads it would be a different machine. The model and batch are large enough that one
# rank's compute (about 100 ms a step at k = 1 on 2 cores) dwarfs the all-reduce of the 282 kB gradient, so
# splitting it pays at k = 2 unless other work takes the cores (benchmarks/bench_speedup.py measures S(2) with
# this workload). The exchange itself takes under a ms, but a rank that waits for it on a small virtual machine
# can be woken a scheduler tick late (about 4 ms; benchmarks/bench_allreduce.py --wakeup), so T_comm per step is
# often 3-5 ms: with the 2×64 MLP (15 ms of compute) that alone held S(2) to 1.2-1.45. A bigger batch would
# also do, but at 65536 examples the float32 sums of the k shards drifted from the one big batch's by 1.4e-5,
# more than the 1e-5 that run.check() allows.
MLP = dict(model="mlp", width=256, depth=2, global_batch=16384, dataset_size=16384, steps=12, threads=1)

SCHEDULE_ELEMENTS = 12  # a tensor of 12 float32: 4 chunks of 3 for k = 4


def record_inputs(*, quick: bool = False, progress: bool = True) -> Inputs:
    """Record every run the figures need; a progress bar follows the stages."""
    sizes = log_sizes(1 << 12, 4 << 20, 4) if quick else log_sizes(1 << 10, 16 << 20, 7)
    stages = [
        ("line model, k=4", lambda: record_run(k=4, b=8, steps=5)),
        ("line model, k=4, all-reduce off", lambda: record_run(k=4, b=8, steps=5, all_reduce=False)),
        ("line model, k=1, biased grab", lambda: record_run(k=1, b=16, steps=1, sampling="biased")),
        *[(f"MLP, k={k}", lambda k=k: record_run(k=k, **MLP)) for k in MLP_KS],
        ("all-reduce sweep", lambda: run_sweep(
            BenchConfig(ks=(2, 4), sizes=sizes, impls=("all_reduce",), repeats=5 if quick else 10), progress=False)),
        ("ring and parameter-server schedules, k=4", lambda: record_schedules(4, SCHEDULE_ELEMENTS)),
    ]
    done = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # k > cores: every figure that shows such a time says so itself
        for name, make in tqdm(stages, desc="recording", unit="run", disable=not progress):
            done.append(make())
    main, alone, biased, *rest = done
    mlp = dict(zip(MLP_KS, rest[: len(MLP_KS)]))
    bench, (ring, server) = rest[len(MLP_KS):]
    return Inputs(main, alone, biased, mlp, bench, ring, server)
