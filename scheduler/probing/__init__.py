"""Probing: the hand-over to and from whatever probes (snapshots, rounds, results), the
ProbeRunner and where its calls run (threads, Ray), and the probe curves."""

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr
from ._curves import ProbeCurves, theil_sen
from ._executors import ProbeExecutor, ThreadProbeExecutor
from ._handover import (
    ProbeFn,
    ProbeMany,
    ProbeResults,
    ProbeRound,
    ProbeSnapshot,
    call_probe_many,
)
from ._runner import PriorityWeights, ProbeRunner, priority_scores

if TYPE_CHECKING:
    from ._ray import RayProbeExecutor

# Ray is imported when the executor is built; its module is light but optional.
__getattr__ = lazy_getattr(__name__, {"RayProbeExecutor": "._ray"})

__all__ = [
    "PriorityWeights",
    "ProbeCurves",
    "ProbeExecutor",
    "ProbeFn",
    "ProbeMany",
    "ProbeResults",
    "ProbeRound",
    "ProbeRunner",
    "ProbeSnapshot",
    "RayProbeExecutor",
    "ThreadProbeExecutor",
    "call_probe_many",
    "priority_scores",
    "theil_sen",
]
