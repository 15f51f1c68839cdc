"""Regression guard: send samples back to a family whose held-out probe score has dropped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from domains import Catalog

from ._registry import PolicyState, register
from ._view import ArmView

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@register("regression_guard")
@dataclass(frozen=True)
class RegressionGuard:
    """Weight 1 for families whose probe curve fell significantly, ``baseline`` for the rest.

    A family is flagged when its last ``consecutive`` probe points each lay more than ``k``
    standard errors below its ``reference``: "best" (the running best point since the
    family's last tier change; the error is the two points' binomial errors combined) or
    "ema_slow" (the curve's slow EMA; the latest point's error). A probe within ``k`` errors
    clears the flag. Errors are floored at ``min_stderr`` so a run of perfect scores (error 0)
    does not flag a one-item dip.

    State (per family): running best and its error, the streak of significant drops, the step
    of the last probe point seen, and the tier it was measured at. ``observe`` reads
    ``view.curves`` after each report and counts a probe point once, when its step is new; with
    several points recorded between two reports only the latest counts. Without curves in the
    view the weights are uniform. Usually one component of a mixture, where its mixing weight is
    the share of samples spent repairing regressions.
    """

    k: float = 2.0
    consecutive: int = 2
    reference: Literal["best", "ema_slow"] = "best"
    min_stderr: float = 0.01
    baseline: float = 0.0

    def __post_init__(self) -> None:
        if not (np.isfinite(self.k) and self.k > 0):
            raise ValueError(f"k (standard errors) must be positive, got {self.k}")
        if self.consecutive < 1:
            raise ValueError(f"consecutive must be >= 1 probe, got {self.consecutive}")
        if self.reference not in ("best", "ema_slow"):
            raise ValueError(f"reference must be best or ema_slow, got {self.reference!r}")
        if not (np.isfinite(self.min_stderr) and self.min_stderr >= 0):
            raise ValueError(f"min_stderr must be >= 0, got {self.min_stderr}")
        if not 0.0 <= self.baseline <= 1.0:
            raise ValueError(f"baseline must be in [0, 1], got {self.baseline}")

    def init_state(self, catalog: Catalog) -> PolicyState:
        f = catalog.n_families
        return {
            "best": np.full(f, np.nan),  # float64 [n_families], running best probe score
            "best_se": np.full(f, np.nan),  # float64 [n_families], its standard error
            "streak": np.zeros(f, dtype=np.int64),  # int64 [n_families], consecutive drops
            "seen_step": np.full(f, -1, dtype=np.int64),  # int64 [n_families], last point seen
            "tier": np.full(f, -1, dtype=np.int64),  # int64 [n_families], -1 before the first
        }

    def flagged(self, state: PolicyState) -> npt.NDArray[np.bool_]:
        """bool [n_families]: families in a significant regression."""
        flags: npt.NDArray[np.bool_] = np.asarray(state["streak"]) >= self.consecutive
        return flags

    def weights(self, view: ArmView, state: PolicyState) -> FloatArray:
        fam = view.catalog.family_of_arm
        if view.curves is None:
            return np.ones(fam.shape[0])
        w: FloatArray = np.where(self.flagged(state)[fam], 1.0, self.baseline)
        return w

    def observe(self, view: ArmView, state: PolicyState, touched: IntArray) -> None:
        curves = view.curves
        if curves is None:
            return
        best, best_se, streak = state["best"], state["best_se"], state["streak"]
        seen, tier = state["seen_step"], state["tier"]
        moved = (tier >= 0) & (tier != view.tier)  # a new tier: old scores are not comparable
        best[moved] = np.nan
        best_se[moved] = np.nan
        streak[moved] = 0
        tier[...] = view.tier

        latest = np.asarray(curves.latest, dtype=np.float64)
        step = np.asarray(curves.latest_step, dtype=np.int64)
        new = (step > seen) & np.isfinite(latest)
        if not new.any():
            return
        se = np.fmax(np.nan_to_num(curves.stderr, nan=0.0), self.min_stderr)
        if self.reference == "best":
            ref = best
            err = np.sqrt(se**2 + np.nan_to_num(best_se, nan=0.0) ** 2)
        else:
            ref = np.asarray(curves.ema_slow, dtype=np.float64)
            err = se
        with np.errstate(invalid="ignore"):
            drop = np.isfinite(ref) & (ref - latest > self.k * err)
        streak[new] = np.where(drop[new], streak[new] + 1, 0)
        better = new & ~(latest <= best)  # NaN best counts as beaten
        best[better] = latest[better]
        best_se[better] = se[better]
        seen[new] = step[new]
