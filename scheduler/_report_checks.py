"""Pure checks of what a trainer reports: outcome arrays, Outcome lists, probe points.

Each function reads its input, checks all of it, and returns parsed numpy arrays, or
raises one ReportError that lists every problem with its index and reason. Nothing here
touches a scheduler's state, so the Scheduler calls these first and applies the result
only when they pass: a rejected report, probe or outcome changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from domains import Catalog

from ._batch import Outcome, Status
from ._errors import ReportError
from ._statecheck import as_array

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# (reward, success, process, cost, status), aligned with the tasks of a report
Columns = tuple[FloatArray, FloatArray, FloatArray, FloatArray, IntArray]

_REAL = "biuf"  # dtype kinds that are real numbers (bool as 0/1 for success)
_STATUS_NAMES = ", ".join(s.name.lower() for s in Status)
_N_STATUS = len(Status)


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def _is_real(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def _show(value: Any) -> str:
    item = value.item() if isinstance(value, np.generic) else value
    text = repr(item)
    return text if len(text) <= 40 else text[:37] + "..."


# ---------------------------------------------------------------------- outcome arrays
def real_column(name: str, value: Any, n: int, problems: list[str]) -> FloatArray | None:
    """``value`` as float64 [n] (None: all NaN), or None with a problem added."""
    if value is None:
        return np.full(n, np.nan)
    arr = as_array(value)
    if arr is None or arr.dtype.kind not in _REAL:
        got = type(value).__name__ if arr is None else f"dtype {arr.dtype}"
        problems.append(f"{name}: must be real numbers, got {got}")
        return None
    if arr.shape != (n,):
        problems.append(f"{name}: must have shape ({n},) like the batch, got {arr.shape}")
        return None
    return arr.astype(np.float64)


def parse_status(status: Any, n: int, problems: list[str]) -> IntArray:
    """Status codes [n] from names (any case), Status members or integer codes; None means
    all ok. A bool (True is no status), a fraction (1.7) or None among them is a problem."""
    if status is None:
        return np.zeros(n, dtype=np.int64)
    values = as_array(status)
    if values is None or values.shape != (n,):
        got = type(status).__name__ if values is None else f"shape {values.shape}"
        problems.append(f"status: must have shape ({n},) like the batch, got {got}")
        return np.zeros(n, dtype=np.int64)
    kind = values.dtype.kind
    if kind in "iu":
        codes = values.astype(np.int64)
        bad = (codes < 0) | (codes >= _N_STATUS)
    elif kind == "f":
        with np.errstate(invalid="ignore"):
            ok = (values == np.round(values)) & (values >= 0) & (values < _N_STATUS)
        codes = np.where(ok, values, -1).astype(np.int64)
        bad = ~ok
    elif kind in "US":
        names, inverse = np.unique(np.char.lower(values.astype(str)), return_inverse=True)
        known = {s.name.lower(): int(s) for s in Status}
        table = np.array([known.get(str(x), -1) for x in names.tolist()], dtype=np.int64)
        codes = table[inverse.reshape(-1)]
        bad = codes < 0
    elif kind == "O":  # mixed or odd values: one look per element, with a cache
        cache: dict[tuple[type, Any], int] = {}
        codes = np.empty(n, dtype=np.int64)
        for i, v in enumerate(values.tolist()):
            try:
                key = (type(v), v)
                if key not in cache:
                    cache[key] = _status_code(v)
                codes[i] = cache[key]
            except TypeError:  # unhashable
                codes[i] = -1
        bad = codes < 0
    else:  # bool, complex, bytes...
        codes = np.zeros(n, dtype=np.int64)
        bad = np.ones(n, dtype=bool)
    for i in np.flatnonzero(bad)[:10].tolist():
        problems.append(
            f"status[{i}]: must be one of {_STATUS_NAMES} (or its code 0..{_N_STATUS - 1}), "
            f"got {_show(values[i])}"
        )
    if bad.sum() > 10:
        problems.append(f"status: {int(bad.sum()) - 10} more bad values")
    return np.where(bad, 0, codes).astype(np.int64)


def _status_code(value: Any) -> int:
    """The code of one status value, or -1."""
    if isinstance(value, str):
        return int(Status[value.upper()]) if value.upper() in Status.__members__ else -1
    if _is_int(value) and 0 <= int(value) < _N_STATUS:
        return int(value)
    return -1


def check_values(
    catalog: Catalog,
    family: IntArray,
    reward: FloatArray,
    success: FloatArray,
    process: FloatArray,
    cost: FloatArray,
    problems: list[str],
) -> None:
    """Ranges of parsed outcome columns: rewards finite and in the family's reward_range,
    success in [0, 1], process in [0, 1] or NaN, cost >= 0 or NaN."""
    lo, hi = catalog.reward_low[family], catalog.reward_high[family]
    # One pass for a good report (the common case): a comparison with NaN is False, so
    # ``good`` is False wherever ``value_problems`` would find a problem, and only then is
    # that run, for the messages.
    good = (
        (np.abs(reward) < np.inf)
        & (reward >= lo - 1e-9)
        & (reward <= hi + 1e-9)
        & (success >= 0)
        & (success <= 1)
        & ~((process < 0) | (process > 1))
        & ~((cost < 0) | (cost == np.inf))
    )
    if not good.all():
        value_problems(catalog, family, reward, success, process, cost, problems)


def value_problems(
    catalog: Catalog,
    family: IntArray,
    reward: FloatArray,
    success: FloatArray,
    process: FloatArray,
    cost: FloatArray,
    problems: list[str],
) -> None:
    """``check_values`` the long way: every problem, with its index and value."""
    lo, hi = catalog.reward_low[family], catalog.reward_high[family]
    values = {"rewards": reward, "success": success, "process": process, "cost": cost}
    checks = (
        ("rewards", ~np.isfinite(reward), "must be finite"),
        (
            "rewards",
            np.isfinite(reward) & ((reward < lo - 1e-9) | (reward > hi + 1e-9)),
            "outside the family's reward_range",
        ),
        ("success", ~np.isfinite(success) | (success < 0) | (success > 1), "must be in [0, 1]"),
        ("process", ~np.isnan(process) & ((process < 0) | (process > 1)), "must be in [0, 1]"),
        ("cost", ~np.isnan(cost) & ~(np.isfinite(cost) & (cost >= 0)), "must be >= 0"),
    )
    for name, bad, message in checks:
        for i in np.flatnonzero(bad)[:10].tolist():
            extra = f" [{lo[i]:g}, {hi[i]:g}]" if message.startswith("outside") else ""
            problems.append(
                f"{name}[{i}] ({catalog.family_names[family[i]]}): {message}{extra}, "
                f"got {values[name][i]!r}"
            )
        if bad.sum() > 10:
            problems.append(f"{name}: {int(bad.sum()) - 10} more bad values")


def parse_columns(
    catalog: Catalog,
    family: IntArray,
    rewards: Any,
    success: Any,
    process: Any,
    cost: Any,
    status: Any,
) -> Columns:
    """The outcome columns of a batch of ``family`` (its drawn families), checked whole.
    Success defaults to "reward at the top of its range"."""
    n = family.shape[0]
    if rewards is None:
        raise ReportError(["rewards: required"])
    problems: list[str] = []
    parsed = {
        name: real_column(name, value, n, problems)
        for name, value in (
            ("rewards", rewards),
            ("success", success),
            ("process", process),
            ("cost", cost),
        )
    }
    stat = parse_status(status, n, problems)
    if problems:
        raise ReportError(problems)
    reward, succ, proc, cst = (parsed[k] for k in ("rewards", "success", "process", "cost"))
    assert reward is not None and succ is not None and proc is not None and cst is not None
    if success is None:
        succ = (reward >= catalog.reward_high[family]).astype(np.float64)
    check_values(catalog, family, reward, succ, proc, cst, problems)
    if problems:
        raise ReportError(problems)
    return reward, succ, proc, cst, stat


# ---------------------------------------------------------------------- Outcome lists
def parse_outcomes(catalog: Catalog, outcomes: Any) -> tuple[IntArray, IntArray, Columns]:
    """(arm, variant, columns) of a list of Outcome, checked whole."""
    if not isinstance(outcomes, list | tuple):
        raise ReportError(
            [f"report: expected a Batch or a list of Outcome, got {type(outcomes).__name__}"]
        )
    problems: list[str] = []
    n = len(outcomes)
    arm = np.zeros(n, dtype=np.int64)
    variant = np.zeros(n, dtype=np.int64)
    values = np.full((4, n), np.nan)
    status: list[Any] = []
    for i, o in enumerate(outcomes):
        if not isinstance(o, Outcome):
            problems.append(f"outcome[{i}]: expected Outcome, got {type(o).__name__}")
            status.append(0)
            continue
        if not (_is_int(o.arm) and 0 <= o.arm < catalog.n_arms):
            problems.append(f"outcome[{i}].arm: unknown arm {_show(o.arm)}")
        else:
            arm[i] = o.arm
            size = int(catalog.pool_size[o.arm])
            if not (_is_int(o.variant) and 0 <= o.variant < size):
                problems.append(
                    f"outcome[{i}].variant: must be in [0, {size}) for arm {o.arm}, "
                    f"got {_show(o.variant)}"
                )
            else:
                variant[i] = o.variant
        fields = (("reward", o.reward), ("process", o.process), ("cost", o.cost))
        for j, (name, v) in enumerate(fields):
            if _is_real(v):
                values[(0, 2, 3)[j], i] = float(v)
            else:
                problems.append(f"outcome[{i}].{name}: must be a real number, got {_show(v)}")
        if _is_real(o.success) or isinstance(o.success, bool | np.bool_):
            values[1, i] = float(o.success)
        else:
            problems.append(
                f"outcome[{i}].success: must be a bool or a number, got {_show(o.success)}"
            )
        status.append(o.status)
    column = np.empty(n, dtype=object)
    column[:] = status
    stat = parse_status(column, n, problems)
    if problems:
        raise ReportError(problems)
    reward, succ, proc, cst = values
    check_values(catalog, catalog.family_of_arm[arm], reward, succ, proc, cst, problems)
    if problems:
        raise ReportError(problems)
    return arm, variant, (reward, succ, proc, cst, stat)


# ---------------------------------------------------------------------- probes
@dataclass(frozen=True, eq=False)
class Probes:
    """Probe points of one ``record_probes`` call, checked: aligned arrays [k]."""

    family: IntArray
    score: FloatArray
    tier: IntArray
    n: IntArray
    step: int


def _int_column(name: str, value: Any, problems: list[str]) -> IntArray | None:
    """A 1-d integer column (a scalar counts as one element; whole floats are fine)."""
    arr = as_array(value)
    if arr is not None and arr.ndim == 0:
        arr = arr.reshape(1)
    if arr is None or arr.dtype.kind not in "iuf":
        got = type(value).__name__ if arr is None else f"dtype {arr.dtype}"
        problems.append(f"probes.{name}: must be integers, got {got}")
        return None
    if arr.ndim != 1:
        problems.append(f"probes.{name}: must be one-dimensional, got shape {arr.shape}")
        return None
    if arr.dtype.kind == "f":
        whole = np.isfinite(arr) & (arr == np.round(arr)) & (np.abs(arr) < 2.0**62)
        for i in np.flatnonzero(~whole)[:10].tolist():
            problems.append(f"probe[{i}].{name}: must be an integer, got {arr[i].item()!r}")
        if not whole.all():
            return None
    return arr.astype(np.int64)


def family_id(catalog: Catalog, family: Any) -> int:
    """One family given by name or id, or a ReportError naming it."""
    if isinstance(family, str):
        try:
            return catalog.family_id(family)
        except KeyError as exc:
            raise ReportError([f"probe: {exc.args[0]}"]) from None
    if _is_int(family) and 0 <= int(family) < catalog.n_families:
        return int(family)
    raise ReportError([f"probe: unknown family id {_show(family)}"])


# a probe's step and item count must fit the probe curves' int32 slots
_MAX_STEP = 2**31 - 1
_MAX_ITEMS = 2**31 - 1


def parse_probes(
    catalog: Catalog,
    current_tier: IntArray,
    families: Any,
    scores: Any,
    tiers: Any,
    n: Any,
    step: Any,
    default_step: int,
) -> Probes:
    """The points of one ``record_probes`` call, checked whole: integer families and
    tiers of this catalog, scores in [0, 1], n >= 1 items, a step >= 0, one-dimensional
    aligned arrays, and no (family, tier) twice (each probe replaces the arm's latest, so a
    repeat in one call would silently drop one; record repeats in separate calls)."""
    problems: list[str] = []
    fam = _int_column("families", families, problems)
    sc_arr = as_array(scores)
    if sc_arr is not None and sc_arr.ndim == 0:
        sc_arr = sc_arr.reshape(1)
    sc: FloatArray | None = None
    if sc_arr is None or sc_arr.dtype.kind not in "iuf":
        got = type(scores).__name__ if sc_arr is None else f"dtype {sc_arr.dtype}"
        problems.append(f"probes.scores: must be real numbers, got {got}")
    elif sc_arr.ndim != 1:
        problems.append(f"probes.scores: must be one-dimensional, got shape {sc_arr.shape}")
    else:
        sc = sc_arr.astype(np.float64)
    tr = None if tiers is None else _int_column("tiers", tiers, problems)
    nn = None if n is None else _int_column("n", n, problems)
    at = default_step
    if step is not None:
        if not _is_int(step) or not 0 <= int(step) <= _MAX_STEP:
            problems.append(
                f"probe.step: must be an integer step in [0, {_MAX_STEP}], got {_show(step)}"
            )
        else:
            at = int(step)
    if problems or fam is None or sc is None:
        raise ReportError(problems)
    k = fam.shape[0]
    lengths = {"families": k, "scores": sc.shape[0]}
    if tiers is not None and tr is not None:
        lengths["tiers"] = tr.shape[0]
    if n is not None and nn is not None:
        lengths["n"] = nn.shape[0]
    if len(set(lengths.values())) != 1:
        raise ReportError(
            [f"probes: families, scores, tiers and n must have one length, got {lengths}"]
        )
    bad_f = (fam < 0) | (fam >= catalog.n_families)
    problems += [f"probe[{i}].family: unknown family id {fam[i]}" for i in np.flatnonzero(bad_f)]
    fam_ok = np.where(bad_f, 0, fam)
    if tr is None:
        tr = current_tier[fam_ok]
    if nn is None:
        nn = np.ones(k, dtype=np.int64)
    bad_t = ~bad_f & ((tr < 0) | (tr >= catalog.n_tiers[fam_ok]))
    problems += [f"probe[{i}].tier: no tier {tr[i]}" for i in np.flatnonzero(bad_t)]
    bad_s = ~np.isfinite(sc) | (sc < 0) | (sc > 1)
    problems += [f"probe[{i}].score: must be in [0, 1], got {sc[i]}" for i in np.flatnonzero(bad_s)]
    problems += [f"probe[{i}].n: must be >= 1, got {nn[i]}" for i in np.flatnonzero(nn < 1)]
    problems += [
        f"probe[{i}].n: must be at most {_MAX_ITEMS} items, got {nn[i]}"
        for i in np.flatnonzero(nn > _MAX_ITEMS)
    ]
    ok = ~bad_f & ~bad_t
    if ok.any():
        arm = np.where(ok, catalog.arm_start[fam_ok] + np.where(ok, tr, 0), -1)
        _, first, inverse = np.unique(arm, return_index=True, return_inverse=True)
        repeat = ok & (first[inverse.reshape(-1)] != np.arange(k))
        for i in np.flatnonzero(repeat)[:10].tolist():
            j = int(first[inverse.reshape(-1)[i]])
            problems.append(
                f"probe[{i}]: family {fam[i]} at tier {tr[i]} again (first at probe[{j}]); "
                "record repeated probes of one arm in separate calls"
            )
    if problems:
        raise ReportError(problems)
    return Probes(family=fam, score=sc, tier=tr.astype(np.int64), n=nn, step=at)
