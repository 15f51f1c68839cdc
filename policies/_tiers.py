"""Difficulty tiers: a controller with hysteresis that moves each family up or down.

A family is promoted when the lower confidence bound of its chance-normalised pass rate at the
current tier clears ``promote_at``, and demoted when the upper bound falls under
``demote_at``; it needs ``min_samples`` episodes at the tier and ``cooldown_steps`` since its
last change. The gap between the thresholds and the confidence bounds give the hysteresis.
Held-out probe items at the current tier count as trials (``probe_evidence``); a family at
its top tier with a confident pass rate is ``mastered``; draws can mix in adjacent tiers and
send a share to a tier the family has left and forgotten (``review_share``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from domains import Catalog

from ._intervals import binomial_interval

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class TierConfig:
    promote_at: float = 0.75
    demote_at: float = 0.15
    min_samples: int = 24
    confidence: float = 0.9
    cooldown_steps: int = 5
    adjacent_share: float = 0.0  # share of draws taken from the tiers just below and above
    adjacent_down: float = 0.5  # the part of that share drawn one tier down (the rest: up)
    review_share: float = 0.5  # share of a family's draws sent to a left tier under review
    retain_at: float = 0.9  # a left tier whose probe (normalised) reads under this is reviewed
    start_tier: int = 0
    window: int = 128  # counts at a tier are scaled down past this, so old results fade out
    probe_evidence: bool = True  # held-out probes at the current tier count as trials too
    mastered_at: float = 0.85  # top tier, lower bound of the normalised pass rate above this
    mastered_weight: float = 0.05  # a mastered family's share cap, in uniform shares
    innate_weight: float = 0.01  # the same for one mastered before training taught it (innate)
    # separate-skill tiers: what each mastered tier keeps of a uniform share of its family's
    # draws while other tiers still train (practice against their interference)
    practice_share: float = 0.05

    def __post_init__(self) -> None:
        if not 0.0 <= self.demote_at < self.promote_at <= 1.0:
            raise ValueError(
                f"tiers: need 0 <= demote_at < promote_at <= 1, got {self.demote_at}, "
                f"{self.promote_at}"
            )
        shares = (self.adjacent_share, self.adjacent_down, self.review_share, self.retain_at)
        if not all(0.0 <= x <= 1.0 for x in shares):
            raise ValueError(
                "tiers: adjacent_share, adjacent_down, review_share, retain_at must be in [0, 1], "
                f"got {shares}"
            )
        if self.window < self.min_samples:
            raise ValueError(f"tiers: window ({self.window}) must be >= min_samples")
        if not 0.0 < self.mastered_at <= 1.0 or not 0.0 <= self.mastered_weight <= 1.0:
            raise ValueError(
                "tiers: need 0 < mastered_at <= 1 and 0 <= mastered_weight <= 1, got "
                f"{self.mastered_at}, {self.mastered_weight}"
            )
        if not 0.0 <= self.practice_share <= 1.0:
            raise ValueError(f"tiers: practice_share must be in [0, 1], got {self.practice_share}")
        if not 0.0 <= self.innate_weight <= 1.0:
            raise ValueError(f"tiers: innate_weight must be in [0, 1], got {self.innate_weight}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"tiers: confidence must be in (0, 1), got {self.confidence}")


@dataclass(frozen=True, eq=False)
class TierChanges:
    """Families whose tier changed in one update, with the evidence."""

    family: IntArray  # [k]
    old_tier: IntArray
    new_tier: IntArray
    pass_rate: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    samples: FloatArray


def _no_changes() -> TierChanges:
    empty, nothing = np.zeros(0, dtype=np.int64), np.zeros(0)
    return TierChanges(empty, empty, empty, nothing, nothing, nothing, nothing)


class TierController:
    """Owns the current tier of every family and the counts at that tier."""

    def __init__(self, catalog: Catalog, config: TierConfig | None = None) -> None:
        self.config = config or TierConfig()
        self._catalog = catalog
        top = catalog.n_tiers - 1
        # int64 [n_families]; a family whose tiers are separate skills has no ladder to climb:
        # it stays at tier 0 here and the scheduler spreads its draws over all its tiers
        self.tier: IntArray = np.where(
            catalog.tier_separate, 0, np.minimum(self.config.start_tier, top)
        ).astype(np.int64)
        # float64 [n_families]: (decayed) episodes and successes at the current tier
        self.trials: FloatArray = np.zeros(catalog.n_families)
        self.successes: FloatArray = np.zeros(catalog.n_families)
        self.last_change: IntArray = np.full(catalog.n_families, -(10**9), dtype=np.int64)
        # float64 [n_families]: training episodes of the family so far, at any tier (probe
        # items left out, nothing faded): how much this run has taught it
        self.taught: FloatArray = np.zeros(catalog.n_families)
        # bool [n_families]: found mastered at a probe round before min_samples training
        # episodes, and mastered at every probe round since (``innate`` is this and mastered
        # now; a caller that already holds ``mastered`` can combine the two itself)
        self.innate_latch: npt.NDArray[np.bool_] = np.zeros(catalog.n_families, dtype=bool)

    def observe(
        self, step: int, family: IntArray, tier: IntArray, success: FloatArray
    ) -> TierChanges:
        """Count outcomes drawn at each family's current tier and apply promotions/demotions."""
        n_fam = self._catalog.n_families
        at_current = tier == self.tier[family]
        fam = family[at_current]
        self.trials += np.bincount(fam, minlength=n_fam)
        self.taught += np.bincount(family, minlength=n_fam)
        self.successes += np.bincount(fam, weights=(success[at_current] > 0.5), minlength=n_fam)
        return self._decide(step)

    def observe_probes(
        self, step: int, family: IntArray, tier: IntArray, score: FloatArray, n: IntArray
    ) -> TierChanges:
        """Count held-out probe items at a family's current tier as trials (``probe_evidence``).

        A probe is cleaner evidence than training outcomes (no hack, fresh items), and it
        arrives for families the policy rarely draws: a mastered family climbs one tier per
        probe round instead of spending training episodes to prove what it knows.
        """
        if not self.config.probe_evidence:
            return _no_changes()
        n_fam = self._catalog.n_families
        at_current = tier == self.tier[family]
        fam = family[at_current]
        items = n[at_current].astype(np.float64)
        self.trials += np.bincount(fam, weights=items, minlength=n_fam)
        self.successes += np.bincount(fam, weights=score[at_current] * items, minlength=n_fam)
        probed = np.zeros(n_fam, dtype=bool)
        probed[fam] = True
        changes = self._decide(step, probed=probed)
        fam = np.flatnonzero(probed)
        untaught = self.taught[fam] < self.config.min_samples
        self.innate_latch[fam] = self._mastered_of(fam) & (self.innate_latch[fam] | untaught)
        return changes

    def _decide(self, step: int, probed: npt.NDArray[np.bool_] | None = None) -> TierChanges:
        """Fade old counts past the window, then promote or demote where the bounds say so.

        With ``probed`` only those families are decided, and promotions skip the cool-down:
        it damps noisy training counts, while a held-out probe at the new tier is fresh
        evidence, so a placement can climb several tiers in one probe round. Demotions
        always wait for the cool-down (a new tier is hard by design)."""
        cfg = self.config
        full = self.trials > cfg.window
        if full.any():
            scale = cfg.window / self.trials[full]
            self.trials[full] *= scale
            self.successes[full] *= scale
        cooling = step - self.last_change < cfg.cooldown_steps
        ready = (self.trials >= cfg.min_samples) & ~self._catalog.tier_separate
        ready &= ~cooling if probed is None else probed
        # A bound can only clear a threshold the point estimate clears: test those alone.
        chance_all = self._catalog.chance_success
        point = (self.successes / np.maximum(self.trials, 1) - chance_all) / (1.0 - chance_all)
        ready &= (point >= cfg.promote_at) | (point <= cfg.demote_at)
        candidates = np.flatnonzero(ready)
        if candidates.size == 0:
            return _no_changes()
        s = self.successes[candidates]
        n = self.trials[candidates]
        low, high = binomial_interval(s, n, cfg.confidence)
        chance = self._catalog.chance_success[candidates]
        norm_low = (low - chance) / (1.0 - chance)
        norm_high = (high - chance) / (1.0 - chance)
        current = self.tier[candidates]
        up = (norm_low >= cfg.promote_at) & (current < self._catalog.n_tiers[candidates] - 1)
        down = (norm_high <= cfg.demote_at) & (current > 0) & ~cooling[candidates]
        move = up | down
        changed = candidates[move]
        new_tier = current[move] + np.where(up[move], 1, -1)
        changes = TierChanges(
            family=changed,
            old_tier=current[move],
            new_tier=new_tier,
            pass_rate=s[move] / n[move],
            ci_low=low[move],
            ci_high=high[move],
            samples=self.trials[changed].copy(),
        )
        self.tier[changed] = new_tier
        self._reset(changed, step)
        return changes

    def _reset(self, family: IntArray, step: int) -> None:
        """Start these families' counts afresh at a new tier."""
        self.trials[family] = 0
        self.successes[family] = 0
        self.innate_latch[family] = False
        self.last_change[family] = step

    @property
    def mastered(self) -> npt.NDArray[np.bool_]:
        """bool [n_families]: at the top tier with the lower confidence bound of the
        chance-normalised pass rate at or above ``mastered_at`` (after ``min_samples``)."""
        return self._mastered_of(np.arange(self._catalog.n_families))

    def _mastered_of(self, family: IntArray) -> npt.NDArray[np.bool_]:
        """``mastered`` for these families only (a probe round may touch a few)."""
        cfg, cat = self.config, self._catalog
        top = (
            (self.tier[family] == cat.n_tiers[family] - 1)
            & (self.trials[family] >= cfg.min_samples)
            & ~cat.tier_separate[family]  # (the scheduler judges those arm by arm)
        )
        result = np.zeros(family.shape[0], dtype=bool)
        pos = np.flatnonzero(top)
        if pos.size:
            idx = family[pos]
            low, _ = binomial_interval(self.successes[idx], self.trials[idx], cfg.confidence)
            chance = cat.chance_success[idx]
            result[pos] = (low - chance) / (1.0 - chance) >= cfg.mastered_at
        return result

    @property
    def innate(self) -> npt.NDArray[np.bool_]:
        """bool [n_families]: mastered, and already so at a probe round when the family had
        had fewer than ``min_samples`` training episodes in all: a skill the model brought,
        not one this run taught. Practice guards taught skills against forgetting; an innate
        one is guarded by its own probe each round (a probe that falls from mastery, or a
        tier change, ends it; mastery regained after training is taught)."""
        result: npt.NDArray[np.bool_] = self.innate_latch & self.mastered
        return result

    def draw(
        self, family: IntArray, rng: np.random.Generator, review: IntArray | None = None
    ) -> IntArray:
        """The tier of each drawn task: the family's tier, an adjacent one for a share, and
        for ``review_share`` of the draws (all of them while the top tier is mastered) the
        tier ``review[family]`` (when >= 0): a tier the family has left that a probe reads
        under ``retain_at`` (forgotten, or never consolidated), so what it learned there is
        rebuilt."""
        base = self.tier[family]
        cfg = self.config
        tier = base.copy()
        if cfg.adjacent_share > 0:
            u = rng.random(family.shape[0])
            down = cfg.adjacent_share * cfg.adjacent_down
            shift = np.where(u < down, -1, np.where(u < cfg.adjacent_share, 1, 0))
            top = self._catalog.n_tiers[family] - 1
            tier = np.clip(base + shift, 0, top)
        if review is not None and cfg.review_share > 0:
            target = review[family]
            # A family whose top tier is already mastered has nothing left to gain there:
            # all of its draws go to the tier under review.
            share = np.where(self.mastered[family], 1.0, cfg.review_share)
            u = rng.random(family.shape[0])
            tier = np.where((u < share) & (target >= 0), target, tier)
        return tier

    def set_tier(self, family: IntArray, tier: IntArray, step: int) -> None:
        self.tier[family] = np.clip(tier, 0, self._catalog.n_tiers[family] - 1)
        self._reset(family, step)

    def state_dict(self) -> dict[str, Any]:
        return {
            "tier": self.tier.copy(),
            "trials": self.trials.copy(),
            "successes": self.successes.copy(),
            "last_change": self.last_change.copy(),
            "taught": self.taught.copy(),
            "innate": self.innate_latch.copy(),
        }

    def check_state(self, state: Any) -> list[str]:
        """Problems with ``state`` as this controller's state (pure: nothing is applied).
        Driven by ``state_dict()``: every array it returns must be there with its shape and
        dtype kind (or be one that ``load_state_dict`` fills for an older state), floats that
        start finite stay finite, counts are >= 0, tiers in range."""
        if not isinstance(state, Mapping):
            return [f"tiers: must be a mapping, got {type(state).__name__}"]
        problems: list[str] = []
        fresh = TierController(self._catalog, self.config).state_dict()
        for name in [name for name in fresh if name not in state]:
            try:  # a field load_state_dict fills for older states (taught, innate) may be absent
                kept = {k: v for k, v in fresh.items() if k != name}
                TierController(self._catalog, self.config).load_state_dict(kept)
            except (KeyError, ValueError, TypeError):
                problems.append(f"tiers.{name}: missing")
        kinds = {"b": "b", "i": "iu", "f": "fiu"}
        for name, want in fresh.items():
            if name not in state:
                continue
            value = np.asarray(state[name]) if isinstance(state[name], np.ndarray | list) else None
            if value is None or value.dtype.kind not in kinds.get(want.dtype.kind, "?"):
                got = type(state[name]).__name__ if value is None else str(value.dtype)
                problems.append(f"tiers.{name}: must be an array of {want.dtype}, got {got}")
                continue
            if value.shape != want.shape:
                problems.append(f"tiers.{name}: expected shape {want.shape}, got {value.shape}")
                continue
            bad = np.zeros(value.shape, dtype=bool)
            if want.dtype.kind == "f" and np.isfinite(want).all():
                bad = ~np.isfinite(value)
            if name in ("trials", "successes", "taught"):
                bad |= value < 0
            if name == "tier":
                bad = (value < 0) | (value >= self._catalog.n_tiers)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                counts = name in ("trials", "successes", "taught")
                rule = "must be finite" + (" and >= 0" if counts else "")
                if name == "tier":
                    rule = f"must be in [0, {self._catalog.n_tiers[i]})"
                problems.append(f"tiers.{name}: {rule}, got {value[i].item()!r} at [{i}]")
        return problems

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a saved state. One saved before ``taught`` and ``innate`` existed counts
        the trials at the current tier as taught (a scheduler passes its exact episode
        counts instead), so no family is called innate on faith."""
        state = dict(state)
        state.setdefault("taught", state["trials"])
        state.setdefault("innate", np.zeros(self._catalog.n_families, dtype=bool))
        dtypes: dict[str, type[Any]] = {"trials": np.float64, "successes": np.float64}
        dtypes |= {"taught": np.float64, "innate": np.bool_}
        for name in ("tier", "trials", "successes", "last_change", "taught", "innate"):
            value = np.asarray(state[name], dtype=dtypes.get(name, np.int64))
            if value.shape != (self._catalog.n_families,):
                raise ValueError(f"tiers.{name}: expected shape ({self._catalog.n_families},)")
            setattr(self, "innate_latch" if name == "innate" else name, value.copy())
