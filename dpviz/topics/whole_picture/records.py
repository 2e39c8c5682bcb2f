"""The record of a data-parallel run through a batch-normalisation layer: per-shard statistics against shared ones.

Written by :func:`dpviz.topics.whole_picture.run_batchnorm.record_batchnorm`. At every step each rank computes its
gradient twice from the same parameters and the same shard: once with the batch-norm layer
normalising by its own shard's mean and variance (what ``torch.nn.BatchNorm1d`` does in each
replica of a data-parallel job), once with the mean and variance all-reduced over every shard
first (by hand, on CPU). Each is all-reduced; the ranks step with the second. The gradient of
the whole global batch, with one batch-norm over all of it, is computed again in one process.

P is the number of parameters, H the batch-norm layer's width, B the examples in a global batch.
"""

from __future__ import annotations

import numpy as np

from dpviz.topics.ground_floor.records import rel_err
from dpviz.engine.schema import Array, Kind, Meta, Record, ran_on, register
from dpviz.engine.tolerance import GRAD_TOLERANCE

KIND = Kind(
    name="batchnorm",
    version=1,
    doc="k ranks trained a small network with a batch-norm layer, computing each step's gradient with the "
        "layer's statistics from their own shard and with statistics all-reduced over every shard; both "
        "all-reduced, beside the gradient one process computed on the whole global batch.",
    arrays=(
        Array("local_grad", ("steps", "k", "P"), "float32",
              "each rank's gradient, its batch norm using its own shard's mean and variance"),
        Array("reduced_grad", ("steps", "k", "P"), "float32", "the all-reduced mean of local_grad, as each rank received it"),
        Array("synced_local_grad", ("steps", "k", "P"), "float32",
              "each rank's gradient, its batch norm using the mean and variance of all shards (all-reduced)"),
        Array("synced_reduced_grad", ("steps", "k", "P"), "float32",
              "the all-reduced mean of synced_local_grad, as each rank received it: what the ranks stepped with"),
        Array("big_grad", ("steps", "P"), "float32",
              "the gradient of the whole global batch with one batch norm over all of it, computed in one process"),
        Array("shard_mean", ("steps", "k", "H"), "float32", "the mean of the batch-norm layer's input over each rank's shard"),
        Array("synced_mean", ("steps", "k", "H"), "float32", "the mean each rank normalised with after all-reducing the statistics"),
        Array("big_mean", ("steps", "H"), "float32", "the mean of the batch-norm layer's input over the whole global batch"),
        Array("params", ("steps+1", "k", "P"), "float32", "every replica's parameters before each step and after the last"),
        Array("shard_sizes", ("k",), "int64", "examples per rank per step"),
        Array("batch_index", ("steps", "B"), "int64", "data set rows of each global batch, rank 0's shard first"),
        Array("example_rank", ("B",), "int64", "the rank that took each position of a batch"),
    ),
    meta=(
        Meta("k", "int", "ranks (devices)"),
        Meta("b", "int", "examples per rank per step"),
        Meta("steps", "int", "optimizer steps (SGD, with the gradient from all-reduced statistics)"),
        Meta("d_in", "int", "input features"),
        Meta("width", "int", "units of the hidden layer and of its batch norm (H)"),
        Meta("n_params", "int", "P, the model's parameter count"),
        Meta("eps", "float", "the batch norm's ε, added to the variance"),
        Meta("lr", "float", "learning rate η"),
        Meta("seed", "int", "seeds the data, the model and every batch draw"),
        Meta("dataset_size", "int", "N, examples in the data set"),
        Meta("backend", "str", "the torch.distributed backend"),
        Meta("device", "str", "cpu"),
        *ran_on("threads_per_rank", "torch_version", "host", "platform", "cores", "date"),
    ),
)


@register
class BatchNormRun(Record):
    """A recorded batch-norm run; ``meta`` says how it was made, and each array of :data:`KIND` is an attribute."""

    KIND = KIND

    def describe(self) -> str:
        m = self.meta
        return (f"k={m['k']}, b={m['b']}, network {m['d_in']}→{m['width']}→batch norm→tanh→1 ({m['n_params']} parameters), "
                f"sgd, lr={m['lr']:g}, {m['steps']} steps, {m['backend']} on {m['device']}, "
                f"{m['threads_per_rank']} thread(s) per rank, {m['host']}, {m['cores']} cores, {m['date'][:10]}")

    def local_rel_err(self) -> np.ndarray:
        """Per step, max |reduced − big| / max |big| over ranks and parameters, with per-shard statistics."""
        return rel_err(self.reduced_grad, self.big_grad[:, None, :], axis=(1, 2))

    def synced_rel_err(self) -> np.ndarray:
        """Per step, the same with the statistics all-reduced before normalising."""
        return rel_err(self.synced_reduced_grad, self.big_grad[:, None, :], axis=(1, 2))

    def check(self, tol: float = GRAD_TOLERANCE, miss: float = 1e-2) -> list[str]:
        """Assert the chapter's claims on this record and return them as lines.

        Per-shard statistics: every rank receives the same bits, yet the all-reduced gradient
        misses the big-batch gradient by more than ``miss`` (relative) at every step. Statistics
        all-reduced first: the ranks normalise with one mean, the whole batch's, and the
        all-reduced gradient equals the big-batch gradient within ``tol``. The replicas stay
        bit-identical throughout.
        """
        def same_bits(grads):
            return bool((grads == grads[:, :1]).all())

        local, synced = self.local_rel_err(), self.synced_rel_err()
        lines = []
        if not (same_bits(self.reduced_grad) and same_bits(self.synced_reduced_grad)):
            raise AssertionError("the ranks received different all-reduced gradients")
        shard_gap = rel_err(self.shard_mean, self.big_mean[:, None, :], axis=(1, 2))
        if not (shard_gap > miss).all():
            raise AssertionError(f"the shards' batch-norm means are not far from the global batch's: {shard_gap}")
        if not (local > miss).all():
            raise AssertionError(f"with per-shard statistics the all-reduced gradient should miss the big batch's; "
                                 f"relative errors {local}")
        lines.append(f"with each shard's own statistics (shard means {shard_gap.min():.0%} to {shard_gap.max():.0%} off "
                     f"the batch's), the all-reduced gradient missed the big-batch gradient by {local.min():.1%} to "
                     f"{local.max():.1%} at the {self.steps} steps")
        synced_gap = rel_err(self.synced_mean, self.big_mean[:, None, :], axis=(1, 2))
        if not (synced_gap <= tol).all() or not (synced <= tol).all():
            raise AssertionError(f"with all-reduced statistics the gradient should be the big batch's; relative errors "
                                 f"{synced}, batch-norm means {synced_gap}")
        lines.append(f"with the statistics all-reduced first, every rank normalised with the whole batch's mean and "
                     f"the all-reduced gradient matched the big-batch gradient within {tol:g} (relative) at every step")
        if not (self.params == self.params[:, :1]).all():
            raise AssertionError("the replicas' parameters differ")
        lines.append(f"all {self.k} replicas held bit-identical parameters after every step")
        return lines
