"""Listeners: whatever follows a run (the recorder) hears of it from the scheduler itself.

A trainer reports each batch once, to ``Scheduler.report``; a listener added with
``Scheduler.add_listener`` gets a frozen copy of what was applied, so nothing is passed
twice and probes that arrive through ``apply_probe_results`` (the asynchronous
``ProbeRunner``) are heard as well as those of ``probe_round``. Calls come on the thread
that called the scheduler (the training thread), so a listener only copies or queues:
slow work (MLflow, figures) goes to its own worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from domains import Catalog

from ._report_checks import Columns

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
_A = TypeVar("_A", bound=npt.NDArray[np.generic])


def frozen_copy(a: _A) -> _A:
    """A read-only copy: what a consumer of the scheduler's state gets."""
    out: _A = a.copy()
    out.flags.writeable = False
    return out


@dataclass(frozen=True, eq=False)
class Reported:
    """The outcomes one ``report`` applied, aligned read-only arrays [k] (copies)."""

    step: int  # the batch's step
    arm: IntArray
    family: IntArray
    tier: IntArray
    variant: IntArray
    reward: FloatArray
    success: FloatArray
    process: FloatArray
    cost: FloatArray
    status: IntArray  # Status codes

    def __len__(self) -> int:
        return int(self.arm.shape[0])

    @classmethod
    def concat(cls, parts: list[Reported]) -> Reported:
        """One report of several (a step reported in pieces): the latest step."""
        if len(parts) == 1:
            return parts[0]
        names = ("arm", "family", "tier", "variant", "reward", "success", "process", "cost")
        arrays = {n: np.concatenate([getattr(p, n) for p in parts]) for n in names}
        status = np.concatenate([p.status for p in parts])
        return cls(step=max(p.step for p in parts), status=status, **arrays)


@dataclass(frozen=True, eq=False)
class ProbesRecorded:
    """The probe points of one ``record_probes`` call, checked, read-only arrays [k]."""

    step: int
    families: IntArray
    tiers: IntArray
    scores: FloatArray
    n: IntArray

    def __len__(self) -> int:
        return int(self.families.shape[0])


class Listener(Protocol):
    """What the scheduler calls, in this order within a step: ``on_report`` after a report
    is applied; ``on_probes`` for each ``record_probes`` call, once its points are checked
    (read the snapshot, not the scheduler, from there); ``before_batch`` at the start of
    ``next_batch``, before anything is drawn, when all that came before is applied (the
    place for a checkpoint). An exception raised here reaches the caller."""

    def on_report(self, reported: Reported) -> None: ...

    def on_probes(self, probes: ProbesRecorded) -> None: ...

    def before_batch(self, step: int) -> None: ...


class Listeners:
    """The scheduler's listeners. Snapshots are built only when someone listens; the time
    spent in listeners is counted (``seconds``), so a caller can leave it out of its own."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog
        self._items: list[Listener] = []
        self.seconds = 0.0

    def __len__(self) -> int:
        return len(self._items)

    def add(self, listener: Listener) -> None:
        if listener not in self._items:
            self._items.append(listener)

    def remove(self, listener: Listener) -> None:
        if listener in self._items:
            self._items.remove(listener)

    def report(self, step: int, arm: IntArray, variant: IntArray, columns: Columns) -> None:
        if not self._items:
            return
        start = time.perf_counter()
        reward, success, process, cost, status = columns
        reported = Reported(
            step=int(step),
            arm=frozen_copy(arm),
            family=frozen_copy(self._catalog.family_of_arm[arm]),
            tier=frozen_copy(self._catalog.tier_of_arm[arm]),
            variant=frozen_copy(variant),
            reward=frozen_copy(reward),
            success=frozen_copy(success),
            process=frozen_copy(process),
            cost=frozen_copy(cost),
            status=frozen_copy(status),
        )
        for listener in list(self._items):
            listener.on_report(reported)
        self.seconds += time.perf_counter() - start

    def probes(
        self, step: int, family: IntArray, tier: IntArray, score: FloatArray, n: IntArray
    ) -> None:
        if not self._items:
            return
        start = time.perf_counter()
        probes = ProbesRecorded(
            step=int(step),
            families=frozen_copy(family),
            tiers=frozen_copy(tier),
            scores=frozen_copy(score),
            n=frozen_copy(n),
        )
        for listener in list(self._items):
            listener.on_probes(probes)
        self.seconds += time.perf_counter() - start

    def before_batch(self, step: int) -> None:
        if not self._items:
            return
        start = time.perf_counter()
        for listener in list(self._items):
            listener.before_batch(step)
        self.seconds += time.perf_counter() - start
