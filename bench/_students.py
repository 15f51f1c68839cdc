"""Simulated students for the quality grid: three learners of different structure.

A benchmark that tunes a curriculum on one learner builds mechanisms that fit that learner
and nothing else. So the grid trains students whose equations share nothing:

* ``SkillStudent`` wraps the project's ``SimulatedLearner``: one latent skill per family, a
  logistic pass rate in skill minus tier difficulty, and a gain that peaks where the pass
  rate is a half (``4 q (1 - q)``).
* ``LadderStudent`` is written from its own equations: a separate competence per tier, a
  tier that can only be learned once the tier under it is (readiness), gains that need a
  few successes to start, spill-over to the tier above, cross-family prerequisites and
  forgetting. Nothing in ``scheduler/`` knows it.
* ``GroupStudent`` (added 2026-12-05 for held-out regimes only, never tuned on): GRPO's
  group advantage as its learning signal (an episode teaches only where a group of 8
  rollouts would mix passes and fails), an asymmetric (Gompertz) pass curve, uneven tier
  gaps, a slow "click" before some families start learning, and interference between the
  families of a domain in place of forgetting.

Any of them can be graded by a ``NoisyVerifier`` (added 2026-12-06 for held-out regimes
only): a verifier wrong on a share of its grades either way, in training and in probes.

Each answers the same questions: run a batch (train, return outcomes), probe (held-out
binomial draws from ``n`` items, their own RNG so probing never changes training), the true
top-tier and all-tier scores, and which episodes are wasted. Waste counts episodes on
families of a trap kind (impossible, coin flip, mastered from the start, hackable), as the
issue's figures do: uniform sampling then wastes about the trap share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from domains import Catalog
from scheduler import Batch, Status
from scheduler.backends import BatchOutcomes, FamilyKind, SimulatedLearner, SimulatedLearnerConfig

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

TRAPS = (FamilyKind.IMPOSSIBLE, FamilyKind.NOISE, FamilyKind.MASTERED, FamilyKind.HACKABLE)


class Student(Protocol):
    catalog: Catalog
    kind: IntArray  # int64 [n_families], FamilyKind

    def run(self, batch: Batch) -> BatchOutcomes: ...
    def probe(self, families: IntArray, tiers: IntArray, n: int) -> FloatArray: ...
    def true_arm(self) -> FloatArray: ...  # float64 [n_arms], chance-normalised, no hack
    def oracle_arms(self, n: int, rng: np.random.Generator) -> IntArray: ...


def scored(student: Student) -> BoolArray:
    """The families a score averages over: those that can be learned (1.0 is reachable)."""
    return np.isin(student.kind, [FamilyKind.LEARNABLE, FamilyKind.FLAKY])


def top_score(student: Student) -> FloatArray:
    """float64 [n_families]: true chance-normalised success at the top tier."""
    cat = student.catalog
    result: FloatArray = student.true_arm()[cat.arm_start[1:] - 1]
    return result


def all_tier_score(student: Student) -> FloatArray:
    """float64 [n_families]: true chance-normalised success, mean over tiers."""
    cat = student.catalog
    total = np.bincount(cat.family_of_arm, weights=student.true_arm(), minlength=cat.n_families)
    result: FloatArray = total / cat.n_tiers
    return result


def wasted(student: Student, family: IntArray) -> BoolArray:
    result: BoolArray = np.isin(student.kind[family], TRAPS)
    return result


def _outcomes(
    catalog: Catalog, family: IntArray, p: FloatArray, rng: np.random.Generator
) -> BatchOutcomes:
    """Bernoulli successes at ``p``, rewards at the top/bottom of each family's range."""
    ok = rng.random(p.shape[0]) < p
    success = ok.astype(np.float64)
    low, high = catalog.reward_low[family], catalog.reward_high[family]
    return BatchOutcomes(
        reward=low + (high - low) * success,
        success=success,
        process=np.full(p.shape[0], np.nan),
        cost=catalog.cost_s[family].astype(np.float64),
        status=np.where(ok, int(Status.OK), int(Status.FAILED)).astype(np.int64),
    )


