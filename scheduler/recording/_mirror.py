"""RecorderMirror: what a RunRecorder does to the scheduler's state, without recording.

A recorder drains the scheduler's events and caches the next batch's weights as each step
begins (``RunRecorder.before_batch``); both are in ``state_dict``. Replicas of one run
(torch.distributed, TRL under accelerate) record on rank 0 only, so the other ranks add
this listener instead, and every replica's state stays byte-equal.
"""

from __future__ import annotations

from .._listeners import ProbesRecorded, Reported
from .._scheduler import Scheduler


class RecorderMirror:
    """``sched.add_listener(RecorderMirror(sched))`` on every rank that does not record."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    def on_report(self, reported: Reported) -> None:
        """Nothing: a recorder only keeps the copy."""

    def on_probes(self, probes: ProbesRecorded) -> None:
        """Nothing: a recorder only keeps the copy."""

    def before_batch(self, step: int) -> None:
        self._scheduler.weights()
        self._scheduler.drain_events()
