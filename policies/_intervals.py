"""Confidence intervals for pass rates, vectorised (Jeffreys: Beta(s + 1/2, n - s + 1/2))."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import special

FloatArray = npt.NDArray[np.float64]


def binomial_interval(
    successes: FloatArray, trials: FloatArray, confidence: float = 0.9
) -> tuple[FloatArray, FloatArray]:
    """Two-sided Jeffreys interval of a pass rate; (0, 1) where there are no trials."""
    s = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    alpha = (1.0 - confidence) / 2.0
    with np.errstate(invalid="ignore"):
        low = special.betaincinv(s + 0.5, n - s + 0.5, alpha)  # Beta quantiles, no
        high = special.betaincinv(s + 0.5, n - s + 0.5, 1.0 - alpha)  # frozen-dist overhead
    low = np.where((n <= 0) | (s <= 0), 0.0, low)
    high = np.where((n <= 0) | (s >= n), 1.0, high)
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