# --------------------------------------------------------------------------- skill student
class SkillStudent:
    """The project's ``SimulatedLearner`` (one latent skill per family), probed with ``n``
    items from a probe RNG of its own."""

    def __init__(self, catalog: Catalog, seed: int, **config: Any) -> None:
        fixed = _as_fields(config)
        # The shipped learner's rate suits thousands of steps; the grid's budgets are
        # hundreds, so the student learns faster per episode (the top tier is reachable).
        fixed.setdefault("learning_rate", 0.1)
        self.catalog = catalog
        self.learner = SimulatedLearner(catalog, seed=seed, config=SimulatedLearnerConfig(**fixed))
        self.kind: IntArray = self.learner.family_kind
        self._probe_rng = np.random.Generator(np.random.PCG64([seed, 7]))

    def run(self, batch: Batch) -> BatchOutcomes:
        return self.learner.run(batch)

    def probe(self, families: IntArray, tiers: IntArray, n: int) -> FloatArray:
        p = self.learner.true_success(families, tiers)
        hits: FloatArray = self._probe_rng.binomial(n, p) / n
        return hits

    def true_arm(self) -> FloatArray:
        sim, cat = self.learner, self.catalog
        fam = cat.family_of_arm
        q = expit(sim.config.slope_k * (sim._skill[fam] - sim._difficulty))
        fixed = np.isin(self.kind, [FamilyKind.IMPOSSIBLE, FamilyKind.NOISE])
        result: FloatArray = np.where(fixed[fam], 0.0, q)
        return result

    def oracle_arms(self, n: int, rng: np.random.Generator) -> IntArray:
        """Each learnable family that is not yet mastered at its top tier, equally often, at
        the tier whose true pass rate is nearest a half (where this student learns most)."""
        cat = self.catalog
        dist = np.abs(self.true_arm() - 0.5)
        order = np.lexsort((dist, cat.family_of_arm))
        first = order[np.searchsorted(cat.family_of_arm[order], np.arange(cat.n_families))]
        live = scored(self) & (top_score(self) < 0.97)
        return _draw_families(first, live, n, rng)


def _draw_families(
    arm_of_family: IntArray, live: BoolArray, n: int, rng: np.random.Generator
) -> IntArray:
    families = np.flatnonzero(live)
    if families.size == 0:
        families = np.arange(arm_of_family.shape[0])
    pick = families[rng.integers(0, families.size, size=n)]
    result: IntArray = arm_of_family[pick]
    return result


