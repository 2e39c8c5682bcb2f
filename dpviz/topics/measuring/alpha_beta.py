"""α and β fitted to all-reduce times, how far the fit misses each point, and when the fit is to be trusted.

A fit of T = A(k)·α + W(k)·M/β always returns numbers; whether they mean anything depends on the
points. Two things must hold before β is read as a link's bandwidth:

1. **The times rise with M** over the fitted range: at every fitted k the largest message takes at
   least :data:`RISE` (2) times as long as the smallest. Otherwise the bandwidth term was never seen,
   and β is whatever number the noise in a flat row of latencies happens to give.
2. **The largest message is bandwidth-bound** under the fit: its transfer term W·M/β is at least
   :data:`SHARE` (half) of its modeled time. Otherwise β rests on a small correction to a latency.

α is trusted when the smallest message is latency-bound under the fit (its A·α at least half its
modeled time). Neither is trusted when the model does not follow the points it was fitted to: their
median relative error, |measured − modeled| / measured (what the fit minimises), must be at most
:data:`FIT_ERROR` (20 %, the project's target for the ring fit). A median lets a few points stray: published H100 times sit up to 3.8× off the
line at the sizes where NCCL changes algorithm, and the rule still trusts that fit, because most of
its points follow it. :func:`check_fit` applies the rule; :func:`residuals` gives measured / modeled − 1
for every point, fitted or not, to draw under the fit::

    fit = bench.fit("ring")
    verdict = check_fit(fit, k, M, seconds)    # FitCheck: .beta_trusted, .alpha_trusted, .words()
    res = residuals(fit, k, M, seconds)        # Residuals: per-point relative misses

The same fit and rule apply to other people's published measurements
(:func:`published_fits`, on a :class:`dpviz.topics.measuring.records.PublishedAllReduce`). numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpviz.engine.checks import check_choice
from dpviz.topics.ground_floor import costmodel

RISE = 2.0  # the largest fitted message's time over the smallest's, at every fitted k, for β to be trusted
SHARE = 0.5  # the share of a message's modeled time its term must hold: transfer for β, latency for α
FIT_ERROR = 0.20  # the largest median |measured − modeled| / measured over the fitted points for α or β to be trusted


@dataclass(frozen=True)
class FitCheck:
    """Whether a fit's α and β can be read as the link's, by the rule in the module docstring."""

    formula: str
    alpha: float  # seconds
    beta: float  # bytes per second (inf: no bandwidth term found)
    rise: float  # the smallest, over fitted k, of time(largest M) / time(smallest M)
    transfer_share: float  # W·M/β over the modeled time, at the largest fitted M
    latency_share: float  # A·α over the modeled time, at the smallest fitted M
    M_range: tuple  # (smallest, largest) fitted M, bytes
    miss: float  # the median |measured − modeled| / measured over the fitted points (the fit's median_rel_err)

    @property
    def rises(self) -> bool:
        return self.rise >= RISE

    @property
    def follows(self) -> bool:
        """The model follows the points it was fitted to: their median miss is at most FIT_ERROR."""
        return self.miss <= FIT_ERROR

    @property
    def beta_trusted(self) -> bool:
        return self.follows and self.rises and self.transfer_share >= SHARE and np.isfinite(self.beta)

    @property
    def alpha_trusted(self) -> bool:
        return self.follows and self.latency_share >= SHARE

    def words(self) -> str:
        """Two or three sentences: what may be read off this fit, and why."""
        lo, hi = (_bytes(v) for v in self.M_range)
        rise = (f"times rise ×{self.rise:.3g} from {lo} to {hi}" if self.rises
                else f"times rise only ×{self.rise:.2g} from {lo} to {hi} (need ×{RISE:g})")
        beta = ("β trusted" if self.beta_trusted else "β NOT trusted")
        why = (f"{rise}; at {hi} the transfer term is {self.transfer_share:.0%} of the modeled time"
               f" (need {SHARE:.0%})")
        alpha = ("α trusted" if self.alpha_trusted else "α NOT trusted") + \
            f" (latency {self.latency_share:.0%} of the modeled time at {lo})"
        miss = (f"The model misses the fitted points by {self.miss:.0%} of their time at the median"
                f" ({'within' if self.follows else 'over'} the {FIT_ERROR:.0%} allowed).")
        return f"{beta}: {why}. {alpha}. {miss}"


def check_fit(fit: costmodel.Fit, k, M, seconds, *, fitted=None) -> FitCheck:
    """Apply the trust rule to ``fit`` and the points ``(k, M, seconds)`` it was fitted to.

    ``fitted`` (bool array) marks the points the fit used; by default every point with k > 1.
    """
    if not isinstance(fit, costmodel.Fit):
        raise TypeError(f"fit must be a costmodel.Fit; got {type(fit).__name__}.")
    k, M, seconds = (np.asarray(a) for a in (k, M, seconds))
    if not (k.shape == M.shape == seconds.shape) or k.ndim != 1:
        raise ValueError(f"k, M and seconds must be 1-d arrays of one length; got shapes {k.shape}, {M.shape}, {seconds.shape}.")
    used = (k > 1) if fitted is None else np.asarray(fitted, bool) & (k > 1)
    if used.sum() < 2:
        raise ValueError(f"fitted must mark at least 2 points with k > 1; got {int(used.sum())}.")
    k, M, seconds = k[used].astype(np.int64), M[used].astype(float), seconds[used].astype(float)
    rises = []
    for kk in np.unique(k):
        sel = k == kk
        lo, hi = np.argmin(M[sel]), np.argmax(M[sel])
        rises.append(seconds[sel][hi] / seconds[sel][lo])
    latency, transfer = _terms(fit, k, M)
    big, small = np.argmax(M), np.argmin(M)
    total_big, total_small = latency[big] + transfer[big], latency[small] + transfer[small]
    return FitCheck(
        formula=fit.formula, alpha=fit.alpha, beta=fit.beta, rise=float(min(rises)),
        transfer_share=float(transfer[big] / total_big) if total_big > 0 else 0.0,
        latency_share=float(latency[small] / total_small) if total_small > 0 else 0.0,
        M_range=(float(M.min()), float(M.max())),
        miss=float(np.median(np.abs(seconds - (latency + transfer)) / seconds)),
    )


@dataclass(frozen=True)
class Residuals:
    """How far the fitted model misses each point: ``rel`` = measured / modeled − 1."""

    k: np.ndarray  # (n,) int
    M: np.ndarray  # (n,) bytes
    rel: np.ndarray  # (n,) measured / modeled − 1
    fitted: np.ndarray  # (n,) bool: the fit used this point (False: the model is extrapolated to it)
    formula: str

    def median_abs(self, *, fitted_only: bool = True) -> float:
        sel = self.fitted if fitted_only else np.ones_like(self.fitted)
        return float(np.median(np.abs(self.rel[sel])))


def residuals(fit: costmodel.Fit, k, M, seconds, *, fitted=None) -> Residuals:
    """Measured / modeled − 1 at every point with k > 1, under ``fit`` (points it did not use included)."""
    k, M, seconds = (np.asarray(a) for a in (k, M, seconds))
    keep = k > 1
    used = keep if fitted is None else np.asarray(fitted, bool) & keep
    model = np.asarray(costmodel.t_comm(k[keep], M[keep], fit.alpha, fit.beta, formula=fit.formula), dtype=float)
    return Residuals(k[keep].astype(int), M[keep].astype(float), seconds[keep] / model - 1.0, used[keep], fit.formula)


@dataclass(frozen=True)
class FittedTimes:
    """One set of all-reduce times with its fit, the fit's check and its residuals."""

    name: str  # who or what: "this machine", or a published system's id
    label: str  # how a figure names it
    k: np.ndarray
    M: np.ndarray
    seconds: np.ndarray
    fit: costmodel.Fit
    check: FitCheck
    residuals: Residuals
    source: str  # the machine it ran on, or the URL of a published table
    line_M: np.ndarray = None  # (points,) bytes, log-spaced over the measured M
    line_seconds: dict = None  # k -> (points,) seconds the fitted model gives at line_M


