"""The learned cost of each family: seconds per episode, and an alarm on overrun.

It starts from the manifest's estimate and follows what the trainer reports (every status
counts: a timeout costs compute too). Compute quotas read it; a family running far over
its estimate raises one ``cost_overrun`` event until it comes back under.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from domains import Catalog

from ._events import Event

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_MIN_SEEN = 20  # episodes of a family before its learned cost may raise the alarm
_REARM = 0.8  # the alarm re-arms once the cost is back under this share of its level


class CostModel:
    """EMA of seconds per episode per family (arrays [n_families])."""

    def __init__(self, catalog: Catalog, *, rate: float, overrun: float) -> None:
        self._catalog = catalog
        self.rate = rate
        self.overrun = overrun
        self.cost: FloatArray = catalog.cost_s.astype(np.float64, copy=True)
        self.seen: IntArray = np.zeros(catalog.n_families, dtype=np.int64)
        self.alarm: BoolArray = np.zeros(catalog.n_families, dtype=bool)

    def learn(self, step: int, family: IntArray, cost: FloatArray) -> tuple[bool, list[Event]]:
        """Fold in these episodes' costs (nan: not reported). Returns whether any cost
        moved, and the overrun events; only the families in the report are touched."""
        known = np.isfinite(cost)
        if not known.any():
            return False, []
        touched, inverse = np.unique(family[known], return_inverse=True)
        k = np.bincount(inverse, minlength=touched.shape[0]).astype(np.float64)
        mean = np.bincount(inverse, weights=cost[known], minlength=touched.shape[0]) / k
        alpha = 1.0 - (1.0 - self.rate) ** k
        self.cost[touched] += alpha * (mean - self.cost[touched])
        self.seen[touched] += k.astype(np.int64)
        ratio = self.cost[touched] / self._catalog.cost_s[touched]
        alarm = (ratio > self.overrun) & (self.seen[touched] >= _MIN_SEEN)
        raised = touched[alarm & ~self.alarm[touched]]
        events = [self._event(step, int(f)) for f in raised.tolist()]
        self.alarm[touched] = (self.alarm[touched] | alarm) & (ratio > _REARM * self.overrun)
        return True, events

    def _event(self, step: int, f: int) -> Event:
        cat = self._catalog
        return Event(
            step=step,
            kind="cost_overrun",
            family=cat.family_names[f],
            domain=cat.domain_names[int(cat.domain_of_family[f])],
            payload={
                "estimated_s": float(cat.cost_s[f]),
                "learned_s": float(self.cost[f]),
                "ratio": float(self.cost[f] / cat.cost_s[f]),
            },
        )

    def state_dict(self) -> dict[str, Any]:
        return {
            "cost": self.cost.copy(),
            "cost_seen": self.seen.copy(),
            "cost_alarm": self.alarm.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.cost = np.asarray(state["cost"], dtype=np.float64).copy()
        self.seen = np.asarray(state["cost_seen"], dtype=np.int64).copy()
        self.alarm = np.asarray(state["cost_alarm"], dtype=bool).copy()
