"""The scheduling core: batches out, outcomes and probes in, weights, quotas and tiers adjusted."""

from ._batch import Batch, Outcome, Status, TaskRef
from ._breakers import BreakerConfig, CircuitBreakers
from ._curves import ProbeCurves, theil_sen
from ._detectors import (
    DetectorConfig,
    Detectors,
    HackingConfig,
    PlateauConfig,
    RegressionConfig,
    UnlearnableConfig,
)
from ._errors import ConfigError, ReportError
from ._events import Event
from ._probes import PriorityWeights, ProbeResults, ProbeRunner, ProbeSnapshot, priority_scores
from ._retries import RetryQueue
from ._scheduler import Scheduler, SchedulerConfig, Weights
from ._serialize import dumps_state, loads_state

__all__ = [
    "Batch",
    "BreakerConfig",
    "CircuitBreakers",
    "ConfigError",
    "DetectorConfig",
    "Detectors",
    "Event",
    "HackingConfig",
    "Outcome",
    "PlateauConfig",
    "PriorityWeights",
    "ProbeCurves",
    "ProbeResults",
    "ProbeRunner",
    "ProbeSnapshot",
    "RegressionConfig",
    "ReportError",
    "RetryQueue",
    "Scheduler",
    "SchedulerConfig",
    "Status",
    "TaskRef",
    "UnlearnableConfig",
    "Weights",
    "dumps_state",
    "loads_state",
    "priority_scores",
    "theil_sen",
]
