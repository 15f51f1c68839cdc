"""Probe evidence per arm: the latest probe's confidence bounds and what follows from them.

The ladder families are judged by the skill model; a family whose tiers are separate
skills is judged arm by arm, from each tier's latest probe. The Jeffreys bounds are most of
a probe round's cost (Beta quantiles), so they are kept per arm and updated only for the
arms a probe touched.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from domains import Catalog
from policies import TierConfig, binomial_interval

from ._state import ArmStats

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class ProbeEvidence:
    """Confidence bounds of every arm's latest probe, and the verdicts read from them."""

    def __init__(self, catalog: Catalog, stats: ArmStats, config: TierConfig) -> None:
        self._catalog = catalog
        self._stats = stats
        self.config = config
        # float64 [n_arms] x 2: Jeffreys bounds of each arm's latest probe (nan: none yet);
        # None until first read, and again after a load
        self._bounds: tuple[FloatArray, FloatArray] | None = None
        self._separate_arm = catalog.tier_separate[catalog.family_of_arm]
        self._any_separate = bool(catalog.tier_separate.any())

    def forget(self) -> None:
        """Drop the cached bounds (the statistics were replaced)."""
        self._bounds = None

    def probed(self, arm: IntArray, score: FloatArray, n: IntArray) -> None:
        """Keep the bounds in step with probes just written to the statistics."""
        if self._bounds is not None:
            low, high = self._interval(score, n)
            self._bounds[0][arm] = low
            self._bounds[1][arm] = high

    def _interval(
        self, score: FloatArray, n: npt.NDArray[np.integer[Any]]
    ) -> tuple[FloatArray, FloatArray]:
        items = n.astype(np.float64)
        return binomial_interval(score * items, items, self.config.confidence)

    def bounds(self) -> tuple[FloatArray, FloatArray]:
        """float64 [n_arms] x 2: (low, high) of every arm's latest probe (nan: none)."""
        if self._bounds is None:
            st = self._stats
            probed = np.flatnonzero(st.probe_n > 0)
            n_arms = self._catalog.n_arms
            low, high = np.full(n_arms, np.nan), np.full(n_arms, np.nan)
            low[probed], high[probed] = self._interval(st.probe_score[probed], st.probe_n[probed])
            self._bounds = (low, high)
        return self._bounds

    def arm_mastered(self) -> BoolArray:
        """bool [n_arms]: the arm's latest probe clears ``tiers.mastered_at`` with
        confidence (the lower bound of the chance-normalised score)."""
        cat = self._catalog
        low, _ = self.bounds()
        chance = cat.chance_success[cat.family_of_arm]
        with np.errstate(invalid="ignore"):
            result: BoolArray = (low - chance) / (1.0 - chance) >= self.config.mastered_at
        return result

    def separate_mastered(self) -> BoolArray:
        """bool [n_families]: a separate-skill family with every arm mastered."""
        cat = self._catalog
        if not self._any_separate:
            return np.zeros(cat.n_families, dtype=bool)
        every_arm = np.logical_and.reduceat(self.arm_mastered(), cat.arm_start[:-1])
        result: BoolArray = cat.tier_separate & every_arm
        return result

    def probe_tier(self, current: IntArray) -> IntArray:
        """int64 [n_families]: the tier a probe round asks for: a ladder's current tier,
        and for separate skills the one probed longest ago (lowest first), so a runner that
        probes one tier per family per round goes round them all."""
        cat = self._catalog
        result = current.copy()
        if self._any_separate:
            arm = np.flatnonzero(self._separate_arm)
            probe_step = self._stats.probe_step[arm]
            order = np.lexsort((arm, probe_step, cat.family_of_arm[arm]))
            first = arm[order][np.unique(cat.family_of_arm[arm[order]], return_index=True)[1]]
            result[cat.family_of_arm[first]] = cat.tier_of_arm[first]
        return result

    def curve_points(self, families: IntArray) -> tuple[FloatArray, IntArray]:
        """One curve point per separate-skill family: the mean of the latest probe of every
        tier probed so far (each skill counts once), and the items behind it."""
        cat, st = self._catalog, self._stats
        probed = st.probe_n > 0
        arms = cat.n_tiers[families]
        start = cat.arm_start[families]
        index = np.repeat(start, arms) + (
            np.arange(int(arms.sum())) - np.repeat(np.cumsum(arms) - arms, arms)
        )
        owner = np.repeat(np.arange(families.shape[0]), arms)
        seen = probed[index]
        n_probed = np.bincount(owner, weights=seen, minlength=families.shape[0])
        total = np.bincount(
            owner, weights=np.where(seen, st.probe_score[index], 0.0), minlength=families.shape[0]
        )
        items = np.bincount(
            owner, weights=np.where(seen, st.probe_n[index], 0), minlength=families.shape[0]
        )
        return total / np.maximum(n_probed, 1), items.astype(np.int64)
