"""The read-only view of scheduler state that every policy reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from domains import Catalog

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class CurveView(Protocol):
    """Per-family probe curves (held-out scores over time), as policies may read them.

    All arrays are [n_families]; NaN where a family has no probe yet. The scheduler's
    ``ProbeCurves`` satisfies this protocol.
    """

    @property
    def latest(self) -> FloatArray: ...
    @property
    def latest_step(self) -> IntArray: ...
    @property
    def count(self) -> IntArray: ...
    @property
    def stderr(self) -> FloatArray: ...
    @property
    def ema_fast(self) -> FloatArray: ...
    @property
    def ema_slow(self) -> FloatArray: ...
    @property
    def normalized(self) -> FloatArray: ...
    def slope(
        self, min_points: int = 4, alpha: float = 0.95
    ) -> tuple[FloatArray, FloatArray, FloatArray]: ...


@dataclass(frozen=True, eq=False)
class ArmView:
    """Per-arm statistics at one step. Arrays are read-only views of the scheduler's state.

    Success and reward EMAs only count episodes that said something about the model (status ok
    or failed); environment faults are left out. ``*_fast`` / ``*_slow`` are exponential moving
    averages with the scheduler's fast and slow rates. Rewards are rescaled to [0, 1] by the
    family's declared reward range, so policies compare families on one scale.
    """

    catalog: Catalog
    step: int
    count: IntArray  # int64 [n_arms], episodes counted
    success_fast: FloatArray  # float64 [n_arms]
    success_slow: FloatArray  # float64 [n_arms]
    reward_fast: FloatArray  # float64 [n_arms], rescaled to [0, 1]
    reward_slow: FloatArray  # float64 [n_arms]
    process_fast: FloatArray  # float64 [n_arms], NaN where no process score was reported
    process_slow: FloatArray  # float64 [n_arms]
    last_step: IntArray  # int64 [n_arms], -1 when never drawn
    probe_score: FloatArray  # float64 [n_arms], latest held-out score, NaN when never probed
    probe_step: IntArray  # int64 [n_arms], -1 when never probed
    tier: IntArray  # int64 [n_families], current tier
    curves: CurveView | None = None  # probe curves per family, when the scheduler keeps them
    fast_rate: float = 0.1  # the EMA rates behind *_fast and *_slow (per episode)
    slow_rate: float = 0.02

    def progress_noise(self, p: FloatArray) -> FloatArray:
        """Standard deviation of fast - slow for a Bernoulli(p) arm that is not learning.

        Both EMAs average the same outcomes; in the stationary state
        Var(fast - slow) = p(1-p) [a/(2-a) + b/(2-b) - 2ab/(a+b-ab)] with a, b the rates.
        """
        a, b = self.fast_rate, self.slow_rate
        factor = a / (2 - a) + b / (2 - b) - 2 * a * b / (a + b - a * b)
        result: FloatArray = np.sqrt(np.clip(p * (1 - p), 0.0, None) * max(factor, 0.0))
        return result

    @property
    def current_arm(self) -> IntArray:
        """int64 [n_families]: the arm of each family at its current tier."""
        return self.catalog.arm_start[:-1] + self.tier

    @property
    def chance(self) -> FloatArray:
        """float64 [n_arms]: success rate of a random policy, per arm."""
        return self.catalog.chance_success[self.catalog.family_of_arm]

    def normalized(self, success: FloatArray, chance: FloatArray | None = None) -> FloatArray:
        """Success rescaled so chance level is 0 and perfect is 1 (clipped); ``chance``
        of the same arms as ``success`` where those are not every arm."""
        if chance is None:
            chance = self.chance
        return np.clip((success - chance) / (1.0 - chance), 0.0, 1.0)

    @property
    def staleness(self) -> IntArray:
        """int64 [n_arms]: steps since each arm was last drawn (step + 1 when never)."""
        return np.where(self.last_step < 0, self.step + 1, self.step - self.last_step)
