"""A recorded data-parallel run: plain arrays plus metadata, and the checks the notes claim.

Array layout (P = number of parameters, B = examples per global batch):

=================  ====================  ==============================================
name               shape                 meaning
=================  ====================  ==============================================
``local_grad``     (steps, k, P)         each rank's mean gradient over its own shard
``reduced_grad``   (steps, k, P)         the gradient each rank stepped with, as it
                                         received it (its own gradient if the
                                         all-reduce was off)
``big_grad``       (steps, P)            the gradient of the whole global batch,
                                         computed independently in one process
``params``         (steps + 1, k, P)     every replica's parameters before each step
                                         and after the last (only when P is small)
``param_digest``   (steps + 1, k)        a SHA-1 digest of those parameters' bytes
``loss``           (steps, k)            each rank's loss on its shard
``big_loss``       (steps,)              the loss on the whole global batch
``t_compute``      (steps, k)            seconds of forward + backward, per rank
``t_comm``         (steps, k)            seconds inside the all-reduce, per rank
``loop_seconds``   (k,)                  each rank's wall time for the whole loop
``shard_sizes``    (k,)                  examples per rank per step
``batch_index``    (steps, B)            data set rows of each global batch, rank 0's
                                         shard first
``example_rank``   (B,)                  the rank that took each position of a batch
``example_grad``   (steps, B, P)         per-example gradients (line model only)
``x``, ``y``       (N, d_in), (N, 1)     the data set
=================  ====================  ==============================================
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dpviz.recordio import load_record, save_record

SCHEMA_VERSION = 1
KIND = "run"


@dataclass
class Run:
    """One recorded run; ``meta`` says how it was made, ``arrays`` what happened (see the module docstring)."""

    meta: dict
    arrays: dict = field(repr=False)

    def __getattr__(self, name):
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name]
        raise AttributeError(f"Run has no array or attribute {name!r}")

    def __repr__(self):
        return f"Run({self.describe()})"

    @property
    def k(self) -> int:
        return int(self.meta["k"])

    @property
    def steps(self) -> int:
        return int(self.meta["steps"])

    def describe(self) -> str:
        """One line naming the run: what a figure made from it should say."""
        m = self.meta
        sizes = m.get("shard_sizes") or [m["b"]]
        b = sizes[0] if len(set(sizes)) == 1 else "+".join(map(str, sizes))
        return (
            f"k={m['k']}, b={b}, {m['model']}, {m['optimizer']}, lr={m['lr']:g}, {m['backend']} on {m['device']}, "
            f"{m['host']}, {m['cores']} cores, {m['date'][:10]}"
        )

    # --- the notes' claims, checked on the recorded data ---

    def big_batch_rel_err(self) -> np.ndarray:
        """Per step, max |reduced − big| / max |big| over ranks and parameters."""
        diff = np.abs(self.reduced_grad - self.big_grad[:, None, :]).max(axis=(1, 2))
        scale = np.abs(self.big_grad).max(axis=1)
        return diff / np.where(scale > 0, scale, 1.0)

    def received_identical(self) -> np.ndarray:
        """Per step, True where every rank received bit-identical copies of the reduced gradient."""
        return (self.reduced_grad == self.reduced_grad[:, :1, :]).all(axis=(1, 2))

    def replicas_identical(self) -> np.ndarray:
        """Per recorded state (steps + 1), True where every replica's parameter bytes agree."""
        return (self.param_digest == self.param_digest[:, :1]).all(axis=1)

    def check(self, tol: float = 1e-5) -> str:
        """Assert the claims that hold for this run's settings and return a one-paragraph report."""
        lines = []
        if self.meta["all_reduce"]:
            assert self.received_identical().all(), "ranks received different reduced gradients"
            assert self.replicas_identical().all(), f"replicas differ at states {np.flatnonzero(~self.replicas_identical())}"
            lines.append(f"every rank received bit-identical reduced gradients at all {self.steps} steps")
            lines.append(f"all {self.k} replicas held bit-identical parameters after every step")
            if self.meta["mean"] == "weighted" or len(set(self.meta["shard_sizes"])) == 1:
                err = self.big_batch_rel_err().max()
                assert err <= tol, f"reduced gradient differs from the big-batch gradient by {err:.2e} > {tol:g}"
                lines.append(f"the reduced gradient matched the big-batch gradient to {err:.1e} (max relative error)")
        return "; ".join(lines) + "."

    # --- files ---

    def save(self, path):
        """Write ``<path>.npz`` and ``<path>.json``; returns the stem."""
        return save_record(path, KIND, SCHEMA_VERSION, self.meta, self.arrays)

    @classmethod
    def load(cls, path) -> "Run":
        """Read a run saved by :meth:`save`; a missing, truncated or other-schema file raises naming the path."""
        meta, arrays = load_record(path, KIND, SCHEMA_VERSION)
        return cls(meta, arrays)
