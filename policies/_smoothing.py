"""Wrappers that any policy takes: temperature and an exploration floor."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def smooth(
    weights: npt.NDArray[np.float64], *, temperature: float = 1.0, floor: float = 0.0
) -> npt.NDArray[np.float64]:
    """Sharpen or flatten non-negative weights, then mix in a uniform share ``floor``.

    The result is a distribution. ``temperature`` < 1 sharpens (w ** (1 / T)); the floor
    guarantees every entry at least ``floor / n`` so no family is starved of data entirely.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"floor must be between 0 and 1, got {floor}")
    finite = np.isfinite(weights).all()  # (then nan_to_num would only copy them)
    w = np.clip(weights if finite else np.nan_to_num(weights, nan=0.0, posinf=0.0), 0.0, None)
    if temperature != 1.0:
        top = w.max(initial=0.0)
        w = (w / top) ** (1.0 / temperature) if top > 0 else w
    total = w.sum()
    n = w.shape[0]
    p = w / total if total > 0 else np.full(n, 1.0 / n)
    result: npt.NDArray[np.float64] = (1.0 - floor) * p + floor / n
    return result
