"""A simulated learner: the built-in stand-in for a model trained with RL on many families.

It exists so the scheduler can be benchmarked and demonstrated without a GPU: a good
curriculum must clearly beat uniform sampling on it, and the traps a real run has (families
that cannot be learned, coin-flip families, mastered families, reward hacking, flaky
environments, forgetting, prerequisites) are all present and switchable.

Model, per family ``f`` with latent skill ``s_f``:

* tier ``t`` has difficulty ``d_f + t * gap_f``; the chance-normalised success of an arm is
  ``q = sigmoid(k * (s_f - difficulty))`` and the success probability is
  ``chance_f + (1 - chance_f) * q``;
* every valid episode raises ``s_f`` by ``lr_f * 4 q (1 - q)`` (nothing is learned from tiers
  far too hard or too easy), summed per family with ``np.bincount`` and saturated per step;
* a fraction of each gain transfers to the family's domain; a prerequisite gates the gain;
* families not practised for a while decay toward their initial skill.

Everything is vectorised over the batch and the families, and all randomness comes from one
``np.random.Generator(PCG64(seed))``, so a run is reproducible and resumable exactly.
"""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from domains import Catalog, CurriculumError

from .._batch import Batch, Status
from ._protocol import BatchOutcomes

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_DEFAULT_PROBE_SIZE = 32
_STATE_VERSION = 1


def _clip01(values: FloatArray) -> None:
    """Clip into [0, 1] in place (twice as fast as np.clip on small arrays)."""
    np.maximum(values, 0.0, out=values)
    np.minimum(values, 1.0, out=values)


class SimulationError(CurriculumError):
    """Bad input to the simulated learner: a config value, an arm, a family or a state dict."""


class FamilyKind(enum.IntEnum):
    """What kind of family the simulator made a family into (``SimulatedLearner.family_kind``)."""

    LEARNABLE = 0
    IMPOSSIBLE = 1  # success stays at chance, nothing is learned
    NOISE = 2  # success ~ Bernoulli(0.5) whatever the skill, nothing is learned
    MASTERED = 3  # starts far above every tier
    HACKABLE = 4  # training success rises through a hack the held-out probe does not see
    FLAKY = 5  # learnable, but the environment fails often (ENV_ERROR / TIMEOUT)


