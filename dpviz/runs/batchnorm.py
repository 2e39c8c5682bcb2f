"""Batch normalisation under data parallelism: per-shard statistics against all-reduced ones, on real ranks.

    from dpviz.runs.batchnorm import record_batchnorm
    run = record_batchnorm(k=2, b=8, steps=3)
    print("\\n".join(run.check()))

    python -m dpviz.runs.batchnorm --k 2 --b 8 --steps 3 --out runs/batchnorm

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
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from dpviz.checks import check_int, check_real
from dpviz.data import teacher_data
from dpviz.records.batchnorm import BatchNormRun
from dpviz.runs import launch as launcher
from dpviz.runs import optim
from dpviz.runs.models import flat_grad, set_flat_grad
from dpviz.runs.where import where_it_ran


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
        check_int("b", self.b, low=2, high=self.dataset_size // max(self.k, 1))  # a variance needs 2 examples
        check_int("steps", self.steps, low=1, high=1000)
        check_int("d_in", self.d_in, low=1, high=1024)
        check_int("width", self.width, low=1, high=4096)
        check_real("lr", self.lr, low=0, low_open=True)
        check_int("dataset_size", self.dataset_size, low=2)
        check_real("stall_timeout", self.stall_timeout, low=0, low_open=True)
        if self.threads is not None:
            check_int("threads", self.threads, low=1, high=4096)


def build_model(config: BatchNormConfig) -> nn.Sequential:
    """Linear → BatchNorm1d → tanh → Linear; the same seed gives bit-identical parameters in every process."""
    torch.manual_seed(config.seed)
    return nn.Sequential(nn.Linear(config.d_in, config.width), nn.BatchNorm1d(config.width), nn.Tanh(),
                         nn.Linear(config.width, 1))


class AllReduceSum(torch.autograd.Function):
    """Sum a tensor over all ranks; the backward pass sums the incoming gradients over all ranks the same way.

    Rank i's loss depends on every shard's activations through the shared sum, so the gradient
    of that sum must reach every shard: the sum over ranks of d(loss_i)/d(sum) is what each
    rank's own contribution to the sum receives.
    """

    @staticmethod
    def forward(ctx, tensor):
        total = tensor.clone()
        dist.all_reduce(total)
        return total

    @staticmethod
    def backward(ctx, grad):
        total = grad.clone()
        dist.all_reduce(total)
        return total


def synced_batch_norm(h: torch.Tensor, bn: nn.BatchNorm1d, total: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalise ``h`` (n, H) with the mean and biased variance of all ranks' ``h`` together (``total`` rows).

    Two all-reduces, as BatchNorm1d computes its statistics in two passes: the mean, then the
    mean squared distance from it. Returns the normalised, scaled and shifted output and the mean.
    """
    mean = AllReduceSum.apply(h.sum(dim=0)) / total  # (H,)
    centred = h - mean
    var = AllReduceSum.apply((centred * centred).sum(dim=0)) / total  # (H,) biased, as batch norm uses in training
    return centred / torch.sqrt(var + bn.eps) * bn.weight + bn.bias, mean


