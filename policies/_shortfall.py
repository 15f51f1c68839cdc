"""The hacking test: held-out probes against the training at the same tier.

A gamed reward shows as training passing where the held-out probe of the same tier does
not. ``ShortfallTest`` keeps, per arm, the training episodes and passes since the family's
last probe round, and per family an EMA of how far each probe falls short of them (a
two-proportion z). ``SkillModel`` owns one and asks it for ``hacked``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from domains import Catalog

from ._state_checks import arm_counts, family_floats
from ._stats import median_of

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_RESID_CLIP = 8.0  # one probe's standardised residual counts at most this much
_RESID_RATE = 0.5  # EMA rate of the residuals, per probe round
_HACK_FRESH = 2.0  # training episodes since a family's last probe for its hack residual


class ShortfallTest:
    """Per-family shortfall of held-out probes under the training at the same tiers."""

    FAMILY_ARRAYS = ("probe_resid", "probe_rounds", "window_closed")
    ARM_COUNTS = ("since_n", "since_k")

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog
        n = catalog.n_families
        # float64 [n_families]: EMA of the probes' standardised shortfall under the training
        # at the same tiers, and the number of probe readings with evidence behind it
        self.probe_resid = np.zeros(n)
        self.probe_rounds = np.zeros(n)
        # int32 [n_arms]: training episodes and passes at each arm since its family's last
        # probe round
        self.since_n = np.zeros(catalog.n_arms, dtype=np.int32)
        self.since_k = np.zeros(catalog.n_arms, dtype=np.int32)
        # float64 [n_families]: the step of the probe round that closed the family's window
        # (-1: open). Readings of that step (a round delivered in several calls) still
        # compare with it; the family's next training starts a new window.
        self.window_closed = np.full(n, -1.0)
        self.version = 0  # bumped by every probe and load: hacked() reads it
        self._hacked_at: tuple[int, float, BoolArray] | None = None

    def trained(self, families: IntArray, arms: IntArray, n: FloatArray, k: FloatArray) -> None:
        """Training counts ``k`` of ``n`` at these distinct arms, of these families."""
        closed = self.window_closed[families] >= 0
        if closed.any():  # probed since their last training: a new window opens
            self._open_windows(families[closed])
        self.since_n[arms] += n.astype(np.int32)  # arms are distinct: no add.at
        self.since_k[arms] += k.astype(np.int32)

    def probed(
        self,
        family: IntArray,
        probed: IntArray,
        owner: IntArray,
        tier: IntArray,
        k: FloatArray,
        n: FloatArray,
        step: int,
    ) -> None:
        """How far each probe reading falls short of the training passes at the same arm
        since the family's last probe round (a two-proportion z), averaged per family. A
        tier not trained since then says nothing (a ladder's lower tiers may lag the one it
        trains at), a family forgetting at the tier it trains fails in training as in the
        probe, and a window is compared only with the round that closed it (a family left
        untrained since forgets: a later probe reads less for that). Row i belongs to
        ``probed[owner[i]]`` (``distinct`` of ``family``)."""
        self.version += 1
        cat, m = self._catalog, probed.shape[0]
        closed_at = self.window_closed[family]
        current = (closed_at < 0) | (closed_at == step)  # the window and this round match
        arm = cat.arm_start[family] + tier
        n_t = np.where(current, self.since_n[arm], 0).astype(np.float64)
        k_t = np.where(current, self.since_k[arm], 0).astype(np.float64)
        seen = n_t > 0
        pooled = (k + k_t) / np.maximum(n + n_t, 1.0)
        spread = pooled * (1.0 - pooled) * (1.0 / np.maximum(n, 1.0) + 1.0 / np.maximum(n_t, 1.0))
        gap = k / np.maximum(n, 1.0) - k_t / np.maximum(n_t, 1.0)
        z = np.where(seen, gap / np.sqrt(np.maximum(spread, 1e-12)), 0.0)
        r = np.clip(z, -_RESID_CLIP, _RESID_CLIP)
        rows = np.bincount(owner, weights=seen, minlength=m)
        trained = np.bincount(owner, weights=n_t, minlength=m)
        mean = np.bincount(owner, weights=r, minlength=m) / np.maximum(rows, 1.0)
        opening = self.window_closed[probed] < 0
        self.window_closed[probed[opening]] = step  # reopened by the next training
        keep = trained >= _HACK_FRESH  # training episodes at the probed tiers since then
        families, mean = probed[keep], mean[keep]
        first = self.probe_rounds[families] == 0
        rate = np.where(first, 1.0, _RESID_RATE)
        self.probe_resid[families] += rate * (mean - self.probe_resid[families])
        self.probe_rounds[families] += 1  # readings with evidence (a call of a round)

    def hacked(self, hack_z: float) -> BoolArray:
        """bool [n_families]: over two probe rounds or more, held-out results fall short of
        the training passes at the same tiers by ``hack_z`` standard errors beyond the
        median family's shortfall (a shift every probe shares is no hack)."""
        known = self._hacked_at
        if known is not None and known[0] == self.version and known[1] == hack_z:
            return known[2]  # only probes move it, not the training between them
        probed = self.probe_rounds >= 2
        if not probed.any():
            result: BoolArray = np.zeros(probed.shape[0], dtype=bool)
        else:
            # Only a shortfall every probe shares is discounted: a shared excess is the
            # training belief lagging a model that learns, and a family that does not lag
            # (a mastered one, a slow one) is no hack for it.
            median = min(median_of(self.probe_resid[probed]), 0.0)
            result = probed & (self.probe_resid - median < -hack_z)
        result.setflags(write=False)
        self._hacked_at = (self.version, hack_z, result)
        return result

    def _open_windows(self, families: IntArray) -> None:
        """Empty every arm's window of these families (their arms are contiguous)."""
        cat = self._catalog
        count = cat.n_tiers[families].astype(np.int64)
        first = np.repeat(cat.arm_start[families] - (np.cumsum(count) - count), count)
        arms = first + np.arange(int(count.sum()))
        self.since_n[arms] = 0
        self.since_k[arms] = 0
        self.window_closed[families] = -1.0

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        names = self.FAMILY_ARRAYS + self.ARM_COUNTS
        return {name: getattr(self, name).copy() for name in names}

    def checked(self, state: dict[str, Any]) -> dict[str, npt.NDArray[Any]]:
        """The state's arrays of this test, checked (ValueError naming the field); nothing
        is applied."""
        cat = self._catalog
        loaded = family_floats(state, self.FAMILY_ARRAYS, cat.n_families)
        if (loaded["probe_rounds"] < 0).any():
            raise ValueError("skill.probe_rounds: counts must be >= 0")
        closed = loaded["window_closed"]
        if ((closed < 0) & (closed != -1.0)).any():
            raise ValueError("skill.window_closed: a step >= 0, or -1 for an open window")
        for name in self.ARM_COUNTS:
            loaded[name] = arm_counts(state.get(name), f"skill.{name}", cat.n_arms)
        if (loaded["since_k"] > loaded["since_n"]).any():
            raise ValueError("skill.since_k: more passes than episodes")
        return loaded

    def apply(self, loaded: dict[str, npt.NDArray[Any]]) -> None:
        """Take arrays ``checked`` returned."""
        for name in self.FAMILY_ARRAYS + self.ARM_COUNTS:
            setattr(self, name, loaded[name])
        self.version += 1
