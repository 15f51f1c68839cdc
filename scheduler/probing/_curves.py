"""Probe curves: the held-out score history of every family, in fixed memory.

Each family keeps a ring buffer of its last ``window`` probe points (arrays
``[n_families, window]``) plus running EMAs. Every statistic is computed for all families at
once; the only Python loops run over window positions or over the occurrence rank of a
family inside one call (almost always a single pass), never over families.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import stats

from domains import Catalog, CurriculumError
from policies import binomial_interval

from .._errors import ConfigError, ReportError
from .._statecheck import compare, finite_like, non_negative, rule
from .._variants import occurrence_rank

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def _fail(message: str, *, config: bool = False) -> CurriculumError:
    """Bad points are a ReportError (nothing of the call applied); a bad constructor argument
    or a state dict that does not fit is a ConfigError."""
    return ConfigError(message) if config else ReportError([message])


def read_only_view(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """A read-only view, so callers cannot corrupt the state through a property."""
    v = a.view()
    v.setflags(write=False)
    return v


def checked_arrays(
    owner: object, names: Sequence[str], state: Mapping[str, Any], where: str
) -> dict[str, npt.NDArray[Any]]:
    """The arrays ``names`` (attribute names; the state keys drop a leading "_") read from
    ``state``, each checked against the owner's current shape and cast to its dtype. Nothing
    is assigned, so a bad state leaves the owner as it was; ConfigError names the key."""
    loaded = {}
    for name in names:
        cur = getattr(owner, name)
        key = name.lstrip("_")
        arr = np.asarray(state.get(key))
        if arr.shape != cur.shape:
            raise ConfigError(f"{where} state.{key}: expected shape {cur.shape}, got {arr.shape}")
        loaded[name] = arr.astype(cur.dtype, copy=True)
    return loaded


def theil_sen(
    x: npt.ArrayLike, y: npt.ArrayLike, *, alpha: float = 0.95, min_points: int = 2
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Theil–Sen slope and Sen's confidence bounds for every row of ``[rows, k]`` arrays.

    A NaN in ``x`` or ``y`` marks a missing point. Row by row the result equals
    ``scipy.stats.theilslopes(y_valid, x_valid, alpha)`` (same ties correction, same rounding
    of the order-statistic ranks); it is NaN where a row has fewer than ``min_points`` valid
    points or no two distinct ``x``. Cost is O(rows * k^2), with k a small fixed window.
    """
    xa = np.atleast_2d(np.asarray(x, dtype=np.float64))
    ya = np.atleast_2d(np.asarray(y, dtype=np.float64))
    if xa.shape != ya.shape:
        raise ValueError(f"x and y shapes differ: {xa.shape} vs {ya.shape}")
    rows, k = ya.shape
    if k < 2:
        nan = np.full(rows, np.nan)
        return nan, nan.copy(), nan.copy()
    i, j, incidence = _pairs(k)
    valid = np.isfinite(xa) & np.isfinite(ya)
    m = valid.sum(axis=1)
    both = valid[:, i] & valid[:, j]  # [rows, pairs], each unordered pair once
    dx = xa[:, i] - xa[:, j]
    dy = ya[:, i] - ya[:, j]
    # scipy takes the ordering with dx > 0; (-dy) / (-dx) == dy / dx exactly in IEEE.
    pair = both & (dx != 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        slopes = np.where(pair, dy / np.where(pair, dx, 1.0), np.nan)
    slopes.sort(axis=1)  # NaN sorts last, so the first nt entries are the sorted slopes
    n_pairs = slopes.shape[1]
    nt = pair.sum(axis=1)
    ok = (m >= max(min_points, 2)) & (nt > 0)
    ntc = np.maximum(nt, 1)
    r = np.arange(rows)
    lo_mid = slopes[r, np.minimum((ntc - 1) // 2, n_pairs - 1)]
    hi_mid = slopes[r, np.minimum(ntc // 2, n_pairs - 1)]
    med = np.where(ok, (lo_mid + hi_mid) / 2.0, np.nan)

    # Sen (1968) eq. 2.6 with the ties correction: a group of c equal values adds
    # c(c-1)(2c+5), which is the sum over its members of (c-1)(2c+5); a member's c - 1 is
    # the number of tied pairs it belongs to.
    cx = ((both & (dx == 0)).astype(np.float64) @ incidence).astype(np.int64) + 1
    cy = ((both & (dy == 0)).astype(np.float64) @ incidence).astype(np.int64) + 1
    tx = np.where(valid, (cx - 1) * (2 * cx + 5), 0).sum(axis=1)
    ty = np.where(valid, (cy - 1) * (2 * cy + 5), 0).sum(axis=1)
    sigsq = 1 / 18.0 * (m * (m - 1) * (2 * m + 5) - tx - ty).astype(np.float64)
    z = _z(alpha)
    with np.errstate(invalid="ignore"):
        sigma = np.sqrt(sigsq)
        ru_f = np.round((nt - z * sigma) / 2.0)
        rl_f = np.round((nt + z * sigma) / 2.0)
    bounds_ok = ok & np.isfinite(sigma)
    ru = np.minimum(np.where(bounds_ok, ru_f, 0), nt - 1).astype(np.int64)
    rl = np.maximum(np.where(bounds_ok, rl_f, 0) - 1, 0).astype(np.int64)
    bounds_ok &= (rl < nt) & (ru >= 0)
    low = np.where(bounds_ok, slopes[r, np.clip(rl, 0, n_pairs - 1)], np.nan)
    high = np.where(bounds_ok, slopes[r, np.clip(ru, 0, n_pairs - 1)], np.nan)
    return med, low, high


@functools.cache
def _pairs(k: int) -> tuple[IntArray, IntArray, FloatArray]:
    """Index pairs i < j of a k-point window, and the [pairs, k] incidence matrix."""
    i, j = np.triu_indices(k, 1)
    incidence = np.zeros((i.shape[0], k))
    incidence[np.arange(i.shape[0]), i] = 1.0
    incidence[np.arange(i.shape[0]), j] = 1.0
    return i.astype(np.int64), j.astype(np.int64), incidence


@functools.cache
def _z(alpha: float) -> float:
    """Normal quantile for a two-sided interval at ``alpha``, formed as scipy forms it."""
    a = 1.0 - alpha if alpha > 0.5 else alpha
    return float(stats.norm.ppf(a / 2.0))


class _Ring:
    """The last ``window`` points (step, value, n) of every row; an empty slot holds a NaN
    value (a recorded score is finite: ``validate_points``), so no mask is kept beside it."""

    def __init__(self, rows: int, window: int) -> None:
        self.window = window
        # steps and item counts fit int32 (a third of the window's memory, its largest part
        # per family); scores stay float64, exactly as recorded
        self.step = np.zeros((rows, window), dtype=np.int32)  # int32 [rows, window]
        self.value = np.full((rows, window), np.nan)  # float64 [rows, window]
        self.n = np.zeros((rows, window), dtype=np.int32)  # int32 [rows, window]
        self.count = np.zeros(rows, dtype=np.int64)  # int64 [rows], points ever
        self.fresh = np.zeros(rows, dtype=np.int64)  # int64 [rows], points since the last reset

    def push(self, rows: IntArray, step: IntArray, value: FloatArray, n: IntArray) -> None:
        """Append one point to each of ``rows`` (distinct)."""
        slot = self.count[rows] % self.window
        self.step[rows, slot] = step
        self.value[rows, slot] = value
        self.n[rows, slot] = n
        self.count[rows] += 1
        self.fresh[rows] += 1

    @property
    def valid(self) -> BoolArray:
        """bool [rows, window]: the slots that hold a point."""
        held: BoolArray = ~np.isnan(self.value)
        return held

    def reset(self, rows: IntArray) -> None:
        self.value[rows] = np.nan
        self.fresh[rows] = 0

    def xy(self) -> tuple[FloatArray, FloatArray]:
        """Steps and values as float arrays with NaN at invalid slots."""
        y = self.value.copy()
        x = np.where(np.isnan(y), np.nan, self.step.astype(np.float64))
        return x, y

    def slope(self, min_points: int, alpha: float) -> tuple[FloatArray, FloatArray, FloatArray]:
        x, y = self.xy()
        return theil_sen(x, y, alpha=alpha, min_points=min_points)

    def span(self) -> FloatArray:
        """Steps covered by the valid points of each row (0 with fewer than two)."""
        x, _ = self.xy()
        valid = self.valid
        with np.errstate(invalid="ignore"):
            hi = np.nanmax(np.where(valid, x, -np.inf), axis=1)
            lo = np.nanmin(np.where(valid, x, np.inf), axis=1)
        return np.where(valid.sum(axis=1) >= 2, hi - lo, 0.0)

    def pooled(self) -> tuple[FloatArray, FloatArray]:
        """Successes and trials summed over the valid window: sum(value * n), sum(n)."""
        valid = self.valid
        w = np.where(valid, self.n, 0).astype(np.float64)
        return (np.where(valid, self.value, 0.0) * w).sum(axis=1), w.sum(axis=1)

    def halves(self) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Pooled (successes, trials) of the older and the newer half of each row's valid
        points, by step; the middle point of an odd count belongs to neither."""
        valid = self.valid
        order = np.argsort(np.where(valid, self.step, np.iinfo(np.int64).max), axis=1,
                           kind="stable")  # fmt: skip
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(self.window)[None, :], axis=1)
        m = valid.sum(axis=1, keepdims=True)
        early = valid & (rank < m // 2)
        late = valid & (rank >= m - m // 2)
        w = self.n.astype(np.float64)
        ks = np.where(valid, self.value, 0.0) * w
        return (
            np.where(early, ks, 0.0).sum(axis=1),
            np.where(early, w, 0.0).sum(axis=1),
            np.where(late, ks, 0.0).sum(axis=1),
            np.where(late, w, 0.0).sum(axis=1),
        )

    def mean(self) -> FloatArray:
        """Unweighted mean of the valid values (NaN for an empty row)."""
        valid = self.valid
        k = valid.sum(axis=1)
        s = np.where(valid, self.value, 0.0).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(k > 0, s / np.maximum(k, 1), np.nan)

    def ordered(self, row: int) -> IntArray:
        """Slots of the valid points of one row, oldest first."""
        start = int(self.count[row]) % self.window
        slots: IntArray = (start + np.arange(self.window, dtype=np.int64)) % self.window
        kept: IntArray = slots[~np.isnan(self.value[row, slots])]
        return kept

    _FIELDS = ("step", "value", "n", "count", "fresh")

    def state_dict(self) -> dict[str, Any]:
        state = {f: getattr(self, f).copy() for f in self._FIELDS}
        state["valid"] = self.valid  # derived; written so a reader of the old layout still reads it
        return state

    def load_state_dict(self, state: dict[str, Any], where: str) -> None:
        """Every field checked before any is set. ``valid`` is optional (an older
        checkpoint's mask): a slot it marks empty is empty, whatever value it holds."""
        shape = {f: getattr(self, f).shape for f in self._FIELDS} | {"valid": self.value.shape}
        loaded = {}
        for f in (*self._FIELDS, "valid"):
            arr = np.asarray(state[f]) if f in state else None
            if arr is None and f == "valid":
                continue
            if arr is None or arr.shape != shape[f]:
                got = "missing" if arr is None else f"shape {arr.shape}"
                raise ConfigError(f"{where}.{f}: expected shape {shape[f]}, got {got}")
            loaded[f] = arr
        for f in self._FIELDS:
            setattr(self, f, loaded[f].astype(getattr(self, f).dtype, copy=True))
        if "valid" in loaded:
            self.value[~loaded["valid"].astype(bool)] = np.nan


def _as_1d(
    name: str, values: npt.ArrayLike, dtype: type, size: int | None, *, config: bool = False
) -> npt.NDArray[Any]:
    arr = np.asarray(values)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise _fail(f"{name}: must be one-dimensional, got shape {arr.shape}", config=config)
    if size is not None and arr.shape[0] != size:
        raise _fail(
            f"{name}: must have {size} elements like families, got {arr.shape[0]}", config=config
        )
    if dtype is np.int64:
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            as_float = arr.astype(np.float64)
            whole = np.isfinite(as_float) & (as_float == np.round(as_float))
            if not whole.all():
                bad = int(np.flatnonzero(~whole)[0])
                raise _fail(f"{name}[{bad}]: must be an integer, got {arr[bad]!r}", config=config)
        return arr.astype(np.int64)
    return arr.astype(np.float64)


def _first_bad(
    name: str, bad: BoolArray, arr: npt.NDArray[Any], rule: str, *, config: bool = False
) -> None:
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _fail(f"{name}[{i}]: {rule}, got {arr[i]!r}", config=config)


def validate_points(
    n_families: int,
    families: npt.ArrayLike,
    values: npt.ArrayLike,
    steps: npt.ArrayLike,
    *,
    where: str,
    value_name: str,
) -> tuple[IntArray, FloatArray, IntArray]:
    """Check one call's family ids, values in [0, 1] and steps; name the first bad element."""
    fam = _as_1d(f"{where}: families", families, np.int64, None)
    val = _as_1d(f"{where}: {value_name}", values, np.float64, fam.shape[0])
    stp = _as_1d(f"{where}: steps", steps, np.int64, fam.shape[0])
    _first_bad(
        f"{where}: families", (fam < 0) | (fam >= n_families), fam, f"must be in [0, {n_families})"
    )
    _first_bad(
        f"{where}: {value_name}",
        ~(np.isfinite(val) & (val >= 0) & (val <= 1)),
        val,
        "must be a finite rate in [0, 1]",
    )
    _first_bad(f"{where}: steps", stp < 0, stp, "must be >= 0")
    return fam, val, stp


class ProbeCurves:
    """Probe history of every family: a ring buffer of the last ``window`` probe points per
    family (arrays ``[n_families, window]``) plus running EMAs. Fixed memory, O(1) Python per
    call, vectorised math.

    ``chance`` is the success rate of a random policy per family; scores are normalised by it
    so that a family at chance reads 0 whatever its format (multiple choice, open ended).
    """

    def __init__(
        self,
        n_families: int,
        *,
        window: int = 16,
        fast: float = 0.3,
        slow: float = 0.05,
        domain_of_family: npt.ArrayLike | None = None,
        chance: npt.ArrayLike | None = None,
        ci_level: float = 0.95,
    ) -> None:
        if n_families < 1:
            raise ConfigError(f"ProbeCurves.n_families: must be >= 1, got {n_families}")
        if window < 2:
            raise ConfigError(f"ProbeCurves.window: must be >= 2, got {window}")
        for name, a in (("fast", fast), ("slow", slow)):
            if not 0 < a <= 1:
                raise ConfigError(f"ProbeCurves.{name}: EMA rate must be in (0, 1], got {a}")
        if not 0 < ci_level < 1:
            raise ConfigError(f"ProbeCurves.ci_level: must be in (0, 1), got {ci_level}")
        self.n_families = n_families
        self.window = window
        self.fast = fast
        self.slow = slow
        self.ci_level = ci_level
        dom = np.zeros(n_families) if domain_of_family is None else domain_of_family
        self.domain_of_family: IntArray = _as_1d(
            "ProbeCurves.domain_of_family", dom, np.int64, n_families, config=True
        )
        if (self.domain_of_family < 0).any():
            raise ConfigError("ProbeCurves.domain_of_family: ids must be >= 0")
        self.n_domains = int(self.domain_of_family.max()) + 1
        ch = np.zeros(n_families) if chance is None else chance
        self.chance: FloatArray = _as_1d(
            "ProbeCurves.chance", ch, np.float64, n_families, config=True
        )
        _first_bad(
            "ProbeCurves.chance",
            ~((self.chance >= 0) & (self.chance < 1)),
            self.chance,
            "must be in [0, 1)",
            config=True,
        )
        self._ring = _Ring(n_families, window)
        self._latest = np.full(n_families, np.nan)  # float64 [F], last score ever
        self._latest_n = np.zeros(n_families, dtype=np.int64)  # int64 [F]
        self._latest_step = np.full(n_families, -1, dtype=np.int64)  # int64 [F], -1 = never
        self._ema_fast = np.full(n_families, np.nan)  # float64 [F], since the last reset
        self._ema_slow = np.full(n_families, np.nan)  # float64 [F]
        self._tier = np.full(n_families, -1, dtype=np.int64)  # int64 [F], -1 = unknown
        self._resets = np.zeros(n_families, dtype=np.int64)  # int64 [F], tier resets so far
        # Slopes are the costly derived value (the detectors and the caller both read them),
        # so they are cached per (min_points, alpha) and dropped by _changed().
        self._slopes: dict[tuple[int, float], tuple[FloatArray, FloatArray, FloatArray]] = {}

    @classmethod
    def from_catalog(cls, catalog: Catalog, **kwargs: Any) -> ProbeCurves:
        return cls(
            catalog.n_families,
            domain_of_family=catalog.domain_of_family,
            chance=catalog.chance_success,
            **kwargs,
        )

    # Recording ---------------------------------------------------------------------------
    def record(
        self,
        families: npt.ArrayLike,
        scores: npt.ArrayLike,
        n: npt.ArrayLike,
        steps: npt.ArrayLike,
        tiers: npt.ArrayLike | None = None,
    ) -> None:
        """Record many probe points at once, in call order for a family that repeats.

        A point at a tier other than the family's current one starts a fresh curve (see
        :meth:`tier_reset`). Bad input raises :class:`ReportError` and changes nothing.
        """
        fam, val, stp = validate_points(
            self.n_families, families, scores, steps, where="record", value_name="scores"
        )
        cnt = _as_1d("record: n", n, np.int64, fam.shape[0])
        _first_bad("record: n", cnt < 1, cnt, "must be >= 1 probe items")
        tie = None
        if tiers is not None:
            tie = _as_1d("record: tiers", tiers, np.int64, fam.shape[0])
            _first_bad("record: tiers", tie < 0, tie, "must be >= 0")
        if fam.shape[0] == 0:
            return
        rank = occurrence_rank(fam)
        for r in range(int(rank.max()) + 1):
            sel = rank == r
            f = fam[sel]
            if tie is not None:
                t = tie[sel]
                changed = (self._tier[f] >= 0) & (self._tier[f] != t)
                if changed.any():
                    self.tier_reset(f[changed])
                self._tier[f] = t
            self._push(f, val[sel], cnt[sel], stp[sel])

    def _changed(self) -> None:
        self._slopes.clear()

    def _push(self, f: IntArray, score: FloatArray, n: IntArray, step: IntArray) -> None:
        self._changed()
        first = self._ring.fresh[f] == 0
        for ema, a in ((self._ema_fast, self.fast), (self._ema_slow, self.slow)):
            old = ema[f]
            ema[f] = np.where(first, score, old + a * (score - old))
        self._ring.push(f, step, score, n)
        self._latest[f] = score
        self._latest_n[f] = n
        self._latest_step[f] = step

    def tier_reset(self, families: npt.ArrayLike) -> None:
        """A tier change makes old points incomparable: drop them from the window and restart
        the EMAs, so slopes and detectors start over. ``latest`` keeps the last point."""
        f = _as_1d("tier_reset: families", families, np.int64, None)
        _first_bad(
            "tier_reset: families",
            (f < 0) | (f >= self.n_families),
            f,
            f"must be in [0, {self.n_families})",
        )
        self._changed()
        self._ring.reset(f)
        self._ema_fast[f] = np.nan
        self._ema_slow[f] = np.nan
        np.add.at(self._resets, f, 1)

    # Read-only views, shape [n_families] ---------------------------------------------------
    @property
    def latest(self) -> FloatArray:
        return read_only_view(self._latest)

    @property
    def latest_n(self) -> IntArray:
        return read_only_view(self._latest_n)

    @property
    def latest_step(self) -> IntArray:
        return read_only_view(self._latest_step)

    @property
    def count(self) -> IntArray:
        """Points ever recorded (tier resets do not lower it)."""
        return read_only_view(self._ring.count)

    @property
    def since_reset(self) -> IntArray:
        """Points recorded since the last tier reset: what slopes and detectors can use."""
        return read_only_view(self._ring.fresh)

    @property
    def resets(self) -> IntArray:
        """How many tier resets each family has had; detectors watch it to restart."""
        return read_only_view(self._resets)

    @property
    def tier(self) -> IntArray:
        return read_only_view(self._tier)

    @property
    def ema_fast(self) -> FloatArray:
        return read_only_view(self._ema_fast)

    @property
    def ema_slow(self) -> FloatArray:
        return read_only_view(self._ema_slow)

    @property
    def stderr(self) -> FloatArray:
        """Binomial standard error of the latest point, sqrt(p(1-p)/n)."""
        p = self._latest
        with np.errstate(invalid="ignore", divide="ignore"):
            se: FloatArray = np.sqrt(p * (1 - p) / self._latest_n)
        return se

    def _jeffreys(self) -> tuple[FloatArray, FloatArray]:
        """Jeffreys interval of each latest point; NaN where a family was never probed."""
        n = self._latest_n.astype(np.float64)
        low, high = binomial_interval(self._latest * n, n, self.ci_level)
        never = np.isnan(self._latest)
        return np.where(never, np.nan, low), np.where(never, np.nan, high)

    @property
    def ci_low(self) -> FloatArray:
        """Jeffreys interval of the latest point (0 when no item passed)."""
        return self._jeffreys()[0]

    @property
    def ci_high(self) -> FloatArray:
        """Jeffreys interval of the latest point (1 when every item passed)."""
        return self._jeffreys()[1]

    def normalize(self, p: FloatArray) -> FloatArray:
        """Chance-normalised rate: (p - chance) / (1 - chance), clipped to [0, 1]."""
        return np.clip((p - self.chance) / (1 - self.chance), 0.0, 1.0)

    @property
    def normalized(self) -> FloatArray:
        return self.normalize(self._latest)

    # Analytics -----------------------------------------------------------------------------
    def slope(
        self, min_points: int = 4, alpha: float = 0.95
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Theil–Sen slope (score per step) over the window since the last tier reset, with
        its ``alpha`` confidence bounds; NaN where fewer than ``min_points`` points."""
        key = (min_points, alpha)
        if key not in self._slopes:
            slope, low, high = self._ring.slope(min_points, alpha)
            self._slopes[key] = (read_only_view(slope), read_only_view(low), read_only_view(high))
        return self._slopes[key]

    def span(self) -> FloatArray:
        """Steps covered by each family's window; slope * span is the change across it."""
        return self._ring.span()

    def pooled(self) -> tuple[FloatArray, FloatArray]:
        """Passed items and probe items summed over each family's window."""
        return self._ring.pooled()

    def halves(self) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Passed and total probe items of the older and newer half of each window."""
        return self._ring.halves()

    def domain_curve(self) -> tuple[FloatArray, FloatArray]:
        """Per-domain mean of the families' latest normalised scores, and its standard error
        (NaN for a domain with no probed family, or fewer than two for the error)."""
        has = np.isfinite(self._latest)
        x = np.where(has, self.normalized, 0.0)
        dom = self.domain_of_family
        k = np.bincount(dom, weights=has.astype(np.float64), minlength=self.n_domains)
        s = np.bincount(dom, weights=x, minlength=self.n_domains)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(k > 0, s / k, np.nan)
            dev = np.where(has, x - mean[dom], 0.0)
            ss = np.bincount(dom, weights=dev * dev, minlength=self.n_domains)
            se = np.where(k > 1, np.sqrt(ss / (k - 1) / k), np.nan)
        return mean, se

    def history(self, family: int) -> tuple[IntArray, FloatArray, IntArray]:
        """Steps, scores and n of one family's window since its last reset, oldest first."""
        if not 0 <= family < self.n_families:
            raise _fail(f"history: family must be in [0, {self.n_families}), got {family}")
        slots = self._ring.ordered(family)
        return (
            self._ring.step[family, slots].astype(np.int64),
            self._ring.value[family, slots].copy(),
            self._ring.n[family, slots].astype(np.int64),
        )

    # State ---------------------------------------------------------------------------------
    _ARRAYS = ("_latest", "_latest_n", "_latest_step", "_ema_fast", "_ema_slow", "_tier", "_resets")

    def state_dict(self) -> dict[str, Any]:
        """Everything needed for an exact resume (arrays copied; safe for dumps_state)."""
        state: dict[str, Any] = {
            "n_families": self.n_families,
            "window": self.window,
            "ring": self._ring.state_dict(),
        }
        state.update({name.lstrip("_"): getattr(self, name).copy() for name in self._ARRAYS})
        return state

    def check_state(self, state: Any, where: str = "curves") -> list[str]:
        """Problems with ``state`` as these curves' state (pure: nothing is applied): the
        structure of ``state_dict()``, floats finite where a fresh object's are, scores in
        [0, 1] (or NaN: none yet), counts >= 0."""
        problems = compare(self.state_dict(), state, where)
        if problems:
            return problems
        for key, want in (("n_families", self.n_families), ("window", self.window)):
            if state[key] != want:
                problems.append(f"{where}.{key}: expected {want}, got {state[key]!r}")
        if problems:
            return problems
        fresh = ProbeCurves(
            self.n_families,
            window=self.window,
            fast=self.fast,
            slow=self.slow,
            domain_of_family=self.domain_of_family,
            chance=self.chance,
            ci_level=self.ci_level,
        ).state_dict()
        finite_like(problems, fresh, state, where)
        ring = state["ring"]
        for name, values in (
            ("latest", state["latest"]),
            ("ema_fast", state["ema_fast"]),
            ("ema_slow", state["ema_slow"]),
            ("ring.value", ring["value"]),
        ):
            arr = np.asarray(values, dtype=np.float64)
            rule(problems, f"{where}.{name}", arr, (arr < 0) | (arr > 1), "must be in [0, 1]")
        non_negative(problems, state, ("latest_n", "resets"), where)
        non_negative(problems, ring, ("n", "count", "fresh", "step"), f"{where}.ring")
        tier = np.asarray(state["tier"])
        rule(problems, f"{where}.tier", tier, tier < -1, "must be a tier >= 0 (-1: none yet)")
        return problems

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state dict from a ProbeCurves of the same shape; else ConfigError."""
        for key, want in (("n_families", self.n_families), ("window", self.window)):
            if state.get(key) != want:
                raise ConfigError(f"ProbeCurves state.{key}: expected {want}, got {state.get(key)}")
        ring = _Ring(self.n_families, self.window)
        ring.load_state_dict(state["ring"], "ProbeCurves state.ring")
        loaded = checked_arrays(self, self._ARRAYS, state, "ProbeCurves")
        self._changed()
        self._ring = ring
        for name, arr in loaded.items():
            setattr(self, name, arr)