def forward(model: nn.Sequential, x: torch.Tensor, *, total: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The network's output and the mean its batch norm normalised with: the shard's own, or with ``total`` all ranks'."""
    linear, bn, act, head = model
    h = linear(x)
    if total is None:
        z, mean = bn(h), h.mean(dim=0)  # BatchNorm1d in training mode: this batch's statistics
    else:
        z, mean = synced_batch_norm(h, bn, total)
    return head(act(z)), mean.detach()


def batch_indices(config: BatchNormConfig, step: int) -> torch.Tensor:
    """Rows of the global batch of ``step``: a seeded random draw of k·b rows, the same in every rank."""
    gen = torch.Generator().manual_seed(config.seed * 100_003 + step)
    return torch.randperm(config.dataset_size, generator=gen)[: config.k * config.b]


def mse(pred, target):
    return torch.mean((pred - target) ** 2)


def load_data(config: BatchNormConfig) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = teacher_data(config.dataset_size, config.d_in, seed=config.seed)
    return torch.from_numpy(x), torch.from_numpy(y)


def batchnorm_worker(rank: int, world_size: int, config: BatchNormConfig) -> dict:
    """One rank: at every step its gradient with its own statistics and with all-reduced ones, both all-reduced."""
    x_all, y_all = load_data(config)
    model = build_model(config)
    optimizer = optim.SGD(model.parameters(), lr=config.lr)
    total = world_size * config.b
    n_params = sum(p.numel() for p in model.parameters())
    out = {name: np.zeros((config.steps, n_params), np.float32)
           for name in ("local_grad", "reduced_grad", "synced_local_grad", "synced_reduced_grad")}
    out["shard_mean"] = np.zeros((config.steps, config.width), np.float32)
    out["synced_mean"] = np.zeros((config.steps, config.width), np.float32)
    params = np.zeros((config.steps + 1, n_params), np.float32)

    def mean_over_ranks(g):
        g = g.clone()
        dist.all_reduce(g)
        return g / world_size

    for step in range(config.steps):
        params[step] = torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy()
        rows = batch_indices(config, step)[rank * config.b:(rank + 1) * config.b]
        x, y = x_all[rows], y_all[rows]

        model.zero_grad(set_to_none=False)
        pred, out["shard_mean"][step] = forward(model, x)  # what each replica's BatchNorm1d does on its own
        mse(pred, y).backward()
        g = flat_grad(model)
        out["local_grad"][step], out["reduced_grad"][step] = g.numpy(), mean_over_ranks(g).numpy()

        model.zero_grad(set_to_none=False)
        pred, out["synced_mean"][step] = forward(model, x, total=total)  # statistics of the whole global batch
        mse(pred, y).backward()
        g = flat_grad(model)
        reduced = mean_over_ranks(g)
        out["synced_local_grad"][step], out["synced_reduced_grad"][step] = g.numpy(), reduced.numpy()

        set_flat_grad(model, reduced)
        optimizer.step()
        launcher.report_progress(step)
    params[config.steps] = torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy()
    out["params"] = params
    out["threads"] = torch.get_num_threads()
    return out


def big_batch(config: BatchNormConfig, flat: np.ndarray, x: torch.Tensor, y: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Gradient of one global batch (x, y) at parameters ``flat``, one BatchNorm1d over all of it; and its mean."""
    model = build_model(config)
    torch.nn.utils.vector_to_parameters(torch.from_numpy(flat), model.parameters())
    pred, mean = forward(model, x)
    mse(pred, y).backward()
    return flat_grad(model).numpy().copy(), mean.numpy()


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
    x_all, y_all = load_data(config)
    batches = [batch_indices(config, step) for step in range(config.steps)]
    big = [big_batch(config, arrays["params"][step, 0], x_all[rows], y_all[rows]) for step, rows in enumerate(batches)]
    arrays["big_grad"] = np.stack([g for g, _ in big])
    arrays["big_mean"] = np.stack([m for _, m in big])
    arrays["shard_sizes"] = np.full(config.k, config.b, dtype=np.int64)
    arrays["batch_index"] = np.stack([rows.numpy() for rows in batches])
    arrays["example_rank"] = np.repeat(np.arange(config.k), config.b)
    meta = dict(
        k=config.k, b=config.b, steps=config.steps, d_in=config.d_in, width=config.width,
        n_params=int(arrays["params"].shape[-1]), eps=float(build_model(config)[1].eps), lr=config.lr,
        seed=config.seed, dataset_size=config.dataset_size,
        **where_it_ran(BatchNormRun, backend="gloo", device="cpu", threads_per_rank=results[0]["threads"]),
    )
    return BatchNormRun(meta, arrays)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dpviz.runs.batchnorm",
                                     description="Record a data-parallel run through a batch-norm layer.")
    for name in ("k", "b", "steps", "width"):
        parser.add_argument(f"--{name}", type=int, default=getattr(BatchNormConfig, name))
    parser.add_argument("--out", required=True, help="record path stem (writes OUT.npz and OUT.json)")
    args = vars(parser.parse_args(argv))
    out = args.pop("out")
    run = record_batchnorm(progress=True, **args)
    print("\n".join(run.check()))
    print(f"wrote {run.save(out)}.npz and .json")


if __name__ == "__main__":
    main()
