"""The Scheduler: draws batches from the policy's weights, learns from reported outcomes.

It is a deterministic state machine. One numpy Generator, owned here, makes every random
choice, and ``state_dict`` captures everything, so a resumed run draws exactly the batches the
uninterrupted run would have drawn.
"""

from __future__ import annotations

import copy
import logging
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from domains import Catalog
from policies import (
    ArmView,
    Policy,
    SkillConfig,
    SkillModel,
    TierChanges,
    TierConfig,
    TierController,
    binomial_interval,
    make_policy,
    policy_params,
    project_quotas_compute,
    smooth,
)

from ._batch import Batch, Outcome, Status
from ._breakers import BreakerConfig, CircuitBreakers
from ._checkpoint import STATE_FORMAT, checked_state
from ._demand import Demand, expected_demand
from ._detectors import DetectorConfig, Detectors
from ._errors import ConfigError, ReportError
from ._events import Event
from ._listeners import Listener, Listeners
from ._pending import PendingBatches
from ._report_checks import Columns, family_id, parse_columns, parse_outcomes, parse_probes
from ._retries import RetryQueue
from ._state import ArmStats
from ._variants import occurrence_rank, permuted_index
from ._weights import Weights
from .backends._protocol import BatchOutcomes
from .probing._curves import ProbeCurves
from .probing._handover import ProbeMany, ProbeResults, ProbeRound, ProbeSnapshot, call_probe_many

if TYPE_CHECKING:
    from .app._settings import Settings

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
_T = TypeVar("_T")

_COUNTED = (int(Status.OK), int(Status.FAILED))
_FAULTS = (int(Status.TIMEOUT), int(Status.ENV_ERROR))


@dataclass(frozen=True)
class SchedulerConfig:
    """Knobs of the scheduler around the policy. Every field has a safe default."""

    ema_fast: float = 0.1
    ema_slow: float = 0.02
    exploration_floor: float = 0.5  # uniform share mixed into the family distribution
    temperature: float = 1.0
    weights_every: int = 1  # recompute the policy's weights at most every k steps
    tiers: TierConfig = field(default_factory=TierConfig)
    # the skill model that places ladder families on their tiers and flags them (None: the
    # legacy per-tier controller and detectors)
    skill: SkillConfig | None = field(default_factory=SkillConfig)
    breakers: BreakerConfig = field(default_factory=BreakerConfig)
    detectors: DetectorConfig = field(default_factory=DetectorConfig)
    probe_window: int = 16  # probe points per family kept for slopes and detectors
    max_retries: int = 2  # re-queues of a task whose environment failed (timeout, env_error)
    retry_share: float = 0.25  # at most this share of a batch is retried tasks
    cost_rate: float = 0.05  # EMA rate (per episode) of the learned cost of each family
    cost_overrun: float = 3.0  # learned cost above this multiple of the estimate: an event
    max_repeats: float | None = None  # draws of an arm per epoch, in pool sizes (None: no cap)
    epoch_episodes: int = 100_000  # the epoch of max_repeats, in episodes
    # a batch may be reported until this many more batches were drawn; then it expires
    report_window: int = 64

    def __post_init__(self) -> None:
        if self.max_repeats is not None and self.max_repeats <= 0:
            raise ValueError(f"max_repeats must be positive or None, got {self.max_repeats}")
        if not 0 < self.cost_rate <= 1 or self.cost_overrun <= 1 or self.epoch_episodes < 1:
            raise ValueError("need 0 < cost_rate <= 1, cost_overrun > 1, epoch_episodes >= 1")
        if self.report_window < 0:
            raise ValueError(f"report_window must be >= 0, got {self.report_window}")


def _fill_to_one(caps: FloatArray, ceiling: FloatArray) -> FloatArray:
    """Scale up the caps below their ceiling until they sum to at least 1 (if they can)."""
    for _ in range(8):  # each pass fills the room left by caps that hit their ceiling
        if caps.sum() >= 1.0 - 1e-12:
            break
        below = caps < ceiling
        room = caps[below].sum()
        need = 1.0 - caps[~below].sum()
        if room <= 0:  # nothing to scale: spread what is missing over the room left
            spare = (ceiling - caps)[below]
            caps = caps.copy()
            caps[below] += spare * min(1.0, need / max(spare.sum(), 1e-300))
            continue
        caps = np.where(below, np.minimum(ceiling, caps * need / room), caps)
    return caps


