"""Argument checks shared by every public entry point.

Each check raises ``ValueError`` (or ``TypeError``) with one sentence that names
the argument and says what range it accepts, so a reader in a notebook sees at
once what to change.
"""

from __future__ import annotations

import math
from numbers import Integral, Real


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
    value = float(value)
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and value > high
    if math.isnan(value) or too_low or too_high:
        raise ValueError(f"{name} must be a number{_real_range_words(low, high, low_open)}; got {value}.")
    return value


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
