"""Rows of the SQL store, both ways: numpy columns and Events encoded as row dicts (checked,
so a bad value is a StoreError naming it before any transaction starts), and selected rows
decoded into arrays."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Row

from .._events import Event
from ._protocol import (
    PROBE_COLUMNS,
    FloatArray,
    IntArray,
    ProbePoints,
    RunInfo,
    StoreError,
    WeightsArg,
)

WEIGHT_DTYPE = np.dtype("<f8")
FLOAT_PROBE = frozenset({"wall_time", "score", "ci_low", "ci_high"})


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True)
class ProbeRows:
    """Probe rows as columns (name -> Python list), ready for either insert path."""

    columns: dict[str, list[Any]]
    n: int

    def __bool__(self) -> bool:
        return self.n > 0


def rows(keys: Sequence[str], columns: Sequence[list[Any]], **const: Any) -> list[dict[str, Any]]:
    """Row dicts for executemany from aligned Python lists (``ndarray.tolist()``)."""
    if const:
        return [
            {**const, **dict(zip(keys, vals, strict=True))} for vals in zip(*columns, strict=True)
        ]
    return [dict(zip(keys, vals, strict=True)) for vals in zip(*columns, strict=True)]


def float_column(values: Sequence[Any]) -> FloatArray:
    # None comes back where SQLite stored a NaN as NULL.
    return np.array(values, dtype=np.float64) if values else np.zeros(0, np.float64)


def int_column(values: Sequence[Any]) -> IntArray:
    return np.array(values, dtype=np.int64) if values else np.zeros(0, np.int64)


def columns(rows: Sequence[Row[Any]], width: int) -> list[tuple[Any, ...]]:
    return list(zip(*rows, strict=True)) if rows else [() for _ in range(width)]


def weight_pairs(weights: WeightsArg | None) -> list[tuple[int, Any]]:
    if weights is None:
        return []
    if isinstance(weights, tuple) and len(weights) == 2 and not isinstance(weights[0], tuple):
        step, arr = weights
        return [(int(step), arr)]
    try:
        return [(int(step), arr) for step, arr in weights]
    except (TypeError, ValueError):
        raise StoreError(
            "weights: expected (step, array) or a list of (step, array) pairs"
        ) from None


def run_info(row: Row[Any]) -> RunInfo:
    return RunInfo(
        run_id=int(row.id),
        name=str(row.name),
        seed=int(row.seed),
        created_at=as_utc(row.created_at),
        config=json.loads(row.config_json),
        catalog_fingerprint=str(row.catalog_fingerprint),
        families=tuple(json.loads(row.families_json)),
    )


def probe_points_of(rows: Sequence[Row[Any]]) -> ProbePoints:
    cols = columns(rows, len(PROBE_COLUMNS) + 1)
    versions = sorted({str(v) for v in cols[-1]})
    arrays: dict[str, Any] = {
        name: (float_column(col) if name in FLOAT_PROBE else int_column(col))
        for name, col in zip(PROBE_COLUMNS, cols, strict=False)
    }
    return ProbePoints(**arrays, probe_version=",".join(versions))


def probe_rows(run_id: int, points: ProbePoints) -> ProbeRows:
    if not isinstance(points, ProbePoints):
        raise StoreError(f"probe_points: expected ProbePoints, got {type(points).__name__}")
    n = len(points)
    columns = {c: getattr(points, c).tolist() for c in PROBE_COLUMNS}
    columns["run_id"] = [run_id] * n
    columns["probe_version"] = [points.probe_version] * n
    return ProbeRows(columns, n)


def event_rows(run_id: int, events: Sequence[Event]) -> list[dict[str, Any]]:
    out = []
    for i, ev in enumerate(events):
        if not isinstance(ev, Event):
            raise StoreError(f"events[{i}]: expected scheduler.Event, got {type(ev).__name__}")
        try:
            payload = json.dumps(ev.payload, sort_keys=True, allow_nan=True)
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"events[{i}].payload ({ev.kind} at step {ev.step}): must be "
                f"JSON-serialisable ({exc})"
            ) from None
        out.append(
            {
                "run_id": run_id,
                "step": int(ev.step),
                "kind": str(ev.kind),
                "family": ev.family,
                "domain": ev.domain,
                "payload_json": payload,
            }
        )
    return out


def weight_row(run_id: int, step: int, weights: FloatArray) -> dict[str, Any]:
    arr = np.asarray(weights)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.number):
        raise StoreError(
            f"weights at step {step}: must be a 1-D numeric array, got shape {arr.shape} "
            f"dtype {arr.dtype}"
        )
    data = np.ascontiguousarray(arr, dtype=WEIGHT_DTYPE).tobytes()
    return {"run_id": run_id, "step": int(step), "size": int(arr.shape[0]), "data": data}


def checkpoint_row(run_id: int, step: int, state: bytes) -> dict[str, Any]:
    if not isinstance(state, bytes | bytearray | memoryview):
        raise StoreError(
            f"checkpoint at step {step}: state must be bytes from dumps_state(), "
            f"got {type(state).__name__}"
        )
    return {"run_id": run_id, "step": int(step), "created_at": utcnow(), "state": bytes(state)}
