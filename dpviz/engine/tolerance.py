"""How closely two float32 gradients must agree to count as the same: the one tolerance every check uses."""

# The largest relative error, max |a − b| / max |b| (dpviz.topics.ground_floor.records.rel_err), allowed between two float32
# results that differ only in the order of their sums: the all-reduced gradient against the big-batch gradient,
# a split layer against the whole one, a reader's answer against the real one. Above float32 rounding, far below
# any real mistake.
GRAD_TOLERANCE = 1e-5


def tolerance_words(tol: float = GRAD_TOLERANCE) -> str:
    """``tol`` as the notes write it: ``1e-5``, where Python's ``f"{tol:g}"`` gives ``1e-05``."""
    text = f"{tol:g}"
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    return f"{mantissa}e{int(exponent)}"
