"""Small numeric helpers the skill model and its hacking test share."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def median_of(values: npt.NDArray[np.float64]) -> float:
    """``np.median`` of a non-empty array of finite values, the same to the last bit,
    without its wrapper's cost (a refresh reads two medians)."""
    n = values.shape[0]
    k = n // 2
    if n % 2:
        return float(np.partition(values, k)[k])
    part = np.partition(values, (k - 1, k))
    return float((part[k - 1] + part[k]) / 2.0)
