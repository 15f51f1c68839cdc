"""The scheduling core: batches out, outcomes and probes in, weights, quotas and tiers adjusted."""

from ._batch import Batch, Outcome, Status, TaskRef
from ._errors import ConfigError, ReportError
from ._events import Event
from ._scheduler import Scheduler, SchedulerConfig, Weights
from ._serialize import dumps_state, loads_state

__all__ = [
    "Batch",
    "ConfigError",
    "Event",
    "Outcome",
    "ReportError",
    "Scheduler",
    "SchedulerConfig",
    "Status",
    "TaskRef",
    "Weights",
    "dumps_state",
    "loads_state",
]