def _as_fields(config: dict[str, Any]) -> dict[str, Any]:
    """A regime's learner options as config fields (JSON lists become tuples)."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in config.items()}


class _TrapShares(Protocol):
    share_impossible: float
    share_noise: float
    share_mastered: float
    share_hackable: float


def _family_kinds(cfg: _TrapShares, n_families: int, rng: np.random.Generator) -> IntArray:
    """int64 [n_families] FamilyKind: each trap kind at its share (rounded), the rest
    learnable, in a random order."""
    shares = [
        (FamilyKind.IMPOSSIBLE, cfg.share_impossible),
        (FamilyKind.NOISE, cfg.share_noise),
        (FamilyKind.MASTERED, cfg.share_mastered),
        (FamilyKind.HACKABLE, cfg.share_hackable),
    ]
    counts = [round(s * n_families) for _, s in shares]
    labels = np.repeat(
        np.array([int(k) for k, _ in shares] + [int(FamilyKind.LEARNABLE)], dtype=np.int64),
        [*counts, max(n_families - sum(counts), 0)],
    )[:n_families]
    result: IntArray = rng.permutation(labels)
    return result


class _ArmStudent:
    """What the ladder and group students share: held-out probes drawn from their pass rate
    without the hack (a probe RNG of their own, so probing never changes training), and a
    hackable family's training-only hack, growing with each training episode."""

    catalog: Catalog
    kind: IntArray
    _rng: np.random.Generator
    _probe_rng: np.random.Generator
    _hack: FloatArray

    def _start(
        self, catalog: Catalog, cfg: _TrapShares, seed: int, streams: tuple[int, int]
    ) -> np.random.Generator:
        """Keep the catalog, make the training and probe RNGs (``streams`` of ``seed``) and
        the family kinds; returns the training RNG, which drew the kinds."""
        self.catalog = catalog
        rng = self._rng = np.random.Generator(np.random.PCG64([seed, streams[0]]))
        self._probe_rng = np.random.Generator(np.random.PCG64([seed, streams[1]]))
        self.kind = _family_kinds(cfg, catalog.n_families, rng)
        return rng

    def _q(self, arm: IntArray) -> FloatArray:
        """Chance-normalised held-out pass rate of these arms (no hack)."""
        raise NotImplementedError

    def _p(self, arm: IntArray, train: bool) -> FloatArray:
        """Raw pass rate: the hack added in training, the chance level, a coin flip's half."""
        fam = self.catalog.family_of_arm[arm]
        q = self._q(arm)
        if train:
            q = q + (1.0 - q) * self._hack[fam]
        chance = self.catalog.chance_success[fam]
        p = chance + (1.0 - chance) * q
        result: FloatArray = np.where(self.kind[fam] == FamilyKind.NOISE, 0.5, p)
        return result

    def true_arm(self) -> FloatArray:
        """float64 [n_arms]: the held-out rate, 0 for the impossible and the coin flips."""
        fam = self.catalog.family_of_arm
        fixed = np.isin(self.kind, [FamilyKind.IMPOSSIBLE, FamilyKind.NOISE])
        result: FloatArray = np.where(fixed[fam], 0.0, self._q(np.arange(self.catalog.n_arms)))
        return result

    def probe(self, families: IntArray, tiers: IntArray, n: int) -> FloatArray:
        arm = self.catalog.arm_start[families] + tiers
        hits: FloatArray = self._probe_rng.binomial(n, self._p(arm, train=False)) / n
        return hits

    def _grow_hack(self, family: IntArray, rate: float) -> None:
        """A training batch's episodes (``family`` of each) grow the hack of the hackable."""
        hackable = self.kind == FamilyKind.HACKABLE
        if hackable.any():
            n = np.bincount(family, minlength=self.catalog.n_families)
            self._hack = np.where(hackable, 1.0 - (1.0 - self._hack) * np.exp(-rate * n), 0.0)


# --------------------------------------------------------------------------- ladder student
@dataclass(frozen=True)
class LadderConfig:
    share_impossible: float = 0.05
    share_noise: float = 0.05
    share_mastered: float = 0.10
    share_hackable: float = 0.0
    rate: float = 0.18  # competence gained per episode at full readiness (mean over families)
    rate_spread: float = 3.0  # per-family rate is log-uniform in [rate / spread, rate * spread]
    bootstrap: float = 0.05  # gain at zero competence, relative to the peak (RL needs hits)
    spill: float = 0.2  # share of a tier's gain that also reaches the tier above
    start: tuple[float, float] = (-0.5, 1.5)  # initial level in tiers (tiers below: mastered)
    prerequisite_share: float = 0.2  # learnable families gated by another family's tier 1
    forgetting: float = 0.003  # per-step decay of learned competence once out of practice
    forget_after: int = 20  # steps without practice before forgetting starts
    hack_rate: float = 0.02  # per-episode growth of a hackable family's training-only hack


