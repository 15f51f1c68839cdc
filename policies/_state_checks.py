"""Checks of a saved skill-model state: arrays named in its errors, nothing applied."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt


def family_floats(
    state: dict[str, Any], names: Iterable[str], n_families: int
) -> dict[str, npt.NDArray[Any]]:
    """Copies of the float arrays ``names`` of ``state``, one finite value per family, or
    ValueError naming the first that is missing or wrong."""
    loaded: dict[str, npt.NDArray[Any]] = {}
    for name in names:
        if state.get(name) is None:
            raise ValueError(f"skill.{name}: missing")
        value = np.asarray(state[name], dtype=np.float64)
        if value.shape != (n_families,) or not np.all(np.isfinite(value)):
            raise ValueError(f"skill.{name}: need {n_families} finite values")
        loaded[name] = value.copy()
    return loaded


def arm_counts(value: Any, where: str, n_arms: int) -> npt.NDArray[np.int32]:
    """A saved per-arm count array as int32, or ValueError naming ``where``."""
    if value is None:
        raise ValueError(f"{where}: missing")
    array = np.asarray(value)
    if array.shape != (n_arms,) or array.dtype.kind not in "iuf":
        raise ValueError(f"{where}: need {n_arms} counts")
    counts = array.astype(np.float64)
    whole = np.isfinite(counts) & (counts == np.rint(counts))
    if not whole.all() or (counts < 0).any() or (counts > np.iinfo(np.int32).max).any():
        raise ValueError(f"{where}: counts must be whole numbers in [0, 2**31)")
    return counts.astype(np.int32)
