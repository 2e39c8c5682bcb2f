"""Built-in data sets: generated from a seed, never downloaded.

* ``line``: points scattered around a straight line, the data for a two-parameter
  model whose gradients are arrows in a plane. Each point has a *kind* (its x is
  negative or positive), so a chapter can show what a biased grab does.
* ``teacher``: inputs and targets from a fixed random two-layer network, for the
  MLP whose size can be set so that communication time becomes visible.
"""

from __future__ import annotations

import numpy as np

from dpviz.engine.checks import check_int

LINE_SLOPE = 1.5      # the true w of the line data
LINE_INTERCEPT = 0.5  # the true intercept c of the line data
LINE_NOISE = 0.4      # standard deviation of the vertical scatter
LINE_START = (-1.0, 2.0)  # θ0 = (w, c) where the line model starts: far enough from the fit that the arrows are long


def line_data(n: int = 512, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points ``y = 1.5 x + 0.5 + noise`` with x uniform in [-2, 2]; returns x (n, 1), y (n, 1), float32."""
    n = check_int("n", n, low=1)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2.0, 2.0, size=(n, 1))
    y = LINE_SLOPE * x + LINE_INTERCEPT + rng.normal(0.0, LINE_NOISE, size=(n, 1))
    return x.astype(np.float32), y.astype(np.float32)


def line_kind(x: np.ndarray) -> np.ndarray:
    """The kind of each line example: 0 where x < 0, 1 where x >= 0 (shape (n,))."""
    return (np.asarray(x)[:, 0] >= 0).astype(np.int64)


def teacher_data(n: int = 512, d_in: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` inputs x ~ N(0, 1) of width ``d_in`` and targets from a fixed random tanh network; float32."""
    n = check_int("n", n, low=1)
    d_in = check_int("d_in", d_in, low=1)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d_in))
    w1 = rng.normal(size=(d_in, 32)) / np.sqrt(d_in)
    w2 = rng.normal(size=(32, 1)) / np.sqrt(32)
    y = np.tanh(x @ w1) @ w2
    return x.astype(np.float32), y.astype(np.float32)
