"""One skill per family, on the tier axis: the evidence model behind the default curriculum.

A family's tiers share one skill, so every outcome and every probe, at whatever tier, says
something about all of them. The model keeps a Gaussian belief ``N(mu, var)`` per family
of its skill ``theta`` in tier units, with an explicit difficulty by tier:

    P(pass at tier t) = chance + (1 - chance) * sigmoid(slope * (theta - t))

so ``theta = t`` means a pass rate of one half at tier ``t`` (chance-normalised). Each
report and each probe is a batch of binomial counts ``(k of n at tier t)``; the belief is
updated by a few Newton steps on the log-posterior (a Laplace approximation, as Glicko and
online IRT do), vectorised over the families touched; a probe of a family whose tasks
pass by chance, by the posterior's moments on a grid instead (``_grid_posterior``: the
Newton steps crawl along the plateau that guessing makes). Skill moves while the model trains,
so every training episode adds ``drift`` to the variance: old evidence fades by itself and a
family that learns is tracked, without windows or counts kept per tier. A family that
rose by ``min_gain`` or more over its last ``patience`` episodes also has its mean moved
by that rise per episode as it trains (a local trend, as a Kalman filter's predict step):
where each outcome says little (answers that pass by chance half the time) a belief that
only fades lags a learning family by a tier, and its tasks come too easy.

From the belief follow the three decisions the curriculum makes for a ladder family:

* the tier: a tempered Thompson draw of ``theta`` per task (the belief's spread halved), and
  the tier whose predicted pass rate is nearest ``target`` for that draw (uncertain families
  explore nearby tiers; a family that passes a top-tier probe is placed at once);
* mastered: the top tier's pass rate clears ``mastered_at`` with confidence;
* stalled: under tier 1, ``patience`` training episodes without the skill rising
  ``min_gain`` (or a quarter of what the typical family rises in as many episodes, on a
  slow learner), so an impossible family and a coin flip get less until they move; a
  family past tier 1 that pauses is on a plateau before a harder tier and keeps its share;
* hacked: held-out probes fall short of the training passes at the same tier since the
  family's last probe, further than the other families' shortfall (a drift shared by every
  probe is not a hack). Only trained tiers count: a tier left behind may lag, and a family
  left untrained forgets; and a family forgetting where it trains fails in training too.

Training and probe evidence are kept as two beliefs (``train_*``, ``probe_*``) fused into
one, so fusing needs no second pass.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from numbers import Real
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from domains import Catalog

from ._grid_posterior import match_moments
from ._laplace import REACH, clip, laplace_update
from ._shortfall import ShortfallTest
from ._slope_test import SlopeTest
from ._state_checks import family_floats
from ._stats import median_of
from ._top_tier import TopTierCounts
from ._verifier_floor import VerifierFloor
from ._workspace import Workspace

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class SkillConfig:
    slope: float = 3.0  # logits of pass rate per tier of skill
    target: float = 0.4  # pass rate (chance-normalised) of the tier a task is drawn at
    prior_var: float = 4.0  # belief before any evidence: N(0, prior_var), in tiers^2
    drift: float = 0.02  # variance added per training episode (skill moves as it trains)
    mastered_at: float = 0.9  # top-tier pass rate that counts as mastered ...
    confidence: float = 0.5  # ... at this many standard deviations of the belief
    patience: int = 128  # training episodes of no skill gain before a family is stalled
    min_gain: float = 0.25  # rise in skill (tiers) that counts as a new best
    reach_floor: float = 0.05  # tier 0 passing under this (confidently): out of reach
    contrast: float = 0.2  # share of an undecided family's draws at the tier beside its own
    flat_z: float = 4.0  # the slope's score test this many standard errors flat: flat
    hack_z: float = 3.0  # training above probes by this many sds beyond the median gap
    # share caps of flagged families, in uniform shares (a trickle keeps evidence coming)
    mastered_weight: float = 0.05
    stalled_weight: float = 0.1
    hacked_weight: float = 0.01
    # and of any family: at most this many uniform shares while others can take the rest
    # (a few unflagged families must not absorb a batch their learning cannot use, nor
    # steer a gradient step: the torch learner's SGD on a family's quarter of a batch
    # oscillated and never mastered it)
    max_weight: float = 8.0

    @property
    def trial(self) -> float:
        """Training episodes that try a family: enough to judge how fast it learns
        (``SkillModel.stalled``), to write it off (``on_trial``), or to have built what a
        mastered family's practice keeps (the scheduler's mastered caps)."""
        return max(self.patience / 4, 1.0)

    def __post_init__(self) -> None:
        for field in fields(self):  # every setting is a number: name the one that is not
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, Real):
                raise ValueError(f"skill.{field.name}: must be a number, got {value!r}")
        positive = {"slope": self.slope, "prior_var": self.prior_var, "max_weight": self.max_weight}
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"skill.{name}: must be > 0, got {value!r}")
        for name, value in {"target": self.target, "mastered_at": self.mastered_at}.items():
            if not 0.0 < value < 1.0:
                raise ValueError(f"skill.{name}: must be in (0, 1), got {value!r}")
        for name, value in {
            "contrast": self.contrast,
            "reach_floor": self.reach_floor,
        }.items():
            if not 0.0 <= value < 1.0:
                raise ValueError(f"skill.{name}: must be in [0, 1), got {value!r}")
        for name, value in {
            "drift": self.drift,
            "confidence": self.confidence,
            "min_gain": self.min_gain,
            "hack_z": self.hack_z,
            "flat_z": self.flat_z,
            "patience": self.patience,
            "mastered_weight": self.mastered_weight,
            "stalled_weight": self.stalled_weight,
            "hacked_weight": self.hacked_weight,
        }.items():
            if not value >= 0:
                raise ValueError(f"skill.{name}: must be >= 0, got {value!r}")


_RISE_Z = 3.0  # standard errors of a rise in the top-tier probes, or of their fall under the
# training below the top, that exempt a family from flat()
_SLOPE_INFO_MIN = 0.5  # information about the slope before the flatness test speaks
_COIN_INFO = 0.3  # ... for a family that passed above chance from its start (coin_like)
_SUSPECT = 0.5  # a slope this share of flat_z flat keeps its contrast draws (slope_undecided)
_STALL_SHARE = 0.25  # a family gaining under this share of the typical rise is stalled
# The tier draw samples the skill from the belief with its spread times this: the full
# spread scattered an uncertain family's draws over tiers far from where it learns (most
# where each outcome says little, as with answers that pass by chance), and none left
# families stranded at a tier they could not leave (docs/policies.md, the grid's ablation)
_DRAW_SPREAD = 0.5
# Only a family whose skill is under this tier can be stalled: one that has learned past its
# easiest tiers and pauses is learning the next (the torch learner's parity families pause
# for hundreds of steps before the top tier; held to a trickle there, they took twice as
# long to learn it). Under it, a family that does not rise has learned next to nothing.
_STALL_BELOW = 1.0
# A family whose tasks pass by chance (or of one tier) is judged for a stall over the
# episodes in which the typical family rises this many tiers (stalled_early()): half a tier
# judged learners too soon (dev skill_chance p10 +0.04 against +0.30), two waited long
# (waste -2.5 against -5.5 points)
_STALL_SPAN = 1.0
# readings of a probe call at tiers the belief says surely fail, at least this many, before
# their median reading above the belief is taken for a shift the whole call shares (late in
# a run few families surely fail their top tier: 16 left a drifting evaluator's lift
# unread there, and it read as skill)
_SHIFT_READINGS = 8


def distinct(values: IntArray, bound: int) -> tuple[IntArray, IntArray]:
    """``np.unique(values, return_inverse=True)`` for ids in [0, bound): a ``bincount``
    where the ids cover much of the range (a probe round of every family), a sort where
    they are few (a batch)."""
    if values.shape[0] * 8 < bound:
        found, inverse = np.unique(values, return_inverse=True)
        return found, inverse.reshape(-1)
    present = np.flatnonzero(np.bincount(values, minlength=bound))
    index = np.zeros(bound, dtype=np.int64)
    index[present] = np.arange(present.shape[0])
    return present, index[values]


class SkillModel:
    """Per-family skill beliefs from training outcomes and probes (arrays [n_families])."""

    def __init__(self, catalog: Catalog, config: SkillConfig | None = None) -> None:
        self.config = config or SkillConfig()
        self._catalog = catalog
        n = catalog.n_families
        cfg = self.config
        # float64 [n_families]: the two beliefs (mean, variance), training and probe evidence
        self.train_mu = np.zeros(n)
        self.train_var = np.full(n, cfg.prior_var)
        self.probe_mu = np.zeros(n)
        self.probe_var = np.full(n, cfg.prior_var)
        # float64 [n_families]: the fused mean, averaged over the last ``patience`` training
        # episodes or so (an EMA per episode): the skill ``patience`` episodes ago
        self.slow_mu = np.zeros(n)
        self.episodes = np.zeros(n)  # float64 [n_families]: training episodes in all
        # float64 [n_families]: training episodes while the top tier was not yet mastered:
        # what it took to learn the family (none for one that came mastered); a saturated
        # batch's spare share goes to mastered families in proportion to it
        self.built = np.zeros(n)
        # the hacking test: probes against the training at the same tiers since each
        # family's last probe round (policies/_shortfall.py)
        self.shortfall = ShortfallTest(catalog)
        # float64 [5, n_families]: the score test of the belief's slope, from training
        # outcomes (each against the belief of its time), fading per episode: the scores of
        # skill and slope, and their information (skill-skill, slope-slope, cross). The
        # flatness test that the one-slope belief cannot make itself.
        self.slope_test = SlopeTest(n)
        # the grader's error rate, read from probes at tiers that surely fail
        self.verifier = VerifierFloor()
        self._floor = True  # the ablation turns it off
        self._top = (catalog.n_tiers - 1).astype(np.float64)
        self._belief: tuple[FloatArray, FloatArray] | None = None  # belief(), until an update
        self.version = 0  # bumped by every update: readers of derived flags skip a re-read
        self._reach_at: tuple[int, BoolArray] | None = None  # out_of_reach(), by version
        # _stall_tests(), by version and the three switches the ablation may set after a read
        self._stall_at: tuple[tuple[Any, ...], tuple[BoolArray, BoolArray]] | None = None
        self._chance = catalog.chance_success.astype(np.float64)
        # the share of a batch's rise in skill its outcomes are scored at, on average, by the
        # slope test (observe_training); 0 scores them at the belief before the batch, as
        # bench/quality.py's ablation does
        self._rise_share = 0.5
        # whether training moves the belief by the family's recent rise (observe_training);
        # bench/quality.py's ablation turns it off
        self._trend = True
        # the tier draw's spread, in belief sds (draw_tiers); the ablation sets it to 1
        self._draw_spread = _DRAW_SPREAD
        # the tier a family must be under to be stalled (stalled()); the ablation sets inf
        self._stall_below = _STALL_BELOW
        # tiers the typical family rises in the episodes a guessable family's early stall
        # is judged over (stalled_early()); the ablation sets 0 (patience's test only)
        self._stall_span = _STALL_SPAN
        # whether a family of one tier may be stalled early too (stalled_early()); the
        # ablation turns it off
        self._early_single = True
        # whether a family of one tier is stalled early below patience's gain, not only
        # below no rise at all (stalled_early()); the ablation turns it off
        self._single_gain = True
        # the share of flat_z at which a slope reads suspect and its contrast draws go on
        # (slope_undecided); the ablation sets inf
        self._suspect = _SUSPECT
        # whether an untried out-of-reach family takes a spare share (on_trial); the
        # ablation turns it off
        self._reach_trial = True
        # whether a probe call's shared shift is taken off its readings (observe_probes);
        # the ablation turns it off
        self._shift = True
        self.last_shift = 0.0  # the shift taken off the latest probe call's readings
        # readings of a probe call at least this many before its shift is read
        # (_shared_shift); the ablation sets 16
        self._shift_readings = _SHIFT_READINGS
        # whether a reading the shift was taken off that is left with under half an item
        # passed reads none (_unshifted); the ablation turns it off
        self._shift_residue = True
        # whether a probe's readings of a family whose tasks pass by chance update its
        # belief by the posterior's moments (_by_moments); the ablation turns it off
        self._match = True
        # whether outcomes read through a grader's floor update a belief by the posterior's
        # moments too, training and probes (_by_moments); the ablation turns it off
        self._floor_moments = True
        # the top tier's own recent outcomes: mastered where they pass, whatever the belief
        # (policies/_top_tier.py); the ablation turns it off
        self.top_tier = TopTierCounts(catalog, cfg.mastered_at)
        self._direct_top = True
        # whether a rise in a family's top-tier probes exempts it from flat(); the ablation
        # turns it off
        self._probe_rise = True
        # whether top-tier probes that fail where the training under the top passes exempt
        # a family from flat() and take its contrast draws to the top tier; the ablation
        # turns it off
        self._under_top = True
        # whether a coin-like family's slope test speaks at _COIN_INFO (_reads_flat); the
        # ablation turns it off
        self._coin_info = True
        # int64: the families of one tier, whose slope no contrast can test: one that is
        # coin-like and stalled reads flat (flat()); the ablation turns it off
        self._single = np.flatnonzero(catalog.n_tiers == 1)
        self._stalled_single = True
        # whether the slope test counts its evidence in a right grader's outcomes under
        # the grader's floor, and in unguessable outcomes where tasks pass by chance
        # (_information); the ablation turns each off
        self._floor_info = True
        self._chance_info = True
        # whether the flatness test's threshold is counted in a right grader's outcomes
        # too (_flat_bar); the ablation turns it off
        self._floor_z = True
        # float64 [n_families]: the share of an unguessable outcome's information about
        # the slope that one of each family carries at most, (1 - chance)^2
        self._unguessed = (1.0 - self._chance) ** 2
        self._work = Workspace()  # a probe round's work arrays (laplace_update)

    # ------------------------------------------------------------------ beliefs
    def belief(self) -> tuple[FloatArray, FloatArray]:
        """The fused belief (mean, variance) of every family: the product of the two
        beliefs over the prior they share (N(0, prior_var) plus the drift both received).
        Kept until the next update: a refresh reads it for every flag."""
        if self._belief is None:
            self._belief = self._fuse()
        return self._belief

    def _changed(self) -> None:
        self._belief = None
        self.version += 1

    def _fuse(self) -> tuple[FloatArray, FloatArray]:
        cfg = self.config
        prec0 = 1.0 / (cfg.prior_var + cfg.drift * self.episodes)
        pt, pp = 1.0 / self.train_var, 1.0 / self.probe_var
        prec = np.maximum(pt + pp - prec0, np.maximum(pt, pp))
        mu = (pt * self.train_mu + pp * self.probe_mu) / prec
        return mu, 1.0 / prec

    def belief_at(self, families: IntArray) -> tuple[FloatArray, FloatArray]:
        """``belief()`` of these families only (the hot path reads a batch's families)."""
        cfg = self.config
        prec0 = 1.0 / (cfg.prior_var + cfg.drift * self.episodes[families])
        pt, pp = 1.0 / self.train_var[families], 1.0 / self.probe_var[families]
        prec = np.maximum(pt + pp - prec0, np.maximum(pt, pp))
        mu = (pt * self.train_mu[families] + pp * self.probe_mu[families]) / prec
        return mu, 1.0 / prec

    def pass_rate(self, families: IntArray, tiers: IntArray) -> FloatArray:
        """Predicted chance-normalised pass rate at these (family, tier) pairs."""
        mu, _ = self.belief_at(families)
        result: FloatArray = expit(self.config.slope * (mu - tiers))
        return result

    def pass_rate_band(
        self, families: IntArray, tiers: IntArray
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Predicted chance-normalised pass rate at these pairs, and at one standard
        deviation of the belief either side (low, mean, high)."""
        mu, var = self.belief_at(families)
        sd = np.sqrt(var)
        s, m = self.config.slope, mu - tiers
        return expit(s * (m - sd)), expit(s * m), expit(s * (m + sd))

    def tier(self) -> IntArray:
        """int64 [n_families]: the tier whose predicted pass rate is nearest the target."""
        mu, _ = self.belief()
        return self._tier_for(mu, np.arange(self._catalog.n_families))

    def tier_of(self, families: IntArray) -> IntArray:
        """``tier()`` of these families only."""
        mu, _ = self.belief_at(families)
        return self._tier_for(mu, families)

    def _tier_for(self, theta: FloatArray, families: IntArray) -> IntArray:
        cfg = self.config
        offset = np.log(cfg.target / (1.0 - cfg.target)) / cfg.slope
        result: IntArray = clip(np.rint(theta - offset), 0, self._top[families]).astype(np.int64)
        return result

    def draw_tiers(self, families: IntArray, rng: np.random.Generator) -> IntArray:
        """A tier for each task: sample the skill from the belief with its spread halved
        (a tempered Thompson draw), take the tier nearest target; a ``contrast`` share of
        the tasks of a family whose slope is still undecided go one tier below it (above
        at tier 0), so the flatness test gets evidence. Those of a family that reads flat
        but whose top-tier probes fail where its easier tiers pass (``under_top``) go to
        its top tier instead: a learner fails there in training too, and a hack passes."""
        mu, var = self.belief_at(families)
        spread = self._draw_spread * np.sqrt(var)
        theta = mu + spread * rng.standard_normal(families.shape[0])
        tier = self._tier_for(theta, families)
        if self.config.contrast > 0:
            z, info = self._slope_z(families)
            undecided = self._undecided(z, info, families)
            side = undecided & (rng.random(families.shape[0]) < self.config.contrast)
            top = self._top[families].astype(np.int64)
            beside = np.where(tier > 0, tier - 1, np.minimum(tier + 1, top))
            beside = np.where(self._to_top(z, info, families), top, beside)
            tier = np.where(side, beside, tier)
        return tier

    def contrast_to_top(self) -> BoolArray:
        """bool [n_families]: the families whose contrast draws ``draw_tiers`` sends to
        their top tier, not beside the tier drawn (``scheduler/_demand.py`` mirrors it)."""
        z, info = self._slope_z()
        return self._to_top(z, info, None)

    def _to_top(self, z: FloatArray, info: FloatArray, families: IntArray | None) -> BoolArray:
        """bool: of ``families`` (default all), whose slope test (``z``, ``info``) reads
        flat but whose top-tier probes fail where its easier tiers pass (``under_top``)."""
        flat = self._reads_flat(z, info, families)
        odd: BoolArray = np.zeros_like(flat)
        if self._under_top and flat.any():  # read only where the slope reads flat
            pick = np.flatnonzero(flat) if families is None else families[flat]
            odd[flat] = self.top_tier.under_top(_RISE_Z, pick)
        return odd

    @property
    def draw_spread(self) -> float:
        """What ``draw_tiers`` multiplies the belief's spread by (``scheduler/_demand.py``
        mirrors the draw with it)."""
        return self._draw_spread

    def flat(self) -> BoolArray:
        """bool [n_families]: the pass rate does not fall with the tier as the belief's
        slope says it should: the score test of the slope (from every training outcome,
        against the belief of its time) reads ``flat_z`` standard errors flatter. A coin
        flip, whatever its tier; difficulty makes no difference, so nothing is taught.
        Unless its top-tier probes have risen since its first ones (``TopTierCounts.risen``):
        a network that has partly learned a nested task's top rule passes every tier alike,
        and it is learning. Nor when its top-tier probes fail where its training under the
        top passes (``TopTierCounts.under_top``): its pass rate falls with the tier, as a
        ladder's does whose tiers 0 and 1, where it trains, pass alike. A family of one
        tier has no slope to test: one that passed above chance from its start and still
        does (``TopTierCounts.coin_like``) reads flat once it is stalled, so a coin flip
        there no longer takes a stalled family's spare share."""
        z, info = self._slope_z()
        result = self._reads_flat(z, info)
        if self._stalled_single and self._single.size:
            single = self._single[self.stalled()[self._single]]
            if single.size:  # the coin test on the stalled families of one tier only
                result[single] |= self.top_tier.coin_like(_RISE_Z, single)
        if self._probe_rise:
            result &= ~self.top_tier.risen(_RISE_Z)
        if self._under_top and result.any():  # read only where the slope reads flat
            flat = np.flatnonzero(result)
            result[flat] = ~self.top_tier.under_top(_RISE_Z, flat)
        return result

    def _reads_flat(
        self, z: FloatArray, info: FloatArray, families: IntArray | None = None
    ) -> BoolArray:
        """bool: the slope's score test (``_slope_z``'s z and information, of ``families``,
        default all) reads flat. A family that is coin-like (``TopTierCounts.coin_like``)
        is read at ``_COIN_INFO`` of information, the rest at ``_SLOPE_INFO_MIN`` (both
        times ``_information``): a coin flip drawn at its top tier gets slope evidence only
        from its contrast draws, and with that evidence fading its information settles
        barely above the usual bar."""
        flatter = z < -self._flat_bar()
        bar = self._information(families)
        result: BoolArray = (info >= bar * _SLOPE_INFO_MIN) & flatter
        if self._coin_info:
            early = flatter & (info >= bar * _COIN_INFO) & ~result
            if early.any():  # the coin test on these families only
                pick = np.flatnonzero(early)
                fam = pick if families is None else families[pick]
                result[pick] = self.top_tier.coin_like(_RISE_Z, fam)
        return result

    def idle(self) -> BoolArray:
        """bool [n_families]: out of reach, flat or stalled: nothing to teach it now."""
        result: BoolArray = self.out_of_reach() | self.flat() | self.stalled()
        return result

    def slope_undecided(self, families: IntArray | None = None) -> BoolArray:
        """bool [n_families] (or of ``families``): the flatness test has too little
        evidence yet, or its slope reads half of ``flat_z`` flat but not yet all of it.
        Such a family sends ``contrast`` of its draws beside its tier. Only the tier
        beside tells a coin flip from a learner: at the tier a draw targets both pass
        about as the belief predicts, so once the first evidence was in, a coin flip's
        test crept toward ``flat_z`` for a hundred steps while it took a full share."""
        z, info = self._slope_z(families)
        return self._undecided(z, info, families)

    def _undecided(
        self, z: FloatArray, info: FloatArray, families: IntArray | None = None
    ) -> BoolArray:
        suspect = z < -self._suspect * self.config.flat_z
        result: BoolArray = (info < self._information(families) * _SLOPE_INFO_MIN) | suspect
        return result

    def _information(self, families: IntArray | None = None) -> FloatArray | float:
        """The share of a right grader's unguessable outcome's information about the slope
        that an outcome of each of ``families`` (default all) carries at most:
        ``_grader_share()`` times ``(1 - chance)^2`` where tasks pass by chance. The slope
        test's bars are multiplied by it, so they are counted in a right grader's
        unguessable outcomes: less of an outcome that tells less is asked for. Without
        it, a guessable family's slope was left undecided, its contrast draws going on
        where guesses tell least (dev ``skill_chance``: p10 +0.36 with it)."""
        share = self._grader_share()
        if not self._chance_info:
            return share
        unguessed = self._unguessed if families is None else self._unguessed[families]
        result: FloatArray = share * unguessed
        return result

    def _flat_bar(self) -> float:
        """The z under which the slope reads flat: ``flat_z`` times the grader's share.
        Through a grader wrong ``e`` of the time a coin flip's z grows with the test's
        information about ``(1 - 2e)^2`` times as fast as under a right grader (dev
        ``ladder_judge`` seed 0, a tenth of the grades wrong: median z -4.0 at 0.36 units
        on step 150, against -5.9 at 0.36 in ``ext``), so at the information its fading
        window holds, a coin flip sat at the bar and half escaped, to take the spare share
        late in the run (4 of 15 took 643 of the last quarter's 9,600 episodes)."""
        share = self._grader_share() if self._floor_z else 1.0
        return self.config.flat_z * share

    def _grader_share(self) -> float:
        """``(1 - 2e)^2`` through a grader wrong ``e`` of the time
        (``VerifierFloor.information``), 1 with the floor's reading switched off. The slope
        test's window is divided by it, so an outcome that tells less fades more slowly
        (without it, 6 of the 15 coin flips of dev ``ladder_judge`` seed 0, a tenth of the
        grades wrong, read flat at the end; 11 with the bars lowered). The chance share
        does not lengthen the window: with it, a plateau's flat evidence outlived the
        plateau, and the torch learner's parity families (chance 0.5) were held after
        they began to learn (no probe: 1,115 +- 286 steps to 0.9 against 762 +- 83,
        over the fixed mix's 1,040), while the dev chance regimes gained nothing from
        it (final -0.0016)."""
        return self.verifier.information if self._floor_info else 1.0

    def _slope_z(self, families: IntArray | None = None) -> tuple[FloatArray, FloatArray]:
        """The slope test's z and information (of ``families``, default all)."""
        return self.slope_test.z_info(families)

    def mastered(self) -> BoolArray:
        """bool [n_families]: the top tier passes at ``mastered_at`` with confidence."""
        mu, var = self.belief()
        return self._mastered(mu, var)

    def _mastered(
        self, mu: FloatArray, var: FloatArray, families: IntArray | None = None
    ) -> BoolArray:
        """The mastered test of beliefs ``mu``, ``var`` (of ``families``, default all)."""
        cfg = self.config
        top = self._top if families is None else self._top[families]
        need = top + np.log(cfg.mastered_at / (1.0 - cfg.mastered_at)) / cfg.slope
        result: BoolArray = mu - cfg.confidence * np.sqrt(var) >= need
        if self._direct_top:
            passed = self.top_tier.passed
            result = result | (passed if families is None else passed[families])
        return result

    def out_of_reach(self) -> BoolArray:
        """bool [n_families]: even tier 0 passes under ``reach_floor`` (normalised) with
        confidence: an impossible family, or one too far from its easiest tier to learn
        from it (its rare passes carry almost no signal)."""
        if self._reach_at is not None and self._reach_at[0] == self.version:
            return self._reach_at[1]  # read twice a refresh: by the flags and by stalled()
        cfg = self.config
        mu, var = self.belief()
        floor = np.log(cfg.reach_floor / (1.0 - cfg.reach_floor)) / cfg.slope
        result: BoolArray = mu + cfg.confidence * np.sqrt(var) < floor
        result.setflags(write=False)
        self._reach_at = (self.version, result)
        return result

    def tried(self) -> BoolArray:
        """bool [n_families]: trained a quarter of ``patience`` episodes or more: enough to
        judge how fast the family learns (``stalled``) or to write it off (``on_trial``)."""
        result: BoolArray = self.episodes >= self.config.trial
        return result

    def on_trial(self) -> BoolArray:
        """bool [n_families]: out of reach but not yet tried. A slow starter passes
        nothing at first, as an impossible family does, and some learners learn from their
        failures: such a family shares a saturated batch's spare share with the mastered
        until it is tried (``FlagBoard.spare_first``)."""
        if not self._reach_trial:
            return np.zeros(self._catalog.n_families, dtype=bool)
        result: BoolArray = self.out_of_reach() & ~self.tried()
        return result

    def progress(self) -> FloatArray:
        """float64 [n_families]: how far the skill moved over about ``patience`` training
        episodes (the fused mean less its slow average), in tiers."""
        mu, _ = self.belief()
        result: FloatArray = mu - self.slow_mu
        return result

    def stalled(self) -> BoolArray:
        """bool [n_families]: under tier 1 and trained ``patience`` episodes or more, and
        the skill neither rose over them (by ``min_gain``, or a quarter of the typical
        family's rise if that is less) nor fell (a fall above tier 0 is forgetting, which
        needs practice; a fall below it is evidence settling on out-of-reach). A family
        that has climbed past tier 1 and pauses is on a plateau before a harder tier, as a
        network is before it finds a sparse parity, not at a dead end (``_STALL_BELOW``).
        Also the families of ``stalled_early``."""
        on_patience, early = self._stall_tests()
        result: BoolArray = on_patience | early
        return result

    def stalled_early(self) -> BoolArray:
        """bool [n_families]: stalled before ``patience``'s test could speak: a family whose
        tasks pass by chance, or a family of one tier, trained as many episodes as the
        typical family takes to rise ``_STALL_SPAN`` tiers (a trial's at least), its skill
        no higher than ``patience`` episodes' average (a family of one tier: not higher by
        ``patience``'s gain). Guesses pass at every skill, so ``out_of_reach`` needs about
        a hundred episodes to write off an impossible family there, and until then it took
        a full share; at one tier no contrast tests a slope, and a coin flip is found only
        by a stall. A slow starter looks the same this soon, so such a family is held to a
        larger share than a stall after ``patience`` (``WeightPipeline``)."""
        return self._stall_tests()[1]

    def _judged_early(self) -> BoolArray:
        """bool [n_families]: the families ``stalled_early`` may judge: guessable, or (unless
        the ablation turns it off) of one tier."""
        kinds: BoolArray = self._chance > 0.0
        if self._early_single:
            kinds = kinds | (self._catalog.n_tiers == 1)
        return kinds

    def _stall_tests(self) -> tuple[BoolArray, BoolArray]:
        """(stalled on ``patience``'s test, stalled early and not on it), by version."""
        key = (
            self.version,
            self._stall_below,
            self._stall_span,
            self._early_single,
            self._single_gain,
        )
        if self._stall_at is not None and self._stall_at[0] == key:
            return self._stall_at[1]
        cfg = self.config
        mu, _ = self.belief()
        moved = self.progress()
        # The gain that counts is relative to how fast this run's families learn: a quarter
        # of the typical family's rise per ``patience`` episodes (skill over episodes so
        # far), at most ``min_gain``. A slow learner is slow for every family, and a family
        # learning at half the typical speed is not stalled.
        judged = self.tried() & ~self.out_of_reach()
        rate = 0.0  # the typical family's rise per episode
        if judged.any():
            rate = max(median_of(mu[judged] / self.episodes[judged]), 0.0)
        gain = min(cfg.min_gain, _STALL_SHARE * rate * cfg.patience)
        forgetting = (moved < -cfg.min_gain) & (mu > 0.0)
        below = mu < self._stall_below
        on_patience: BoolArray = (self.episodes >= cfg.patience) & (moved < gain) & ~forgetting
        on_patience &= below
        early: BoolArray = np.zeros_like(on_patience)
        if self._stall_span > 0.0 and rate > 0.0:
            # only one not risen at all, and only where guesses pass or at one tier: at
            # chance 0 and over tiers, where out_of_reach and the flatness test speak
            # early, this test read slow starters stalled (a belief settling below the
            # prior reads as a fall; dev ext p10 -0.25, skill_top final -0.02), and with a
            # gain of min_gain more so (ext p10 -0.75). At one tier, not risen by
            # patience's gain: judged on no rise at all, a coin flip's flag came and went
            # with its belief's noise, and each time it went the family took an unflagged
            # share, late in a run the ceiling's (skill_1tier waste -1.37 points on dev
            # seeds 0-11; at every guessable family, ladder_yesno p10 -0.23)
            window = max(self._stall_span / rate, cfg.trial)
            bar = np.zeros(moved.shape[0])
            if self._single_gain and self._single.size:
                bar[self._single] = gain
            early = (self.episodes >= window) & (moved < bar) & self._judged_early()
            early &= below & ~forgetting & ~on_patience
        on_patience.setflags(write=False)
        early.setflags(write=False)
        self._stall_at = (key, (on_patience, early))
        return on_patience, early

    def hacked(self) -> BoolArray:
        """bool [n_families]: over two probe rounds or more, held-out results fall short of
        the training passes at the same tiers by ``hack_z`` standard errors beyond the
        median family's shortfall (``ShortfallTest``)."""
        return self.shortfall.hacked(self.config.hack_z)

    # ------------------------------------------------------------------ evidence
    def observe_training(self, arm: IntArray, success: FloatArray) -> IntArray:
        """Training outcomes (pass or fail) of these arms; drift added per episode first.
        Only the families in the report are touched (indices compressed to them); returns
        them, sorted and distinct."""
        if arm.size == 0:
            return np.zeros(0, dtype=np.int64)
        self._changed()
        cat = self._catalog
        arms, inverse = np.unique(arm, return_inverse=True)
        n_arm = np.bincount(inverse, minlength=arms.shape[0]).astype(np.float64)
        k_arm = np.bincount(inverse, weights=success > 0.5, minlength=arms.shape[0]).astype(
            np.float64
        )
        families, owner = distinct(cat.family_of_arm[arms], cat.n_families)
        per_family = np.bincount(owner, weights=n_arm, minlength=families.shape[0]).astype(
            np.float64
        )
        tiers = cat.tier_of_arm[arms]
        self.shortfall.trained(families, arms, n_arm, k_arm)
        before, before_var = self.belief_at(families)
        mastered = self._mastered(before, before_var, families)
        self.built[families] += np.where(mastered, 0.0, per_family)
        self.train_var[families] += self.config.drift * per_family
        self.probe_var[families] += self.config.drift * per_family
        patience = max(self.config.patience, 1)  # episodes: the trend's and slow_mu's window
        if self._trend:
            # The predict step: the rise per episode of the last ``patience`` or so (the EMA
            # ``slow_mu`` trails a steady rise by ``patience`` episodes' worth), times the
            # batch's episodes, where that rise is a new best (``min_gain``, as stalled()
            # reads it): a coin flip's belief wanders, and a trend read from its wandering
            # would feed itself. Both beliefs move alike.
            moved = before - self.slow_mu[families]
            per_episode = np.where(moved >= self.config.min_gain, moved, 0.0) / patience
            rise = per_episode * per_family
            self.train_mu[families] += rise
            self.probe_mu[families] += rise
        moments = self._by_moments(families, owner, guessed=False)
        self._update_belief(
            self.train_mu, self.train_var, families, owner, tiers, k_arm, n_arm, moments
        )
        # The slope test scores a batch's outcomes as if they came one by one: the i-th of a
        # family's n against the belief about i/n of the way through the batch's rise.
        # Scored against the belief before the batch, a family given many episodes a step
        # is judged a whole step behind its learning, and its rise at the tier trained (the
        # tiers below it pass already) reads as a flat slope. A fall is not followed: a
        # learner rises as it trains, while a coin flip's belief moves both ways.
        after, _ = self.belief_at(families)
        lag = self._rise_share * (per_family - 1.0) / per_family
        scored_at = before + lag * np.maximum(after - before, 0.0)
        low, span = self._levels(families[owner])
        self.slope_test.add(
            families,
            owner,
            tiers,
            k_arm,
            n_arm,
            per_family,
            scored_at,
            low,
            span,
            self.config.slope,
            self._grader_share(),
        )
        self.top_tier.trained(arms, k_arm, n_arm, families, owner, per_family)
        self.episodes[families] += per_family
        mu, _ = self.belief_at(families)
        rate = 1.0 - (1.0 - 1.0 / patience) ** per_family
        self.slow_mu[families] += rate * (mu - self.slow_mu[families])
        return families

    def observe_probes(
        self, families: IntArray, tiers: IntArray, scores: FloatArray, n: IntArray, step: int = 0
    ) -> IntArray:
        """Held-out probe readings (``scores`` of ``n`` items) at any tiers, taken at
        ``step``; returns the families they touched, sorted and distinct."""
        if families.size == 0:
            return np.zeros(0, dtype=np.int64)
        items = n.astype(np.float64)
        fails, passes, mu = self._sure(families, tiers)  # read once for the three below
        if self._floor and (
            self._read_floor(fails, families, scores, items)
            | self._confirm_floor(passes, families, scores, items)
        ):
            self.top_tier.set_floor(self.verifier.rate)
        self.last_shift = (
            self._shared_shift(fails, mu, families, tiers, scores) if self._shift else 0.0
        )
        if self.last_shift > 0.0:
            scores = self._unshifted(scores, self.last_shift, items)
        self._changed()
        touched, owner = distinct(families, self._catalog.n_families)
        passed = scores * items
        self.shortfall.probed(families, touched, owner, tiers, passed, items, step)
        self.top_tier.probed(touched, owner, tiers, passed, items)
        moments = self._by_moments(touched, owner, guessed=self._match)
        self._update_belief(
            self.probe_mu, self.probe_var, touched, owner, tiers, passed, items, moments
        )
        return touched

    def _by_moments(
        self, families: IntArray, owner: IntArray, *, guessed: bool
    ) -> BoolArray | None:
        """bool per row (of family ``families[owner]``): updated by the posterior's moments,
        not by Newton steps (``_update_belief``); None where none is. Where a pass can come
        without the skill the posterior of a low belief has a plateau and, after a pass, a
        peak far above it: Newton steps climb to the peak and read its curvature as the
        belief's. Under a grader's floor, every row of training and probes: one pass by a
        grader's error lifted an impossible family out of reach with its spread halved
        (dev ``skill_judge`` seed 0: -1.74 +- 1.14 to -0.50 +- 0.48, where the moments
        say -1.46 +- 1.08), and it took a full share till its belief sank again. With
        ``guessed`` (probes only), the rows of families whose tasks pass by chance: in
        training, their moments lowered the area of the guessable regimes (dev seeds
        0-11: ``skill_chance`` -0.0085, ``ladder_yesno`` -0.0091)."""
        if self._floor_moments and self.verifier.rate > 0.0:
            return np.ones(owner.shape[0], dtype=bool)
        if not guessed:
            return None
        result: BoolArray = self._chance[families][owner] > 0
        return result if result.any() else None

    def _update_belief(
        self,
        mean: FloatArray,
        var: FloatArray,
        families: IntArray,
        owner: IntArray,
        tiers: IntArray,
        k: FloatArray,
        n: FloatArray,
        moments: BoolArray | None,
    ) -> None:
        """One belief's update by counts ``k of n`` at (family ``families[owner]``,
        ``tiers``): the rows of ``moments`` by the posterior's moments on a grid
        (``_update_by_moments``), the rest by Newton steps from the prior (``_update``).
        Where every row goes one way, the families and owners given are used as they
        are."""
        if moments is None:
            self._update(mean, var, families, owner, tiers, k, n)
            return
        if moments.all():
            self._update_by_moments(mean, var, families, owner, tiers, k, n)
            return
        rows = families[owner]
        for pick, update in ((~moments, self._update), (moments, self._update_by_moments)):
            touched, own = distinct(rows[pick], self._catalog.n_families)
            update(mean, var, touched, own, tiers[pick], k[pick], n[pick])

    def _update_by_moments(
        self,
        mean: FloatArray,
        var: FloatArray,
        families: IntArray,
        owner: IntArray,
        tiers: IntArray,
        k: FloatArray,
        n: FloatArray,
    ) -> None:
        """Update of one belief by the posterior's moments on a grid (``match_moments``),
        as ``_update`` by Newton steps."""
        mu, new_var = match_moments(
            mean[families],
            var[families],
            owner,
            self._chance[families[owner]],
            tiers.astype(np.float64),
            k,
            n,
            slope=self.config.slope,
            low=-REACH,
            high=self._top[families] + REACH,
            floor=self.verifier.rate,
        )
        mean[families] = mu
        var[families] = new_var

    def _shared_shift(
        self,
        fails: BoolArray,
        mu: FloatArray,
        families: IntArray,
        tiers: IntArray,
        scores: FloatArray,
    ) -> float:
        """How far above the belief a probe call reads where the belief says the tier
        surely fails: an evaluator that drifts (a judge grown lenient, a test set that
        leaked) lifts every reading of a round alike, and a family far below a tier cannot
        pass it, whatever it has learned. Their median reading above the prediction, where
        at least ``_SHIFT_READINGS`` of them were read, else 0. "Surely" is the out-of-reach
        test's: the tier's pass rate at ``confidence`` sds above the belief is under
        ``reach_floor``. Only a rise is read: a fall shows where a tier surely passes,
        which forgetting also does. ``fails`` and ``mu``: ``_sure``'s."""
        if np.count_nonzero(fails) < self._shift_readings:
            return 0.0
        chance = self._chance[families][fails]
        q = expit(self.config.slope * (mu[fails] - tiers[fails]))
        expected = self.verifier.raw(chance + (1.0 - chance) * q)
        return max(float(np.median(scores[fails] - expected)), 0.0)

    def _read_floor(
        self, fails: BoolArray, families: IntArray, scores: FloatArray, items: FloatArray
    ) -> bool:
        """Pool a probe call's readings at tiers that surely fail, of families whose tasks
        do not pass by chance (``VerifierFloor``); True where the floor changed. Their
        passes are the grader's alone; where guesses pass too, a belief that lags on the
        plateau guessing makes lifts them as well (the held-out regimes at chance 0.25
        read a floor with no grader's errors: `group_mc` final -0.029). Readings past half
        are a belief that is wrong, not a grader (a family mastered before its probes
        showed it). ``fails``: ``_sure``'s."""
        if not self.verifier.reading:
            return False
        fails = fails & (self._chance[families] == 0.0) & (scores <= 0.5)
        passed = scores[fails] * items[fails]
        none = float(np.count_nonzero(passed < 0.5))
        return self.verifier.add(float(passed.sum()), float(items[fails].sum()), fails.sum(), none)

    def _confirm_floor(
        self, passes: BoolArray, families: IntArray, scores: FloatArray, items: FloatArray
    ) -> bool:
        """Pool a call's readings at tiers that surely pass (``passes``: ``_sure``'s), of
        families without a chance level and at half their items or more, against the floor
        read (``VerifierFloor.confirm``); True where that ends it."""
        if self.verifier.rate == 0.0:
            return False
        passes = passes & (self._chance[families] == 0.0) & (scores >= 0.5)
        failed = float(((1.0 - scores) * items)[passes].sum())
        return self.verifier.confirm(failed, float(items[passes].sum()))

    def _sure(self, families: IntArray, tiers: IntArray) -> tuple[BoolArray, BoolArray, FloatArray]:
        """Per reading, from one read of the belief: the tier surely fails (its pass rate
        at ``confidence`` sds above the belief is under ``reach_floor``, the out-of-reach
        test's "surely"), the tier surely passes (at ``confidence`` sds below, over ``1 -
        reach_floor``); and the belief's means."""
        cfg = self.config
        mu, var = self.belief_at(families)
        spread = cfg.confidence * np.sqrt(var)
        fails: BoolArray = expit(cfg.slope * (mu + spread - tiers)) < cfg.reach_floor
        passes: BoolArray = expit(cfg.slope * (mu - spread - tiers)) > 1.0 - cfg.reach_floor
        return fails, passes, mu

    def _unshifted(self, scores: FloatArray, shift: float, items: FloatArray) -> FloatArray:
        """Readings of ``items`` items less a lift of ``shift``. A reading at 1 may have
        been clipped there: all it says is a rate between 1 - shift and 1, and it is taken
        at the middle of that (at 1 - shift, the mastered read as learning and kept their
        share: dev `ladder_drift` 0.883 final against 0.885, p10 0.609 against 0.706). A
        reading left with under half an item passed reads none: that residue is the
        shift's error, not a pass, and at a tier far above a family's skill the logistic's
        tail reads a hundredth of an item as a tier of skill (an impossible family's
        belief rose out of reach that way under a drifting evaluator)."""
        lowered: FloatArray = np.where(
            scores >= 1.0, 1.0 - 0.5 * shift, np.clip(scores - shift, 0.0, 1.0)
        )
        if self._shift_residue:
            lowered[lowered * items < 0.5] = 0.0
        return lowered

    def _update(
        self,
        mean: FloatArray,
        var: FloatArray,
        families: IntArray,
        owner: IntArray,
        tier: IntArray,
        k: FloatArray,
        n: FloatArray,
    ) -> None:
        """Laplace update of one belief (``laplace_update``) by counts ``k of n`` at
        (family, tier), row i of family ``families[owner[i]]``."""
        low, span = self._levels(families[owner])
        laplace_update(
            mean,
            var,
            families,
            owner,
            tier,
            k,
            n,
            low=low,
            span=span,
            top=self._top[families],
            slope=self.config.slope,
            work=self._work,
        )

    def _levels(self, rows: IntArray) -> tuple[FloatArray, FloatArray]:
        """Each row's pass rate at no skill (the chance level) and what skill adds to it
        (``1 - chance``), as the grader shows them (``VerifierFloor``): ``P(pass) = low +
        span * sigmoid(slope * (theta - tier))``."""
        chance, floor = self._chance[rows], self.verifier.rate
        keep = 1.0 - 2.0 * floor
        low: FloatArray = floor + keep * chance
        span: FloatArray = keep * (1.0 - chance)
        return low, span

    # ------------------------------------------------------------------ state
    _FAMILY_ARRAYS = (
        "train_mu",
        "train_var",
        "probe_mu",
        "probe_var",
        "slow_mu",
        "episodes",
        "built",
    )

    def state_dict(self) -> dict[str, Any]:
        state = {name: getattr(self, name).copy() for name in self._FAMILY_ARRAYS}
        tests = self.slope_test.state_dict() | self.top_tier.state_dict()
        tests |= self.verifier.state_dict()
        return state | self.shortfall.state_dict() | tests

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Check every array, then apply them all (a bad state changes nothing)."""
        cat = self._catalog
        state = dict(state)
        state.setdefault("built", state.get("episodes"))  # before it: every episode counted
        loaded = family_floats(state, self._FAMILY_ARRAYS, cat.n_families)
        slope_test = self.slope_test.checked(state)
        verifier = self.verifier.checked(state)
        top_tier = self.top_tier.checked(state)
        if (loaded["train_var"] <= 0).any() or (loaded["probe_var"] <= 0).any():
            raise ValueError("skill: variances must be positive")
        for name in ("episodes", "built"):
            if (loaded[name] < 0).any():
                raise ValueError(f"skill.{name}: counts must be >= 0")
        shortfall = self.shortfall.checked(state)
        for name, value in loaded.items():
            setattr(self, name, value)
        self.shortfall.apply(shortfall)
        self.slope_test.apply(slope_test)
        self.verifier.apply(verifier)
        self.top_tier.apply(top_tier)
        self.top_tier.set_floor(self.verifier.rate)
        self._changed()
