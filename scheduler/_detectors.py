"""Detectors over probe curves: regression, plateau, unlearnable families, reward hacking.

Each detector is a handful of boolean and counter arrays of shape ``[n_families]`` updated
with vectorised comparisons after a round of probes. A detector fires an :class:`Event` once
per episode (when its flag turns on) and re-arms when the evidence clears, so a noisy curve
does not flood the event log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import stats

from domains import Catalog
from policies import binomial_interval

from ._errors import ConfigError
from ._events import Event
from ._statecheck import compare, finite_like, non_negative
from ._variants import occurrence_rank
from .probing._curves import (
    BoolArray,
    FloatArray,
    IntArray,
    ProbeCurves,
    _as_1d,
    _Ring,
    _ro,
    checked_arrays,
    validate_points,
)

logger = logging.getLogger(__name__)


def _need(ok: bool, where: str, rule: str, got: Any) -> None:
    if not ok:
        raise ConfigError(f"DetectorConfig.{where}: {rule}, got {got!r}")


@dataclass(frozen=True)
class RegressionConfig:
    """When a drop in a family's probe score counts as a regression."""

    method: str = "kse"  # "kse": k standard errors on consecutive probes; "page_hinkley"
    k: float = 3.0  # kse: a probe this many standard errors below the reference is a drop
    consecutive: int = 2  # kse: drops in a row before the event (one noisy probe is not enough)
    reference: str = "best_fast"  # kse: running max of the "best_slow" or "best_fast" EMA,
    # or the "slow" EMA itself; the max of a fast EMA sits above the true level under noise
    min_stderr: float = 0.02  # floor on the standard error, so a reference near 0 or 1 is sane
    recover_k: float = 1.0  # re-arm once a probe is back within recover_k SE of the old level
    ph_delta: float = 0.5  # Page–Hinkley: tolerated drift per probe, in standard errors
    ph_lambda: float = 8.0  # Page–Hinkley: alarm when the cumulative drop exceeds this (SE)
    min_points: int = 5  # points since the last tier reset before a regression can be called

    def __post_init__(self) -> None:
        _need(self.method in ("kse", "page_hinkley"), "regression.method",
              'must be "kse" or "page_hinkley"', self.method)  # fmt: skip
        _need(self.reference in ("best_slow", "best_fast", "slow"), "regression.reference",
              'must be "best_slow", "best_fast" or "slow"', self.reference)  # fmt: skip
        _need(self.k > 0, "regression.k", "must be > 0", self.k)
        _need(self.consecutive >= 1, "regression.consecutive", "must be >= 1", self.consecutive)
        _need(self.min_stderr > 0, "regression.min_stderr", "must be > 0", self.min_stderr)
        _need(self.recover_k >= 0, "regression.recover_k", "must be >= 0", self.recover_k)
        _need(self.ph_delta >= 0, "regression.ph_delta", "must be >= 0", self.ph_delta)
        _need(self.ph_lambda > 0, "regression.ph_lambda", "must be > 0", self.ph_lambda)
        _need(self.min_points >= 2, "regression.min_points", "must be >= 2", self.min_points)


@dataclass(frozen=True)
class PlateauConfig:
    """When a family has stopped moving before it was mastered."""

    eps: float = 0.15  # the slope's CI, times the window's span, must lie within (-eps, eps)
    mastery: float = 0.9  # chance-normalised fast EMA at which a flat curve is done, not stuck

    def __post_init__(self) -> None:
        _need(self.eps > 0, "plateau.eps", "must be > 0", self.eps)
        _need(0 < self.mastery <= 1, "plateau.mastery", "must be in (0, 1]", self.mastery)


