"""The ArmView policies read, made once and reused while the arrays behind it stay.

The statistics and the tiers are updated in place, so a read-only view of one of those
arrays shows its latest values for as long as the array object lives. ``ArmViews`` keeps
the views with the objects they were made from, and makes new ones only when one of those
objects was replaced (a ``load_state_dict``, a part swapped); a step that moved on just
gets a view with the new step. It checks identity, so nothing has to tell it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from policies import ArmView

from .probing._curves import read_only_view

if TYPE_CHECKING:
    from ._scheduler import Scheduler

# the ArmView fields that are read-only views of ArmStats arrays of the same name
_STATS = (
    "count",
    "success_fast",
    "success_slow",
    "reward_fast",
    "reward_slow",
    "process_fast",
    "process_slow",
    "last_step",
    "probe_score",
    "probe_step",
)


class ArmViews:
    """The latest ArmView of one scheduler and the objects it views."""

    def __init__(self) -> None:
        self._view: ArmView | None = None
        self._sources: tuple[Any, ...] = ()

    def of(self, sched: Scheduler) -> ArmView:
        """The scheduler's state now, as an ArmView of read-only views."""
        s = sched.stats
        sources = (
            *(getattr(s, name) for name in _STATS),
            sched.tiers.tier,
            sched.catalog,
            sched.curves,
            sched.config,
        )
        view = self._view
        if (
            view is None
            or len(sources) != len(self._sources)
            or any(a is not b for a, b in zip(sources, self._sources, strict=True))
        ):
            view = ArmView(
                catalog=sched.catalog,
                step=sched.step,
                **{name: read_only_view(getattr(s, name)) for name in _STATS},
                tier=read_only_view(sched.tiers.tier),
                curves=sched.curves,
                fast_rate=sched.config.ema_fast,
                slow_rate=sched.config.ema_slow,
            )
            self._sources = sources
        elif view.step != sched.step:
            view = replace(view, step=sched.step)
        self._view = view
        return view
