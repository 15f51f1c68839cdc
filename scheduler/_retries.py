"""The retry queue: tasks whose environment failed get another go, a bounded number of times.

An outcome with a fault status (``timeout``, ``env_error``) says nothing about the model, so it
is not counted in pass rates or learning progress. Instead the same (arm, variant) is queued
and handed out again in a later batch. Three bounds keep a broken environment from dragging
the run: a task is retried at most ``max_retries`` times (then it is ``abandoned``), retries
take at most ``max_share`` of a batch (so they never crowd out the curriculum), and the queue
holds at most ``capacity`` rows (the oldest overflow first). Rows of a family whose circuit
breaker is open are dropped.

Rows are numpy arrays in arrival order; ``pop`` hands out the oldest first.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from ._errors import ConfigError
from ._statecheck import as_array, compare, non_negative, rule

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_ROWS = ("arm", "variant", "attempts", "first_step")
_COUNTERS = ("pushed", "popped", "abandoned", "dropped_open", "dropped_overflow")


class RetryQueue:
    """Faulted tasks waiting for a later batch.

    ``attempts`` counts retries: 0 for a task drawn fresh, k for its k-th retry. ``pop``
    returns the attempt number each row will run as; the caller hands that number back to
    ``push`` if the retry faults again.

    >>> q = RetryQueue(catalog.family_of_arm, max_retries=2)
    >>> q.push(batch.arm[fault], batch.variant[fault], attempts[fault], step=batch.step)
    >>> arm, variant, attempts = q.pop(256, blocked=breakers.open_mask)
    """

    def __init__(
        self,
        family_of_arm: npt.ArrayLike,
        *,
        max_retries: int = 2,
        max_share: float = 0.25,
        capacity: int = 65536,
    ) -> None:
        if max_retries < 0:
            raise ConfigError(f"retries.max_retries: must be >= 0, got {max_retries!r}")
        if not 0.0 <= max_share <= 1.0:
            raise ConfigError(f"retries.max_share: must be in [0, 1], got {max_share!r}")
        if capacity < 1:
            raise ConfigError(f"retries.capacity: must be >= 1, got {capacity!r}")
        self.family_of_arm: IntArray = np.asarray(family_of_arm, dtype=np.int64)
        self.max_retries = int(max_retries)
        self.max_share = float(max_share)
        self.capacity = int(capacity)
        empty = np.zeros(0, dtype=np.int64)
        self.arm: IntArray = empty.copy()  # int64 [rows]
        self.variant: IntArray = empty.copy()  # int64 [rows]
        self.attempts: IntArray = empty.copy()  # int64 [rows], retries already made
        self.first_step: IntArray = empty.copy()  # int64 [rows], step of the fault that queued it
        self.counters: dict[str, int] = dict.fromkeys(_COUNTERS, 0)

    def __len__(self) -> int:
        return int(self.arm.shape[0])

    def limit(self, batch_size: int) -> int:
        """How many retries a batch of ``batch_size`` may carry."""
        return min(len(self), int(np.floor(self.max_share * batch_size)))

    def push(
        self, arm: npt.ArrayLike, variant: npt.ArrayLike, attempts: npt.ArrayLike, step: int
    ) -> int:
        """Queue faulted tasks (aligned arrays); returns how many were queued.

        A task whose ``attempts`` already reached ``max_retries`` is abandoned instead.
        """
        a = np.asarray(arm, dtype=np.int64).reshape(-1)
        v = np.asarray(variant, dtype=np.int64).reshape(-1)
        k = np.broadcast_to(np.asarray(attempts, dtype=np.int64), a.shape).copy()
        if v.shape != a.shape:
            raise ValueError("arm, variant and attempts must have one length")
        if a.size and (a.min() < 0 or a.max() >= self.family_of_arm.shape[0]):
            raise ValueError(f"arm ids must be in [0, {self.family_of_arm.shape[0]})")
        spent = k >= self.max_retries
        self.counters["abandoned"] += int(spent.sum())
        keep = ~spent
        self.arm = np.concatenate([self.arm, a[keep]])
        self.variant = np.concatenate([self.variant, v[keep]])
        self.attempts = np.concatenate([self.attempts, k[keep]])
        self.first_step = np.concatenate(
            [self.first_step, np.full(int(keep.sum()), int(step), dtype=np.int64)]
        )
        self.counters["pushed"] += int(keep.sum())
        over = len(self) - self.capacity
        if over > 0:
            self._take(np.arange(len(self)) >= over)
            self.counters["dropped_overflow"] += over
            log.warning("retry queue full: dropped the %d oldest rows", over)
        return int(keep.sum())

    def drop_families(self, blocked: npt.ArrayLike) -> int:
        """Drop rows of families where ``blocked`` (bool [n_families]) is True."""
        mask = np.asarray(blocked, dtype=bool)
        gone = mask[self.family_of_arm[self.arm]]
        n = int(gone.sum())
        if n:
            self._take(~gone)
            self.counters["dropped_open"] += n
        return n

    def pop(
        self, batch_size: int, *, blocked: npt.ArrayLike | None = None
    ) -> tuple[IntArray, IntArray, IntArray]:
        """The oldest rows, at most ``max_share`` of a batch: (arm, variant, attempt number).

        Rows of ``blocked`` families (e.g. ``breakers.open_mask``) are dropped first.
        """
        if blocked is not None:
            self.drop_families(blocked)
        k = self.limit(batch_size)
        out = (self.arm[:k].copy(), self.variant[:k].copy(), self.attempts[:k] + 1)
        self._take(np.arange(len(self)) >= k)
        self.counters["popped"] += k
        return out

    def state_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name).copy() for name in _ROWS}
        out["counters"] = dict(self.counters)
        out["config"] = {
            "max_retries": self.max_retries,
            "max_share": self.max_share,
            "capacity": self.capacity,
        }
        return out

    def check_state(self, state: Any, where: str = "retries") -> list[str]:
        """Problems with ``state`` as this queue's state (pure: nothing is applied): rows of
        one length, arm ids of this catalog, counters and attempts >= 0."""
        if not isinstance(state, Mapping):
            return [f"{where}: must be a mapping, got {type(state).__name__}"]
        problems = compare(
            self.state_dict()["counters"], state.get("counters"), f"{where}.counters"
        )
        rows: dict[str, IntArray] = {}
        for name in _ROWS:
            arr = as_array(state.get(name)) if name in state else None
            if arr is None or arr.dtype.kind not in "iu" or arr.ndim != 1:
                got = "missing" if name not in state else _describe(state[name])
                problems.append(f"{where}.{name}: must be a 1-d array of int64, got {got}")
            else:
                rows[name] = arr
        if problems:
            return problems
        if len({r.shape for r in rows.values()}) != 1:
            return [f"{where}: row arrays differ in length"]
        arm = rows["arm"]
        n_arms = self.family_of_arm.shape[0]
        rule(
            problems,
            f"{where}.arm",
            arm,
            (arm < 0) | (arm >= n_arms),
            "arm ids outside this catalog",
        )
        non_negative(problems, rows, ("variant", "attempts", "first_step"), where)
        non_negative(problems, state["counters"], _COUNTERS, f"{where}.counters")
        if arm.shape[0] > self.capacity:
            problems.append(f"{where}: {arm.shape[0]} rows, over the capacity {self.capacity}")
        return problems

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore exactly (the queue's rows and counters; the config stays this run's)."""
        problems = self.check_state(state)
        if problems:
            raise ConfigError("checkpoint: " + "; ".join(problems))
        for name in _ROWS:
            setattr(self, name, np.asarray(state[name], dtype=np.int64).reshape(-1).copy())
        self.counters = {name: int(state["counters"][name]) for name in _COUNTERS}

    def _take(self, keep: BoolArray) -> None:
        for name in _ROWS:
            setattr(self, name, getattr(self, name)[keep])


def _describe(value: Any) -> str:
    arr = as_array(value)
    return type(value).__name__ if arr is None else f"dtype {arr.dtype}, shape {arr.shape}"