@dataclass(frozen=True)
class UnlearnableConfig:
    """When a family is quarantined as unlearnable (at chance, or paying coin-flip rewards).

    A family is quarantined only while its slope is not significantly positive, its pooled
    window score is not credibly above chance, and both held on ``confirm`` probe rounds in a
    row; the conjunction keeps slow learners safe while a truly flat family is caught soon.
    """

    min_probes: int = 16  # probes since the last tier reset before a verdict
    coin_min_probes: int = 16  # the same for coin flips; lower it only where a family that
    coin_confirm: int = 3  # learns cannot sit at a 50 % pass rate for long (see docs)
    chance_margin: float = 0.1  # normalised upper bound of the newer half's score must be below
    confirm: int = 3  # consecutive probe rounds meeting the condition
    coin_band: float = 0.15  # training pass rate within 0.5 +- band, with no trend = coin flips
    coin_alpha: float = 0.7  # a rise of the probe halves at this one-sided level blocks it
    flat_min_probes: int = 4  # coin verdict after this many probes where the next tier up
    # passes as often as the current one (difficulty makes no difference: a coin flip)
    floor: float = 0.05  # weight_cap of a quarantined family, and its share cap in uniform
    # shares (floor / n_families); it is still sampled a little and probed
    suspect_cap: float = 1.0  # share cap, in uniform shares, of a family whose next tier
    # passes as often as its current one, both near a half, with chance below the coin band
    # (a coin-flip suspect), until it is judged; a large value turns the cap off

    def __post_init__(self) -> None:
        _need(self.min_probes >= 3, "unlearnable.min_probes", "must be >= 3", self.min_probes)
        _need(self.coin_min_probes >= 3, "unlearnable.coin_min_probes", "must be >= 3",
              self.coin_min_probes)  # fmt: skip
        _need(0 < self.chance_margin < 1, "unlearnable.chance_margin", "must be in (0, 1)",
              self.chance_margin)  # fmt: skip
        _need(self.confirm >= 1, "unlearnable.confirm", "must be >= 1", self.confirm)
        _need(self.coin_confirm >= 1, "unlearnable.coin_confirm", "must be >= 1",
              self.coin_confirm)  # fmt: skip
        _need(0 < self.coin_band <= 0.5, "unlearnable.coin_band", "must be in (0, 0.5]",
              self.coin_band)  # fmt: skip
        _need(0 <= self.floor <= 1, "unlearnable.floor", "must be in [0, 1]", self.floor)
        _need(self.suspect_cap >= self.floor, "unlearnable.suspect_cap",
              "must be >= unlearnable.floor", self.suspect_cap)  # fmt: skip
        _need(0.5 <= self.coin_alpha < 1, "unlearnable.coin_alpha", "must be in [0.5, 1)",
              self.coin_alpha)  # fmt: skip
        _need(self.flat_min_probes >= 2, "unlearnable.flat_min_probes", "must be >= 2",
              self.flat_min_probes)  # fmt: skip


@dataclass(frozen=True)
class HackingConfig:
    """When rising training success with a flat held-out probe suggests reward hacking.

    Suspected when the training slope's lower bound is above 0 while the probe's upper bound,
    as a change across the same span of steps, is at most ``eps + ratio * training change``;
    or, once the rise is over, when the training pass rate over the window stands more than
    ``min_gap`` above the upper confidence bound of the pooled held-out probe at the same tier
    (a hack that already saturated, e.g. after it drove tier promotions that reset the
    curves).
    """

    eps: float = 0.05  # absolute probe change (across the training window) still called flat
    ratio: float = 0.25  # ... plus this fraction of the training change
    cap: float = 0.25  # weight_cap of a suspected family
    window: int = 16  # training pass-rate points kept per family
    min_points: int = 6  # points needed in both series
    min_train_change: float = 0.2  # training must also rise this much across its window
    confirm: int = 2  # consecutive rounds meeting the condition before the event
    min_gap: float = 0.4  # training pass rate above the probe's upper bound ("level" test)

    def __post_init__(self) -> None:
        _need(self.eps >= 0, "hacking.eps", "must be >= 0", self.eps)
        _need(0 <= self.ratio < 1, "hacking.ratio", "must be in [0, 1)", self.ratio)
        _need(self.min_train_change >= 0, "hacking.min_train_change", "must be >= 0",
              self.min_train_change)  # fmt: skip
        _need(self.confirm >= 1, "hacking.confirm", "must be >= 1", self.confirm)
        _need(0 < self.min_gap <= 1, "hacking.min_gap", "must be in (0, 1]", self.min_gap)
        _need(0 <= self.cap <= 1, "hacking.cap", "must be in [0, 1]", self.cap)
        _need(self.window >= 3, "hacking.window", "must be >= 3", self.window)
        _need(2 <= self.min_points <= self.window, "hacking.min_points",
              "must be in [2, hacking.window]", self.min_points)  # fmt: skip