class Scheduler:
    """Curriculum scheduler over a Catalog of families and tiers.

    >>> sched = Scheduler(catalog, seed=0)
    >>> batch = sched.next_batch(256)
    >>> sched.report(batch, rewards=r, success=s)
    """

    def __init__(
        self,
        catalog: Catalog,
        policy: str | Mapping[str, Any] | Policy = "uniform",
        seed: int = 0,
        *,
        config: SchedulerConfig | None = None,
        **policy_options: Any,
    ) -> None:
        self.catalog = catalog
        self.config = config or SchedulerConfig()
        self.policy: Policy = make_policy(policy, **policy_options)
        self.seed = int(seed)
        self.rng = np.random.Generator(np.random.PCG64(self.seed))
        self.step = 0  # number of batches drawn so far
        self.stats = ArmStats(catalog.n_arms, self.config.ema_fast, self.config.ema_slow)
        self.tiers = TierController(catalog, self.config.tiers)
        self.skill = None if self.config.skill is None else SkillModel(catalog, self.config.skill)
        # bool [3, n_families]: mastered, idle, suspected hacking, as last reported in events
        self._skill_flags = np.zeros((3, catalog.n_families), dtype=bool)
        self.policy_state: dict[str, Any] = self.policy.init_state(catalog)
        self.cursor: IntArray = np.zeros(catalog.n_arms, dtype=np.int64)  # draws per arm
        # float64 [n_families]: learned seconds per episode, starting from the manifest's
        # estimate; compute quotas and the overrun alarm read it
        self.cost: FloatArray = catalog.cost_s.astype(np.float64, copy=True)
        self.cost_seen: IntArray = np.zeros(catalog.n_families, dtype=np.int64)
        self.cost_alarm = np.zeros(catalog.n_families, dtype=bool)  # bool [n_families]
        # float64 [n_domains]: compute-quota translation of the last projection, its warm start
        self.compute_ratio: FloatArray = np.ones(catalog.n_domains)
        self.quota_short = np.zeros(catalog.n_domains, dtype=bool)  # bool [n_domains]
        self.breakers = CircuitBreakers(catalog, self.config.breakers)
        self.curves = ProbeCurves.from_catalog(catalog, window=self.config.probe_window)
        self.detectors = Detectors.from_catalog(catalog, self.config.detectors)
        self.retries = RetryQueue(
            catalog.family_of_arm,
            max_retries=self.config.max_retries,
            max_share=self.config.retry_share,
        )
        # float64 [n_families]: multiplier on each family's weight; 0 while its breaker is
        # open, a trickle while half-open, a floor while quarantined, a cap while suspected
        # of reward hacking. Derived from breakers and detectors in _refresh_gates.
        self.family_factor: FloatArray = np.ones(catalog.n_families)
        # batches drawn and not yet reported, with this scheduler's token (Batch.token): a
        # report must match one of them (see scheduler/_pending.py)
        self._token = secrets.randbits(63) | 1
        self._pending = PendingBatches(
            self.config.report_window, catalog.family_of_arm, catalog.tier_of_arm
        )
        self._last_batch_size: int | None = None  # demand()'s default batch size
        self._events: list[Event] = []
        self.listeners = Listeners(catalog)  # the recorder, ...: see add_listener
        self._weights: Weights | None = None
        self._cdf: FloatArray | None = None
        self._tier_cdf: FloatArray | None = None  # float64 [n_arms], family f spans (f, f+1]
        self._weights_step = -(10**9)
        # Jeffreys bounds (low, high) of every arm's latest probe, kept up to date probe by
        # probe (None: to be computed for all arms, as after a load)
        self._bounds: tuple[FloatArray, FloatArray] | None = None
        # cache of review_tier: (tier, last_change, result) it was computed for; probes clear it
        self._review: tuple[IntArray, IntArray, IntArray] | None = None
        self._flat: tuple[IntArray, IntArray, npt.NDArray[np.bool_]] | None = None
        self._reward_span = catalog.reward_high - catalog.reward_low

    @classmethod
    def from_settings(cls, settings: Settings, catalog: Catalog | None = None) -> Scheduler:
        """The scheduler ``settings`` describe (policy, seed, every SchedulerConfig field),
        over ``catalog`` or else the manifests of ``settings.domains``:
        ``Scheduler.from_settings(Settings.load())``. See ``Settings.build_scheduler``."""
        return settings.build_scheduler(catalog)

    # ------------------------------------------------------------------ views
    def view(self) -> ArmView:
        """A read-only view of the state, as policies see it."""

        def ro(a: np.ndarray) -> np.ndarray:
            v = a.view()
            v.setflags(write=False)
            return v

        s = self.stats
        return ArmView(
            catalog=self.catalog,
            step=self.step,
            count=ro(s.count),
            success_fast=ro(s.success_fast),
            success_slow=ro(s.success_slow),
            reward_fast=ro(s.reward_fast),
            reward_slow=ro(s.reward_slow),
            process_fast=ro(s.process_fast),
            process_slow=ro(s.process_slow),
            last_step=ro(s.last_step),
            probe_score=ro(s.probe_score),
            probe_step=ro(s.probe_step),
            tier=ro(self.tiers.tier),
            curves=self.curves,
            fast_rate=self.config.ema_fast,
            slow_rate=self.config.ema_slow,
        )

    def weights(self) -> Weights:
        """The distribution the next batch is drawn from (recomputed only when stale)."""
        if self._weights is None or (self.step - self._weights_step) >= self.config.weights_every:
            self._weights = self._compute_weights()
            self._weights_step = self.step
            self._set_cdfs(self._weights)
        if self._weights.catalog is None:  # names for by_domain() / by_family()
            self._weights = replace(self._weights, catalog=self.catalog)
        return self._weights

    def _set_cdfs(self, weights: Weights) -> None:
        cdf = np.cumsum(weights.family)
        self._cdf = cdf / cdf[-1]
        self._tier_cdf = np.cumsum(weights.tier)

    def _compute_weights(self) -> Weights:
        cat = self.catalog
        raw = np.asarray(self.policy.weights(self.view(), self.policy_state), dtype=np.float64)
        if raw.shape != (cat.n_arms,) or not np.all(np.isfinite(raw)) or (raw < 0).any():
            raise ValueError(
                f"policy {policy_params(self.policy)['name']!r} returned invalid weights: "
                "need finite non-negative values of shape [n_arms]"
            )
        current = cat.arm_start[:-1] + self.tiers.tier
        value, tier = self._separate_tiers(raw)
        family = smooth(
            value * cat.family_priority * cat.domain_priority[cat.domain_of_family],
            temperature=self.config.temperature,
            floor=self.config.exploration_floor,
        )
        base = self._family_caps(current)
        caps = self._cap_flagged(base)
        for attempt in range(40):
            try:
                family, self.compute_ratio = project_quotas_compute(
                    family * self.family_factor,
                    cat.domain_of_family,
                    cat.domain_min_share,
                    cat.domain_max_share,
                    caps,
                    self.cost,
                    cat.domain_compute_basis,
                    ratio=self.compute_ratio,
                )
                break
            except ValueError:
                # The flagged families' caps leave the quotas no room (the domains that
                # may still grow hold only flagged families): relax those caps, doubling.
                if attempt == 39 or np.array_equal(caps, base):
                    raise
                caps = np.minimum(base, caps * 2.0)
        self._check_quotas(family)
        total = raw.sum()
        arm = raw / total if total > 0 else np.full(cat.n_arms, 1.0 / cat.n_arms)
        domain = np.asarray(
            np.bincount(cat.domain_of_family, weights=family, minlength=cat.n_domains),
            dtype=np.float64,
        )
        return Weights(arm=arm, family=family, domain=domain, tier=tier)

    def _separate_tiers(self, raw: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Each family's value to the policy, and how its draws split over its tiers.

        A ladder family is worth its current arm's weight (the tier controller picks the
        tier). A family whose tiers are separate skills is worth the summed weight of its
        arms not yet mastered (``arm_mastered``) over its number of tiers, i.e. what it has
        left to learn (uniform weights: its share of open arms; measured ×0.55 of the fixed
        mix's steps against ×0.57 for the mean over open arms on the torch benchmark's
        separate-rule suite), and its draws go to those arms in proportion to
        their weights, mixed with ``exploration_floor`` of a uniform share; a mastered arm
        keeps ``tiers.practice_share`` of a uniform share, enough practice for its probe to
        notice if it is being forgotten (it then counts as open again)."""
        cat = self.catalog
        fam = cat.family_of_arm
        n_tiers = cat.n_tiers.astype(np.float64)
        value = raw[cat.arm_start[:-1] + self.tiers.tier]
        tier = 1.0 / n_tiers[fam]
        if not cat.tier_separate.any():
            return value, tier
        separate = cat.tier_separate[fam]
        done = self.arm_mastered & separate
        open_ = separate & ~done
        per_family = self._per_family
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
        tier = np.where(separate, sep_tier, tier)
        return value, tier

    @property
    def arm_mastered(self) -> npt.NDArray[np.bool_]:
        """bool [n_arms]: the arm's latest probe clears ``tiers.mastered_at`` with
        confidence (the Jeffreys lower bound of the chance-normalised score)."""
        probed = np.flatnonzero(self.stats.probe_n > 0)
        result = np.zeros(self.catalog.n_arms, dtype=bool)
        low, _, chance = self._latest_probe_bounds(probed)
        result[probed] = (low - chance) / (1.0 - chance) >= self.config.tiers.mastered_at
        return result

    def _latest_probe_bounds(self, arm: IntArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """The Jeffreys interval (at ``tiers.confidence``) of these arms' latest probes, and
        their families' chance levels. The bounds are kept per arm as probes arrive: the
        Beta quantiles are most of a probe round's cost (0.25 s per pass over 100,000 arms),
        and several readers ask for them each round."""
        if self._bounds is None:
            probed = np.flatnonzero(self.stats.probe_n > 0)
            low, high = np.full(self.catalog.n_arms, np.nan), np.full(self.catalog.n_arms, np.nan)
            low[probed], high[probed] = self._probe_interval(
                self.stats.probe_score[probed], self.stats.probe_n[probed]
            )
            self._bounds = (low, high)
        low_all, high_all = self._bounds
        return (
            low_all[arm],
            high_all[arm],
            self.catalog.chance_success[self.catalog.family_of_arm[arm]],
        )

    def _probe_interval(self, score: FloatArray, n: IntArray) -> tuple[FloatArray, FloatArray]:
        """The Jeffreys interval at ``tiers.confidence`` of probes passing ``score`` of ``n``."""
        items = n.astype(np.float64)
        return binomial_interval(score * items, items, self.config.tiers.confidence)

    def _per_family(self, x: npt.NDArray[Any]) -> FloatArray:
        """Sum a per-arm array over each family's arms."""
        cat = self.catalog
        return np.bincount(cat.family_of_arm, weights=x, minlength=cat.n_families).astype(
            np.float64
        )

    def _check_quotas(self, family: FloatArray) -> None:
        """An event when a domain cannot hold its min_share (its families are blocked or
        capped by scarce variants), once until it can again."""
        cat = self.catalog
        share = np.bincount(cat.domain_of_family, weights=family, minlength=cat.n_domains)
        if cat.domain_compute_basis.any():
            spent = np.bincount(
                cat.domain_of_family, weights=family * self.cost, minlength=cat.n_domains
            )
            share = np.where(cat.domain_compute_basis, spent / spent.sum(), share)
        short = share < cat.domain_min_share * (1.0 - 1e-3) - 1e-9
        for d in np.flatnonzero(short & ~self.quota_short).tolist():
            self._events.append(
                Event(
                    step=self.step,
                    kind="quota_unreachable",
                    domain=cat.domain_names[d],
                    payload={
                        "min_share": float(cat.domain_min_share[d]),
                        "share": float(share[d]),
                        "basis": "compute" if cat.domain_compute_basis[d] else "samples",
                    },
                )
            )
        self.quota_short = short

    def _family_caps(self, current: IntArray) -> FloatArray:
        """Each family's share cap: 0 while its breaker is open, else its manifest cap and,
        for a small variant pool, the share that draws its current arm ``max_repeats`` times
        per pool per epoch. Where the caps together cannot fill a batch, the scarcity caps,
        then the manifest caps, are scaled up evenly (logged), never the breakers."""
        cat = self.catalog
        open_ = ~self.breakers.open_mask
        if not open_.any():
            raise RuntimeError("every family's circuit breaker is open: nothing can be drawn")
        caps = np.where(open_, cat.family_max_share, 0.0)
        if self.config.max_repeats is not None:
            scarce = self.config.max_repeats * cat.pool_size[current] / self.config.epoch_episodes
            caps = _fill_to_one(np.minimum(caps, scarce), caps)
        if caps.sum() < 1.0:
            log.warning("family caps sum to %.3f < 1; relaxing them evenly", caps.sum())
            caps = _fill_to_one(caps, open_.astype(np.float64))
        return caps

    def _cap_flagged(self, caps: FloatArray) -> FloatArray:
        """Hold quarantined and mastered families to a small share (``unlearnable.floor``,
        ``tiers.mastered_weight``, in uniform shares) inside the projection, and families
        that look like coin flips (``tier_flat``) to ``unlearnable.suspect_cap`` until the
        detector has judged them: learning progress reads a coin's sampling noise as
        progress and would give it about twice a fair share meanwhile.

        A cap, not a multiplier: a coin flip that a policy mistakes for progress is held to
        the floor however large its weight, and mass that quotas push around goes to the
        families that can still learn. Where a domain's min_share cannot be met otherwise
        (all its families flagged), its flagged caps are raised evenly until it can.
        """
        cat = self.catalog
        n = cat.n_families
        flag_cap = np.full(n, np.inf)
        if self.skill is not None:
            sk = self.config.skill
            assert sk is not None
            ladder = ~cat.tier_separate
            idle = self.skill.idle()
            flag_cap[ladder & idle] = sk.stalled_weight / n
            flag_cap[ladder & self.skill.mastered()] = sk.mastered_weight / n
            # separate-skill families: every arm mastered (``arm_mastered``)
            separate_done = cat.tier_separate & self.mastered
            flag_cap[separate_done] = self.config.tiers.mastered_weight / n
            flag_cap[ladder & self.skill.hacked()] = sk.hacked_weight / n
            return self._hold_flagged(caps, flag_cap)
        flag_cap[self.tier_flat] = self.config.detectors.unlearnable.suspect_cap / n
        mastered = self.mastered
        flag_cap[mastered] = self.config.tiers.mastered_weight / n
        flag_cap[mastered & self.tiers.innate_latch] = self.config.tiers.innate_weight / n
        flag_cap[self.detectors.quarantined] = self.config.detectors.unlearnable.floor / n
        return self._hold_flagged(caps, flag_cap)

    def _hold_flagged(self, caps: FloatArray, flag_cap: FloatArray) -> FloatArray:
        """Apply the flagged families' caps, raised evenly in a domain whose min_share
        could not be met otherwise."""
        cat = self.catalog
        flagged = np.isfinite(flag_cap) & (caps > 0)
        if not flagged.any():
            return caps
        capped = np.where(flagged, np.minimum(caps, flag_cap), caps)
        dom = cat.domain_of_family
        free = np.bincount(dom, weights=np.where(flagged, 0.0, capped), minlength=cat.n_domains)
        held = np.bincount(dom, weights=np.where(flagged, capped, 0.0), minlength=cat.n_domains)
        need = cat.domain_min_share * 1.001 - free  # what the flagged ones must hold
        scale = np.where(need > held, need / np.maximum(held, 1e-300), 1.0)[dom]
        result: FloatArray = np.where(flagged, np.minimum(caps, capped * scale), capped)
        if result.sum() < 1.0:  # everything flagged: relax evenly rather than starve
            result = _fill_to_one(result, caps)
        return result

    def _invalidate(self) -> None:
        if self.config.weights_every <= 1:
            self._weights = None

    def _refresh_gates(self) -> None:
        """Derive each family's weight multiplier from its breaker and the detectors;
        recompute weights if it changed (a blocked family must stop being drawn at once,
        whatever weights_every says)."""
        factor = self.breakers.sampling_factor
        if self.skill is None:
            factor = factor * self.detectors.weight_cap
        if not np.array_equal(factor, self.family_factor):
            self.family_factor = np.asarray(factor, dtype=np.float64).copy()
            self._weights = None

    # ------------------------------------------------------------------ drawing
    def next_batch(self, n: int) -> Batch:
        """Draw ``n`` tasks: families from the weights, tiers from the controller, variants
        by cycling each arm's pool without replacement."""
        if n <= 0:
            raise ValueError(f"batch size must be positive, got {n}")
        self.listeners.before_batch(self.step)
        self._events += self.breakers.tick(self.step)
        self._refresh_gates()
        self.weights()
        assert self._cdf is not None
        cat = self.catalog
        # Tasks whose environment failed come back first (same variant), within a share.
        retry_arm, retry_variant, retry_attempt = self.retries.pop(
            n, blocked=self.breakers.open_mask
        )
        fresh = n - retry_arm.shape[0]
        family = np.searchsorted(self._cdf, self.rng.random(fresh), side="right").astype(np.int64)
        np.minimum(family, cat.n_families - 1, out=family)
        if self.skill is not None:
            tier = self.skill.draw_tiers(family, self.rng)
        else:
            review = self.review_tier if self.config.tiers.review_share > 0 else None
            tier = self.tiers.draw(family, self.rng, review=review)
        separate = cat.tier_separate[family]
        if separate.any():  # separate-skill tiers: draw from the family's tier distribution
            assert self._tier_cdf is not None
            f = family[separate]
            at = np.searchsorted(self._tier_cdf, f + self.rng.random(f.shape[0]), side="right")
            tier[separate] = (
                np.clip(at, cat.arm_start[f], cat.arm_start[f + 1] - 1) - cat.arm_start[f]
            )
        arm = cat.arm_start[family] + tier
        position = self.cursor[arm] + occurrence_rank(arm)
        size = cat.pool_size[arm]
        variant = permuted_index(position % size, size, arm, position // size, self.seed)
        self.cursor += np.bincount(arm, minlength=cat.n_arms)
        batch = Batch(
            step=self.step,
            arm=np.concatenate([retry_arm, arm]),
            family=np.concatenate([cat.family_of_arm[retry_arm], family]),
            tier=np.concatenate([cat.tier_of_arm[retry_arm], tier]),
            variant=np.concatenate([retry_variant, variant]),
            catalog=cat,
            attempt=np.concatenate([retry_attempt, np.zeros(fresh, dtype=np.int64)]),
            token=self._token,
        )
        assert batch.attempt is not None
        self._pending.add(self.step, self._token, batch.arm, batch.variant, batch.attempt)
        self._last_batch_size = n
        self.step += 1
        return batch

    def demand(self, steps: int, batch_size: int | None = None) -> Demand:
        """Expected tasks per arm, family and environment over the next ``steps`` batches
        (of ``batch_size``, by default the last batch's), at the current weights, quotas and
        tiers; draws nothing and leaves the RNG as it is (scheduler/_demand.py)."""
        size = batch_size if batch_size is not None else self._last_batch_size
        if size is None:
            raise ConfigError("demand: no batch drawn yet; pass batch_size")
        return expected_demand(self, steps, size)

    # ------------------------------------------------------------------ feedback
    def report(
        self,
        batch: Batch | Sequence[Outcome],
        rewards: npt.ArrayLike | BatchOutcomes | None = None,
        success: npt.ArrayLike | None = None,
        process: npt.ArrayLike | None = None,
        cost: npt.ArrayLike | None = None,
        status: npt.ArrayLike | Sequence[str] | None = None,
    ) -> None:
        """Apply the outcomes of a batch (arrays aligned with it) or a list of Outcome.

        Everything is validated first; on any problem a ReportError lists them all and
        nothing is applied. A backend's ``BatchOutcomes`` may stand in for the arrays:
        ``report(batch, backend.run(batch))``. Only tasks this scheduler drew and that
        await a report are accepted, each once, within ``report_window`` batches (see
        scheduler/_pending.py); a list of Outcome may report a batch in pieces.
        """
        if isinstance(rewards, BatchOutcomes):
            out = rewards
            rewards, success, process, cost, status = (
                out.reward,
                out.success,
                out.process,
                out.cost,
                out.status,
            )
        if isinstance(batch, Batch):
            if batch.catalog is not self.catalog:
                raise ReportError(["batch: drawn from another catalog"])
            problems = self._pending.check_batch(batch, self.step)
            if problems:
                raise ReportError(problems)
            # checked equal to what was drawn, so these are plain int64 arrays of this catalog
            arm, variant, step = (
                np.asarray(batch.arm, dtype=np.int64),
                np.asarray(batch.variant, dtype=np.int64),
                int(batch.step),
            )
            family = self.catalog.family_of_arm[arm]
            columns = parse_columns(self.catalog, family, rewards, success, process, cost, status)
            attempt = np.asarray(
                batch.attempt if batch.attempt is not None else np.zeros_like(arm), dtype=np.int64
            )
            self._pending.take_batch(step)
        else:
            if any(x is not None for x in (rewards, success, process, cost, status)):
                raise ReportError(["pass either a Batch with arrays or a list of Outcome"])
            arm, variant, columns = parse_outcomes(self.catalog, batch)
            matched, problems = self._pending.match(arm, variant, self.step)
            if problems:
                raise ReportError(problems)
            step = int(matched.step.max()) if matched.step.size else max(self.step - 1, 0)
            attempt = matched.attempt
            self._pending.take_rows(matched)
        self._feed(step, arm, variant, attempt, columns)
        self.listeners.report(step, arm, variant, columns)

    def record_outcomes(self, outcomes: Sequence[Outcome], step: int | None = None) -> None:
        """Apply outcomes of tasks this scheduler did not draw (a warm start from another
        run's logs, a test that steers a policy): checked like ``report``, bound to no
        batch, so nothing refuses a repeat. ``step`` defaults to the latest batch's."""
        arm, variant, columns = parse_outcomes(self.catalog, list(outcomes))
        if step is not None and (not isinstance(step, int) or isinstance(step, bool) or step < 0):
            raise ReportError([f"step: must be an integer >= 0, got {step!r}"])
        at = max(self.step - 1, 0) if step is None else step
        self._feed(at, arm, variant, np.zeros_like(arm), columns)

    def _feed(
        self, step: int, arm: IntArray, variant: IntArray, attempt: IntArray, columns: Columns
    ) -> None:
        """Apply checked outcomes: statistics, learned costs, retries and breakers."""
        reward, succ, proc, cst, stat = columns
        self._apply(step, arm, variant, reward, succ, proc, cst, stat)
        self._learn_cost(step, self.catalog.family_of_arm[arm], cst)
        # Environment faults say nothing about the model: retry the task, watch the breaker.
        fault = np.isin(stat, _FAULTS)
        if fault.any():
            self.retries.push(arm[fault], variant[fault], attempt[fault], step)
        family = self.catalog.family_of_arm[arm]
        self._events += self.breakers.record_outcomes(family, stat, step)
        self._refresh_gates()

    def _apply(
        self,
        step: int,
        arm: IntArray,
        variant: IntArray,
        reward: FloatArray,
        success: FloatArray,
        process: FloatArray,
        cost: FloatArray,
        status: IntArray,
    ) -> None:
        cat = self.catalog
        counted = np.isin(status, _COUNTED)
        a = arm[counted]
        family = cat.family_of_arm[a]
        span = self._reward_span[family]
        reward01 = (reward[counted] - cat.reward_low[family]) / span
        touched = self.stats.update(step, a, success[counted], reward01, process[counted])
        if self.skill is not None:
            self.skill.observe_training(a, success[counted])
            self._follow_skill(step)
        else:
            changes = self.tiers.observe(step, family, cat.tier_of_arm[a], success[counted])
            self._tier_events(step, changes)
        self.policy.observe(self.view(), self.policy_state, touched)
        self._invalidate()

    def _follow_skill(self, step: int) -> None:
        """Set each ladder family's current tier (what views, probes and metrics read) to
        the skill model's, with a promotion or demotion event where it moved, and an event
        where a family's flag (mastered, idle, suspected hacking) turned on or off."""
        assert self.skill is not None
        cat = self.catalog
        self._flag_events(step)
        new = np.where(cat.tier_separate, self.tiers.tier, self.skill.tier())
        moved = np.flatnonzero(new != self.tiers.tier)
        if moved.size == 0:
            return
        old = self.tiers.tier[moved].copy()
        low, rate, high = self.skill.pass_rate_band(moved, new[moved])
        self.tiers.tier[moved] = new[moved]
        self.tiers.last_change[moved] = step
        self._tier_events(
            step,
            TierChanges(moved, old, new[moved], rate, low, high, self.skill.episodes[moved].copy()),
        )

    def _flag_events(self, step: int) -> None:
        assert self.skill is not None
        sk, cat = self.skill, self.catalog
        idle_reason = np.select(
            [sk.out_of_reach(), sk.flat(), sk.stalled()], [1, 2, 3], default=0
        ).astype(np.int8)
        flags = np.stack([sk.mastered(), idle_reason > 0, sk.hacked()]) & ~cat.tier_separate
        changed = np.argwhere(flags != self._skill_flags)
        reasons = ("", "out_of_reach", "flat", "stalled")
        for row, f in changed.tolist():  # only families whose flag changed
            on = bool(flags[row, f])
            kind = ("mastered", "idle", "suspected_reward_hacking")[row]
            payload: dict[str, Any] = {"on": on}
            if row == 1 and on:
                payload["reason"] = reasons[int(idle_reason[f])]
            self._events.append(
                Event(
                    step=step,
                    kind=kind if on else f"{kind}_cleared",
                    family=cat.family_names[f],
                    domain=cat.domain_names[int(cat.domain_of_family[f])],
                    payload=payload,
                )
            )
        self._skill_flags = flags

    def _tier_events(self, step: int, changes: TierChanges) -> None:
        """One event per promotion or demotion, with the evidence behind it."""
        cat = self.catalog
        for i in range(changes.family.shape[0]):  # only families whose tier changed
            f = int(changes.family[i])
            kind = "tier_promoted" if changes.new_tier[i] > changes.old_tier[i] else "tier_demoted"
            self._events.append(
                Event(
                    step=step,
                    kind=kind,
                    family=cat.family_names[f],
                    domain=cat.domain_names[int(cat.domain_of_family[f])],
                    payload={
                        "old_tier": int(changes.old_tier[i]),
                        "new_tier": int(changes.new_tier[i]),
                        "pass_rate": float(changes.pass_rate[i]),
                        "ci": [float(changes.ci_low[i]), float(changes.ci_high[i])],
                        "samples": round(float(changes.samples[i]), 1),
                    },
                )
            )

    def _learn_cost(self, step: int, family: IntArray, cost: FloatArray) -> None:
        """EMA of seconds per episode (every status: a timeout costs compute too), and an
        event when a family runs far over its manifest estimate."""
        known = np.isfinite(cost)
        if not known.any():
            return
        cat = self.catalog
        fam = family[known]
        k_all = np.bincount(fam, minlength=cat.n_families)
        touched = np.flatnonzero(k_all)
        k = k_all[touched].astype(np.float64)
        mean = np.bincount(fam, weights=cost[known], minlength=cat.n_families)[touched] / k
        alpha = 1.0 - (1.0 - self.config.cost_rate) ** k
        self.cost[touched] += alpha * (mean - self.cost[touched])
        self.cost_seen += k_all
        ratio = self.cost / cat.cost_s
        alarm = (ratio > self.config.cost_overrun) & (self.cost_seen >= 20)
        for f in np.flatnonzero(alarm & ~self.cost_alarm).tolist():
            self._events.append(
                Event(
                    step=step,
                    kind="cost_overrun",
                    family=cat.family_names[f],
                    domain=cat.domain_names[int(cat.domain_of_family[f])],
                    payload={
                        "estimated_s": float(cat.cost_s[f]),
                        "learned_s": float(self.cost[f]),
                        "ratio": float(ratio[f]),
                    },
                )
            )
        # Re-arm once the cost is back under 80% of the alarm level.
        self.cost_alarm = (self.cost_alarm | alarm) & (ratio > 0.8 * self.config.cost_overrun)
        if cat.domain_compute_basis.any():
            self._invalidate()

    # ------------------------------------------------------------------ probes
    def record_probe(
        self,
        family: str | int,
        score: float,
        *,
        tier: int | None = None,
        n: int = 1,
        step: int | None = None,
    ) -> None:
        """Record a held-out score of one family at one tier (default: its current tier)."""
        f = family_id(self.catalog, family)
        self.record_probes([f], [score], tiers=None if tier is None else [tier], n=[n], step=step)

    def record_probes(
        self,
        families: npt.ArrayLike,
        scores: npt.ArrayLike,
        *,
        tiers: npt.ArrayLike | None = None,
        n: npt.ArrayLike | None = None,
        step: int | None = None,
        side: bool = False,
    ) -> None:
        """Record many probe points at once (aligned arrays). Validated as a whole
        (``parse_probes``: nothing is applied unless every point passes; one arm at most
        once per call).

        ``side=True`` for the probes ``side_targets()`` asks for (a tier left behind, the
        tier above a coin-like one): they are kept per arm, where they steer review draws
        and the coin-flip check, and stay off the families' probe curves."""
        cat = self.catalog
        # By default a probe belongs to the latest batch's step (it ran after that report).
        probes = parse_probes(
            cat, self.tiers.tier, families, scores, tiers, n, step, max(self.step - 1, 0)
        )
        fam, sc, tr, nn, at = probes.family, probes.score, probes.tier, probes.n, probes.step
        self.listeners.probes(at, fam, tr, sc, nn, side)
        arm = cat.arm_start[fam] + tr
        st = self.stats
        st.prev_probe_score[arm] = st.probe_score[arm]
        st.prev_probe_step[arm] = st.probe_step[arm]
        st.probe_score[arm] = sc
        st.probe_n[arm] = nn
        st.probe_step[arm] = at
        if self._bounds is not None:
            low, high = self._probe_interval(sc, nn)
            self._bounds[0][arm] = low
            self._bounds[1][arm] = high
        self._review = self._flat = None
        if side:
            ahead = tr > self.tiers.tier[fam]
            if ahead.any():
                st.pool_lookahead(
                    arm[ahead], sc[ahead], nn[ahead], self.tiers.last_change[fam[ahead]], at
                )
            self._invalidate()
            return
        # The training pass rate of the same arm, beside the probe: the hacking detector
        # compares the two curves.
        rate = self.stats.success_fast[arm]
        trained = self.stats.count[arm] > 0
        separate = cat.tier_separate[fam]
        if separate.any():
            fam, sc, nn, tr, rate, trained = self._separate_points(
                fam, sc, nn, tr, rate, trained, separate
            )
        steps = np.full(fam.shape[0], at, dtype=np.int64)
        self.curves.record(fam, sc, nn, steps, tiers=tr)
        if self.skill is not None:
            ladder = ~cat.tier_separate[fam]
            self.skill.observe_probes(fam[ladder], tr[ladder], sc[ladder], nn[ladder])
            self._follow_skill(at)
            self._refresh_gates()
            self._invalidate()
            return
        self._tier_events(at, self.tiers.observe_probes(at, fam, tr, sc, nn))
        self.detectors.record_training(fam[trained], rate[trained], steps[trained])
        # A mastered family's probe already reads at the ceiling, so there is no reward the
        # probe could miss; the few episodes it is still drawn make a thin, lagging
        # training curve, which must not read as a hack.
        self._events += self.detectors.update(
            at, self.curves, exempt=self.mastered, tier_flat=self.tier_flat, skilled=self.skilled
        )
        self._refresh_gates()
        self._invalidate()

    def _separate_points(
        self,
        fam: IntArray,
        score: FloatArray,
        n: IntArray,
        tier: IntArray,
        rate: FloatArray,
        trained: npt.NDArray[np.bool_],
        separate: npt.NDArray[np.bool_],
    ) -> tuple[IntArray, FloatArray, IntArray, IntArray, FloatArray, npt.NDArray[np.bool_]]:
        """Replace the probes of separate-skill families by one curve point each: the mean
        of the latest probe of every tier probed so far (each skill counts once), with the
        mean training pass rate of its trained arms beside it. Their curve is the family's
        skill as a whole, so the detectors judge the family, not one tier."""
        st, per_family = self.stats, self._per_family
        probed = st.probe_n > 0
        arm_trained = st.count > 0
        families = np.unique(fam[separate])
        n_probed = per_family(probed)[families]
        mean = per_family(np.where(probed, st.probe_score, 0.0))[families] / n_probed
        items = per_family(np.where(probed, st.probe_n, 0))[families].astype(np.int64)
        n_trained = per_family(arm_trained)[families]
        train_rate = per_family(np.where(arm_trained, st.success_fast, 0.0))[families] / (
            np.maximum(n_trained, 1)
        )
        keep = ~separate
        return (
            np.concatenate([fam[keep], families]),
            np.concatenate([score[keep], mean]),
            np.concatenate([n[keep], items]),
            np.concatenate([tier[keep], self.tiers.tier[families]]),
            np.concatenate([rate[keep], train_rate]),
            np.concatenate([trained[keep], n_trained > 0]),
        )

    def placement_targets(self) -> tuple[IntArray, IntArray]:
        """(families, tiers) that a probe just moved to a tier not probed since: probing
        them again at once places a family at its level in one round (a mastered family
        climbs every tier it passes), instead of one tier per round."""
        cat = self.catalog
        current = cat.arm_start[:-1] + self.tiers.tier
        latest = self.stats.probe_step.max()  # the latest probe round
        moved = (self.tiers.last_change == latest) & (
            self.stats.probe_step[current] < self.tiers.last_change
        )
        families = np.flatnonzero(moved)
        return families, self.tiers.tier[families].copy()

    def probe_targets(self) -> tuple[IntArray, IntArray]:
        """(families, tiers) whose probes make a round's curve points: every family at
        ``probe_tier``, and every other tier of families whose tiers are separate skills
        (their curve point is the mean over all their tiers, so all are probed)."""
        cat = self.catalog
        tier = self.probe_tier
        others = cat.tier_separate[cat.family_of_arm] & (cat.tier_of_arm != tier[cat.family_of_arm])
        families = np.concatenate([np.arange(cat.n_families), cat.family_of_arm[others]])
        return families, np.concatenate([tier, cat.tier_of_arm[others]])

    def side_targets(self) -> tuple[IntArray, IntArray]:
        """(families, tiers) to probe besides ``probe_targets`` in a probe round: the
        ``retention_targets`` and the ``lookahead_targets`` (a family may appear twice)."""
        kept_f, kept_t = self.retention_targets()
        ahead_f, ahead_t = self.lookahead_targets()
        return np.concatenate([kept_f, ahead_f]), np.concatenate([kept_t, ahead_t])

    def probe_round(self, probe: ProbeMany) -> ProbeRound:
        """Run one synchronous probe round through ``probe(families, tiers) -> (scores,
        n)``: the ``probe_targets``, again where a probe promoted a family (placement, so a
        family reaches its level in one round), then the ``side_targets`` (kept per arm,
        off the curves). Returns the probes that made curve points, placements included.

        The ProbeRunner is the asynchronous, budgeted way; this is for a trainer (or a
        benchmark) that can evaluate many families at once between steps."""
        parts: list[tuple[IntArray, IntArray, FloatArray, IntArray]] = []

        def ask(families: IntArray, tiers: IntArray, side: bool) -> None:
            scores, n = call_probe_many(probe, families, tiers)
            self.record_probes(families, scores, tiers=tiers, n=n, side=side)
            if not side:
                parts.append((families, tiers, scores, n))

        ask(*self.probe_targets(), side=False)
        if self.skill is not None:  # the skill model places families from any tier's probe
            fam, tier, score, count = parts[0]
            return ProbeRound(families=fam, tiers=tier, scores=score, n=count)
        for _ in range(int(self.catalog.n_tiers.max())):
            moved, placed = self.placement_targets()
            if not moved.size:
                break
            ask(moved, placed, side=False)
        side_families, side_tiers = self.side_targets()
        if side_families.size:
            ask(side_families, side_tiers, side=True)
        fam, tier, score, count = (np.concatenate(c) for c in zip(*parts, strict=True))
        return ProbeRound(families=fam, tiers=tier, scores=score, n=count)

    def lookahead_targets(self) -> tuple[IntArray, IntArray]:
        """(families, tiers): the tier above, for families not quarantined whose latest probe
        at the current tier passes about half the time (0.5 +- ``unlearnable.coin_band``),
        where that band is clear of chance (``_coin_clear_of_chance``).

        A harder tier that passes just as often says difficulty makes no difference: the
        signature of a coin flip, which the detector then needs far fewer rounds to trust
        than a flat curve alone (see ``tier_flat``)."""
        cat = self.catalog
        current = cat.arm_start[:-1] + self.tiers.tier
        band = self.config.detectors.unlearnable.coin_band
        score = self.stats.probe_score[current]
        coin_like = (
            (self.tiers.tier < cat.n_tiers - 1)
            & self._coin_clear_of_chance
            & ~cat.tier_separate  # (separate skills differ by design, not by difficulty)
            & ~self.detectors.quarantined
            & (np.abs(np.nan_to_num(score, nan=0.0) - 0.5) <= band)
        )
        families = np.flatnonzero(coin_like)
        return families, self.tiers.tier[families] + 1

    def _cached_for_tiers(self, cached: tuple[IntArray, IntArray, _T] | None) -> _T | None:
        """A cached result if it was computed for the current tiers (probes clear it)."""
        if (
            cached is not None
            and np.array_equal(cached[0], self.tiers.tier)
            and np.array_equal(cached[1], self.tiers.last_change)
        ):
            return cached[2]
        return None

    @property
    def _coin_clear_of_chance(self) -> npt.NDArray[np.bool_]:
        """bool [n_families]: the coin band (0.5 +- ``unlearnable.coin_band``) lies above
        the family's chance level. Elsewhere (binary labels) a family that has not started
        learning also passes half the time at every tier: a flat look-ahead says nothing
        there (on the torch benchmark's nested suite it quarantined parities that had not
        started yet), and such families are left to the slow rules."""
        band = self.config.detectors.unlearnable.coin_band
        result: npt.NDArray[np.bool_] = self.catalog.chance_success < 0.5 - band
        return result

    @property
    def tier_flat(self) -> npt.NDArray[np.bool_]:
        """bool [n_families]: the next tier up passes about as often as the current one.

        Pooled evidence, so the verdict firms up round by round rather than flickering with
        each probe: the current tier's probe window and every look-ahead probe of the next
        tier since the latest tier change both pass about half the time (0.5 +-
        ``unlearnable.coin_band``), and the harder tier not significantly less often
        (one-sided 95 %). Cached until a probe or a tier change (every weight update reads
        it, through the suspect cap)."""
        hit = self._cached_for_tiers(self._flat)
        if hit is not None:
            return hit
        cat = self.catalog
        st = self.stats
        band = self.config.detectors.unlearnable.coin_band
        has_up = self.tiers.tier < cat.n_tiers - 1
        current = cat.arm_start[:-1] + self.tiers.tier
        up = np.where(has_up, current + 1, current)
        k_cur, n_cur = self.curves.pooled()
        n_up = st.lookahead_n[up].astype(np.float64)
        pooled_up = has_up & (n_up > 0) & (st.lookahead_from[up] >= self.tiers.last_change)
        with np.errstate(invalid="ignore", divide="ignore"):
            p_cur = k_cur / n_cur
            p_up = st.lookahead_passed[up] / n_up
            pool = (k_cur + st.lookahead_passed[up]) / (n_cur + n_up)
            se = np.sqrt(np.clip(pool * (1 - pool), 1e-12, None) * (1 / n_cur + 1 / n_up))
            harder = (p_cur - p_up) / se > 1.645  # one-sided 95 %: the next tier is harder
            result: npt.NDArray[np.bool_] = (
                pooled_up
                & self._coin_clear_of_chance
                & ~cat.tier_separate
                & (n_cur > 0)
                & (np.abs(p_cur - 0.5) <= band)
                & (np.abs(p_up - 0.5) <= band)
                & ~harder
            )
        result.setflags(write=False)
        self._flat = (self.tiers.tier.copy(), self.tiers.last_change.copy(), result)
        return result

    def retention_targets(self) -> tuple[IntArray, IntArray]:
        """(families, tiers) worth probing besides the current tiers: one tier each family has
        left, one under review first (see ``review_tier``), else the longest unprobed.

        Probing them is how the scheduler notices that training on a higher tier lost (or
        never consolidated) a lower one, which then gets ``tiers.review_share`` of the
        family's draws until it reads ``tiers.retain_at`` again."""
        cat = self.catalog
        below = cat.tier_of_arm < self.tiers.tier[cat.family_of_arm]
        if not below.any():
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        arm = np.flatnonzero(below)
        suspect = self._suspect_arms()[arm]
        # Order within each family: under review, or read under retain_at once (the next
        # read confirms or clears it), first; then least recently probed.
        order = np.lexsort((self.stats.probe_step[arm], ~suspect, cat.family_of_arm[arm]))
        arm = arm[order]
        _, first = np.unique(cat.family_of_arm[arm], return_index=True)
        chosen = arm[first]
        return cat.family_of_arm[chosen].copy(), cat.tier_of_arm[chosen].copy()

    def _unretained_arms(self) -> npt.NDArray[np.bool_]:
        """bool [n_arms]: below the family's current tier, probed since, and the latest probe
        (chance-normalised) under ``tiers.retain_at``, confirmed: the upper bound of its
        Jeffreys interval is under too, or the probe before it (also since the family left
        the tier) read under as well. One read under is weak evidence (a 32-item probe of a
        tier held at 93 % reads under 0.9 nearly one time in five), and each such read
        sent half the family's draws back to a tier it had not lost; demanding the bound
        alone was tried and missed real, gradual forgetting (docs/design.md)."""
        cat = self.catalog
        st = self.stats
        retain_at = self.config.tiers.retain_at
        left_at = self.tiers.last_change[cat.family_of_arm]
        under_again = (st.prev_probe_step >= left_at) & (
            self._normalized_probe(st.prev_probe_score) < retain_at
        )
        return self._suspect_arms() & ((self._latest_probe_high() < retain_at) | under_again)

    def _suspect_arms(self) -> npt.NDArray[np.bool_]:
        """bool [n_arms]: below the family's current tier, probed since it left, and the
        latest probe under ``tiers.retain_at`` (confirmed or not)."""
        cat = self.catalog
        left_at = self.tiers.last_change[cat.family_of_arm]
        below = cat.tier_of_arm < self.tiers.tier[cat.family_of_arm]
        return (
            below
            & (self.stats.probe_step >= left_at)
            & (self._normalized_probe(self.stats.probe_score) < self.config.tiers.retain_at)
        )

    def _normalized_probe(self, score: FloatArray) -> FloatArray:
        """Chance-normalised probe scores per arm (1 where never probed)."""
        chance = self.catalog.chance_success[self.catalog.family_of_arm]
        result: FloatArray = (np.nan_to_num(score, nan=1.0) - chance) / (1.0 - chance)
        return result

    def _latest_probe_high(self) -> FloatArray:
        """float64 [n_arms]: the chance-normalised upper Jeffreys bound of each arm's latest
        probe (inf where never probed)."""
        _, high, chance = self._latest_probe_bounds(np.arange(self.catalog.n_arms))
        result: FloatArray = np.nan_to_num((high - chance) / (1.0 - chance), nan=np.inf)
        return result

    @property
    def batch_token(self) -> int:
        """The token this scheduler's batches carry (``Batch.token``)."""
        return int(self._token)

    def awaiting_report(self) -> bool:
        """Whether any batch drawn is still awaiting its report."""
        return bool(np.asarray(self._pending.state_dict()["step"]).size)

    def adopt_token(self, token: int) -> None:
        """Take another scheduler's batch token: replicas of one run (every rank of a
        ReplicatedScheduler) draw the same batches and accept each other's reports."""
        if self.awaiting_report():
            raise ConfigError("adopt_token: batches are awaiting a report; adopt before drawing")
        self._token = int(token)

    def held_back(self) -> npt.NDArray[np.bool_]:
        """bool [n_families]: families held to a small share because they cannot teach the
        model anything now: the skill model's idle and suspected-hacking flags (the legacy
        detectors' quarantine with ``skill=None``)."""
        if self.skill is None:
            return self.detectors.quarantined.copy()
        sk = self.skill
        result: npt.NDArray[np.bool_] = (sk.idle() | sk.hacked()) & ~self.catalog.tier_separate
        return result

    @property
    def mastered(self) -> npt.NDArray[np.bool_]:
        """bool [n_families]: the top tier mastered (``TierController.mastered``) and no tier
        left behind under review, or for separate-skill tiers every arm mastered
        (``arm_mastered``); such a family keeps only ``tiers.mastered_weight``."""
        cat = self.catalog
        if self.skill is not None:
            ladder: npt.NDArray[np.bool_] = self.skill.mastered()
        else:
            ladder = self.tiers.mastered & (self.review_tier < 0)
        if not cat.tier_separate.any():
            return ladder
        every_arm = np.logical_and.reduceat(self.arm_mastered, cat.arm_start[:-1])
        result: npt.NDArray[np.bool_] = np.where(cat.tier_separate, every_arm, ladder)
        return result

    @property
    def skilled(self) -> npt.NDArray[np.bool_]:
        """bool [n_families]: families with a tier whose latest probe passes credibly above
        chance (normalised lower bound over ``unlearnable.chance_margin``) and above a
        coin's band (lower bound over 0.5 + ``coin_band``, where chance is below that
        band). Such a family has learned something, so it is not unlearnable: a
        separate-skill family whatever its mean over tiers reads while its other tiers are
        still at chance (torch benchmark: 9 of 16 parity families were quarantined for a
        while without this), and a ladder that stalls at chance on a tier above one it
        passed (the same parities declared as a ladder: 5 quarantines on 5 seeds)."""
        cat, unl = self.catalog, self.config.detectors.unlearnable
        arm = np.flatnonzero(self.stats.probe_n > 0)
        low, _, chance = self._latest_probe_bounds(arm)
        # Above a coin's band too, unless chance is itself about a half (then a coin flip
        # is at chance, and clearing chance is enough).
        coin_at_chance = ~self._coin_clear_of_chance[cat.family_of_arm[arm]]
        clear = ((low - chance) / (1.0 - chance) > unl.chance_margin) & (
            (low > 0.5 + unl.coin_band) | coin_at_chance
        )
        result = np.zeros(cat.n_families, dtype=bool)
        result[cat.family_of_arm[arm[clear]]] = True
        return result

    @property
    def probe_tier(self) -> IntArray:
        """int64 [n_families]: the tier a probe round asks for: a ladder's current tier, and
        for separate-skill tiers the one probed longest ago (lowest first), so a runner that
        probes one tier per family per round goes round them all."""
        cat = self.catalog
        result = self.tiers.tier.copy()
        if cat.tier_separate.any():
            arm = np.flatnonzero(cat.tier_separate[cat.family_of_arm])
            order = np.lexsort((arm, self.stats.probe_step[arm], cat.family_of_arm[arm]))
            first = arm[order][np.unique(cat.family_of_arm[arm[order]], return_index=True)[1]]
            result[cat.family_of_arm[first]] = cat.tier_of_arm[first]
        return result

    @property
    def review_tier(self) -> IntArray:
        """int64 [n_families]: the lowest tier a family has left whose latest probe reads under
        ``tiers.retain_at`` (forgotten, or never consolidated); -1 where none. Review draws
        go there. Cached until a probe or a tier change: every draw reads it, and it is a
        few passes over all arms (a fifth of a 100,000-arm step with ``weights_every``)."""
        hit = self._cached_for_tiers(self._review)
        if hit is not None:
            return hit
        cat = self.catalog
        tier = np.where(self._unretained_arms(), cat.tier_of_arm, np.iinfo(np.int64).max)
        lowest = np.minimum.reduceat(tier, cat.arm_start[:-1])
        result: IntArray = np.where(lowest == np.iinfo(np.int64).max, -1, lowest)
        result.setflags(write=False)
        self._review = (self.tiers.tier.copy(), self.tiers.last_change.copy(), result)
        return result

    def probe_snapshot(self) -> ProbeSnapshot:
        """What a ProbeRunner needs to choose the next families to probe, and the side
        targets (a left tier, the tier above a family at a half) to probe besides (copied
        now)."""
        cat = self.catalog
        tiers = self.probe_tier
        current = cat.arm_start[:-1] + tiers
        slope, _, _ = self.curves.slope()
        drift = np.abs(self.stats.success_fast[current] - self.stats.success_slow[current])
        side_families, side_tiers = self.side_targets()
        return ProbeSnapshot(
            step=self.step,
            tiers=tiers,
            weights=self.weights().family.copy(),
            last_probe_step=self.stats.probe_step[current].copy(),
            change=np.where(np.isfinite(slope), np.abs(slope) * self.config.probe_window, drift),
            allowed=self.breakers.probe_allowed.copy(),
            side_families=side_families,
            side_tiers=side_tiers,
        )

    def apply_probe_results(self, results: ProbeResults) -> None:
        """Record what a ProbeRunner drained: scores of the probes that succeeded (the side
        probes after the others, off the curves, as in ``probe_round``), and every success
        or failure for the breakers. Call it from the training thread, between steps
        (``runner.drain()`` is the thread-safe hand-over)."""
        if len(results) == 0:
            return
        width = int(self.catalog.n_tiers.max()) + 1
        for side in (False, True):
            keep = np.flatnonzero(results.ok & (results.side == side))
            # A drain may hold several rounds, and record_probes takes an arm once a call:
            # repeats go in later calls, in arrival order.
            rank = occurrence_rank(results.families[keep] * width + results.tiers[keep])
            for r in range(int(rank.max(initial=-1)) + 1):
                sel = keep[rank == r]
                self.record_probes(
                    results.families[sel],
                    results.scores[sel],
                    tiers=results.tiers[sel],
                    n=results.n[sel],
                    side=side,
                )
        self._events += self.breakers.record_probe_results(results.families, results.ok, self.step)
        self._refresh_gates()

    # ------------------------------------------------------------------ listeners
    def add_listener(self, listener: Listener) -> None:
        """Have ``listener`` hear of every report, probe and step boundary (scheduler/
        _listeners.py): ``sched.add_listener(recorder)`` records a run with no second call."""
        self.listeners.add(listener)

    def remove_listener(self, listener: Listener) -> None:
        self.listeners.remove(listener)

    # ------------------------------------------------------------------ events
    def drain_events(self) -> list[Event]:
        """Events since the last call, oldest first."""
        events, self._events = self._events, []
        return events

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: stats, tiers, policy state, cursors, RNG."""
        return {
            "format": STATE_FORMAT,
            "catalog": self.catalog.fingerprint,
            "policy": policy_params(self.policy),
            "config": asdict(self.config),
            "seed": self.seed,
            "step": self.step,
            "rng": self.rng.bit_generator.state,
            "stats": self.stats.state_dict(),
            "tiers": self.tiers.state_dict(),
            "skill": None if self.skill is None else self.skill.state_dict(),
            "skill_flags": self._skill_flags.copy(),
            "policy_state": copy.deepcopy(self.policy_state),
            "cursor": self.cursor.copy(),
            "cost": self.cost.copy(),
            "cost_seen": self.cost_seen.copy(),
            "cost_alarm": self.cost_alarm.copy(),
            "compute_ratio": self.compute_ratio.copy(),
            "quota_short": self.quota_short.copy(),
            "family_factor": self.family_factor.copy(),
            "curves": self.curves.state_dict(),
            "detectors": self.detectors.state_dict(),
            "breakers": self.breakers.state_dict(),
            "retries": self.retries.state_dict(),
            "pending": self._pending.state_dict(),
            "events": [asdict(e) for e in self._events],
            "cached_weights": None
            if self._weights is None
            else {
                "step": self._weights_step,
                "arm": self._weights.arm.copy(),
                "family": self._weights.family.copy(),
                "domain": self._weights.domain.copy(),
                "tier": self._weights.tier.copy(),
            },
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state from ``state_dict``; the next batch is the one the saved run would
        have drawn. The whole state is migrated and checked first (scheduler/_checkpoint.py):
        a ConfigError names every bad field, and nothing of a rejected state is applied."""
        state = checked_state(self, state)
        self.stats.load_state_dict(state["stats"])
        self._bounds = self._review = self._flat = None
        self.tiers.load_state_dict(dict(state["tiers"]))
        self.breakers.load_state_dict(state["breakers"])
        self.retries.load_state_dict(state["retries"])
        self.curves.load_state_dict(state["curves"])
        self.detectors.load_state_dict(state["detectors"])
        if self.skill is not None:
            self.skill.load_state_dict(state["skill"])
            self._skill_flags = np.asarray(state["skill_flags"], dtype=bool).copy()
        self.cursor = np.asarray(state["cursor"], dtype=np.int64).copy()
        self.cost = np.asarray(state["cost"], dtype=np.float64).copy()
        self.cost_seen = np.asarray(state["cost_seen"], dtype=np.int64).copy()
        self.cost_alarm = np.asarray(state["cost_alarm"], dtype=bool).copy()
        self.compute_ratio = np.asarray(state["compute_ratio"], dtype=np.float64).copy()
        self.quota_short = np.asarray(state["quota_short"], dtype=bool).copy()
        self.family_factor = np.asarray(state["family_factor"], dtype=np.float64).copy()
        self.seed = int(state["seed"])
        self.step = int(state["step"])
        self.rng.bit_generator.state = dict(state["rng"])
        self.policy_state = copy.deepcopy(dict(state["policy_state"]))
        self._pending.load_state_dict(state["pending"])
        # a resumed scheduler is the one that saved: it takes the token its awaited batches
        # carry, so the batches it draws next carry it too (and the state matches the saver's)
        tokens = np.asarray(state["pending"]["token"], dtype=np.int64)
        if tokens.size:
            self._token = int(tokens[-1])
        self._events = [Event(**e) for e in state["events"]]
        cached = state.get("cached_weights")
        if cached is None:
            self._weights, self._cdf, self._weights_step = None, None, -(10**9)
        else:
            self._weights = Weights(
                arm=np.asarray(cached["arm"], dtype=np.float64).copy(),
                family=np.asarray(cached["family"], dtype=np.float64).copy(),
                domain=np.asarray(cached["domain"], dtype=np.float64).copy(),
                tier=np.asarray(cached["tier"], dtype=np.float64).copy(),
            )
            self._weights_step = int(cached["step"])
            self._set_cdfs(self._weights)
