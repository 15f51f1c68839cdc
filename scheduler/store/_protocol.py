"""The Store interface and the row containers it speaks.

Rows travel as aligned numpy arrays (struct of arrays), never as one object per row, so a
step's worth of probe points or outcomes is written with one executemany and read back with
one select.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from domains import Catalog, CurriculumError

from .._batch import Status
from .._events import Event

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


_MIN_STATUS, _MAX_STATUS = min(Status), max(Status)
assert list(Status) == list(range(_MIN_STATUS, _MAX_STATUS + 1))  # contiguous codes


class StoreError(CurriculumError):
    """A store problem the user can fix: a bad URL, a missing run, bad rows, a schema too new."""


@dataclass(frozen=True)
class RunInfo:
    """One run as recorded in the store."""

    run_id: int
    name: str
    seed: int
    created_at: datetime  # UTC, timezone-aware
    config: dict[str, Any]
    catalog_fingerprint: str
    families: tuple[str, ...]  # family names; row family ids index this tuple


def _coerce(obj: Any, kind: str, name: str, dtype: type[np.generic], n: int | None) -> Any:
    """One column as a 1-D array of ``dtype`` and length ``n`` (checked), or StoreError."""
    try:
        arr = np.asarray(getattr(obj, name))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{kind}.{name}: not an array ({exc})") from None
    if arr.ndim != 1:
        raise StoreError(f"{kind}.{name}: must be 1-D, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise StoreError(f"{kind}.{name}: has {arr.shape[0]} elements, the other columns have {n}")
    fractional = (
        dtype is np.int64
        and arr.size > 0
        and not np.issubdtype(arr.dtype, np.integer)
        and (not np.issubdtype(arr.dtype, np.floating) or not np.all(arr == np.round(arr)))
    )
    if fractional:
        raise StoreError(f"{kind}.{name}: must hold integers, got dtype {arr.dtype}")
    try:
        return np.ascontiguousarray(arr, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{kind}.{name}: cannot be read as {dtype.__name__} ({exc})") from None


def _normalise(obj: Any, kind: str, columns: Mapping[str, type[np.generic]]) -> int:
    """Coerce every array column of a frozen dataclass in place; returns the row count."""
    n: int | None = None
    for name, dtype in columns.items():
        arr = _coerce(obj, kind, name, dtype, n)
        n = int(arr.shape[0])
        object.__setattr__(obj, name, arr)
    return n or 0


_PROBE_COLUMNS: dict[str, type[np.generic]] = {
    "family": np.int64,
    "tier": np.int64,
    "step": np.int64,
    "wall_time": np.float64,
    "score": np.float64,
    "n": np.int64,
    "ci_low": np.float64,
    "ci_high": np.float64,
}

_OUTCOME_COLUMNS: dict[str, type[np.generic]] = {
    "step": np.int64,
    "arm": np.int64,
    "family": np.int64,
    "tier": np.int64,
    "variant": np.int64,
    "reward": np.float64,
    "success": np.float64,
    "process": np.float64,
    "cost": np.float64,
    "status": np.int64,
}


@dataclass(frozen=True, eq=False)
class ProbePoints:
    """Held-out probe scores: element i is one (family, tier, step) point."""

    family: IntArray  # int64 [k], family id (index into RunInfo.families)
    tier: IntArray  # int64 [k]
    step: IntArray  # int64 [k]
    wall_time: FloatArray  # float64 [k], unix seconds
    score: FloatArray  # float64 [k]
    n: IntArray  # int64 [k], probe items behind the score
    ci_low: FloatArray  # float64 [k]
    ci_high: FloatArray  # float64 [k]
    probe_version: str = ""  # distinct versions joined by "," when read back mixed

    def __post_init__(self) -> None:
        _normalise(self, "probe_points", _PROBE_COLUMNS)

    def __len__(self) -> int:
        return int(self.step.shape[0])

    @classmethod
    def empty(cls) -> ProbePoints:
        z_i, z_f = np.zeros(0, np.int64), np.zeros(0, np.float64)
        return cls(z_i, z_i, z_i, z_f, z_f, z_i, z_f, z_f)

    def columns(self) -> dict[str, npt.NDArray[Any]]:
        return {name: getattr(self, name) for name in _PROBE_COLUMNS}

    def take(self, index: npt.ArrayLike) -> ProbePoints:
        """The points at ``index`` (integer positions or a boolean mask), in that order."""
        idx = np.arange(len(self))[np.asarray(index)]
        cols = {k: v[idx] for k, v in self.columns().items()}
        return ProbePoints(**cols, probe_version=self.probe_version)

    @classmethod
    def concat(cls, parts: Sequence[ProbePoints]) -> ProbePoints:
        """One set of points from several (e.g. buffered steps); versions must agree."""
        if not parts:
            return cls.empty()
        versions = {p.probe_version for p in parts}
        if len(versions) > 1:
            raise StoreError(f"probe_points: cannot merge probe versions {sorted(versions)}")
        cols = {k: np.concatenate([p.columns()[k] for p in parts]) for k in _PROBE_COLUMNS}
        return cls(**cols, probe_version=versions.pop())

    def equals(self, other: ProbePoints) -> bool:
        """Exact equality of every column (NaN equals NaN) and of the version."""
        return self.probe_version == other.probe_version and all(
            np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
            for a, b in zip(self.columns().values(), other.columns().values(), strict=True)
        )


@dataclass(frozen=True, eq=False)
class OutcomeRows:
    """Outcome index rows: element i is one task result. Trajectories live elsewhere (URI)."""

    step: IntArray  # int64 [k]
    arm: IntArray  # int64 [k]
    family: IntArray  # int64 [k]
    tier: IntArray  # int64 [k]
    variant: IntArray  # int64 [k]
    reward: FloatArray  # float64 [k]
    success: FloatArray  # float64 [k]
    process: FloatArray  # float64 [k], NaN when absent
    cost: FloatArray  # float64 [k]
    status: IntArray  # int64 [k], scheduler.Status codes
    trajectory_uri: list[str | None] | None = None  # None when no row has one

    def __post_init__(self) -> None:
        n = _normalise(self, "outcomes", _OUTCOME_COLUMNS)
        uris = self.trajectory_uri
        if uris is not None:
            uris = list(uris)
            if len(uris) != n:
                raise StoreError(
                    f"outcomes.trajectory_uri: has {len(uris)} elements, the other columns have {n}"
                )
            bad = [i for i, u in enumerate(uris) if u is not None and not isinstance(u, str)]
            if bad:
                raise StoreError(f"outcomes.trajectory_uri[{bad[0]}]: must be a string or None")
            object.__setattr__(self, "trajectory_uri", uris)
        valid = (self.status >= _MIN_STATUS) & (self.status <= _MAX_STATUS)
        if not valid.all():
            i = int(np.flatnonzero(~valid)[0])
            raise StoreError(
                f"outcomes.status[{i}]: {int(self.status[i])} is not a Status code "
                f"({', '.join(f'{s.name}={int(s)}' for s in Status)})"
            )

    def __len__(self) -> int:
        return int(self.step.shape[0])

    @classmethod
    def empty(cls) -> OutcomeRows:
        z_i, z_f = np.zeros(0, np.int64), np.zeros(0, np.float64)
        return cls(z_i, z_i, z_i, z_i, z_i, z_f, z_f, z_f, z_f, z_i)

    def columns(self) -> dict[str, npt.NDArray[Any]]:
        return {name: getattr(self, name) for name in _OUTCOME_COLUMNS}

    @classmethod
    def concat(cls, parts: Sequence[OutcomeRows]) -> OutcomeRows:
        """One set of rows from several (e.g. buffered steps)."""
        if not parts:
            return cls.empty()
        cols = {k: np.concatenate([p.columns()[k] for p in parts]) for k in _OUTCOME_COLUMNS}
        has_uri = any(p.trajectory_uri is not None for p in parts)
        uris = [u for p in parts for u in p.uris()] if has_uri else None
        return cls(**cols, trajectory_uri=uris)

    def take(self, index: npt.ArrayLike) -> OutcomeRows:
        """The rows at ``index`` (integer positions or a boolean mask), in that order."""
        idx = np.arange(len(self))[np.asarray(index)]
        cols = {k: v[idx] for k, v in self.columns().items()}
        uris = self.trajectory_uri
        return OutcomeRows(**cols, trajectory_uri=None if uris is None else [uris[i] for i in idx])

    def uris(self) -> list[str | None]:
        return list(self.trajectory_uri) if self.trajectory_uri is not None else [None] * len(self)

    def equals(self, other: OutcomeRows) -> bool:
        """Exact equality of every column (NaN equals NaN) and of the URIs."""
        return self.uris() == other.uris() and all(
            np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
            for a, b in zip(self.columns().values(), other.columns().values(), strict=True)
        )


# Names of the array columns, for the SQL layer (one source of truth).
PROBE_COLUMNS: tuple[str, ...] = tuple(_PROBE_COLUMNS)
OUTCOME_COLUMNS: tuple[str, ...] = tuple(_OUTCOME_COLUMNS)
assert {f.name for f in fields(ProbePoints)} == {*PROBE_COLUMNS, "probe_version"}
assert {f.name for f in fields(OutcomeRows)} == {*OUTCOME_COLUMNS, "trajectory_uri"}

# One (step, weights) pair, or a list of them (a buffered writer's several steps).
WeightsArg = tuple[int, FloatArray] | Sequence[tuple[int, FloatArray]]

DEFAULT_REPLAY_STATUSES: tuple[Status, ...] = (Status.FAILED,)


@runtime_checkable
class Store(Protocol):
    """Durable record of runs: probe curves, events, weights, outcomes and checkpoints.

    ``write`` is the commit unit of a step: everything given to one call becomes visible
    together or not at all, so a crash never leaves a checkpoint without its rows.
    """

    def open_run(
        self,
        name: str,
        *,
        seed: int,
        config: Mapping[str, Any],
        catalog: Catalog,
        resume: bool = False,
    ) -> RunInfo: ...

    def get_run(self, name: str) -> RunInfo | None: ...

    def runs(self) -> list[RunInfo]: ...

    def add_probe_points(self, run_id: int, points: ProbePoints) -> None: ...

    def probe_curve(self, run_id: int, family: int, tier: int | None = None) -> ProbePoints: ...

    def probe_points(self, run_id: int, since_step: int | None = None) -> ProbePoints: ...

    def add_events(self, run_id: int, events: Sequence[Event]) -> None: ...

    def events(
        self,
        run_id: int,
        *,
        kind: str | None = None,
        family: str | None = None,
        since_step: int | None = None,
    ) -> list[Event]: ...

    def add_weights(self, run_id: int, step: int, weights: FloatArray) -> None: ...

    def weights(self, run_id: int) -> tuple[IntArray, FloatArray]: ...

    def add_outcomes(self, run_id: int, rows: OutcomeRows) -> None: ...

    def outcomes(self, run_id: int, since_step: int | None = None) -> OutcomeRows: ...

    def replay_set(
        self,
        run_id: int,
        *,
        statuses: Sequence[Status | int] = DEFAULT_REPLAY_STATUSES,
        families: Sequence[int] | None = None,
        since_step: int | None = None,
        limit: int | None = None,
    ) -> OutcomeRows: ...

    def freeze_regression_set(self, run_id: int, name: str, rows: OutcomeRows) -> None: ...

    def regression_set(self, run_id: int, name: str) -> OutcomeRows: ...

    def regression_sets(self, run_id: int) -> list[str]: ...

    def save_checkpoint(self, run_id: int, step: int, state: bytes) -> None: ...

    def latest_checkpoint(self, run_id: int) -> tuple[int, bytes] | None: ...

    def checkpoint_steps(self, run_id: int) -> list[int]: ...

    def checkpoint(self, run_id: int, step: int) -> bytes | None: ...

    def integrity_check(self) -> str: ...

    def write(
        self,
        run_id: int,
        *,
        probe_points: ProbePoints | None = None,
        events: Sequence[Event] = (),
        weights: WeightsArg | None = None,
        outcomes: OutcomeRows | None = None,
        checkpoint: tuple[int, bytes] | None = None,
    ) -> None: ...

    def truncate_after(self, run_id: int, step: int) -> None: ...

    def schema_version(self) -> int: ...

    def close(self) -> None: ...
