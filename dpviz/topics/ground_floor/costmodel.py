"""The alpha-beta cost model of one data-parallel step, and a fit of alpha, beta to measured times.

A step on ``k`` ranks takes ``t_compute / k`` (the work split evenly) plus ``t_comm`` (the gradient
all-reduce, which nobody can skip). Every all-reduce below costs

    t_comm = alpha * A(k) + W(k) * M / beta

with ``alpha`` the per-message latency (seconds), ``beta`` the link bandwidth (bytes/second) and
``M`` the message size (bytes). The three formulas differ only in ``A(k)``, the number of latency
hops, and ``W(k)``, the share of ``M`` each rank must push through its link:

    formula             A(k)          W(k)
    "notes"             log2 k        (k-1)/k      a reduce-scatter on its own
    "ring"              2 (k-1)       2 (k-1)/k    ring all-reduce, what gloo runs
    "halving_doubling"  2 log2 k      2 (k-1)/k    Rabenseifner's all-reduce

"notes" is "halving_doubling" with both A and W halved, so fitted to all-reduce times it matches
them as well, but reports alpha twice and beta half the true value.

Every function broadcasts over its array arguments like numpy does; all-scalar input gives a
Python float. This module needs only numpy, so a notebook can import it without torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpviz.engine.checks import check_choice, check_int, check_real

FORMULAS = ("notes", "ring", "halving_doubling")


def _checked(name, value, check, **bounds):
    """Run a scalar check from ``dpviz.engine.checks`` on a scalar or on every element of an array.

    Only lower bounds are used here, so checking the smallest element is enough; a float array
    passed as ``k`` fails on that element too, because ``check_int`` rejects floats.
    """
    array = np.asarray(value)
    if array.ndim == 0:
        return check(name, array.item(), **bounds)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a number or an array of numbers; got dtype {array.dtype}.")
    if array.size:
        check(name, array.min().item(), **bounds)  # NaN wins min(), and check_real rejects it
    return array.astype(float)


def _k(k):
    return _checked("k", k, check_int, low=1)


def _nonneg(name, value):
    return _checked(name, value, check_real, low=0.0)


def _positive(name, value):
    return _checked(name, value, check_real, low=0.0, low_open=True)


def _out(x):
    """A 0-d result comes back as a plain float."""
    return float(x) if np.ndim(x) == 0 else x


def _hops_and_share(k, formula):
    """Return ``(A(k), W(k))`` of the table in the module docstring; ``k`` already checked."""
    k = np.asarray(k, dtype=float)
    share = (k - 1) / k
    if formula == "notes":
        return np.log2(k), share
    if formula == "ring":
        return 2 * (k - 1), 2 * share
    return 2 * np.log2(k), 2 * share


def _t_comm(k, M, alpha, beta, formula):
    k, M = _k(k), _nonneg("M", M)
    alpha, beta = _nonneg("alpha", alpha), _positive("beta", beta)
    hops, share = _hops_and_share(k, formula)
    return _out(alpha * hops + share * M / beta)


def t_comm_notes(k, M, alpha, beta):
    """Seconds for ``alpha * log2(k) + (k-1)/k * M / beta``, the formula the notes use.

    It prices a reduce-scatter alone, which is half of an all-reduce: after it each rank holds
    the sum of only its own 1/k slice of the gradient, and an all-gather (the other half) is still
    needed to hand every rank the whole sum. Use ``t_comm_ring`` or ``t_comm_halving_doubling``
    for the full all-reduce.
    """
    return _t_comm(k, M, alpha, beta, "notes")


def t_comm_ring(k, M, alpha, beta):
    """Seconds for a ring all-reduce: ``2 (k-1) alpha + 2 (k-1)/k * M / beta``.

    The ring sends k-1 chunks of size M/k around to reduce-scatter, then k-1 more to all-gather,
    so latency grows linearly in k while the bytes per rank stay below 2M. gloo runs this.
    """
    return _t_comm(k, M, alpha, beta, "ring")


def t_comm_halving_doubling(k, M, alpha, beta):
    """Seconds for Rabenseifner's all-reduce: ``2 log2(k) alpha + 2 (k-1)/k * M / beta``.

    A recursive-halving reduce-scatter followed by a recursive-doubling all-gather: the same bytes
    as the ring in only 2 log2(k) rounds. The count is exact for k a power of two; for other k
    real implementations add a step or two, which this idealised formula leaves out.
    """
    return _t_comm(k, M, alpha, beta, "halving_doubling")


def t_comm(k, M, alpha, beta, *, formula="ring"):
    """Seconds to all-reduce ``M`` bytes across ``k`` ranks, by the named formula (see module doc)."""
    check_choice("formula", formula, FORMULAS)
    return _t_comm(k, M, alpha, beta, formula)


def speedup(t_compute, k, t_comm):
    """``S = t_compute / (t_compute / k + t_comm)``: one rank's step time over k ranks' step time.

    ``t_compute`` is the single-rank compute time of one step and ``t_comm`` the sync time, both in
    seconds. S = k when sync is free, and S = 1 at k = 1 with nothing to sync. If both times are 0
    there is no step to speed up and S is NaN.
    """
    t_compute, k = _nonneg("t_compute", t_compute), _k(k)
    t_comm = _nonneg("t_comm", t_comm)
    with np.errstate(invalid="ignore", divide="ignore"):
        return _out(np.divide(t_compute, np.divide(t_compute, k) + t_comm))


def efficiency(t_compute, k, t_comm):
    """``S / k``: the fraction of the ideal k-fold speedup that survives the sync."""
    return _out(np.divide(speedup(t_compute, k, t_comm), _k(k)))


def bandwidth_fraction(k):
    """``(k-1)/k``: 0 at k = 1, 1/2 at k = 2, and below 1 for every finite k."""
    k = _k(k)
    return _out(np.divide(np.subtract(k, 1), k))


def bus_bandwidth(M, seconds, k):
    """``busbw = (M / seconds) · 2(k−1)/k``, bytes per second: what each rank's link carried in a ring all-reduce.

    ``M / seconds`` is the algorithm bandwidth (algbw), what the application sees; the ring makes every rank
    send ``2(k−1)/k · M`` bytes, so busbw can be compared across k and with a link's β. It is 0 at k = 1.
    """
    M, seconds = _nonneg("M", M), _positive("seconds", seconds)
    return _out(np.divide(M, seconds) * 2 * bandwidth_fraction(k))


def lr_linear(lr_base, k):
    """``k * lr_base``: the linear scaling rule, for a batch k times larger."""
    return _out(np.multiply(_k(k), _positive("lr_base", lr_base)))


def lr_sqrt(lr_base, k):
    """``sqrt(k) * lr_base``: the gentler rule that tracks the k-fold drop in gradient variance."""
    return _out(np.sqrt(_k(k)) * _positive("lr_base", lr_base))


ACCUMULATION_SYNCS = ("accumulate", "every")  # one all-reduce per update (DDP's no_sync), or one per micro-batch


def accumulation_allreduces(m, *, sync="accumulate"):
    """All-reduce calls per update when a rank accumulates ``m`` micro-batches: 1, or m with ``sync="every"``."""
    check_choice("sync", sync, ACCUMULATION_SYNCS)
    m = _checked("m", m, check_int, low=1)
    return _out(np.ones_like(m, dtype=float) if sync == "accumulate" else np.asarray(m, dtype=float))


def accumulation_update_time(m, t_micro, t_comm, *, sync="accumulate"):
    """Seconds per update for a rank that runs ``m`` micro-batches of ``t_micro`` seconds each, one after another.

    ``t_comm`` is one all-reduce of the gradient (0 for one process). Accumulating first costs
    ``m * t_micro + t_comm``; all-reducing after every micro-batch costs ``m * (t_micro + t_comm)``.
    The compute, ``m * t_micro``, is the same either way: the micro-batches never run at once.
    """
    t_micro, t_comm = _nonneg("t_micro", t_micro), _nonneg("t_comm", t_comm)
    calls = accumulation_allreduces(m, sync=sync)
    return _out(np.multiply(_checked("m", m, check_int, low=1), t_micro) + np.multiply(calls, t_comm))


@dataclass(frozen=True, eq=False)
class Fit:
    """alpha and beta fitted to measured all-reduce times, with how well they reproduce them."""

    formula: str  # one of FORMULAS
    alpha: float  # seconds per latency hop
    beta: float  # bytes per second; inf when the fit found no bandwidth term
    predicted: np.ndarray  # seconds, the model at each measured (k, M)
    residuals: np.ndarray  # seconds, measured - predicted
    rel_err: np.ndarray  # |residuals| / measured
    median_rel_err: float  # over the points with k > 1, the ones the fit used

    def __repr__(self):
        return (
            f"Fit(formula={self.formula!r}, alpha={self.alpha * 1e6:.3g} µs, "
            f"beta={self.beta / 1e9:.3g} GB/s, median_rel_err={self.median_rel_err:.1%})"
        )


def fit_alpha_beta(k, M, seconds, *, formula="ring"):
    """Fit ``alpha`` (seconds) and ``beta`` (bytes/second) to all-reduce times ``seconds``.

    ``k``, ``M`` (bytes) and ``seconds`` are arrays of one shape, one entry per measurement. The
    model ``t = alpha * A(k) + (1/beta) * W(k) * M`` is linear in ``alpha`` and ``1/beta``, so this
    is a least-squares fit, made on relative residuals (each row divided by its measured time):
    otherwise the largest messages would decide everything and the latency of small ones would
    be ignored. Points with k = 1 are left out, since A = W = 0 there says nothing.

    A negative alpha or 1/beta is not physical. When the unconstrained fit gives one, the fit is
    redone with that term pinned at its bound (alpha = 0, or 1/beta = 0, i.e. beta = inf), keeping
    whichever pinned fit has the smaller error, so alpha >= 0 and beta > 0 always hold.
    """
    check_choice("formula", formula, FORMULAS)
    shapes = {name: np.shape(v) for name, v in (("k", k), ("M", M), ("seconds", seconds))}
    if len(set(shapes.values())) > 1:
        raise ValueError(f"k, M and seconds must have one shape; got {shapes}.")
    k, M = np.asarray(_k(k), float), np.asarray(_nonneg("M", M), float)
    seconds = np.asarray(_positive("seconds", seconds), float)

    hops, share = _hops_and_share(k, formula)
    used = k > 1
    if used.sum() < 2:
        raise ValueError(f"fit_alpha_beta needs at least 2 points with k > 1; got {used.sum()}.")
    # Rows scaled by 1/seconds: the fit drives every predicted/measured ratio towards 1.
    x = np.stack([hops[used], share[used] * M[used]], axis=1) / seconds[used, None]
    if np.linalg.matrix_rank(x) < 2:
        raise ValueError(
            "M must vary, or k vary with M > 0, across the points with k > 1 to tell alpha from beta."
        )
    coef = _fit_nonnegative(x, np.ones(len(x)))

    predicted = coef[0] * hops + coef[1] * share * M
    residuals = seconds - predicted
    rel_err = np.abs(residuals) / seconds
    with np.errstate(divide="ignore"):
        beta = float(np.divide(1.0, coef[1]))
    return Fit(formula, float(coef[0]), beta, predicted, residuals, rel_err, float(np.median(rel_err[used])))


def _fit_nonnegative(x, y):
    """Least squares ``x @ c ~ y`` with both ``c >= 0``, for two columns of non-negative ``x``.

    The optimum is either the unconstrained solution or lies on one of the two edges c0 = 0 and
    c1 = 0; try each and keep the best feasible one.
    """
    candidates = [np.linalg.lstsq(x, y, rcond=None)[0]]
    for keep in (0, 1):
        col = x[:, keep]
        c = np.zeros(2)
        c[keep] = col @ y / (col @ col) if col.any() else 0.0
        candidates.append(c)
    feasible = [c for c in candidates if np.all(c >= 0)]
    return min(feasible, key=lambda c: np.sum((x @ c - y) ** 2))


def fit_all(k, M, seconds):
    """One ``Fit`` per formula in ``FORMULAS``, keyed by its name, to compare them on one data set."""
    return {formula: fit_alpha_beta(k, M, seconds, formula=formula) for formula in FORMULAS}
