"""Which dataset row holds each task the scheduler draws: the one map every adapter shares.

A dataset holds rows tagged with (family, tier, variant) in the columns ``DatasetColumns``
names. A (family, tier) need not have a row for every variant of its pool: the rows it has
are its pool, and variant ``v`` of that arm is its ``v mod k``-th row (of ``k``, by variant
id). Every (family, tier) needs at least one row, since the scheduler may draw any of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from domains import Catalog

from .._batch import Batch
from .._errors import ConfigError
from ._columns import DatasetColumns

IntArray = npt.NDArray[np.int64]
_SHOWN = 5  # problems listed in one error; the count of the rest follows


class RowIndex:
    """Dataset rows of every arm, grouped by arm and sorted by variant id."""

    def __init__(self, catalog: Catalog, arm: IntArray, variant: IntArray) -> None:
        """``arm`` and ``variant`` (int64 [n_rows]) are row i's arm and variant id, checked."""
        self.catalog = catalog
        order = np.lexsort((variant, arm))
        self._rows: IntArray = order.astype(np.int64)  # int64 [n_rows], grouped by arm
        self.arm_of_row: IntArray = arm.copy()  # int64 [n_rows]
        self.variant_of_row: IntArray = variant.copy()  # int64 [n_rows]
        counts = np.bincount(arm, minlength=catalog.n_arms)
        self.rows_per_arm: IntArray = counts.astype(np.int64)  # int64 [n_arms]
        self._start: IntArray = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        self._stride = int(catalog.pool_size.max()) if catalog.n_arms else 1
        self._keys: IntArray = (arm * self._stride + variant)[order]  # sorted, unique

    @property
    def n_rows(self) -> int:
        return int(self.arm_of_row.shape[0])

    @classmethod
    def from_columns(
        cls,
        catalog: Catalog,
        *,
        family: Sequence[str] | npt.ArrayLike,
        tier: npt.ArrayLike,
        variant: npt.ArrayLike,
        columns: DatasetColumns | None = None,
    ) -> RowIndex:
        """Build from a dataset's columns (row i has family name or id, tier and variant id).

        Raises ConfigError naming the row and column of every bad value (an unknown family,
        a tier or variant out of range), the rows that repeat a (family, tier, variant), and
        the (family, tier) pairs without a row. ``columns`` names the columns in messages."""
        names = columns or DatasetColumns()
        fam_col = np.asarray(family)
        tr_col = np.asarray(tier)
        var_col = np.asarray(variant)
        if not (fam_col.shape == tr_col.shape == var_col.shape) or fam_col.ndim != 1:
            raise ConfigError(
                f"RowIndex: columns {names.family!r}, {names.tier!r} and {names.variant!r} "
                f"must be 1-D and of one length, got shapes {fam_col.shape}, {tr_col.shape}, "
                f"{var_col.shape}"
            )
        problems: list[str] = []
        fam = _family_ids(catalog, fam_col, names.family, problems)
        tr = _integers(tr_col, names.tier, problems)
        var = _integers(var_col, names.variant, problems)
        bad_family = fam < 0
        safe_fam = np.where(bad_family, 0, fam)
        bad_tier = ~bad_family & ((tr < 0) | (tr >= catalog.n_tiers[safe_fam]))
        for i in np.flatnonzero(bad_tier)[:_SHOWN].tolist():
            f = int(fam[i])
            problems.append(
                f"row {i}, column {names.tier!r}: family {catalog.family_names[f]!r} has tiers "
                f"0..{int(catalog.n_tiers[f]) - 1}, got {int(tr[i])}"
            )
        arm = np.where(bad_family | bad_tier, 0, catalog.arm_start[safe_fam] + tr)
        bad_variant = ~(bad_family | bad_tier) & ((var < 0) | (var >= catalog.pool_size[arm]))
        for i in np.flatnonzero(bad_variant)[:_SHOWN].tolist():
            problems.append(
                f"row {i}, column {names.variant!r}: the pool of "
                f"{catalog.family_names[int(fam[i])]!r} tier {int(tr[i])} has variants "
                f"0..{int(catalog.pool_size[arm[i]]) - 1}, got {int(var[i])}"
            )
        _more(problems, int(bad_tier.sum()), names.tier)
        _more(problems, int(bad_variant.sum()), names.variant)
        if problems:
            raise ConfigError("RowIndex: " + "; ".join(problems))
        stride = int(catalog.pool_size.max())
        keys = arm * stride + var
        order = np.argsort(keys, kind="stable")
        repeat = np.flatnonzero(keys[order][1:] == keys[order][:-1])
        for j in repeat[:_SHOWN].tolist():
            a, b = int(order[j]), int(order[j + 1])
            problems.append(
                f"rows {a} and {b} both hold {catalog.family_names[int(fam[a])]!r} tier "
                f"{int(tr[a])} variant {int(var[a])}"
            )
        if repeat.shape[0] > _SHOWN:
            problems.append(f"and {repeat.shape[0] - _SHOWN} more repeated rows")
        empty = np.flatnonzero(np.bincount(arm, minlength=catalog.n_arms) == 0)
        for a in empty[:_SHOWN].tolist():
            f = int(catalog.family_of_arm[a])
            problems.append(
                f"{catalog.family_names[f]!r} tier {int(catalog.tier_of_arm[a])} has no row "
                "(every family and tier the scheduler can draw needs at least one)"
            )
        if empty.shape[0] > _SHOWN:
            problems.append(f"and {empty.shape[0] - _SHOWN} more (family, tier) pairs without rows")
        if problems:
            raise ConfigError("RowIndex: " + "; ".join(problems))
        return cls(catalog, arm.astype(np.int64), var)

    @classmethod
    def from_dataset(
        cls, catalog: Catalog, dataset: Any, columns: DatasetColumns | None = None
    ) -> RowIndex:
        """Build from anything indexable by column name (a ``datasets.Dataset``, a dict of
        lists, a pandas DataFrame), reading the columns ``columns`` names."""
        names = columns or DatasetColumns()
        have = _column_names(dataset)
        missing = [c for c in names.names() if have is not None and c not in have]
        if missing:
            raise ConfigError(
                f"RowIndex: the dataset has no column {missing[0]!r} "
                f"(it has {sorted(have or [])}); name the columns with "
                "DatasetColumns(family=..., tier=..., variant=...)"
            )
        return cls.from_columns(
            catalog,
            family=list(dataset[names.family]),
            tier=list(dataset[names.tier]),
            variant=list(dataset[names.variant]),
            columns=names,
        )

    def rows(self, batch: Batch) -> IntArray:
        """The dataset rows of a batch's tasks, in batch order."""
        return self.rows_of(batch.arm, batch.variant)

    def rows_of(self, arm: IntArray, variant: IntArray) -> IntArray:
        """Row of each (arm, variant): the arm's ``variant mod k``-th row of its ``k``."""
        at = self._start[arm] + variant % self.rows_per_arm[arm]
        result: IntArray = self._rows[at]
        return result

    def lookup(self, arm: IntArray, variant: IntArray) -> IntArray:
        """The row holding exactly (arm, dataset variant id), or -1 where none does."""
        cat = self.catalog
        safe = np.clip(arm, 0, max(cat.n_arms - 1, 0))
        valid = (arm >= 0) & (arm < cat.n_arms) & (variant >= 0) & (variant < cat.pool_size[safe])
        keys = safe * self._stride + np.where(valid, variant, 0)
        at = np.clip(np.searchsorted(self._keys, keys), 0, max(self._keys.shape[0] - 1, 0))
        hit = valid & (self._keys[at] == keys)
        result: IntArray = np.where(hit, self._rows[at], -1).astype(np.int64)
        return result


