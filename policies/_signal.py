"""Which feedback channel a policy reads: pass rate, reward, or the dense process score.

Outcomes arrive as separate channels (verifiable success, judged reward, dense process score)
and are never pre-mixed. A policy picks one with ``signal``. "auto" reads the chance-normalised
pass rate but, where success is sparse (a hard tier at 0%), falls back to the process score
(such as the fraction of unit tests passed), which still moves when the pass rate does not.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from ._view import ArmView

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Signal = Literal["success", "reward", "process", "auto"]
SIGNALS: tuple[str, ...] = ("success", "reward", "process", "auto")


def check_signal(signal: str, sparse_below: float) -> None:
    """Shared ``__post_init__`` checks of the two signal options."""
    if signal not in SIGNALS:
        raise ValueError(f"signal must be one of {', '.join(SIGNALS)}, got {signal!r}")
    if not 0.0 <= sparse_below <= 1.0:
        raise ValueError(f"sparse_below must be in [0, 1], got {sparse_below}")


def read_signal(
    view: ArmView, signal: str, sparse_below: float, arms: IntArray | None = None
) -> tuple[FloatArray, FloatArray]:
    """The fast and slow EMA of the chosen channel per arm, each float64 [n_arms] in [0, 1]
    (or of ``arms`` only: a policy that learns from a batch reads the batch's arms, not
    every arm of a large catalog).

    A missing process score (NaN: never reported) reads as the pass rate in "auto" mode and
    as 0 in "process" mode.
    """

    def of(values: FloatArray) -> FloatArray:
        return values if arms is None else values[arms]

    cat = view.catalog
    chance = None if arms is None else cat.chance_success[cat.family_of_arm[arms]]
    success = (
        view.normalized(of(view.success_fast), chance),
        view.normalized(of(view.success_slow), chance),
    )
    if signal == "success":
        return success
    if signal == "reward":
        return np.asarray(of(view.reward_fast), dtype=np.float64), np.asarray(
            of(view.reward_slow), dtype=np.float64
        )
    process_fast, process_slow = of(view.process_fast), of(view.process_slow)
    if signal == "process":
        return np.nan_to_num(process_fast, nan=0.0), np.nan_to_num(process_slow, nan=0.0)
    sparse = (success[0] < sparse_below) & (success[1] < sparse_below) & ~np.isnan(process_fast)
    fast = np.where(sparse, np.nan_to_num(process_fast, nan=0.0), success[0])
    slow = np.where(sparse, np.nan_to_num(process_slow, nan=0.0), success[1])
    return fast, slow