@dataclass(frozen=True)
class DetectorConfig:
    """All detector thresholds; slopes use Theil–Sen bounds at confidence ``alpha``."""

    regression: RegressionConfig = field(default_factory=RegressionConfig)
    plateau: PlateauConfig = field(default_factory=PlateauConfig)
    unlearnable: UnlearnableConfig = field(default_factory=UnlearnableConfig)
    hacking: HackingConfig = field(default_factory=HackingConfig)
    alpha: float = 0.95  # confidence of the slope bounds and the pooled-score bound
    min_points: int = 4  # probe points since reset before a slope exists

    def __post_init__(self) -> None:
        _need(0.5 < self.alpha < 1, "alpha", "must be in (0.5, 1)", self.alpha)
        _need(self.min_points >= 2, "min_points", "must be >= 2", self.min_points)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DetectorConfig:
        """Build from plain data (YAML); unknown keys are an error naming the key."""
        parts: dict[str, Any] = {}
        subs: dict[str, type[Any]] = {
            "regression": RegressionConfig,
            "plateau": PlateauConfig,
            "unlearnable": UnlearnableConfig,
            "hacking": HackingConfig,
        }
        for key, value in data.items():
            if key in subs:
                if not isinstance(value, dict):
                    raise ConfigError(f"DetectorConfig.{key}: must be a mapping, got {value!r}")
                known = set(subs[key].__dataclass_fields__)
                for sub in value:
                    if sub not in known:
                        raise ConfigError(
                            f"DetectorConfig.{key}.{sub}: unknown field; expected one of "
                            f"{sorted(known)}"
                        )
                parts[key] = subs[key](**value)
            elif key in ("alpha", "min_points"):
                parts[key] = value
            else:
                raise ConfigError(
                    f"DetectorConfig.{key}: unknown field; expected one of "
                    f"{sorted([*subs, 'alpha', 'min_points'])}"
                )
        return cls(**parts)


def _num(x: Any) -> float | None:
    """A JSON-safe float (None for NaN or inf)."""
    v = float(x)
    return v if np.isfinite(v) else None