def _column_names(dataset: Any) -> list[str] | None:
    names = getattr(dataset, "column_names", None)
    if names is None and isinstance(dataset, Mapping):
        names = list(dataset.keys())
    if names is None and hasattr(dataset, "columns"):
        names = [str(c) for c in dataset.columns]
    return None if names is None else list(names)


def _integers(col: npt.NDArray[Any], name: str, problems: list[str]) -> IntArray:
    """The column as int64; each non-integer value is a problem naming its row."""
    if col.dtype.kind in "iu":
        return col.astype(np.int64)
    try:
        as_float = col.astype(np.float64)
        ok = np.isfinite(as_float) & (as_float == np.round(as_float))
    except (TypeError, ValueError):
        as_float = np.zeros(col.shape[0])
        ok = np.zeros(col.shape[0], dtype=bool)
    for i in np.flatnonzero(~ok)[:_SHOWN].tolist():
        problems.append(f"row {i}, column {name!r}: must be an integer, got {col[i]!r}")
    return np.where(ok, as_float, -1).astype(np.int64)


def _family_ids(
    catalog: Catalog, col: npt.NDArray[Any], name: str, problems: list[str]
) -> IntArray:
    """Family id of each row (-1 where unknown), looked up once per distinct value."""
    if col.dtype.kind in "iu":
        fam = col.astype(np.int64)
        bad = (fam < 0) | (fam >= catalog.n_families)
        for i in np.flatnonzero(bad)[:_SHOWN].tolist():
            problems.append(
                f"row {i}, column {name!r}: family ids run 0..{catalog.n_families - 1}, "
                f"got {int(fam[i])}"
            )
        _more(problems, int(bad.sum()), name)
        return np.where(bad, -1, fam)
    distinct, inverse = np.unique(col.astype(str), return_inverse=True)
    index = {n: i for i, n in enumerate(catalog.family_names)}
    ids = np.array([index.get(str(d), -1) for d in distinct.tolist()], dtype=np.int64)
    fam = ids[inverse.reshape(-1)]
    bad = fam < 0
    for i in np.flatnonzero(bad)[:_SHOWN].tolist():
        problems.append(f"row {i}, column {name!r}: unknown family {str(col[i])!r}")
    _more(problems, int(bad.sum()), name)
    return fam


def _more(problems: list[str], count: int, name: str) -> None:
    if count > _SHOWN:
        problems.append(f"and {count - _SHOWN} more bad values in column {name!r}")
