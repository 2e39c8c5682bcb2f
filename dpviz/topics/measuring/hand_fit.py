"""α and β set by hand against measured all-reduce times: how far a hand-set pair misses the points the fit used.

:func:`dpviz.topics.ground_floor.costmodel.fit_alpha_beta` chooses the pair that makes the root mean square of the
relative misses, (measured − modeled) / measured over the fitted points, as small as it can be. :class:`FittedPoints`
gives that number for any pair, so the chapter's slider panel can show a student's own pair beside the fit's, and
that no pair does better than the fit::

    points = fitted_points(bench, "the record")      # the times bench.fit() used: k with a core per rank
    points.fit("ring")                               # the fit, as bench.fit("ring") makes it
    points.ratio(alpha, beta, "ring")                # (n,) measured / modeled at each point
    points.rms(alphas, betas, "ring")                # RMS relative miss; broadcasts over arrays of α and β

The points are the fastest repeat at each (k, M), as the fit takes them (why:
:mod:`dpviz.topics.speedup_model.records`).
numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpviz.engine.checks import check_choice
from dpviz.topics.ground_floor import costmodel
from dpviz.topics.speedup_model.records import BenchRecord


@dataclass(frozen=True, eq=False)
class FittedPoints:
    """The all-reduce times a fit of one sweep used, and how far any (α, β) misses them."""

    name: str  # how the panel names the sweep: "the record", "just now"
    k: np.ndarray  # (n,) ranks
    M: np.ndarray  # (n,) bytes
    seconds: np.ndarray  # (n,) the fastest repeat at each (k, M)
    repeats: int  # timed calls per point, of which the fastest is kept
    where: str  # what the sweep was and where it ran: the record's describe()
    left_out: tuple  # the measured k that were not fitted (more ranks than cores)

    def fit(self, formula: str = "ring") -> costmodel.Fit:
        """α and β fitted to these points: the same fit as the record's own ``fit(formula)``."""
        return costmodel.fit_alpha_beta(self.k, self.M, self.seconds, formula=check_choice("formula", formula,
                                                                                         costmodel.FORMULAS))

    def terms(self, formula: str = "ring") -> tuple[np.ndarray, np.ndarray]:
        """``(A, W·M)`` at each point: the seconds per second of α, and the bytes per (bytes per second) of 1/β."""
        hops = np.asarray(costmodel.t_comm(self.k, np.zeros(len(self.k)), 1.0, 1.0, formula=formula), dtype=float)
        shared = np.asarray(costmodel.t_comm(self.k, self.M, 0.0, 1.0, formula=formula), dtype=float)
        return hops, shared

    def modeled(self, alpha, beta, formula: str = "ring") -> np.ndarray:
        """Seconds the model gives at each point; ``alpha`` and ``beta`` broadcast, the points on the last axis."""
        hops, shared = self.terms(formula)
        alpha, beta = np.asarray(alpha, dtype=float)[..., None], np.asarray(beta, dtype=float)[..., None]
        if np.any(alpha < 0) or np.any(beta <= 0):
            raise ValueError("alpha must be >= 0 seconds and beta > 0 bytes per second.")
        return alpha * hops + shared / beta

    def ratio(self, alpha, beta, formula: str = "ring") -> np.ndarray:
        """Measured / modeled at each point (1: the model hits it)."""
        return self.seconds / self.modeled(alpha, beta, formula)

    def misses(self, alpha, beta, formula: str = "ring") -> np.ndarray:
        """(measured − modeled) / measured at each point: the relative miss the fit minimises the squares of."""
        return 1.0 - self.modeled(alpha, beta, formula) / self.seconds

    def rms(self, alpha, beta, formula: str = "ring"):
        """The root mean square of :meth:`misses` over the points, shaped as ``alpha`` and ``beta`` broadcast."""
        out = np.sqrt(np.mean(self.misses(alpha, beta, formula) ** 2, axis=-1))
        return float(out) if out.ndim == 0 else out


def fitted_points(bench: BenchRecord, name: str = "the record", *, impl: str = "all_reduce",
                  argument: str = "bench") -> FittedPoints:
    """The points ``bench.fit()`` fits: ``impl``'s fastest repeat at each (k, M), for the k with a core per rank.

    ``argument`` is how an error names ``bench``: the caller's own argument.
    """
    if not isinstance(bench, BenchRecord):
        raise TypeError(f"{argument} must be a BenchRecord (a record of kind 'bench', from run_sweep or "
                        f"load_inputs()); got {type(bench).__name__}.")
    own = bench.own_core_ks()
    rows = (np.asarray(bench.impl) == impl) & np.isin(bench.k, own)
    if rows.sum() < 2:
        raise ValueError(f"{argument} must hold at least 2 {impl} points with a core per rank; got {int(rows.sum())}.")
    measured = sorted(set(np.asarray(bench.k)[np.asarray(bench.impl) == impl].tolist()))
    return FittedPoints(name, np.asarray(bench.k)[rows].astype(int), np.asarray(bench.M)[rows].astype(float),
                        np.asarray(bench.fastest)[rows].astype(float), int(bench.times.shape[1]), bench.describe(),
                        tuple(k for k in measured if k not in own))


__all__ = ["FittedPoints", "fitted_points"]