class LadderStudent(_ArmStudent):
    """Separate competence per tier, learned bottom-up (see the module docstring)."""

    def __init__(self, catalog: Catalog, seed: int, **config: Any) -> None:
        cfg = self.config = LadderConfig(**_as_fields(config))
        rng = self._start(catalog, cfg, seed, streams=(11, 13))
        n_fam = catalog.n_families
        fam, tier = catalog.family_of_arm, catalog.tier_of_arm
        level = rng.uniform(*cfg.start, size=n_fam)
        c = np.clip(level[fam] - tier, 0.0, 1.0)
        c = np.where(self.kind[fam] == FamilyKind.MASTERED, 1.0, c)
        c = np.where(np.isin(self.kind[fam], [FamilyKind.IMPOSSIBLE, FamilyKind.NOISE]), 0.0, c)
        self._c: FloatArray = c  # float64 [n_arms]: competence
        self._c0 = c.copy()
        spread = math.log(cfg.rate_spread)
        self._rate = cfg.rate * np.exp(rng.uniform(-spread, spread, n_fam))
        self._rate[~np.isin(self.kind, [FamilyKind.LEARNABLE, FamilyKind.MASTERED])] = 0.0
        learnable = np.flatnonzero(self.kind == FamilyKind.LEARNABLE)
        gated = learnable[rng.random(learnable.size) < cfg.prerequisite_share]
        self._prereq = np.full(n_fam, -1, dtype=np.int64)
        others = np.setdiff1d(learnable, gated)
        if others.size:
            self._prereq[gated] = others[rng.integers(0, others.size, size=gated.size)]
        self._hack = np.zeros(n_fam)
        self._last = np.zeros(n_fam, dtype=np.int64)
        self._step = 0
        # per arm: index of the tier below in the same family (self for tier 0)
        self._below = np.where(tier > 0, np.arange(catalog.n_arms) - 1, np.arange(catalog.n_arms))
        self._above = np.where(tier < catalog.n_tiers[fam] - 1, np.arange(catalog.n_arms) + 1, -1)

    @property
    def prerequisite(self) -> IntArray:
        """int64 [n_families]: the family whose tier 1 gates each family's learning (-1:
        none); a reading for bench/diagnose.py, not for a curriculum."""
        return self._prereq

    def _q(self, arm: IntArray) -> FloatArray:
        result: FloatArray = self._c[arm]
        return result

    def run(self, batch: Batch) -> BatchOutcomes:
        cat, cfg = self.catalog, self.config
        arm = np.asarray(batch.arm, dtype=np.int64)
        fam = cat.family_of_arm[arm]
        out = _outcomes(cat, fam, self._p(arm, train=True), self._rng)
        # learning, per arm touched: saturating in the number of episodes this step
        k = np.bincount(arm, minlength=cat.n_arms).astype(np.float64)
        touched = np.flatnonzero(k)
        c = self._c[touched]
        ready = np.where(cat.tier_of_arm[touched] > 0, self._c[self._below[touched]] ** 2, 1.0)
        f = cat.family_of_arm[touched]
        gate = np.ones(touched.size)
        has = self._prereq[f] >= 0
        if has.any():
            pre = self._prereq[f[has]]
            gate[has] = self._c[np.minimum(cat.arm_start[pre] + 1, cat.arm_start[pre + 1] - 1)]
        per = self._rate[f] * ready * gate * (cfg.bootstrap + c) / (1.0 + cfg.bootstrap)
        gain = (1.0 - c) * -np.expm1(-per * k[touched])
        self._c[touched] = c + gain
        above = self._above[touched]
        up = above >= 0
        self._c[above[up]] = np.minimum(1.0, self._c[above[up]] + cfg.spill * gain[up])
        self._step += 1
        self._last[fam] = self._step
        self._grow_hack(fam, cfg.hack_rate)
        if cfg.forgetting > 0:
            stale = (self._step - self._last) > cfg.forget_after
            excess = np.maximum(self._c - self._c0, 0.0) * stale[cat.family_of_arm]
            self._c -= cfg.forgetting * excess
        return out

    def oracle_arms(self, n: int, rng: np.random.Generator) -> IntArray:
        """Each learnable family not yet at its top, equally often, at its lowest tier under
        0.95 (the only place this student can learn)."""
        cat = self.catalog
        open_ = self._c < 0.95
        key = np.where(open_, cat.tier_of_arm, 10**6)
        order = np.lexsort((key, cat.family_of_arm))
        first = order[np.searchsorted(cat.family_of_arm[order], np.arange(cat.n_families))]
        live = scored(self) & (top_score(self) < 0.95)
        return _draw_families(first, live, n, rng)


