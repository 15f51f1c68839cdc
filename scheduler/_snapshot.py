"""A frozen view of the scheduler for what follows a run (metrics, the recorder).

Consumers read this, not the scheduler's live parts: arrays are read-only copies taken at
one moment (the start of a step, where everything before it is applied), and the curves
are the read-only ``CurveView`` a policy sees. Derived flags are computed once here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from policies import CurveView

from ._listeners import frozen_copy
from ._weights import Weights

if TYPE_CHECKING:
    from ._scheduler import Scheduler

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class SchedulerSnapshot:
    step: int  # batches drawn so far
    weights: Weights  # the distribution the next batch is drawn from
    tier: IntArray  # int64 [n_families], current tiers
    cost: FloatArray  # float64 [n_families], learned seconds per episode
    count: npt.NDArray[np.int32]  # int32 [n_arms], episodes counted
    success_fast: FloatArray  # float64 [n_arms]
    curves: CurveView  # probe curves per family (read-only protocol)
    domain_probe: FloatArray  # float64 [n_domains], the domains' probe curves' latest point
    mastered: BoolArray  # bool [n_families]
    held_back: BoolArray  # bool [n_families]: idle or suspected of hacking
    breakers_open: BoolArray  # bool [n_families]

    @classmethod
    def of(cls, sched: Scheduler) -> SchedulerSnapshot:
        return cls(
            step=sched.step,
            weights=sched.weights(),
            tier=frozen_copy(sched.tiers.tier),
            cost=frozen_copy(sched.costs.cost),
            count=frozen_copy(sched.stats.count),
            success_fast=frozen_copy(sched.stats.success_fast),
            curves=sched.curves,
            domain_probe=frozen_copy(sched.curves.domain_curve()[0]),
            mastered=frozen_copy(sched.mastered),
            held_back=frozen_copy(sched.held_back()),
            breakers_open=frozen_copy(sched.breakers.open_mask),
        )
