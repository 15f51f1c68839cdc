"""The weight pipeline: raw policy weights -> tiers -> smoothing -> gates -> quotas -> CDF.

The whole pipeline is global (smoothing normalises, quotas couple every family of a
domain), so it runs on a refresh, not on every step: once the reports since the last
refresh hold ``refresh_per_family`` episodes per family, after a probe, or at once when a
breaker's factor moves. Between refreshes a step only reads the cached CDF, and the tier a
task is drawn at comes fresh from the skill model. At the default 0.25 and a batch of 256
that is a refresh every step up to 1,024 families, as before; at 25,000 families it is one
every 25 steps, when every family has had a quarter of an episode more on average.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import numpy.typing as npt

from domains import Catalog
from policies import project_quotas_compute, smooth

from ._config import SchedulerConfig
from ._events import Event
from ._evidence import ProbeEvidence
from ._flags import FlagBoard
from ._gates import Gates
from ._memo import ArrayMemo, memo_key
from ._weights import Weights

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_RELAX_ROUNDS = 40  # doublings of the flagged caps tried before the quotas give up
# A stalled family's weight in a spare share, against a mastered family's 1 (per unit of
# its cap, which is twice a mastered family's by default): about half a mastered family's
# share. A stall is weaker evidence of something left to learn than mastery is of something
# to keep, and a coin flip on a single tier is found only by its stall.
_STALLED_SPARE = 0.25
# A family stalled early (``SkillModel.stalled_early``: guessable or of one tier, not risen
# over the episodes in which the typical family rises a tier) is held to this many uniform
# shares, not ``stalled_weight``: a slow starter looks the same that soon (the ladder
# student's, at chance 0.5: p10 0.127 at stalled_weight's 0.1, 0.307 at 0.25, 0.228 at 0.5,
# against 0.138 without the early test; final 0.833 / 0.804 / 0.780 against 0.752; dev
# seeds 0-11)
_EARLY_STALL_CAP = 0.25


class WeightPipeline:
    """Owns the current Weights, their CDFs, and when to recompute them."""

    def __init__(self, catalog: Catalog, config: SchedulerConfig, gates: Gates) -> None:
        self._catalog = catalog
        self.config = config
        self.gates = gates
        # float64 [n_domains]: compute-quota translation of the last projection, its warm start
        self.compute_ratio: FloatArray = np.ones(catalog.n_domains)
        self.quota_short = np.zeros(catalog.n_domains, dtype=bool)  # bool [n_domains]
        self.weights: Weights | None = None
        self.cdf: FloatArray | None = None  # float64 [n_families], ends at 1
        self.tier_cdf: FloatArray | None = None  # float64 [n_arms]; family f spans (f, f+1]
        self.computed_at = -(10**9)  # the step of the latest computation
        self.episodes_since = 0  # episodes reported since then
        self._refresh_after = max(1.0, config.refresh_per_family * catalog.n_families)
        self._any_separate = bool(catalog.tier_separate.any())
        self._any_compute = bool(catalog.domain_compute_basis.any())
        self._projected = ArrayMemo()  # the last quota projection, to skip a repeat of it
        self._held = ArrayMemo()  # the last flagged caps held to the batch (hold_flagged)
        self.stalled_spare = _STALLED_SPARE  # 1.0: as a mastered family (the ablation)
        self.early_stall_cap = _EARLY_STALL_CAP  # uniform shares (ablation: 0, stalled_weight)
        self.built_spare = True  # False: the mastered split a spare share evenly (ablation)
        self.built_cap = True  # False: every mastered family keeps the whole cap (ablation)
        # no family takes more than this share while others can take the rest (fixed)
        self._ceiling = config.skill.max_weight / catalog.n_families

    # ------------------------------------------------------------------ staleness
    def reported(self, episodes: int) -> None:
        self.episodes_since += episodes

    def invalidate(self) -> None:
        """Recompute before the next draw (a probe, a gate, a load)."""
        self.weights = None

    @property
    def stale(self) -> bool:
        return self.weights is None or self.episodes_since >= self._refresh_after

    # ------------------------------------------------------------------ computing
    def compute(
        self,
        raw: FloatArray,
        current: IntArray,
        flags: FlagBoard,
        evidence: ProbeEvidence,
        cost: FloatArray,
        step: int,
        built: FloatArray | None = None,
    ) -> list[Event]:
        """Recompute the weights from ``raw`` policy weights [n_arms] and the current
        ladder tiers; returns the quota events."""
        cat = self._catalog
        value, tier = self._separate_tiers(raw, current, evidence)
        family = smooth(
            value * cat.family_priority * cat.domain_priority[cat.domain_of_family],
            temperature=self.config.temperature,
            floor=self.config.exploration_floor,
        )
        base = self.gates.caps(cat.pool_size[cat.arm_start[:-1] + current])
        # where every family is flagged, the mastered, the stalled and the out-of-reach not
        # yet tried take the spare share first: flat, hacked and tried out-of-reach
        # families teach nothing
        first = self._spare_weight(flags, evidence, built)
        caps = self._hold(base, self._flag_caps(flags, evidence, built), first)
        for attempt in range(_RELAX_ROUNDS):
            try:
                family, self.compute_ratio = self._project(
                    family * self.gates.factor,
                    cat.domain_of_family,
                    cat.domain_min_share,
                    cat.domain_max_share,
                    caps,
                    cost,
                    cat.domain_compute_basis,
                    ratio=self.compute_ratio,
                )
                break
            except ValueError:
                # The flagged families' caps leave the quotas no room (the domains that
                # may still grow hold only flagged families): relax those caps, doubling.
                if attempt == _RELAX_ROUNDS - 1 or np.array_equal(caps, base):
                    raise
                caps = np.minimum(base, caps * 2.0)
        events = self._check_quotas(family, cost, step)
        total = raw.sum()
        arm = raw / total if total > 0 else np.full(cat.n_arms, 1.0 / cat.n_arms)
        domain = np.asarray(
            np.bincount(cat.domain_of_family, weights=family, minlength=cat.n_domains),
            dtype=np.float64,
        )
        self.set(Weights(arm=arm, family=family, domain=domain, tier=tier), step)
        return events

    def _hold(self, base: FloatArray, flag_caps: FloatArray, first: FloatArray) -> FloatArray:
        """``Gates.hold_flagged`` of these caps, or its last answer when they are equal to
        the last ones it was given (its passes of ``fill_to_one`` are a refresh's largest
        part after the projection; the gates' factor does not enter it)."""
        key = memo_key([base, flag_caps, first])
        known = self._held.get(key)
        if known is not None:
            return cast(FloatArray, known[0])
        caps = self.gates.hold_flagged(base, flag_caps, first=first, ceiling=self._ceiling)
        self._held.put(key, (caps,))
        return caps

    def _project(
        self,
        weight: FloatArray,
        domain_of_family: IntArray,
        domain_min: FloatArray,
        domain_max: FloatArray,
        caps: FloatArray,
        cost: FloatArray,
        compute_basis: npt.NDArray[np.bool_],
        *,
        ratio: FloatArray,
    ) -> tuple[FloatArray, FloatArray]:
        """``project_quotas_compute``, or its last answer where it is given the same
        weights and caps (and, with a compute quota, the same costs and warm start: only
        then does the answer depend on them). The rest are the catalog's fixed arrays."""
        key = memo_key([weight, caps, cost, ratio] if self._any_compute else [weight, caps])
        known = self._projected.get(key)
        if known is not None:
            return cast(FloatArray, known[0]), cast(FloatArray, known[1])
        family, next_ratio = project_quotas_compute(
            weight,
            domain_of_family,
            domain_min,
            domain_max,
            caps,
            cost,
            compute_basis,
            ratio=ratio,
        )
        self._projected.put(key, (family, next_ratio))
        return family, next_ratio

    def set(self, weights: Weights, step: int) -> None:
        """Take ``weights`` as current (computed at ``step``) and build their CDFs."""
        self.weights = weights
        cdf = np.cumsum(weights.family)
        self.cdf = cdf / cdf[-1]
        # only separate-skill families draw from it (a ladder's tier comes from the skill model)
        self.tier_cdf = np.cumsum(weights.tier) if self._any_separate else None
        self.computed_at = step
        self.episodes_since = 0

    def _spare_weight(
        self, flags: FlagBoard, evidence: ProbeEvidence, built: FloatArray | None
    ) -> FloatArray:
        """float64 [n_families]: how the spare share of a batch the caps cannot fill is
        split among the families that take it first (0: not one of them). The untried
        out-of-reach and the separate-skill mastered take it evenly, the stalled at
        ``stalled_spare`` of that; a mastered ladder family in proportion
        to ``built``, the training it took to master (its mean over them is 1): practice
        keeps what training built, and a family that came mastered was built by none."""
        weight = (flags.spare_first() | evidence.separate_mastered()).astype(np.float64)
        weight[flags.stalled()] *= self.stalled_spare
        if built is None or not self.built_spare:
            return weight
        mastered = flags.row("mastered") & (weight > 0)
        mean = float(built[mastered].mean()) if mastered.any() else 0.0
        if mean > 0:
            weight[mastered] = built[mastered] / mean
        return weight

    def _flag_caps(
        self, flags: FlagBoard, evidence: ProbeEvidence, built: FloatArray | None
    ) -> FloatArray:
        """float64 [n_families]: the share cap of each flagged family (inf: not flagged).

        A mastered ladder family's cap scales with ``built``, the training it took to
        master, up to a trial's worth (``SkillConfig.trial``; at least one episode's):
        practice keeps what training built, and a family that came mastered was built by
        none, so it keeps a trickle of its trickle. A fall in its probes or its outcomes
        clears the flag as before."""
        cat, sk = self._catalog, self.config.skill
        n = cat.n_families
        cap = np.full(n, np.inf)
        cap[flags.row("idle")] = sk.stalled_weight / n
        cap[flags.stalled_early()] = max(self.early_stall_cap, sk.stalled_weight) / n
        mastered = flags.row("mastered")
        cap[mastered] = sk.mastered_weight / n
        if built is not None and self.built_cap:
            cap[mastered] *= np.minimum(np.maximum(built[mastered], 1.0) / sk.trial, 1.0)
        cap[evidence.separate_mastered()] = self.config.tiers.mastered_weight / n
        cap[flags.row("suspected_reward_hacking")] = sk.hacked_weight / n
        return cap

    def _separate_tiers(
        self, raw: FloatArray, current: IntArray, evidence: ProbeEvidence
    ) -> tuple[FloatArray, FloatArray]:
        """Each family's value to the policy, and how its draws split over its tiers.

        A ladder family is worth its current arm's weight (the skill model picks the
        tier). A family whose tiers are separate skills is worth the summed weight of its
        arms not yet mastered over its number of tiers (what it has left to learn), and its
        draws go to those arms in proportion to their weights, mixed with
        ``exploration_floor`` of a uniform share; a mastered arm keeps
        ``tiers.practice_share`` of a uniform share, enough practice for its probe to
        notice if it is being forgotten (it then counts as open again)."""
        cat = self._catalog
        fam = cat.family_of_arm
        n_tiers = cat.n_tiers.astype(np.float64)
        value = raw[cat.arm_start[:-1] + current]
        tier = 1.0 / n_tiers[fam]
        if not cat.tier_separate.any():
            return value, tier

        def per_family(x: npt.NDArray[Any]) -> FloatArray:
            return np.bincount(fam, weights=x, minlength=cat.n_families).astype(np.float64)

        separate = cat.tier_separate[fam]
        done = evidence.arm_mastered() & separate
        open_ = separate & ~done
        n_open, n_done = per_family(open_), per_family(done)
        open_raw = per_family(np.where(open_, raw, 0.0))
        all_done = n_open[fam] == 0
        value = np.where(
            cat.tier_separate,
            np.where(n_open > 0, open_raw / n_tiers, per_family(raw) / n_tiers),
            value,
        )
        floor = self.config.exploration_floor
        by_weight = np.where(
            open_raw[fam] > 0,
            raw / np.maximum(open_raw[fam], 1e-300),
            1.0 / np.maximum(n_open[fam], 1),
        )
        open_share = (1.0 - floor) * by_weight + floor / np.maximum(n_open[fam], 1)
        kept = np.minimum(self.config.tiers.practice_share / n_tiers[fam], 1.0)
        done_total = kept * n_done[fam]  # what the family's mastered arms keep in all
        sep_tier = np.where(
            all_done, 1.0 / n_tiers[fam], np.where(done, kept, open_share * (1.0 - done_total))
        )
        return value, np.where(separate, sep_tier, tier)

    def _check_quotas(self, family: FloatArray, cost: FloatArray, step: int) -> list[Event]:
        """An event when a domain cannot hold its min_share (its families are blocked or
        capped by scarce variants), once until it can again."""
        cat = self._catalog
        share = np.bincount(cat.domain_of_family, weights=family, minlength=cat.n_domains)
        if cat.domain_compute_basis.any():
            spent = np.bincount(
                cat.domain_of_family, weights=family * cost, minlength=cat.n_domains
            )
            share = np.where(cat.domain_compute_basis, spent / spent.sum(), share)
        short = share < cat.domain_min_share * (1.0 - 1e-3) - 1e-9
        events = [
            Event(
                step=step,
                kind="quota_unreachable",
                domain=cat.domain_names[d],
                payload={
                    "min_share": float(cat.domain_min_share[d]),
                    "share": float(share[d]),
                    "basis": "compute" if cat.domain_compute_basis[d] else "samples",
                },
            )
            for d in np.flatnonzero(short & ~self.quota_short).tolist()
        ]
        self.quota_short = short
        return events

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        w = self.weights
        cached = None
        if w is not None:
            cached = {
                "step": self.computed_at,
                "episodes_since": self.episodes_since,
                "arm": w.arm.copy(),
                "family": w.family.copy(),
                "domain": w.domain.copy(),
                "tier": w.tier.copy(),
            }
        return {
            "compute_ratio": self.compute_ratio.copy(),
            "quota_short": self.quota_short.copy(),
            "family_factor": self.gates.factor.copy(),
            "cached_weights": cached,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._projected.clear()
        self._held.clear()
        self.compute_ratio = np.asarray(state["compute_ratio"], dtype=np.float64).copy()
        self.quota_short = np.asarray(state["quota_short"], dtype=bool).copy()
        self.gates.factor = np.asarray(state["family_factor"], dtype=np.float64).copy()
        cached = state.get("cached_weights")
        if cached is None:
            self.weights, self.cdf, self.tier_cdf = None, None, None
            self.computed_at, self.episodes_since = -(10**9), 0
            return
        weights = Weights(
            arm=np.asarray(cached["arm"], dtype=np.float64).copy(),
            family=np.asarray(cached["family"], dtype=np.float64).copy(),
            domain=np.asarray(cached["domain"], dtype=np.float64).copy(),
            tier=np.asarray(cached["tier"], dtype=np.float64).copy(),
        )
        self.set(weights, int(cached["step"]))
        self.episodes_since = int(cached.get("episodes_since", 0))
