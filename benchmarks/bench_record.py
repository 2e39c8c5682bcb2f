"""How long a recorded run takes, and what recording costs against a plain data-parallel loop.

    .venv/bin/python benchmarks/bench_record.py

Prints:

* the wall time of ``record_run`` with k = 4 (line model, 5 steps), process start
  included, over a few repeats (target: <= 10 s on 2 cores);
* the in-rank loop time of a recorded run against a plain data-parallel loop with the
  same model, k, batches and steps, which only computes, all-reduces and steps
  (target: recorded / plain <= 1.15). The two alternate; the ratio compares the
  fastest of each, since on a shared machine other work only ever adds time.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
import torch.distributed as dist

from dpviz.runs.launch import cpu_count, launch
from dpviz.runs.models import flat_grad, set_flat_grad
from dpviz.runs.training import TrainConfig, batch_indices, load_data, make_model, make_optimizer, mse, record_run

RECORD_TARGET = 10.0  # seconds, k = 4, process start included
OVERHEAD_TARGET = 1.15  # recorded loop time / plain loop time


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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # k > cores: ranks share cores; said once below instead
    print(f"machine: {cpu_count()} cores, torch {torch.__version__}")

    walls = []
    for _ in range(3):
        begin = time.perf_counter()
        run = record_run(k=4, b=8, steps=5)
        walls.append(time.perf_counter() - begin)
    run.check()
    verdict = "met" if statistics.median(walls) <= RECORD_TARGET else "NOT met"
    print(f"record_run k=4, line model, 5 steps: median {statistics.median(walls):.2f} s "
          f"(runs: {', '.join(f'{w:.2f}' for w in walls)}), target <= {RECORD_TARGET:g} s: {verdict}")

    # The cost of recording is fixed per step (a hash of the parameters and a copy of each gradient),
    # so its share depends on how long a step computes: b=256 per rank is the target workload, and
    # b=32 shows the share when a step is tiny.
    for k, b in ((2, 256), (4, 256), (2, 32)):
        config = TrainConfig(k=k, b=b, steps=40, model="mlp", width=256, depth=2, dataset_size=2048)
        plain, recorded = [], []
        for _ in range(args.repeats):
            plain.append(max(launch(plain_worker, k, args=(config,))))  # the slowest rank ends the loop
            recorded.append(max(record_run(config).loop_seconds))
        ratio = min(recorded) / min(plain)
        note = " (k > cores: ranks share cores)" if k > cpu_count() else ""
        verdict = "met" if ratio <= OVERHEAD_TARGET else "NOT met"
        print(f"recording overhead, k={k}, b={b}, mlp {config.width}x{config.depth}, {config.steps} steps{note}: "
              f"{ratio:.3f}x fastest to fastest (plain {min(plain) * 1e3:.0f} ms, recorded {min(recorded) * 1e3:.0f} ms; "
              f"medians {statistics.median(recorded) / statistics.median(plain):.3f}x), target <= {OVERHEAD_TARGET}: {verdict}")


if __name__ == "__main__":
    main()