@dataclass(frozen=True)
class SimulatedLearnerConfig:
    """Every knob of the simulated learner; defaults make a 300-family, 4-tier run interesting.

    Skill and difficulty share one unit; with ``slope_k = 3`` and a tier gap near 1.2 a tier
    one gap below the skill is at ~97 % success and one gap above at ~3 %.
    """

    # Family kinds (shares of all families; the rest are learnable).
    share_impossible: float = 0.05  # cannot be learned: success stays at chance
    share_noise: float = 0.05  # coin flips: success ~ Bernoulli(0.5), no learning
    share_mastered: float = 0.10  # start above every tier (training on them is wasted)
    share_hackable: float = 0.0  # training success can be gamed; the held-out probe cannot
    share_flaky: float = 0.0  # environment faults at ``flaky_error_rate``
    # Learning.
    learning_rate: float = 0.004  # skill gained by one episode at q = 0.5 (mean over families)
    learning_rate_spread: float = 2.0  # per-family lr is log-uniform in [lr / spread, lr * spread]
    max_gain_per_step: float = 0.06  # saturation of one family's gain in one step (huge batches)
    transfer: float = 0.15  # share of a family's gain also given to its domain, split evenly
    prerequisite_share: float = 0.2  # share of learnable families gated by a prerequisite
    forgetting: float = 0.002  # per-step decay toward the initial skill once out of practice
    forget_after: int = 25  # steps without practice before forgetting starts
    slope_k: float = 3.0  # steepness of success in skill minus difficulty
    # Families and tiers.
    tier_gap: tuple[float, float] = (0.9, 1.5)  # uniform range of the gap between tiers
    base_difficulty_sd: float = 0.3  # spread of the tier-0 difficulty across families
    initial_tiers: tuple[float, float] = (-0.6, 0.8)  # initial skill, in tier gaps above tier 0
    mastered_margin: float = 1.5  # mastered families start this many gaps above the top tier
    hack_rate: float = 0.001  # per-episode growth of the hack term of a hackable family
    # Observation noise.
    process_slope: float = 1.0  # slope of the dense process score (gentler than slope_k)
    process_noise: float = 0.05  # sd of the (uniform) process-score noise
    reward_noise: float = 0.05  # sd of the (uniform) reward noise, before clipping into range
    cost_sigma: float = 0.3  # sd of log(cost / estimated cost)
    timeout_cost_factor: float = 3.0  # a TIMEOUT costs this many times the estimate
    probe_noise: float = 0.02  # sd of a per-probe evaluation shift on top of binomial noise
    env_error_rate: float = 0.002  # ENV_ERROR / TIMEOUT rate of an ordinary family
    flaky_error_rate: float = 0.35  # ENV_ERROR / TIMEOUT rate of a flaky family
    timeout_share: float = 0.3  # share of environment faults reported as TIMEOUT

    def validate(self) -> None:
        """Raise SimulationError naming the first field that is out of range."""
        where = "SimulatedLearnerConfig"
        shares = ["share_impossible", "share_noise", "share_mastered", "share_hackable"]
        shares.append("share_flaky")
        unit = [*shares, "transfer", "prerequisite_share", "forgetting", "env_error_rate"]
        unit += ["flaky_error_rate", "timeout_share"]
        for name in unit:
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise SimulationError(f"{where}.{name}: must be between 0 and 1, got {value!r}")
        total = sum(getattr(self, n) for n in shares)
        if total > 1.0 + 1e-12:
            raise SimulationError(
                f"{where}.share_*: the family shares must sum to at most 1, got {total:g}"
            )
        nonneg = ["learning_rate", "hack_rate", "base_difficulty_sd", "mastered_margin"]
        nonneg += ["process_noise", "reward_noise", "cost_sigma", "probe_noise", "forget_after"]
        for name in nonneg:
            value = getattr(self, name)
            if not value >= 0:
                raise SimulationError(f"{where}.{name}: must be >= 0, got {value!r}")
        positive = ("max_gain_per_step", "slope_k", "process_slope", "timeout_cost_factor")
        for name in positive:
            value = getattr(self, name)
            if not value > 0:
                raise SimulationError(f"{where}.{name}: must be > 0, got {value!r}")
        if not self.learning_rate_spread >= 1.0:
            raise SimulationError(
                f"{where}.learning_rate_spread: must be >= 1, got {self.learning_rate_spread!r}"
            )
        for name in ("tier_gap", "initial_tiers"):
            pair = getattr(self, name)
            if not (isinstance(pair, tuple | list) and len(pair) == 2):
                raise SimulationError(f"{where}.{name}: must be a pair [low, high], got {pair!r}")
            low, high = pair
            if not low <= high:
                raise SimulationError(f"{where}.{name}: must be (low, high) with low <= high")
        if not self.tier_gap[0] > 0:
            raise SimulationError(f"{where}.tier_gap: gaps must be > 0, got {self.tier_gap!r}")


