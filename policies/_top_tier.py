"""Each family's top tier, counted on its own: a second road to mastery beside the belief.

A ladder whose middle tier, left out of practice, reads lower than its top fits no
one-slope belief, and the fused belief settles between them and never confirms a top tier
that passes (docs/policies.md). ``TopTierCounts`` keeps the top tier's recent training
episodes and probe items, passed and run, each fading per outcome, and says where both
pass at ``mastered_at``. ``SkillModel`` owns one and reads it in its mastered test.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from domains import Catalog

from ._intervals import binomial_interval

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

# Each count fades by this per outcome (the last 32 or so count: a family left out of
# practice forgets), and the training passes at this two-sided confidence
_FADE = 1.0 - 1.0 / 32.0
_CONFIDENCE = 0.8
_TRAIN, _PROBE = 0, 2  # rows of the passed counts; the counts run are the row after


class TopTierCounts:
    """float64 [4, n_families]: the top tier's training episodes passed and run, and its
    probe items passed and probed, fading."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog
        self._top = (catalog.n_tiers - 1).astype(np.int64)
        self._chance = catalog.chance_success.astype(np.float64)
        self.counts = np.zeros((4, catalog.n_families))

    def trained(
        self, families: IntArray, owner: IntArray, tiers: IntArray, k: FloatArray, n: FloatArray
    ) -> None:
        """Training passes ``k`` of ``n`` at distinct arms of tier ``tiers``, each of
        ``families[owner]``."""
        self._add(_TRAIN, families, owner, tiers, k, n)

    def probed(
        self, families: IntArray, owner: IntArray, tiers: IntArray, k: FloatArray, n: FloatArray
    ) -> None:
        """Probe items passed ``k`` of ``n`` at tiers ``tiers``, each of ``families[owner]``."""
        self._add(_PROBE, families, owner, tiers, k, n)

    def _add(
        self,
        row: int,
        families: IntArray,
        owner: IntArray,
        tiers: IntArray,
        k: FloatArray,
        n: FloatArray,
    ) -> None:
        at_top = tiers == self._top[families[owner]]
        if not at_top.any():
            return
        size = families.shape[0]
        run = np.bincount(owner[at_top], weights=n[at_top], minlength=size)
        passed = np.bincount(owner[at_top], weights=k[at_top], minlength=size)
        hit = run > 0
        f = families[hit]
        fade = _FADE ** run[hit]
        self.counts[row, f] = self.counts[row, f] * fade + passed[hit]
        self.counts[row + 1, f] = self.counts[row + 1, f] * fade + run[hit]

    def passes(self, mastered_at: float, families: IntArray | None = None) -> BoolArray:
        """bool [n_families] (or of ``families``): the top tier's training passes at
        ``mastered_at`` (chance-normalised) with confidence, and its probe items on average.
        Training is fresh samples each time (a fixed probe set that happens to be easy is
        not: the torch learner's read mastered early from probes alone), and the probes
        agreeing keeps a hack's training passes out."""
        c = self.counts if families is None else self.counts[:, families]
        chance = self._chance if families is None else self._chance[families]
        need = chance + mastered_at * (1.0 - chance)
        # the interval (Beta quantiles) only where both point estimates pass already
        result: BoolArray = (c[0] >= need * c[1]) & (c[2] >= need * c[3]) & (c[3] > 0)
        if result.any():
            at = np.flatnonzero(result)
            low, _ = binomial_interval(c[0, at], c[1, at], _CONFIDENCE)
            result[at] = low >= need[at]
        return result

    def state_dict(self) -> dict[str, Any]:
        return {"top_tier": self.counts.copy()}

    def checked(self, state: dict[str, Any]) -> FloatArray:
        """The counts of ``state``, checked (ValueError naming the field), not yet applied."""
        if "top_tier" not in state:
            raise ValueError("skill.top_tier: missing")
        n = self._catalog.n_families
        counts = np.asarray(state["top_tier"], dtype=np.float64)
        if counts.shape != (4, n) or not np.all(np.isfinite(counts)) or (counts < 0).any():
            raise ValueError(f"skill.top_tier: need 4 x {n} finite values >= 0")
        if (counts[0] > counts[1]).any() or (counts[2] > counts[3]).any():
            raise ValueError("skill.top_tier: more passed than run")
        result: FloatArray = counts.copy()
        return result

    def apply(self, counts: FloatArray) -> None:
        self.counts = counts