# --------------------------------------------------------------------------- group student
@dataclass(frozen=True)
class GroupConfig:
    share_impossible: float = 0.05
    share_noise: float = 0.05
    share_mastered: float = 0.10
    share_hackable: float = 0.0
    rate: float = 0.05  # skill gained per episode at a full group signal (mean over families)
    rate_spread: float = 2.0  # per-family rate is log-uniform in [rate / spread, rate * spread]
    group: int = 8  # rollouts of a GRPO group: all-pass or all-fail groups teach nothing
    sharpness: float = 2.0  # the Gompertz pass curve's steepness, per unit of skill
    gap: tuple[float, float] = (0.4, 1.6)  # each tier's difficulty step, uniform
    start: tuple[float, float] = (-0.5, 1.0)  # initial skill
    share_slow_click: float = 0.4  # learnable families that learn slowly until they click
    click: float = 0.03  # how far a slow family's click grows per teaching episode (to 1)
    interference: float = 0.03  # share of a family's gain the rest of its domain loses
    hack_rate: float = 0.01  # per-episode growth of a hackable family's training-only hack


class GroupStudent(_ArmStudent):
    """One skill per family, a Gompertz pass curve over uneven tiers, and GRPO's group
    signal (see the module docstring)."""

    def __init__(self, catalog: Catalog, seed: int, **config: Any) -> None:
        cfg = self.config = GroupConfig(**_as_fields(config))
        rng = self._start(catalog, cfg, seed, streams=(17, 19))
        n_fam = catalog.n_families
        fam, tier = catalog.family_of_arm, catalog.tier_of_arm
        step = rng.uniform(*cfg.gap, size=catalog.n_arms)
        step[tier == 0] = 0.0
        # float64 [n_arms]: each tier's difficulty, the family's steps summed up to it
        total = np.cumsum(step)
        self._difficulty = total - total[catalog.arm_start[fam]]
        top = self._difficulty[catalog.arm_start[1:] - 1]
        self._skill = rng.uniform(*cfg.start, size=n_fam)
        mastered = self.kind == FamilyKind.MASTERED
        self._skill[mastered] = top[mastered] + 3.0
        self._skill0 = self._skill.copy()
        spread = math.log(cfg.rate_spread)
        self._rate = cfg.rate * np.exp(rng.uniform(-spread, spread, n_fam))
        self._rate[self.kind != FamilyKind.LEARNABLE] = 0.0
        slow = rng.random(n_fam) < cfg.share_slow_click
        self._click = np.where(slow, 0.1, 1.0)
        self._hack = np.zeros(n_fam)
        size = np.bincount(catalog.domain_of_family, minlength=catalog.n_domains)
        self._others_in_domain = np.maximum(size[catalog.domain_of_family] - 1, 1)

    def _q(self, arm: IntArray) -> FloatArray:
        """Chance-normalised held-out pass rate of these arms (no hack)."""
        fam = self.catalog.family_of_arm[arm]
        gap = self._skill[fam] - self._difficulty[arm]
        q = np.exp(-np.exp(-self.config.sharpness * gap))
        result: FloatArray = np.where(self.kind[fam] == FamilyKind.IMPOSSIBLE, 0.0, q)
        return result

    def run(self, batch: Batch) -> BatchOutcomes:
        cat, cfg = self.catalog, self.config
        arm = np.asarray(batch.arm, dtype=np.int64)
        fam = cat.family_of_arm[arm]
        out = _outcomes(cat, fam, self._p(arm, train=True), self._rng)
        q = self._q(arm)
        mixed = 1.0 - q**cfg.group - (1.0 - q) ** cfg.group  # the group's signal
        signal = np.bincount(fam, weights=mixed, minlength=cat.n_families)
        gain = self._rate * self._click * signal
        self._click = np.minimum(1.0, self._click + cfg.click * signal * (self._rate > 0))
        lost = np.bincount(cat.domain_of_family, weights=gain, minlength=cat.n_domains)
        others = (lost[cat.domain_of_family] - gain) * cfg.interference
        self._skill += gain
        self._skill = np.maximum(self._skill - others / self._others_in_domain, self._skill0)
        self._grow_hack(fam, cfg.hack_rate)
        return out

    def oracle_arms(self, n: int, rng: np.random.Generator) -> IntArray:
        """Each learnable family not yet at its top, equally often, at the tier whose group
        signal is largest (where this student learns most)."""
        cat, g = self.catalog, self.config.group
        q = self.true_arm()
        signal = 1.0 - q**g - (1.0 - q) ** g
        order = np.lexsort((-signal, cat.family_of_arm))
        first = order[np.searchsorted(cat.family_of_arm[order], np.arange(cat.n_families))]
        live = scored(self) & (top_score(self) < 0.97)
        return _draw_families(first, live, n, rng)