def _line(fit, k, M, points: int = 60) -> tuple:
    grid = np.geomspace(max(float(np.min(M)), 1.0), float(np.max(M)), points)
    return grid, {int(kk): np.asarray(costmodel.t_comm(int(kk), grid, fit.alpha, fit.beta, formula=fit.formula),
                                      dtype=float) for kk in np.unique(k) if kk > 1}


def bench_fit(bench, formula: str = "ring", *, impl: str = "all_reduce") -> FittedTimes:
    """This machine's fit: ``bench.fit(formula)`` on the k with a core per rank, checked, with residuals.

    Its points are the fastest repeat at each (k, M), the times the fit is made to (see
    :mod:`dpviz.topics.speedup_model.records` for why not the median).
    """
    check_choice("formula", formula, costmodel.FORMULAS)
    rows = np.asarray(bench.impl) == impl
    k, M, seconds = np.asarray(bench.k)[rows], np.asarray(bench.M)[rows], np.asarray(bench.fastest)[rows]
    fitted = np.isin(k, bench.own_core_ks())
    fit = bench.fit(formula, impl=impl)
    meta = bench.meta
    where = f"{meta.get('backend')} on {meta.get('host')}, {meta.get('cores')} cores, {str(meta.get('date', ''))[:10]}"
    label = f"this machine ({where}; fastest of {bench.times.shape[1]} calls per point)"
    return FittedTimes("this machine", label, k, M, seconds, fit,
                       check_fit(fit, k, M, seconds, fitted=fitted), residuals(fit, k, M, seconds, fitted=fitted), where,
                       *_line(fit, k, M))


