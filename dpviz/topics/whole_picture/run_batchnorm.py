"""Batch normalisation under data parallelism: per-shard statistics against all-reduced ones, on real ranks.

    from dpviz.topics.whole_picture.run_batchnorm import record_batchnorm
    run = record_batchnorm(k=2, b=8, steps=3)
    print("\\n".join(run.check()))

    python -m dpviz.topics.whole_picture.run_batchnorm --k 2 --b 8 --steps 3 --out runs/batchnorm

Step 3's identity (the mean of the shard gradients is the big-batch gradient) assumes that
each example's gradient depends on that example alone. A batch-norm layer breaks that: it
normalises every example by the mean and variance of the batch it sits in. In a data-parallel
job each replica's ``torch.nn.BatchNorm1d`` sees only its own shard, so the all-reduced
gradient is the gradient of k small batches, each normalised on its own, not the gradient
of one big batch.

All-reducing the statistics restores the equality: every rank adds up its shard's sum of
activations, divides by the global batch size, and normalises with that one mean (the same
for the variance). ``torch.nn.SyncBatchNorm`` does this on GPUs but refuses CPU tensors, so
here it is written out: :func:`synced_batch_norm`, with an autograd function whose forward
and backward are both an all-reduce sum, so the gradient flows through the other shards'
statistics too.

Each rank computes both gradients at every step from the same parameters and shard, and
steps with the second; the launching process computes the big-batch gradient with one
``BatchNorm1d`` over the whole global batch.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass

import numpy as np

from dpviz.engine.fronts import rank_side_names
from dpviz.engine.checks import MAX_DATASET, check_int, check_lr, check_seed, check_timeout
from dpviz.topics.whole_picture.records import BatchNormRun
from dpviz.engine import launch as launcher
from dpviz.engine.where import where_it_ran


def batchnorm_worker(rank: int, world_size: int, config: BatchNormConfig) -> dict:
    """Runs in each rank: :func:`dpviz.topics.whole_picture.rank_batchnorm.batchnorm_worker`, imported there (with torch), not here."""
    from dpviz.topics.whole_picture.rank_batchnorm import batchnorm_worker

    return batchnorm_worker(rank, world_size, config)


# the rank side's names this front offers (importing torch only when one is used)
__getattr__ = rank_side_names(__name__, "dpviz.topics.whole_picture.rank_batchnorm", (
    "build_model", "AllReduceSum", "synced_batch_norm", "forward", "batch_indices", "mse", "load_data",
    "big_batch",
))


@dataclass
class BatchNormConfig:
    k: int = 2                # ranks
    b: int = 8                # examples per rank per step
    steps: int = 3            # SGD steps, taken with the gradient from all-reduced statistics
    d_in: int = 4             # input features of the teacher data
    width: int = 8            # hidden units, each batch-normalised
    lr: float = 0.1           # learning rate η
    seed: int = 0             # seeds the data, the model and every batch draw
    dataset_size: int = 512   # examples in the data set
    stall_timeout: float = 60.0  # seconds a rank may go without finishing a step
    threads: int | None = None  # intra-op threads per rank; None: the cores shared evenly

    def __post_init__(self):
        check_int("k", self.k, low=1, high=64)
        check_int("dataset_size", self.dataset_size, low=2, high=MAX_DATASET)
        check_int("b", self.b, low=2, high=self.dataset_size // max(self.k, 1))  # a variance needs 2 examples
        check_int("steps", self.steps, low=1, high=1000)
        check_int("d_in", self.d_in, low=1, high=1024)
        check_int("width", self.width, low=1, high=4096)
        check_lr("lr", self.lr)
        check_seed("seed", self.seed)
        check_timeout("stall_timeout", self.stall_timeout)
        if self.threads is not None:
            check_int("threads", self.threads, low=1, high=4096)


def record_batchnorm(config: BatchNormConfig | None = None, *, progress: bool = False, **overrides) -> BatchNormRun:
    """Launch ``k`` ranks (gloo, CPU), train ``steps`` steps, and return the :class:`BatchNormRun`.

    ``record_batchnorm(k=2, b=8)`` builds the config from keywords.
    """
    config = BatchNormConfig(**{**(asdict(config) if config else {}), **overrides})
    results = launcher.launch(batchnorm_worker, config.k, args=(config,), backend="gloo", stall_timeout=config.stall_timeout,
                              threads=config.threads, total_steps=config.steps, progress=progress)
    arrays = {name: np.stack([r[name] for r in results], axis=1)
              for name in ("local_grad", "reduced_grad", "synced_local_grad", "synced_reduced_grad",
                           "shard_mean", "synced_mean", "params")}
    for name in ("big_grad", "big_mean", "batch_index"):  # rank 0's big-batch reference
        arrays[name] = results[0][name]
    arrays["shard_sizes"] = np.full(config.k, config.b, dtype=np.int64)
    arrays["example_rank"] = np.repeat(np.arange(config.k), config.b)
    meta = dict(
        k=config.k, b=config.b, steps=config.steps, d_in=config.d_in, width=config.width,
        n_params=int(arrays["params"].shape[-1]), eps=results[0]["eps"], lr=config.lr,
        seed=config.seed, dataset_size=config.dataset_size,
        **where_it_ran(BatchNormRun, backend="gloo", device="cpu", threads_per_rank=results[0]["threads"]),
    )
    return BatchNormRun(meta, arrays)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dpviz.topics.whole_picture.run_batchnorm",
                                     description="Record a data-parallel run through a batch-norm layer.")
    for name in ("k", "b", "steps", "width"):
        parser.add_argument(f"--{name}", type=int, default=getattr(BatchNormConfig, name))
    parser.add_argument("--out", required=True, help="record path stem (writes OUT.npz and OUT.json)")
    args = vars(parser.parse_args(argv))
    out = args.pop("out")
    try:
        config = BatchNormConfig(**args)  # before any rank starts
    except (ValueError, TypeError) as e:
        parser.exit(2, f"{parser.prog}: error: --{e}\n")  # every message starts with the field, named as its option
    run = record_batchnorm(config, progress=True)
    try:
        verified = run.check()
    except AssertionError as e:
        sys.exit(f"{parser.prog}: the run failed its own check ({e}), so nothing was saved to {out!r}.")
    print("\n".join(verified))
    print(f"wrote {run.save(out)}.npz and .json")


if __name__ == "__main__":
    main()