class Detectors:
    """Regression, plateau, unlearnable and reward-hacking detectors for every family.

    Call :meth:`record_training` with each family's training pass rate (at probe cadence:
    the rate since the previous probe) and :meth:`update` after each round of probes. Only
    the latest probe of a family is examined per update.
    """

    def __init__(
        self,
        family_names: Sequence[str],
        *,
        config: DetectorConfig | None = None,
        domain_names: Sequence[str] | None = None,
        domain_of_family: npt.ArrayLike | None = None,
    ) -> None:
        self.config = config or DetectorConfig()
        self.family_names = tuple(family_names)
        f = len(self.family_names)
        if f < 1:
            raise ConfigError("Detectors.family_names: at least one family is needed")
        self.n_families = f
        self.domain_names = tuple(domain_names) if domain_names is not None else None
        self.domain_of_family: IntArray | None = (
            None
            if domain_of_family is None
            else _as_1d("Detectors.domain_of_family", domain_of_family, np.int64, f, config=True)
        )
        self._train = _Ring(f, self.config.hacking.window)
        self._seen_count = np.zeros(f, dtype=np.int64)  # int64 [F], curves.count at last update
        self._seen_resets = np.zeros(f, dtype=np.int64)  # int64 [F], curves.resets at last update
        self._seen_train = np.zeros(f, dtype=np.int64)  # int64 [F], training points seen
        self._best_fast = np.full(f, np.nan)  # float64 [F], running max of the fast EMA
        self._best_slow = np.full(f, np.nan)  # float64 [F], running max of the slow EMA
        self._prev_slow = np.full(f, np.nan)  # float64 [F], slow EMA before the latest point
        self._below = np.zeros(f, dtype=np.int64)  # int64 [F], consecutive drops (kse)
        self._alarm_ref = np.full(f, np.nan)  # float64 [F], the level a regression fell from
        self._ph_mean = np.zeros(f)  # float64 [F], Page–Hinkley running mean
        self._ph_count = np.zeros(f, dtype=np.int64)  # int64 [F]
        self._ph_m = np.zeros(f)  # float64 [F], cumulative statistic
        self._ph_max = np.zeros(f)  # float64 [F], its running max
        self._confirm = np.zeros(f, dtype=np.int64)  # int64 [F], rounds meeting unlearnable
        self._release = np.zeros(f, dtype=np.int64)  # int64 [F], rounds of progress (quarantined)
        self._hack_count = np.zeros(f, dtype=np.int64)  # int64 [F], rounds meeting hacking
        self._regressing = np.zeros(f, dtype=bool)  # bool [F]
        self._plateaued = np.zeros(f, dtype=bool)  # bool [F]
        self._quarantined = np.zeros(f, dtype=bool)  # bool [F]
        self._coin = np.zeros(f, dtype=bool)  # bool [F], quarantined as a coin flip
        self._hacking = np.zeros(f, dtype=bool)  # bool [F]

    @classmethod
    def from_catalog(cls, catalog: Catalog, config: DetectorConfig | None = None) -> Detectors:
        return cls(
            catalog.family_names,
            config=config,
            domain_names=catalog.domain_names,
            domain_of_family=catalog.domain_of_family,
        )

    # Flags ---------------------------------------------------------------------------------
    @property
    def quarantined(self) -> BoolArray:
        return _ro(self._quarantined)

    @property
    def regressing(self) -> BoolArray:
        return _ro(self._regressing)

    @property
    def plateaued(self) -> BoolArray:
        return _ro(self._plateaued)

    @property
    def hacking(self) -> BoolArray:
        return _ro(self._hacking)

    @property
    def weight_cap(self) -> FloatArray:
        """Multiplier on each family's sampling weight: 1.0 normally, ``hacking.cap`` for a
        suspected family, at most ``unlearnable.floor`` for a quarantined one."""
        cap = np.where(self._hacking, self.config.hacking.cap, 1.0)
        return np.where(self._quarantined, np.minimum(cap, self.config.unlearnable.floor), cap)

    # Input ---------------------------------------------------------------------------------
    def record_training(
        self, families: npt.ArrayLike, pass_rate: npt.ArrayLike, steps: npt.ArrayLike
    ) -> None:
        """Record training pass rates (in call order for repeated families)."""
        fam, val, stp = validate_points(
            self.n_families, families, pass_rate, steps,
            where="record_training", value_name="pass_rate",
        )  # fmt: skip
        if fam.shape[0] == 0:
            return
        rank = occurrence_rank(fam)
        for r in range(int(rank.max()) + 1):
            sel = rank == r
            self._train.push(fam[sel], stp[sel], val[sel], np.ones(int(sel.sum()), np.int64))

    def training_history(self, family: int) -> tuple[IntArray, FloatArray]:
        """Steps and training pass rates of one family's window, oldest first."""
        slots = self._train.ordered(family)
        return self._train.step[family, slots].copy(), self._train.value[family, slots].copy()

    # Update --------------------------------------------------------------------------------
    def update(
        self,
        step: int,
        curves: ProbeCurves,
        exempt: BoolArray | None = None,
        tier_flat: BoolArray | None = None,
        skilled: BoolArray | None = None,
    ) -> list[Event]:
        """Examine each family's newest probe (and training) points; return new events.

        ``exempt``: families the caller holds to a floor for another reason (the scheduler's
        mastered ones); no reward-hacking verdict is drawn on their thin training curve.
        ``tier_flat``: families whose next tier up, probed, passes as often as the current
        one, both near a half and clear of chance (``Scheduler.tier_flat``); their coin
        verdict needs only ``flat_min_probes`` probes and no weak-rise check.
        ``skilled``: families that have shown a skill outright (a separate-skill family with
        one tier credibly passing, clear of chance and of a coin's band): they get no
        unlearnable verdict (release still needs progress on the curve: a single lucky probe
        of one tier must not free a coin flip)."""
        if curves.n_families != self.n_families:
            raise ConfigError(
                f"Detectors.update: curves have {curves.n_families} families, "
                f"the detectors {self.n_families}"
            )
        restarted = curves.resets != self._seen_resets
        if restarted.any():
            self._restart(np.flatnonzero(restarted))
        new = curves.count != self._seen_count
        tnew = self._train.count != self._seen_train
        cfg = self.config
        slope, lo, hi = curves.slope(cfg.min_points, cfg.alpha)
        events: list[Event] = []
        events += self._regression(step, curves, new)
        events += self._plateau(step, curves, new, lo, hi)
        # Training slope once for both users; each gates on its own point count.
        train = self._train.slope(2, cfg.alpha)
        flat = np.zeros(self.n_families, dtype=bool) if tier_flat is None else tier_flat
        shown = np.zeros(self.n_families, dtype=bool) if skilled is None else skilled
        events += self._unlearnable(step, curves, new, slope, lo, hi, train, flat, shown)
        held = self._quarantined if exempt is None else self._quarantined | exempt
        events += self._reward_hacking(step, curves, (new | tnew) & ~held, slope, lo, hi, train)
        self._seen_count = curves.count.copy()
        self._seen_resets = curves.resets.copy()
        self._seen_train = self._train.count.copy()
        for e in events:
            logger.info("step %d: %s %s %s", e.step, e.kind, e.family, e.payload)
        return events

    def _restart(self, f: IntArray) -> None:
        """A tier reset: this family's old evidence no longer applies (quarantine stays)."""
        self._best_fast[f] = np.nan
        self._best_slow[f] = np.nan
        self._prev_slow[f] = np.nan
        self._below[f] = 0
        self._alarm_ref[f] = np.nan
        self._ph_count[f] = 0
        self._ph_m[f] = 0.0
        self._ph_max[f] = 0.0
        self._confirm[f] = 0
        self._release[f] = 0
        self._hack_count[f] = 0
        self._regressing[f] = False
        self._plateaued[f] = False
        self._hacking[f] = False
        self._train.reset(f)

    def _events(
        self, step: int, kind: str, fire: BoolArray, payload: dict[str, Any]
    ) -> list[Event]:
        """One event per firing family; ``payload`` holds [F] arrays or scalars."""
        out = []
        for f in np.flatnonzero(fire).tolist():
            domain = None
            if self.domain_names is not None and self.domain_of_family is not None:
                domain = self.domain_names[int(self.domain_of_family[f])]
            body = {k: (_num(v[f]) if isinstance(v, np.ndarray) else v) for k, v in payload.items()}
            out.append(Event(step, kind, self.family_names[f], domain, body))
        return out

    def _regression(self, step: int, curves: ProbeCurves, new: BoolArray) -> list[Event]:
        cfg = self.config.regression
        x = curves.latest
        n = np.maximum(curves.latest_n, 1)
        old_ph_mean = self._ph_mean.copy()
        if cfg.method == "kse":
            ref = {"best_fast": self._best_fast, "best_slow": self._best_slow}.get(
                cfg.reference, self._prev_slow
            )
            # Binomial variance at the larger of the two levels' p(1-p): at the reference alone
            # a high, max-biased reference understates the spread of the left-skewed scores.
            # The reference is an EMA with noise of its own: var = a / (2 - a) of a point's.
            a = curves.fast if cfg.reference == "best_fast" else curves.slow
            pq = np.fmax(ref * (1 - ref), x * (1 - x))
            se = np.maximum(np.sqrt(np.clip(pq, 0, None) / n), cfg.min_stderr)
            se = se * np.sqrt(1 + a / (2 - a))
            eligible = new & (curves.since_reset >= cfg.min_points) & np.isfinite(ref)
            drop = eligible & (x < ref - cfg.k * se)
            self._below = np.where(new, np.where(drop, self._below + 1, 0), self._below)
            alarm = eligible & (self._below >= cfg.consecutive)
            stat = (ref - x) / se
        else:
            first = new & (self._ph_count == 0)
            cont = new & ~first
            cnt = np.where(cont, self._ph_count + 1, self._ph_count)
            mean = np.where(cont, self._ph_mean + (x - self._ph_mean) / np.maximum(cnt, 1),
                            self._ph_mean)  # fmt: skip
            se = np.maximum(np.sqrt(np.clip(mean * (1 - mean), 0, None) / n), cfg.min_stderr)
            m = np.where(cont, self._ph_m + (x - mean) / se + cfg.ph_delta, self._ph_m)
            mmax = np.maximum(self._ph_max, m)
            stat = mmax - m
            alarm = cont & (stat > cfg.ph_lambda) & (curves.since_reset >= cfg.min_points)
            ref = np.where(alarm, old_ph_mean, mean)
            # Start over from this point after an alarm (or on a family's first point).
            restart = first | alarm
            self._ph_mean = np.where(restart, x, mean)
            self._ph_count = np.where(restart, 1, cnt)
            self._ph_m = np.where(restart, 0.0, m)
            self._ph_max = np.where(restart, 0.0, mmax)
        fire = alarm & ~self._regressing
        self._alarm_ref = np.where(fire, ref, self._alarm_ref)
        rec_se = np.maximum(
            np.sqrt(np.clip(self._alarm_ref * (1 - self._alarm_ref), 0, None) / n), cfg.min_stderr
        )
        recovered = self._regressing & new & (x >= self._alarm_ref - cfg.recover_k * rec_se)
        events = self._events(
            step,
            "regression",
            fire,
            {"method": cfg.method, "score": x, "reference": ref, "stderr": se, "statistic": stat,
             "n": n.astype(np.float64), "consecutive": self._below.astype(np.float64)},
        )  # fmt: skip
        self._regressing = (self._regressing & ~recovered) | fire
        self._below = np.where(recovered | fire, 0, self._below)
        # The running bests start once the EMAs have averaged a few points: a max over the
        # first raw points would sit well above the true level.
        warm = new & (curves.since_reset >= cfg.min_points - 1)
        self._best_fast = np.where(warm, np.fmax(self._best_fast, curves.ema_fast), self._best_fast)
        self._best_slow = np.where(warm, np.fmax(self._best_slow, curves.ema_slow), self._best_slow)
        self._prev_slow = np.where(new, curves.ema_slow, self._prev_slow)
        return events

    def _plateau(
        self, step: int, curves: ProbeCurves, new: BoolArray, lo: FloatArray, hi: FloatArray
    ) -> list[Event]:
        cfg = self.config.plateau
        span = curves.span()
        bound = np.fmax(np.abs(lo), np.abs(hi)) * span  # largest change the CI allows
        level = curves.normalize(curves.ema_fast)
        mastered = level >= cfg.mastery
        full = curves.since_reset >= curves.window
        cond = new & full & np.isfinite(bound) & (bound < cfg.eps) & ~mastered
        fire = cond & ~self._plateaued
        moving = new & ((lo > 0) | (hi < 0) | mastered)
        events = self._events(
            step, "plateau", fire,
            {"change_bound": bound, "slope_low": lo, "slope_high": hi, "span_steps": span,
             "level": level, "eps": cfg.eps},
        )  # fmt: skip
        self._plateaued = (self._plateaued & ~moving) | fire
        return events

    def _unlearnable(
        self,
        step: int,
        curves: ProbeCurves,
        new: BoolArray,
        slope: FloatArray,
        lo: FloatArray,
        hi: FloatArray,
        train: tuple[FloatArray, FloatArray, FloatArray],
        tier_flat: BoolArray,
        skilled: BoolArray,
    ) -> list[Event]:
        cfg = self.config.unlearnable
        # The level is the pooled newer half of the window, with a Jeffreys interval, in
        # chance-normalised units: "near chance" = its upper bound is within the margin.
        k1, n1, k2, n2 = curves.halves()
        lb, ub = binomial_interval(k2, n2, self.config.alpha)
        level_ub = curves.normalize(ub)
        level_lb = curves.normalize(lb)
        # Progress: a significantly positive slope, or a newer half of the window that passes
        # significantly more items than the older half (a two-proportion z-test; it keeps its
        # power on low, heavily tied scores where Theil-Sen bounds are wide).
        with np.errstate(invalid="ignore", divide="ignore"):
            pool = (k1 + k2) / (n1 + n2)
            z = (k2 / n2 - k1 / n1) / np.sqrt(pool * (1 - pool) * (1 / n1 + 1 / n2))
        progressing = (lo > 0) | (z > stats.norm.ppf(self.config.alpha))
        # A score that fell significantly from a level credibly above chance to chance: the
        # family learned and is forgetting (the regression detector's case), which training
        # mends. (A coin flip's dips are no such fall; the coin rules judge those.)
        older_lb, _ = binomial_interval(k1, n1, self.config.alpha)
        falling = (z < -stats.norm.ppf(self.config.alpha)) & (
            curves.normalize(older_lb) > cfg.chance_margin
        )
        # Coin flips: training pays off half the time with no trend, and the held-out score
        # sits at a half too; such a family reads well above "chance" yet learns nothing.
        ts, tlo, _ = train
        tmean = self._train.mean()
        with np.errstate(invalid="ignore", divide="ignore"):
            probe_level = k2 / n2
        coin = (
            (self._train.fresh >= self.config.min_points)
            & (np.abs(tmean - 0.5) <= cfg.coin_band)
            & (tlo <= 0)  # no significant rise: the rewards are not teaching anything
        )
        # A learner crossing a half looks like a coin flip for a while; the verdict needs the
        # probe halves to show not even weak evidence of a rise (one-sided, coin_alpha).
        weak_rise = z > stats.norm.ppf(cfg.coin_alpha)
        at_half = coin & (np.abs(probe_level - 0.5) <= cfg.coin_band)
        coin_level = at_half & ~weak_rise
        # Where the next tier up passes as often, the learner-crossing-a-half case is ruled
        # out already (its harder tier would pass far less): only real progress blocks it.
        flat_level = tier_flat & at_half
        probes = curves.since_reset
        cond = (
            new
            & np.isfinite(slope)
            & ~progressing
            & ~skilled
            & (
                ((probes >= cfg.min_probes) & (level_ub <= cfg.chance_margin) & ~falling)
                | ((probes >= cfg.coin_min_probes) & coin_level)
                | ((probes >= cfg.flat_min_probes) & flat_level)
            )
        )
        self._confirm = np.where(new, np.where(cond, self._confirm + 1, 0), self._confirm)
        coin_confirmed = (coin_level | flat_level) & (self._confirm >= cfg.coin_confirm)
        confirmed = (self._confirm >= cfg.confirm) | coin_confirmed
        fire = cond & confirmed & ~self._quarantined
        # Release needs progress that has also carried the level credibly off chance, so a
        # lucky run of a flat family does not flip it in and out of quarantine.
        # A coin flip reads well above chance by nature: it must also rise credibly into the
        # upper half of its band, or lucky runs of rounds would release it (windows overlap).
        off_coin = lb > 0.5 + cfg.coin_band / 2
        lifted = (
            self._quarantined
            & progressing
            & (level_lb > cfg.chance_margin)
            & (~self._coin | off_coin)
        )
        self._release = np.where(new, np.where(lifted, self._release + 1, 0), self._release)
        released = self._quarantined & new & (self._release >= cfg.confirm)
        events = self._events(
            step, "quarantined", fire & coin,
            {"reason": "coin_flip", "slope": slope, "slope_low": lo, "slope_high": hi,
             "level_upper": level_ub, "halves_z": z, "train_mean": tmean, "train_slope": ts,
             "probes": curves.since_reset.astype(np.float64), "weight_cap": cfg.floor},
        )  # fmt: skip
        events += self._events(
            step, "quarantined", fire & ~coin,
            {"reason": "chance", "slope": slope, "slope_low": lo, "slope_high": hi,
             "level_upper": level_ub, "halves_z": z,
             "probes": curves.since_reset.astype(np.float64),
             "weight_cap": cfg.floor},
        )  # fmt: skip
        events += self._events(
            step, "released", released,
            {"slope": slope, "slope_low": lo, "slope_high": hi, "halves_z": z,
             "level_lower": level_lb},
        )  # fmt: skip
        self._quarantined = (self._quarantined & ~released) | fire
        self._coin = (self._coin & ~released) | (fire & coin)
        self._confirm = np.where(released, 0, self._confirm)
        self._release = np.where(released, 0, self._release)
        return events

    def _reward_hacking(
        self,
        step: int,
        curves: ProbeCurves,
        fresh: BoolArray,
        slope: FloatArray,
        lo: FloatArray,
        hi: FloatArray,
        train: tuple[FloatArray, FloatArray, FloatArray],
    ) -> list[Event]:
        cfg = self.config.hacking
        ts, tlo, thi = train
        span = self._train.span()
        train_change = ts * span
        probe_change_high = hi * span
        # ``fresh`` leaves out families held to a floor (quarantined, or exempt by the
        # caller): drawn so rarely, their training pass rate is stale.
        eligible = (
            fresh
            & (self._train.fresh >= cfg.min_points)
            & (curves.since_reset >= max(cfg.min_points, self.config.min_points))
            & np.isfinite(hi)
        )
        rising = (
            (tlo > 0)
            & (train_change >= cfg.min_train_change)
            & (probe_change_high <= cfg.eps + cfg.ratio * train_change)
        )
        passed, total = curves.pooled()
        _, probe_upper = binomial_interval(passed, total, self.config.alpha)
        train_mean = self._train.mean()
        gap = train_mean - probe_upper
        cond = eligible & (rising | (gap >= cfg.min_gap))
        self._hack_count = np.where(
            eligible, np.where(cond, self._hack_count + 1, 0), self._hack_count
        )
        fire = cond & (self._hack_count >= cfg.confirm) & ~self._hacking
        cleared = self._hacking & eligible & (lo > 0)
        events = self._events(
            step, "suspected_reward_hacking", fire,
            {"train_slope": ts, "train_slope_low": tlo, "train_slope_high": thi,
             "probe_slope": slope, "probe_slope_low": lo, "probe_slope_high": hi,
             "span_steps": span, "train_change": train_change,
             "probe_change_high": probe_change_high, "train_mean": train_mean,
             "probe_upper": probe_upper, "gap": gap, "weight_cap": cfg.cap},
        )  # fmt: skip
        self._hacking = (self._hacking & ~cleared) | fire
        return events

    # State ---------------------------------------------------------------------------------
    _ARRAYS = (
        "_seen_count", "_seen_resets", "_seen_train", "_best_fast", "_best_slow", "_prev_slow",
        "_below", "_alarm_ref", "_ph_mean", "_ph_count", "_ph_m", "_ph_max", "_confirm", "_release",
        "_hack_count", "_regressing", "_plateaued", "_quarantined", "_coin", "_hacking",
    )  # fmt: skip

    def state_dict(self) -> dict[str, Any]:
        """Every flag, counter and the training window; the config rides along for reference."""
        state: dict[str, Any] = {
            "n_families": self.n_families,
            "config": asdict(self.config),
            "train": self._train.state_dict(),
        }
        state.update({name.lstrip("_"): getattr(self, name).copy() for name in self._ARRAYS})
        return state

    def check_state(self, state: Any, where: str = "detectors") -> list[str]:
        """Problems with ``state`` as these detectors' state (pure: nothing is applied): the
        structure of ``state_dict()`` (``coin`` may be absent in an older state), floats
        finite where a fresh object's are, counters >= 0."""
        if not isinstance(state, Mapping):
            return [f"{where}: must be a mapping, got {type(state).__name__}"]
        if "coin" not in state:  # saved before coin-flip quarantines were told apart
            state = {**state, "coin": np.zeros(self.n_families, dtype=bool)}
        problems = compare(self.state_dict(), state, where)
        if problems:
            return problems
        if state["n_families"] != self.n_families:
            return [f"{where}.n_families: expected {self.n_families}, got {state['n_families']!r}"]
        fresh = Detectors(self.family_names, config=self.config).state_dict()
        finite_like(problems, fresh, state, where)
        counters = ("seen_count", "seen_resets", "seen_train", "below", "ph_count", "confirm")
        non_negative(problems, state, (*counters, "release", "hack_count"), where)
        non_negative(problems, state["train"], ("n", "count", "fresh", "step"), f"{where}.train")
        return problems

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore exactly; a state of another shape raises ConfigError and changes nothing."""
        if state.get("n_families") != self.n_families:
            raise ConfigError(
                f"Detectors state.n_families: expected {self.n_families}, "
                f"got {state.get('n_families')}"
            )
        train = _Ring(self.n_families, self.config.hacking.window)
        train.load_state_dict(state["train"], "Detectors state.train")
        if "coin" not in state:  # saved before coin-flip quarantines were told apart
            state = {**state, "coin": np.zeros(self.n_families, dtype=bool)}
        loaded = checked_arrays(self, self._ARRAYS, state, "Detectors")
        self._train = train
        for name, arr in loaded.items():
            setattr(self, name, arr)