class SimulatedLearner:
    """A seeded, vectorised simulated learner that implements ``TrainerBackend``.

    Static per-family parameters (kinds, difficulties, learning rates, prerequisites) are
    drawn from the seed at construction; ``run`` and ``probe`` then draw from the same
    generator, so identical calls on identical seeds give identical results.
    """

    def __init__(
        self, catalog: Catalog, seed: int = 0, config: SimulatedLearnerConfig | None = None
    ) -> None:
        self.catalog = catalog
        self.config = config if config is not None else SimulatedLearnerConfig()
        self.config.validate()
        self.seed = int(seed)
        self._rng = np.random.Generator(np.random.PCG64(self.seed))
        self._build_static()
        self._derive()

    # Construction ---------------------------------------------------------------------------
    def _build_static(self) -> None:
        """Draw the families' kinds, difficulties, learning rates and prerequisites."""
        cat, cfg, rng = self.catalog, self.config, self._rng
        n_fam = cat.n_families
        shares = [
            (FamilyKind.IMPOSSIBLE, cfg.share_impossible),
            (FamilyKind.NOISE, cfg.share_noise),
            (FamilyKind.MASTERED, cfg.share_mastered),
            (FamilyKind.HACKABLE, cfg.share_hackable),
            (FamilyKind.FLAKY, cfg.share_flaky),
        ]
        counts = [round(share * n_fam) for _, share in shares]
        labels = np.repeat(
            np.array([int(k) for k, _ in shares] + [int(FamilyKind.LEARNABLE)], dtype=np.int64),
            [*counts, max(n_fam - sum(counts), 0)],
        )[:n_fam]
        self.family_kind: IntArray = rng.permutation(labels)  # int64 [n_families], FamilyKind

        n_tiers = cat.n_tiers.astype(np.float64)
        self._gap: FloatArray = rng.uniform(*cfg.tier_gap, size=n_fam)  # float64 [n_families]
        self._base: FloatArray = cfg.base_difficulty_sd * rng.standard_normal(n_fam)
        top = self._base + (n_tiers - 1.0) * self._gap
        start = self._base + self._gap * rng.uniform(*cfg.initial_tiers, size=n_fam)
        mastered = self.family_kind == FamilyKind.MASTERED
        self._init_skill: FloatArray = np.where(
            mastered, top + cfg.mastered_margin * self._gap, start
        )  # float64 [n_families]
        spread = math.log(cfg.learning_rate_spread)
        self._lr: FloatArray = cfg.learning_rate * np.exp(rng.uniform(-spread, spread, n_fam))

        # Prerequisites: only between families that learn, within a domain, from a family
        # earlier in a random order (so there are no cycles); vectorised over families.
        learns = np.isin(self.family_kind, [FamilyKind.LEARNABLE, FamilyKind.FLAKY])
        order_key = rng.random(n_fam)
        cand = np.flatnonzero(learns | mastered)
        cand = cand[np.lexsort((order_key[cand], cat.domain_of_family[cand]))]
        dom = cat.domain_of_family[cand]
        first = np.searchsorted(dom, dom, side="left")
        rank = np.arange(cand.size) - first  # position within the domain's random order
        pick = first + np.floor(rng.random(cand.size) * rank).astype(np.int64)
        wants = (rng.random(cand.size) < cfg.prerequisite_share) & (rank > 0) & learns[cand]
        self._prereq: IntArray = np.arange(n_fam, dtype=np.int64)  # self when none
        self._prereq[cand[wants]] = cand[pick[wants]]
        mid = self._base + 0.5 * (n_tiers - 1.0) * self._gap  # the prerequisite's middle tier
        self._threshold: FloatArray = np.full(n_fam, -np.inf)  # float64 [n_families]
        self._threshold[cand[wants]] = mid[cand[pick[wants]]]

        self._skill: FloatArray = self._init_skill.copy()  # float64 [n_families]
        self._hack: FloatArray = np.zeros(n_fam)  # float64 [n_families], in [0, 1)
        self._last_practised: IntArray = np.zeros(n_fam, dtype=np.int64)  # step of last practice
        self._step = 0  # number of run() calls so far
        logger.debug(
            "simulated learner: %d families, kinds %s",
            n_fam,
            np.bincount(self.family_kind, minlength=len(FamilyKind)).tolist(),
        )

    def _derive(self) -> None:
        """Per-family and per-arm constants that follow from the static parameters."""
        cat, cfg = self.catalog, self.config
        kind = self.family_kind
        chance = cat.chance_success.astype(np.float64)
        fixed = np.isin(kind, [FamilyKind.IMPOSSIBLE, FamilyKind.NOISE])
        # p = p_base + p_scale * q: impossible -> chance, noise -> 0.5, others chance-scaled.
        self._p_base = np.where(kind == FamilyKind.NOISE, 0.5, chance)
        self._p_scale = np.where(fixed, 0.0, 1.0 - chance)
        learns = np.isin(kind, [FamilyKind.LEARNABLE, FamilyKind.MASTERED, FamilyKind.FLAKY])
        self._learns = learns  # bool [n_families]: skill moves (learning, transfer, forgetting)
        self._lr4 = np.where(learns, 4.0 * self._lr, 0.0)  # 4 p (1 - p) peaks at 1
        self._hack_rate = np.where(kind == FamilyKind.HACKABLE, cfg.hack_rate, 0.0)
        self._scored = ~fixed  # true_score is 0 for impossible and noise families
        flaky = kind == FamilyKind.FLAKY
        self._err_rate = np.where(flaky, cfg.flaky_error_rate, cfg.env_error_rate)
        self._timeout_rate = self._err_rate * cfg.timeout_share
        self._reward_low = cat.reward_low.astype(np.float64)
        self._reward_span = cat.reward_high - cat.reward_low
        self._cost = cat.cost_s.astype(np.float64)
        members = np.bincount(cat.domain_of_family, weights=learns, minlength=cat.n_domains)
        split = cfg.transfer / np.maximum(members - 1.0, 1.0)  # per domain
        self._transfer_to = split[cat.domain_of_family] * learns  # [n_families]
        self._has_prereq = bool(np.any(np.isfinite(self._threshold)))
        self._has_hack = bool(np.any(self._hack_rate > 0))
        # Uniform noise of the configured sd: sqrt(12) sd wide.
        self._reward_noise_width = math.sqrt(12.0) * cfg.reward_noise
        self._process_noise_width = math.sqrt(12.0) * cfg.process_noise
        self._probe_n = np.where(cat.probe_size > 0, cat.probe_size, _DEFAULT_PROBE_SIZE)
        # float64 [n_arms]: difficulty of each arm.
        self._difficulty = (
            self._base[cat.family_of_arm] + cat.tier_of_arm * self._gap[cat.family_of_arm]
        )

    # TrainerBackend -------------------------------------------------------------------------
    def run(self, batch: Batch) -> BatchOutcomes:
        """Train on the batch (update skills) and return one outcome per task."""
        cfg, cat, rng = self.config, self.catalog, self._rng
        arm = np.ascontiguousarray(batch.arm, dtype=np.int64)
        n = arm.shape[0]
        # One reduction checks both ends: a negative id viewed as uint64 is huge.
        if n and int(arm.view(np.uint64).max()) >= cat.n_arms:
            raise SimulationError(
                f"batch {batch.step}: arm ids must be in [0, {cat.n_arms}), "
                f"got {int(arm.min())}..{int(arm.max())}"
            )
        fam = cat.family_of_arm[arm]
        gap = self._skill[fam] - self._difficulty[arm]
        q = expit(cfg.slope_k * gap)  # chance-normalised held-out success of each episode
        hack = self._hack[fam]
        q_train = q + (1.0 - q) * hack  # the hack only helps training, never the probe
        p = self._p_base[fam] + self._p_scale[fam] * q_train

        uniform = rng.random((4, n))
        fault = uniform[1] < self._err_rate[fam]
        timeout = uniform[1] < self._timeout_rate[fam]
        ok = (uniform[0] < p) & ~fault
        success = ok.astype(np.float64)
        # Status codes without a select: FAILED - ok, then +2 on a fault, -1 on a timeout.
        status = np.subtract(int(Status.FAILED), ok, dtype=np.int64)
        status += fault
        status += fault
        status -= timeout
        reward = success + self._reward_noise_width * (uniform[2] - 0.5)
        _clip01(reward)
        reward[fault] = 0.0
        reward = self._reward_low[fam] + self._reward_span[fam] * reward
        process = expit(cfg.process_slope * gap)
        process += self._process_noise_width * (uniform[3] - 0.5)
        _clip01(process)
        process[fault] = np.nan
        cost = self._cost[fam] * np.exp(cfg.cost_sigma * rng.standard_normal(n))
        cost[timeout] *= cfg.timeout_cost_factor

        self._learn(fam, q, fault)
        return BatchOutcomes(
            reward=reward, success=success, process=process, cost=cost, status=status
        )

    def _learn(self, fam: IntArray, q: FloatArray, fault: BoolArray) -> None:
        """Apply one step of learning, transfer, prerequisites, hacking and forgetting."""
        cfg, cat = self.config, self.catalog
        n_fam = cat.n_families
        signal = q * (1.0 - q)  # times 4 (in _lr4): 1 at q = 0.5, ~0 far from it
        signal[fault] = 0.0  # a broken environment teaches nothing
        raw = np.bincount(fam, weights=signal, minlength=n_fam) * self._lr4
        cap = cfg.max_gain_per_step
        gain = np.expm1(raw * (-1.0 / cap))
        gain *= -cap  # cap * (1 - exp(-raw / cap)): linear when small, saturates at cap
        dom = cat.domain_of_family
        domain_gain = np.bincount(dom, weights=gain, minlength=cat.n_domains)
        gain += (domain_gain[dom] - gain) * self._transfer_to
        if self._has_prereq:
            gain *= expit(cfg.slope_k * (self._skill[self._prereq] - self._threshold))
        self._skill += gain

        self._step += 1
        valid_fam = fam[~fault]
        self._last_practised[valid_fam] = self._step
        if self._has_hack:
            practised = np.bincount(valid_fam, minlength=n_fam)
            self._hack = 1.0 - (1.0 - self._hack) * np.exp(-self._hack_rate * practised)
        if cfg.forgetting > 0.0:
            stale = (self._step - self._last_practised) > cfg.forget_after
            excess = self._skill - self._init_skill
            np.maximum(excess, 0.0, out=excess)
            excess *= stale
            self._skill -= cfg.forgetting * excess

    def probe(self, family: int, tier: int) -> tuple[float, int]:
        """Noisy held-out success of one family at one tier: (mean, number of probe items)."""
        means, ns = self.probe_many(np.array([family]), np.array([tier]))
        return float(means[0]), int(ns[0])

    def probe_many(
        self, families: npt.ArrayLike, tiers: npt.ArrayLike
    ) -> tuple[FloatArray, IntArray]:
        """Vectorised probes: binomial held-out draws plus a small evaluation shift."""
        fam, tier = self._check_arms(families, tiers)
        p = self.true_success(fam, tier)
        n = self._probe_n[fam]
        hits = self._rng.binomial(n, p)
        shift = self.config.probe_noise * self._rng.standard_normal(fam.shape[0])
        return np.clip(hits / n + shift, 0.0, 1.0), n.astype(np.int64)

    # Ground truth (for benchmarks and tests; a real trainer has none of this) -------------
    def true_success(
        self, families: npt.ArrayLike | None = None, tiers: npt.ArrayLike | None = None
    ) -> FloatArray:
        """Expected held-out success without noise (the hack not included).

        With no arguments: per arm, shape [n_arms]. Otherwise families and tiers are aligned
        arrays (a scalar tier broadcasts) and the result has their shape.
        """
        if families is None and tiers is None:
            arm: IntArray = np.arange(self.catalog.n_arms, dtype=np.int64)
        elif families is None or tiers is None:
            raise SimulationError("true_success: give both families and tiers, or neither")
        else:
            fam, tier = self._check_arms(families, tiers)
            arm = self.catalog.arm_start[fam] + tier
        fam = self.catalog.family_of_arm[arm]
        q = expit(self.config.slope_k * (self._skill[fam] - self._difficulty[arm]))
        result: FloatArray = self._p_base[fam] + self._p_scale[fam] * q
        return result

    def true_score(self) -> FloatArray:
        """[n_families]: chance-normalised held-out skill, mean over tiers, in [0, 1].

        0 for impossible and noise families; a hackable family's hack does not count.
        """
        cat = self.catalog
        fam = cat.family_of_arm
        q = expit(self.config.slope_k * (self._skill[fam] - self._difficulty))
        total = np.bincount(fam, weights=q, minlength=cat.n_families)
        result: FloatArray = np.where(self._scored, total / cat.n_tiers, 0.0)
        return result

    def wasted(self, families: npt.ArrayLike, tiers: npt.ArrayLike | None = None) -> BoolArray:
        """Per episode: would training on it teach the model nothing real?

        True for impossible, noise and hackable families (the last only games its
        reward), and for mastered ones: true_success >= 0.95 at the episode's tier when
        ``tiers`` is given, at every tier of the family otherwise.
        """
        fam = np.asarray(families, dtype=np.int64)
        if tiers is None:
            self._check_arms(fam, np.zeros_like(fam))
            arm_ok = self.true_success() >= 0.95
            all_ok = (
                np.bincount(
                    self.catalog.family_of_arm, weights=~arm_ok, minlength=self.catalog.n_families
                )
                == 0
            )
            mastered = all_ok[fam]
        else:
            fam, tier = self._check_arms(fam, tiers)
            mastered = self.true_success(fam, tier) >= 0.95
        useless = np.isin(
            self.family_kind, [FamilyKind.IMPOSSIBLE, FamilyKind.NOISE, FamilyKind.HACKABLE]
        )
        result: BoolArray = useless[fam] | mastered
        return result

    def training_success(self) -> FloatArray:
        """[n_arms]: expected training success, hack included (what rewards show)."""
        cat = self.catalog
        fam = cat.family_of_arm
        q = expit(self.config.slope_k * (self._skill[fam] - self._difficulty))
        q_train = 1.0 - (1.0 - q) * (1.0 - self._hack[fam])
        result: FloatArray = self._p_base[fam] + self._p_scale[fam] * q_train
        return result

    @property
    def step(self) -> int:
        """Number of batches run so far."""
        return self._step

    @property
    def skill(self) -> FloatArray:
        """[n_families]: a read-only copy of the latent skills."""
        view = self._skill.copy()
        view.setflags(write=False)
        return view

    @property
    def prerequisite(self) -> IntArray:
        """[n_families]: the prerequisite family of each family, -1 when it has none."""
        fams = np.arange(self.catalog.n_families)
        result: IntArray = np.where(self._prereq == fams, -1, self._prereq)
        return result

    def _check_arms(
        self, families: npt.ArrayLike, tiers: npt.ArrayLike
    ) -> tuple[IntArray, IntArray]:
        fam = np.atleast_1d(np.asarray(families, dtype=np.int64))
        tier = np.broadcast_to(np.asarray(tiers, dtype=np.int64), fam.shape)
        n_fam = self.catalog.n_families
        if fam.size and (fam.min() < 0 or fam.max() >= n_fam):
            raise SimulationError(
                f"family ids must be in [0, {n_fam}), got {fam.min()}..{fam.max()}"
            )
        if fam.size and (np.any(tier < 0) or np.any(tier >= self.catalog.n_tiers[fam])):
            bad = int(np.flatnonzero((tier < 0) | (tier >= self.catalog.n_tiers[fam]))[0])
            raise SimulationError(
                f"family {self.catalog.family_names[fam[bad]]!r} has tiers "
                f"0..{int(self.catalog.n_tiers[fam[bad]]) - 1}, got tier {int(tier[bad])}"
            )
        return fam, tier

    # Resume -----------------------------------------------------------------------------------
    _ARRAYS = (
        "family_kind",
        "_gap",
        "_base",
        "_init_skill",
        "_lr",
        "_prereq",
        "_threshold",
        "_skill",
        "_hack",
        "_last_practised",
    )

    def state_dict(self) -> dict[str, Any]:
        """Everything needed for an exact resume: arrays, step, config and RNG state."""
        return {
            "version": _STATE_VERSION,
            "catalog": self.catalog.fingerprint,
            "seed": self.seed,
            "step": self._step,
            "config": {
                k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self.config).items()
            },
            "arrays": {name.lstrip("_"): getattr(self, name).copy() for name in self._ARRAYS},
            "rng": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict` (possibly via ``scheduler._serialize``)."""
        if state.get("version") != _STATE_VERSION:
            raise SimulationError(
                f"simulated learner state: version must be {_STATE_VERSION}, "
                f"got {state.get('version')!r}"
            )
        if state.get("catalog") != self.catalog.fingerprint:
            raise SimulationError(
                "simulated learner state: catalog fingerprint differs from this learner's "
                "catalog; load it into a learner built on the same catalog"
            )
        where = "simulated learner state"
        missing = sorted({"seed", "step", "config", "arrays", "rng"} - set(state))
        saved = state.get("arrays", {})
        missing += [f"arrays.{n.lstrip('_')}" for n in self._ARRAYS if n.lstrip("_") not in saved]
        if missing:
            raise SimulationError(f"{where}: {missing[0]}: missing")
        known = {f.name for f in fields(SimulatedLearnerConfig)}
        raw: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in state["config"].items()
        }
        unknown = sorted(set(raw) - known)
        if unknown:
            raise SimulationError(f"{where}: config.{unknown[0]}: unknown field")
        config = SimulatedLearnerConfig(**raw)
        config.validate()
        # Check everything before assigning anything, so a bad state leaves this one intact.
        loaded: dict[str, np.ndarray] = {}
        for name in self._ARRAYS:
            value = np.asarray(state["arrays"][name.lstrip("_")])
            if value.shape != (self.catalog.n_families,):
                raise SimulationError(
                    f"{where}: arrays.{name.lstrip('_')}: shape must be "
                    f"({self.catalog.n_families},), got {value.shape}"
                )
            loaded[name] = value.astype(getattr(self, name).dtype, copy=True)
        rng = np.random.Generator(np.random.PCG64())
        try:
            rng.bit_generator.state = state["rng"]
        except (TypeError, ValueError, KeyError) as exc:
            raise SimulationError(f"{where}: rng: not a PCG64 state ({exc})") from None
        for name, value in loaded.items():
            setattr(self, name, value)
        self.config = config
        self.seed = int(state["seed"])
        self._step = int(state["step"])
        self._rng = rng
        self._derive()
