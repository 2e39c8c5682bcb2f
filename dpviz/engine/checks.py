"""Argument checks shared by every public entry point.

Each check raises ``ValueError`` (or ``TypeError``) with one sentence that names
the argument and says what range it accepts, so a reader in a notebook sees at
once what to change.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

# The finite ranges the ranks can use, shared by every config that takes these values.
MAX_SEED = 2**32 - 1  # numpy's RandomState (under PowerSGD) takes 32 bits; the ranks' int64 batch seeds stay in range
MAX_LR = 1e3  # learning rate: far past any that trains (such a run diverges and fails its check); 1e308 overflowed the
              # ranks' float32 step
MAX_DATASET = 1 << 20  # examples in a data set
MAX_TIMEOUT = 86_400.0  # seconds (a day): the process group's own timeout is built from it and must stay finite


def check_int(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an int, or raise naming ``name`` and its allowed range."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer{_range_words(low, high)}; got {value!r}.")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be an integer{_range_words(low, high)}; got {value}.")
    return value


def check_real(
    name: str,
    value,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> float:
    """Return ``value`` as a float, or raise naming ``name`` and its allowed range.

    ``low_open=True`` excludes ``low`` itself (for example ``beta > 0``).
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number{_real_range_words(low, high, low_open)}; got {value!r}.")
    try:
        value = float(value)
    except OverflowError:  # an int past float's range
        value = math.inf if value > 0 else -math.inf
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and value > high
    if math.isnan(value) or too_low or too_high:
        raise ValueError(f"{name} must be a number{_real_range_words(low, high, low_open)}; got {value}.")
    return value


def check_seed(name: str, value) -> int:
    """A seed: an integer from 0 to :data:`MAX_SEED`."""
    return check_int(name, value, low=0, high=MAX_SEED)


def check_lr(name: str, value) -> float:
    """A learning rate: a number > 0 and at most :data:`MAX_LR`."""
    return check_real(name, value, low=0, low_open=True, high=MAX_LR)


def check_timeout(name: str, value) -> float:
    """A timeout in seconds: a number > 0 and at most :data:`MAX_TIMEOUT` (a day)."""
    return check_real(name, value, low=0, low_open=True, high=MAX_TIMEOUT)


def check_choice(name: str, value, choices) -> str:
    """Return ``value`` if it is one of ``choices``, else raise listing them."""
    if value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {listed}; got {value!r}.")
    return value


def _range_words(low, high) -> str:
    if low is not None and high is not None:
        return f" from {low} to {high}"
    if low is not None:
        return f" >= {low}"
    if high is not None:
        return f" <= {high}"
    return ""


def _real_range_words(low, high, low_open) -> str:
    if low is None and high is None:
        return ""
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"<= {high:g}")
    return " " + " and ".join(parts)
