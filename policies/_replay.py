"""Prioritized level replay over arms (Jiang et al. 2021, PLR)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy.special import softmax
from scipy.stats import rankdata

from ._registry import PolicyState, Stateless, register
from ._signal import Signal, check_signal, read_signal
from ._view import ArmView

FloatArray = npt.NDArray[np.float64]
SCORES = ("advantage", "failure", "progress")


@register("prioritized_replay")
@dataclass(frozen=True)
class PrioritizedReplay(Stateless):
    """PLR: replay the arms with the highest learning potential, and revisit stale ones.

    Over the families' current arms (the only arms the scheduler draws at family level; other
    arms get weight 0), with ``p`` the fast EMA of the chosen ``signal``:

    - score: "advantage" ``2 p (1 - p)`` (the expected |advantage| of a binary reward, PLR's
      |GAE| proxy), "failure" ``1 - p``, or "progress" ``|fast - slow|``;
    - score prioritisation: ``P_S ∝ (1 / rank) ** (1 / beta)``, rank 1 the highest score (ties
      share the best rank); arms never seen score +inf, so they come first;
    - staleness prioritisation: ``P_C ∝ step - last_step`` (never-drawn arms are the stalest);
    - ``P = (1 - rho) P_S + rho P_C``.

    Smaller ``beta`` concentrates on the top ranks; larger ``rho`` refreshes stale scores more
    often. Stateless: the view's counts and last steps are all it needs.
    """

    score: Literal["advantage", "failure", "progress"] = "advantage"
    signal: Signal = "auto"
    sparse_below: float = 0.05
    beta: float = 0.1
    rho: float = 0.1

    def __post_init__(self) -> None:
        if self.score not in SCORES:
            raise ValueError(f"score must be one of {', '.join(SCORES)}, got {self.score!r}")
        check_signal(self.signal, self.sparse_below)
        if not (np.isfinite(self.beta) and self.beta > 0):
            raise ValueError(f"beta (rank temperature) must be positive, got {self.beta}")
        if not 0.0 <= self.rho <= 1.0:
            raise ValueError(f"rho (staleness share) must be in [0, 1], got {self.rho}")

    def weights(self, view: ArmView, state: PolicyState) -> FloatArray:
        cur = view.current_arm
        fast, slow = read_signal(view, self.signal, self.sparse_below, cur)
        p = fast
        if self.score == "advantage":
            score = 2.0 * p * (1.0 - p)
        elif self.score == "failure":
            score = 1.0 - p
        else:
            score = np.abs(p - slow)
        score = np.where(view.count[cur] == 0, np.inf, score)
        rank = rankdata(-score, method="min")
        by_score = softmax(-np.log(rank) / self.beta)
        stale = view.staleness[cur].astype(np.float64)
        total = stale.sum()
        by_age = stale / total if total > 0 else np.full(cur.shape[0], 1.0 / cur.shape[0])
        w = np.zeros(view.catalog.n_arms)
        w[cur] = (1.0 - self.rho) * by_score + self.rho * by_age
        return w
