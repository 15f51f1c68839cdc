"""The bounded in-memory backlog of metric values between the training thread and the worker.

Not thread-safe by itself: the tracker holds its lock around every call. Adding a record is
O(number of keys) with no I/O. When the backlog exceeds ``max_values``, it shrinks to 3/4 of
that (hysteresis, so the cost is amortised O(1) per value):

1. coalesce: for a (key, step) logged more than once, only the newest value is kept;
2. thin: if that is not enough, every other record of the older half of the backlog is
   dropped, repeatedly. Every key keeps its first point and full recent resolution, and old
   history gets sparser (roughly log-spaced), so each curve keeps its shape in the UI.
   The newest record is never dropped.

Every value removed is counted (``coalesced`` or ``dropped``), so at any time
``queued == sent + coalesced + dropped + backlog`` holds for the tracker.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(slots=True)
class Record:
    """The values of one ``log_metrics`` call (or a piece of one)."""

    seq: int  # order of arrival; the flush target
    step: int
    timestamp_ms: int
    keys: tuple[str, ...]
    values: FloatArray  # float64 [len(keys)]

    def __len__(self) -> int:
        return len(self.keys)


class MetricBuffer:
    """FIFO of records with a value budget, coalescing and thinning on overflow."""

    def __init__(self, max_values: int) -> None:
        self.max_values = max_values
        self._records: deque[Record] = deque()
        self.size = 0  # values held
        self.queued = 0
        self.coalesced = 0
        self.dropped = 0
        self.max_backlog = 0
        self.last_seq = 0

    def add(self, step: int, timestamp_ms: int, keys: tuple[str, ...], values: FloatArray) -> int:
        self.last_seq += 1
        self._records.append(Record(self.last_seq, step, timestamp_ms, keys, values))
        self.size += len(keys)
        self.queued += len(keys)
        self.max_backlog = max(self.max_backlog, self.size)
        if self.size > self.max_values:
            self._shrink(target=(self.max_values * 3) // 4)
        return self.last_seq

    def take(self, n: int) -> list[Record]:
        """Remove and return up to ``n`` values from the front, splitting a record if needed."""
        out: list[Record] = []
        count = 0
        while self._records and count < n:
            rec = self._records[0]
            room = n - count
            if len(rec) <= room:
                out.append(self._records.popleft())
                count += len(rec)
            else:
                out.append(
                    Record(rec.seq, rec.step, rec.timestamp_ms, rec.keys[:room], rec.values[:room])
                )
                self._records[0] = Record(
                    rec.seq, rec.step, rec.timestamp_ms, rec.keys[room:], rec.values[room:]
                )
                count += room
        self.size -= count
        return out

    def clear(self) -> int:
        """Drop everything (counted as dropped); returns how many values that was."""
        lost = self.size
        self.dropped += lost
        self._records.clear()
        self.size = 0
        return lost

    @property
    def front_seq(self) -> int | None:
        return self._records[0].seq if self._records else None

    @property
    def front_timestamp_ms(self) -> int | None:
        return self._records[0].timestamp_ms if self._records else None

    def __len__(self) -> int:
        return len(self._records)

    # Overflow ------------------------------------------------------------------------------
    def _shrink(self, target: int) -> None:
        self._coalesce()
        while self.size > target and len(self._records) > 1:
            records = list(self._records)
            half = max(1, (len(records) - 1) // 2)
            old = records[:half]
            drop, keep = (old[1::2], old[0::2]) if len(old) >= 2 else (old, [])
            lost = sum(len(r) for r in drop)
            self._records = deque(keep + records[half:])
            self.size -= lost
            self.dropped += lost

    def _coalesce(self) -> None:
        """Keep only the newest value of each (key, step); a record left empty is removed."""
        by_step: dict[int, list[int]] = {}
        for i, rec in enumerate(self._records):
            by_step.setdefault(rec.step, []).append(i)
        groups = [idx for idx in by_step.values() if len(idx) > 1]
        if not groups:
            return
        records = list(self._records)
        for idx in groups:
            newer: set[str] = set()
            for i in reversed(idx):  # newest first
                rec = records[i]
                keep = np.fromiter((k not in newer for k in rec.keys), dtype=bool, count=len(rec))
                newer.update(rec.keys)
                removed = len(rec) - int(keep.sum())
                if removed:
                    keys = tuple(k for k, m in zip(rec.keys, keep.tolist(), strict=True) if m)
                    records[i] = Record(rec.seq, rec.step, rec.timestamp_ms, keys, rec.values[keep])
                    self.size -= removed
                    self.coalesced += removed
        self._records = deque(r for r in records if len(r))