def published_fits(published, formula: str = "ring") -> dict[str, FittedTimes]:
    """The same fit, check and residuals for each system of a published record, keyed by system id."""
    check_choice("formula", formula, costmodel.FORMULAS)
    out = {}
    for system in published.system_ids:
        k, M, seconds = published.rows(system)
        fit = costmodel.fit_alpha_beta(k, M, seconds, formula=formula)
        out[system] = FittedTimes(system, published.label(system), k, M, seconds, fit, check_fit(fit, k, M, seconds),
                                  residuals(fit, k, M, seconds), published.source(system), *_line(fit, k, M))
    return out


def _terms(fit, k, M):
    """The latency and transfer terms of the fitted model at each (k, M), in seconds."""
    latency = np.asarray(costmodel.t_comm(k, np.zeros_like(M), fit.alpha, 1.0, formula=fit.formula), dtype=float)
    total = np.asarray(costmodel.t_comm(k, M, fit.alpha, fit.beta, formula=fit.formula), dtype=float)
    return latency, total - latency


def _bytes(M: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if M >= scale:
            return f"{M / scale:.3g} {unit}"
    return f"{M:.0f} B"


__all__ = ["RISE", "SHARE", "FIT_ERROR", "FitCheck", "check_fit", "Residuals", "residuals", "FittedTimes", "bench_fit",
           "published_fits", "one_call_answer"]


def one_call_answer(bench, M: int, *, k: int = 2) -> tuple[float, str, str]:
    """For the prediction "how long will one all-reduce of M bytes on k processes take here?": the median call in
    milliseconds, how the chapter writes it, and why this machine gave it, from the ring fit to the same times."""
    rows = np.flatnonzero((bench.k == k) & (bench.M == M) & (bench.impl == "all_reduce"))
    if rows.size != 1:
        raise ValueError(f"bench must hold one all_reduce row at k = {k}, M = {M:,} bytes; got {rows.size}.")
    row = int(rows[0])
    median, fastest = float(bench.median[row]), float(bench.fastest[row])
    fit = bench.fit("ring")
    latency, transfer = _terms(fit, np.array([k]), np.array([M]))
    said = (f"{median * 1e3:.3g} ms for {_bytes(M)} on k = {k} (the median of {bench.times.shape[1]} calls; "
            f"the fastest took {fastest * 1e3:.3g} ms)")
    why = (f"The ring fit to these times charges {float(latency[0]) * 1e3:.3g} ms of latency (α = {fit.alpha * 1e6:.3g} µs "
           f"per step) and {float(transfer[0]) * 1e3:.3g} ms to move the bytes (β = {fit.beta / 1e9:.3g} GB/s): this "
           f"machine's link is the operating system passing bytes between processes")
    if median > 1.5 * fastest:
        why += (f"; the median sits {median / fastest:.2g}× above the fastest call, which is what late wake-ups "
                f"(the aside above) add")
    return median * 1e3, said, why
