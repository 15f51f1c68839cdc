"""Per-completion results folded into one result per prompt group (GRPO's unit).

GRPO scores ``num_generations`` completions of each prompt. The scheduler learns from one
outcome per task, so each group becomes its mean reward, its success rate, and the spread
of its rewards: a group whose completions all score the same has zero advantage and gives
GRPO no gradient (DAPO filters these out), which is worth counting per task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Completions:
    """Per-completion results of one generation round (arrays aligned, one per completion)."""

    row: IntArray  # int64 [n]: dataset row the completion answers
    reward: FloatArray  # float64 [n]: NaN where the reward function returned None
    success: FloatArray  # float64 [n]: in [0, 1]
    process: FloatArray  # float64 [n]: NaN where not supplied
    cost: FloatArray  # float64 [n]: seconds; NaN where not supplied

    def __len__(self) -> int:
        return int(self.row.shape[0])

    @classmethod
    def concat(cls, parts: Sequence[Completions]) -> Completions:
        return cls(
            row=np.concatenate([p.row for p in parts]).astype(np.int64),
            reward=np.concatenate([p.reward for p in parts]).astype(np.float64),
            success=np.concatenate([p.success for p in parts]).astype(np.float64),
            process=np.concatenate([p.process for p in parts]).astype(np.float64),
            cost=np.concatenate([p.cost for p in parts]).astype(np.float64),
        )


@dataclass(frozen=True, eq=False)
class GroupReport:
    """One entry per distinct row of a round, sorted by row."""

    row: IntArray  # int64 [g]
    completions: IntArray  # int64 [g]: completions seen for the row
    scored: IntArray  # int64 [g]: of which with a finite reward
    reward: FloatArray  # float64 [g]: mean over scored completions (NaN if none)
    success: FloatArray  # float64 [g]: mean over scored completions
    spread: FloatArray  # float64 [g]: standard deviation of the scored rewards
    process: FloatArray  # float64 [g]: mean where supplied, else NaN
    cost: FloatArray  # float64 [g]: mean seconds per completion where supplied, else NaN

    @property
    def zero_variance(self) -> npt.NDArray[np.bool_]:
        """Groups of two or more scored completions that all scored the same."""
        return (self.scored > 1) & (self.spread <= 1e-12)


def aggregate_groups(c: Completions) -> GroupReport:
    """Fold completions into groups by row, with bincount (no loop over groups)."""
    row, inverse = np.unique(c.row, return_inverse=True)
    inverse = inverse.reshape(-1)
    g = row.shape[0]
    scored = np.isfinite(c.reward)
    n_scored = np.bincount(inverse, weights=scored, minlength=g)
    r = np.where(scored, c.reward, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(inverse, weights=r, minlength=g) / n_scored
        dev = np.where(scored, c.reward - mean[inverse], 0.0)
        var = np.bincount(inverse, weights=dev * dev, minlength=g) / n_scored
        passed = np.bincount(inverse, weights=np.where(scored, c.success, 0.0), minlength=g)
        success: FloatArray = passed / n_scored
    return GroupReport(
        row=row.astype(np.int64),
        completions=np.bincount(inverse, minlength=g).astype(np.int64),
        scored=n_scored.astype(np.int64),
        reward=mean,
        success=success,
        spread=np.sqrt(var),
        process=_nanmean_by(inverse, c.process, g),
        cost=_nanmean_by(inverse, c.cost, g),
    )


def _nanmean_by(inverse: IntArray, x: FloatArray, g: int) -> FloatArray:
    have = ~np.isnan(x)
    n = np.bincount(inverse, weights=have, minlength=g)
    total = np.bincount(inverse, weights=np.where(have, x, 0.0), minlength=g)
    with np.errstate(invalid="ignore", divide="ignore"):
        result: FloatArray = np.where(n > 0, total / n, np.nan)
    return result