# --------------------------------------------------------------------------- a noisy verifier
class NoisyVerifier:
    """A student graded by a verifier that is wrong on a share ``noise`` of what it grades,
    either way (an LLM judge, a flaky test harness): a pass read as a fail and a fail as a
    pass, in training and in the held-out probes alike, so an impossible family passes
    ``noise`` of its episodes and a mastered one fails as often, while the catalog declares
    no chance level. The student learns as before; only what the curriculum sees is noisy,
    and the scores are the true pass rates. Episodes that did not run (an environment
    error, a timeout) are not graded and stay as they are. Its own RNG (stream 23)."""

    def __init__(self, student: Student, noise: float, seed: int) -> None:
        self.student = student
        self.noise = noise
        self._rng = np.random.Generator(np.random.PCG64([seed, 23]))

    @property
    def catalog(self) -> Catalog:
        return self.student.catalog

    @property
    def kind(self) -> IntArray:
        return self.student.kind

    def run(self, batch: Batch) -> BatchOutcomes:
        out = self.student.run(batch)
        graded = np.isin(out.status, [int(Status.OK), int(Status.FAILED)])
        flip = graded & (self._rng.random(out.status.shape[0]) < self.noise)
        ok = np.where(flip, out.success < 0.5, out.success > 0.5)
        family = self.catalog.family_of_arm[np.asarray(batch.arm, dtype=np.int64)]
        low, high = self.catalog.reward_low[family], self.catalog.reward_high[family]
        success = ok.astype(np.float64)
        status = np.where(graded, np.where(ok, int(Status.OK), int(Status.FAILED)), out.status)
        return BatchOutcomes(
            reward=np.where(flip, low + (high - low) * success, out.reward),
            success=success,
            process=out.process,
            cost=out.cost,
            status=status.astype(np.int64),
        )

    def probe(self, families: IntArray, tiers: IntArray, n: int) -> FloatArray:
        passed = np.rint(self.student.probe(families, tiers, n) * n).astype(np.int64)
        kept = self._rng.binomial(passed, 1.0 - self.noise)
        gained = self._rng.binomial(n - passed, self.noise)
        result: FloatArray = (kept + gained) / n
        return result

    def true_arm(self) -> FloatArray:
        return self.student.true_arm()

    def oracle_arms(self, n: int, rng: np.random.Generator) -> IntArray:
        return self.student.oracle_arms(n, rng)


STUDENTS = {"skill": SkillStudent, "ladder": LadderStudent, "group": GroupStudent}


def make_student(
    name: str, catalog: Catalog, seed: int, verifier_noise: float = 0.0, **config: Any
) -> Student:
    """A student of kind ``name``; graded by a ``NoisyVerifier`` where ``verifier_noise``."""
    student: Student = STUDENTS[name](catalog, seed, **config)
    if verifier_noise > 0:
        student = NoisyVerifier(student, verifier_noise, seed)
    return student
