"""How closely two float32 gradients must agree to count as the same: the one tolerance every check uses.

The arithmetic behind it. Rounding one float32 addition errs by at most 2⁻²⁴ (6e-8) of the larger operand, so the
rounding in a sum grows with the terms summed, not with the sum: where the terms cancel, the sum can be far smaller
than its own rounding error. Two gradients that differ only in the order of their sums (the all-reduced gradient, a
mean of k rank gradients, each a mean of its examples' gradients; and the big-batch gradient, the mean of the same
examples' gradients taken at once) therefore agree to a small fraction of the largest term summed, however small
the result. So :data:`GRAD_TOLERANCE` is relative to :func:`rounding_scale`, the largest magnitude among the
terms and the results, not to the result alone. With a batch that covers the whole data set, the big-batch
gradient shrinks toward 0 as training nears the data set's minimum while the rounding does not: after 300 steps
of the line model with 2 ranks of 256 examples its largest component was 3.6e-7, and the error 3e-2 of it, but
1.5e-6 of the largest rank gradient and 3e-8 of the largest example gradient. A real mistake (a rank left out,
a sum for a mean) moves the result by a good fraction of a term, far above the tolerance.
"""

from __future__ import annotations

import numpy as np

# The largest relative error, max |a − b| / max |b| (dpviz.topics.ground_floor.records.rel_err), allowed between two
# float32 results that differ only in the order of their sums: the all-reduced gradient against the big-batch
# gradient, a split layer against the whole one, a reader's answer against the real one. Above float32 rounding,
# far below any real mistake. Where the terms summed are known, the scale is rounding_scale(...), not max |b|.
GRAD_TOLERANCE = 1e-5


def rounding_scale(*arrays, axis=None) -> np.ndarray | float:
    """The largest magnitude among ``arrays`` (a sum's terms and its results) over ``axis``, leading axes aligned.

    Each array is reduced over its own axes past the first ``ndim`` of the result (``axis`` names the axes reduced
    in the first array), so per-step scales can be taken from arrays of different shapes: ``rounding_scale(big
    (steps, P), local (steps, k, P), axis=1)`` is, per step, the largest component of either. A scale of 0 counts
    as 1 (two zero vectors agree).
    """
    first = np.asarray(arrays[0])
    keep = first.ndim - (first.ndim if axis is None else len(np.atleast_1d(axis)))
    scale = None
    for a in arrays:
        a = np.abs(np.asarray(a, dtype=np.float64))
        if a.size == 0:
            continue
        a = a.max(axis=tuple(range(keep, a.ndim))) if a.ndim > keep else a
        scale = a if scale is None else np.maximum(scale, a)
    scale = np.where(scale > 0, scale, 1.0)
    return float(scale) if np.ndim(scale) == 0 else scale


def tolerance_words(tol: float = GRAD_TOLERANCE) -> str:
    """``tol`` as the notes write it: ``1e-5``, where Python's ``f"{tol:g}"`` gives ``1e-05``."""
    text = f"{tol:g}"
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    return f"{mantissa}e{int(exponent)}"
