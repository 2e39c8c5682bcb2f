"""How long a recorded run takes, and what recording costs against a plain data-parallel loop.

    .venv/bin/python benchmarks/bench_record.py
    .venv/bin/python benchmarks/bench_record.py --repeats 20 --only-overhead --k 2

Prints the load average and a speed reference (benchmarks/machine.py's: seconds for 30 products of
256 × 256 matrices on one BLAS thread, in a process of its own; lower is faster) before and after, then:

* the wall time of ``record_run`` with k = 4 (line model, 5 steps), process start
  included, over a few repeats (target: <= 10 s on 2 cores);
* for each configuration (k = 2, b = 256 with the MLP and with the line model first), the
  in-rank loop time of a recorded run (its rank worker, ``train_worker``) and of a plain
  data-parallel loop with the same model, k, batches and steps, which only computes,
  all-reduces and steps: fastest and median of each, and recorded / plain against the target
  (<= 1.10). The two alternate in the same ranks of one launch, each first in half the
  repeats; the ratio compares the fastest of each, since on a shared machine other work only
  ever adds time. With k > cores the ranks share cores and the ratio is mostly
  scheduling: it is printed, but only k <= cores is held to the target.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist

from dpviz.engine.launch import cpu_count, launch
from dpviz.topics.ground_floor.rank_models import flat_grad, set_flat_grad
from dpviz.topics.ground_floor.rank_training import (
    batch_indices, load_data, make_model, make_optimizer, mse, train_worker,
)
from dpviz.topics.ground_floor.run_training import TrainConfig, record_run

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402
from bench_allreduce import speed_reference  # noqa: E402

RECORD_TARGET = 10.0  # seconds, k = 4, process start included
OVERHEAD_TARGET = 1.10  # recorded loop time / plain loop time, fastest to fastest

# (k, b, model): b = 256 per rank is the target workload; b = 32 shows the share when a step is tiny.
CONFIGS = ((2, 256, "mlp"), (2, 256, "line"), (4, 256, "mlp"), (2, 32, "mlp"))


def plain_worker(rank: int, world_size: int, config: TrainConfig) -> float:
    """The same training loop with nothing recorded: the baseline. Returns the loop's seconds."""
    x_all, y_all = load_data(config)
    model = make_model(config)
    optimizer = make_optimizer(config, model.parameters())
    start = sum(config.sizes[:rank])
    begin = time.perf_counter()
    for step in range(config.steps):
        rows = batch_indices(config, step)[start:start + config.sizes[rank]]
        model.zero_grad(set_to_none=False)
        mse(model(x_all[rows]), y_all[rows]).backward()
        g = flat_grad(model)
        dist.all_reduce(g)
        g /= world_size
        set_flat_grad(model, g)
        optimizer.step()
    return time.perf_counter() - begin


def paired_worker(rank: int, world_size: int, config: TrainConfig, repeats: int) -> dict:
    """Both loops in the same ranks, one after the other, each first in half the repeats: their seconds, by name.

    The recorded loop is the recorded run's own (``train_worker``, whose ``loop_seconds`` a record keeps);
    running both in one launch keeps where the ranks run, and what else shares their cores, the same for both.
    """
    times = {"plain": [], "recorded": []}
    for i in range(repeats):
        for name in (("plain", "recorded") if i % 2 == 0 else ("recorded", "plain")):
            dist.barrier()
            if name == "plain":
                times[name].append(plain_worker(rank, world_size, config))
            else:
                times[name].append(train_worker(rank, world_size, config)["loop_seconds"])
    return times


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1 / 5 / 15 min)"


def ms(seconds) -> str:
    return f"{min(seconds) * 1e3:.1f} ms fastest, {statistics.median(seconds) * 1e3:.1f} ms median"


def overhead(k: int, b: int, model: str, repeats: int) -> bool:
    """Time the recorded and the plain loop, alternating in the same ranks; print both and the ratio.

    Returns whether the target is met.
    """
    config = TrainConfig(k=k, b=b, steps=40, model=model, width=256, depth=2, dataset_size=2048)
    per_rank = launch(paired_worker, k, args=(config, repeats), stall_timeout=120)
    plain, recorded = [[max(r[name][i] for r in per_rank) for i in range(repeats)]  # the slowest rank ends a loop
                       for name in ("plain", "recorded")]
    ratio = min(recorded) / min(plain)
    met = ratio <= OVERHEAD_TARGET
    name = f"mlp {config.width}x{config.depth} ({config.n_params():,} parameters)" if model == "mlp" else "line model"
    note = " (k > cores: ranks share cores; not held to the target)" if k > cpu_count() else ""
    print(f"k={k}, b={b}, {name}, {config.steps} steps, {repeats} repeats{note}:\n"
          f"    recorded {ms(recorded)}\n"
          f"    plain    {ms(plain)}\n"
          f"    recorded / plain {ratio:.3f}x fastest to fastest (medians "
          f"{statistics.median(recorded) / statistics.median(plain):.3f}x; median of each repeat's pair "
          f"{statistics.median(r / p for r, p in zip(recorded, plain)):.3f}x), target <= {OVERHEAD_TARGET:.2f}: "
          f"{'met' if met else 'MISSED'}", flush=True)
    return met


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=12, help="runs of each loop per configuration (default 12)")
    parser.add_argument("--only-overhead", action="store_true", help="skip the record_run wall time")
    parser.add_argument("--k", type=int, nargs="+", help="only the configurations with these k")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # k > cores: ranks share cores; said once below instead
    print(f"machine: {cpu_count()} cores, torch {torch.__version__}; load average {load()}; "
          f"speed reference {speed_reference():.3f} s (30 matrix products 256x256, one thread; lower is faster)", flush=True)

    if not args.only_overhead:
        walls = []
        for _ in range(3):
            begin = time.perf_counter()
            run = record_run(k=4, b=8, steps=5)
            walls.append(time.perf_counter() - begin)
        run.check()
        verdict = "met" if statistics.median(walls) <= RECORD_TARGET else "MISSED"
        print(f"record_run k=4, line model, 5 steps: median {statistics.median(walls):.2f} s "
              f"(runs: {', '.join(f'{w:.2f}' for w in walls)}), target <= {RECORD_TARGET:g} s: {verdict}", flush=True)

    configs = [c for c in CONFIGS if args.k is None or c[0] in args.k]
    missed = [f"k={k}, b={b}, {model}" for k, b, model in configs
              if not overhead(k, b, model, args.repeats) and k <= cpu_count()]
    print(f"load average after {load()}; speed reference {speed_reference():.3f} s")
    print(f"recording overhead target <= {OVERHEAD_TARGET:.2f} where k <= {cpu_count()} cores: "
          + (f"MISSED for {'; '.join(missed)}" if missed else "met"))


if __name__ == "__main__":
    machine.keep_if_asked(__file__)  # --keep: append what it prints to HISTORY.md
    main()
