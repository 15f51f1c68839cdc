"""Compact encoding of outcome rows: one record array per step, stored as little-endian bytes.

A training step reports hundreds of outcomes. Inserting them one SQL row each costs several
microseconds a row (parameter processing plus three B-tree updates), which alone would add
tens of percent to a simulated step. One blob per step costs one row. Queries (replay sets)
select the steps by SQL (run, step, a bitmask of the statuses present) and filter the decoded
arrays with numpy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._protocol import OUTCOME_COLUMNS, OutcomeRows, StoreError

# Every column but ``step`` (one step per blob), packed little-endian (55 bytes a row) so any
# host reads it. Ids are int32 and tiers int16: encode() checks the ranges.
_RECORD = np.dtype(
    [
        ("arm", "<i4"),
        ("family", "<i4"),
        ("tier", "<i2"),
        ("variant", "<i8"),
        ("status", "<i1"),
        ("reward", "<f8"),
        ("success", "<f8"),
        ("process", "<f8"),
        ("cost", "<f8"),
    ]
)
assert set(_RECORD.names or ()) | {"step"} == set(OUTCOME_COLUMNS)


def status_mask(status: np.ndarray) -> int:
    """A bitmask with bit ``s`` set when status ``s`` occurs."""
    present = np.flatnonzero(np.bincount(status, minlength=1))
    return int(np.bitwise_or.reduce(np.left_shift(1, present), initial=0))


def _check_ranges(rows: OutcomeRows) -> None:
    for name in ("arm", "family", "tier"):
        values = getattr(rows, name)
        info = np.iinfo(_RECORD.fields[name][0])  # type: ignore[index]
        bad = (values < 0) | (values > info.max)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise StoreError(
                f"outcomes.{name}[{i}]: {int(values[i])} is out of range 0..{info.max}"
            )


def encode(rows: OutcomeRows) -> list[dict[str, Any]]:
    """One chunk per step present in ``rows`` (rows keep their order within a step)."""
    if not len(rows):
        return []
    _check_ranges(rows)
    order = np.argsort(rows.step, kind="stable")
    steps, starts = np.unique(rows.step[order], return_index=True)
    bounds = np.append(starts, len(order))
    record = np.empty(len(rows), dtype=_RECORD)
    for name in _RECORD.names or ():
        record[name] = getattr(rows, name)
    record = record[order]
    uris = rows.trajectory_uri
    chunks = []
    for i, step in enumerate(steps.tolist()):
        part = slice(int(bounds[i]), int(bounds[i + 1]))
        block = record[part]
        chunk_uris = None if uris is None else [uris[j] for j in order[part].tolist()]
        chunks.append(
            {
                "step": step,
                "size": int(block.shape[0]),
                "status_mask": status_mask(block["status"]),
                "data": block.tobytes(),
                "uris_json": None
                if chunk_uris is None or all(u is None for u in chunk_uris)
                else json.dumps(chunk_uris),
            }
        )
    return chunks


def decode(chunks: Sequence[Any]) -> OutcomeRows:
    """Rows of chunks (with .step .size .data .uris_json), concatenated in the given order."""
    if not chunks:
        return OutcomeRows.empty()
    sizes = np.fromiter((c.size for c in chunks), dtype=np.int64, count=len(chunks))
    blob = b"".join(bytes(c.data) for c in chunks)
    if len(blob) != int(sizes.sum()) * _RECORD.itemsize:
        raise StoreError("outcome chunk is corrupt: its byte length does not match its size")
    record = np.frombuffer(blob, dtype=_RECORD)
    steps = np.repeat(np.fromiter((c.step for c in chunks), np.int64, len(chunks)), sizes)
    uris: list[str | None] | None = None
    if any(c.uris_json is not None for c in chunks):
        uris = []
        for c in chunks:
            uris.extend(json.loads(c.uris_json) if c.uris_json is not None else [None] * c.size)
    cols: dict[str, Any] = {name: record[name] for name in _RECORD.names or ()}
    return OutcomeRows(step=steps, **cols, trajectory_uri=uris)  # (widened back to int64)


_FLAT = np.dtype([("step", "<i8"), *((n, _RECORD.fields[n][0]) for n in _RECORD.names or ())])  # type: ignore[index]


def encode_flat(rows: OutcomeRows) -> tuple[bytes, str | None]:
    """All rows in their order (step included): for frozen regression sets."""
    _check_ranges(rows)
    record = np.empty(len(rows), dtype=_FLAT)
    for name in _FLAT.names or ():
        record[name] = getattr(rows, name)
    uris = rows.trajectory_uri
    has_uri = uris is not None and any(u is not None for u in uris)
    return record.tobytes(), json.dumps(uris) if has_uri else None


def decode_flat(data: bytes, uris_json: str | None) -> OutcomeRows:
    if len(data) % _FLAT.itemsize:
        raise StoreError("regression set is corrupt: its byte length is not a whole row count")
    record = np.frombuffer(data, dtype=_FLAT)
    cols: dict[str, Any] = {name: record[name] for name in _FLAT.names or ()}
    uris = json.loads(uris_json) if uris_json is not None else None
    return OutcomeRows(**cols, trajectory_uri=uris)
