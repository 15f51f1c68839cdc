"""Pure checks of a saved state against the shape of a live one, for ``load_state_dict``.

Every component checks a state before anything of it is applied, so a rejected checkpoint
leaves the scheduler as it was. The structure (keys, array shapes, dtypes) is not written
out by hand: it is read from a *template*, the ``state_dict()`` a component returns for the
current catalog, so a field added to a component is checked with no change here. Value
rules (ranges, finiteness) are the few lines each component adds on top (``rule``).

Problems are strings ``field.path: what is wrong, got ...``; the caller prefixes
``checkpoint:`` and raises one ConfigError listing them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

# The dtype kinds a saved array may have for each kind of template array: a list or an
# array of a narrower type is fine, a float where an integer belongs is not (it would be
# truncated), and strings or objects never are.
_KINDS = {"f": "fiu", "i": "iu", "u": "iu", "b": "b"}
_SKIPPED = frozenset({"config"})  # configs ride along for reference and are never applied


def as_array(value: Any) -> npt.NDArray[Any] | None:
    """``value`` as an array, or None if numpy cannot make a plain one of it."""
    if type(value) is np.ndarray:  # what np.asarray would return, without the call
        return value
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return None
    return arr


def compare(template: Any, state: Any, where: str, *, skip: Iterable[str] = ()) -> list[str]:
    """Problems where ``state`` does not have the structure of ``template``.

    Mappings need every key of the template (extra keys are ignored: nothing reads them);
    arrays need the template's shape and a dtype that casts to the template's without loss;
    Python scalars need the same type (an int for an int, never a bool). Keys named in
    ``skip`` and ``config`` are not compared.
    """
    skipped = _SKIPPED | set(skip)
    if isinstance(template, Mapping):
        if not isinstance(state, Mapping):
            return [f"{where}: must be a mapping, got {type(state).__name__}"]
        problems: list[str] = []
        for key, want in template.items():
            if key in skipped:
                continue
            name = f"{where}.{key}" if where else str(key)
            if key not in state:
                problems.append(f"{name}: missing")
            else:
                problems += compare(want, state[key], name)
        return problems
    if isinstance(template, np.ndarray):
        return _compare_array(template, state, where)
    if isinstance(template, bool):
        ok = isinstance(state, bool | np.bool_)
        return [] if ok else [f"{where}: must be true or false, got {state!r}"]
    if isinstance(template, int):
        ok = isinstance(state, int | np.integer) and not isinstance(state, bool | np.bool_)
        return [] if ok else [f"{where}: must be an integer, got {_short(state)}"]
    if isinstance(template, float):
        ok = isinstance(state, int | float | np.integer | np.floating) and not isinstance(
            state, bool | np.bool_
        )
        return [] if ok else [f"{where}: must be a number, got {_short(state)}"]
    if isinstance(template, str):
        return [] if isinstance(state, str) else [f"{where}: must be a string, got {_short(state)}"]
    if isinstance(template, list | tuple):
        ok = isinstance(state, list | tuple)
        return [] if ok else [f"{where}: must be a list, got {type(state).__name__}"]
    return []


def _compare_array(template: npt.NDArray[Any], state: Any, where: str) -> list[str]:
    arr = as_array(state)
    if arr is None or arr.dtype.kind not in _KINDS.get(template.dtype.kind, template.dtype.kind):
        got = type(state).__name__ if arr is None else f"dtype {arr.dtype}"
        return [f"{where}: must be an array of {template.dtype}, got {got}"]
    if arr.shape != template.shape:
        return [f"{where}: expected shape {template.shape}, got {arr.shape}"]
    if template.dtype.kind in "iu" and arr.size:
        low, high = (int(arr.min()), int(arr.max())) if arr.dtype.kind in "iu" else (0, 1)
        info = np.iinfo(template.dtype)
        if low < info.min or high > info.max:
            return [f"{where}: values outside {template.dtype}, got {low}..{high}"]
    return []


def rule(problems: list[str], where: str, values: Any, bad: npt.ArrayLike, text: str) -> None:
    """Add ``where: text, got v at [i]`` for the first of ``bad`` (and how many more)."""
    mask = np.asarray(bad, dtype=bool).reshape(-1)
    if not mask.any():
        return
    flat = np.asarray(values).reshape(-1)
    first = int(np.flatnonzero(mask)[0])
    index = np.unravel_index(first, np.shape(values)) if np.ndim(values) > 1 else (first,)
    at = ", ".join(str(int(i)) for i in index)
    more = int(mask.sum()) - 1
    extra = f" (and {more} more)" if more else ""
    problems.append(f"{where}: {text}, got {flat[first].item()!r} at [{at}]{extra}")


def finite_like(
    problems: list[str], template: Mapping[str, Any], state: Mapping[str, Any], where: str
) -> None:
    """Every float array that is all finite in ``template`` (a fresh component: counts,
    sums, EMAs that start at 0) must be finite in ``state``; arrays a fresh component fills
    with NaN ("not seen yet") may hold NaN but not infinities. Recurses into mappings."""
    for key, want in template.items():
        if key in _SKIPPED or key not in state:
            continue
        name = f"{where}.{key}" if where else str(key)
        if isinstance(want, Mapping) and isinstance(state[key], Mapping):
            finite_like(problems, want, state[key], name)
        elif isinstance(want, np.ndarray) and want.dtype.kind == "f":
            arr = np.asarray(state[key], dtype=np.float64)
            if np.isfinite(want).all():
                rule(problems, name, arr, ~np.isfinite(arr), "must be finite")
            else:
                rule(problems, name, arr, np.isinf(arr), "must be finite or NaN (not yet seen)")


def non_negative(
    problems: list[str], state: Mapping[str, Any], names: Iterable[str], where: str
) -> None:
    """Each of ``names`` (arrays of ``state``) must be >= 0 (NaN passes; finiteness is
    ``finite_like``'s job)."""
    for key in names:
        if key in state:
            arr = np.asarray(state[key], dtype=np.float64)
            rule(problems, f"{where}.{key}", arr, arr < 0, "must be >= 0")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
