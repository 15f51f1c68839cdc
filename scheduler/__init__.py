"""The scheduling core: batches out, outcomes and probes in, weights, quotas and tiers adjusted."""

from ._batch import Batch, Outcome, Status, TaskRef
from ._breakers import BreakerConfig, CircuitBreakers
from ._curves import ProbeCurves, theil_sen
from ._demand import Demand
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
from ._figures import (
    events_figure,
    probe_curves_figure,
    save_figures,
    tier_timeline_figure,
    weights_heatmap_figure,
)
from ._history import AttentionRow, DomainCurves, EventCounts, RunHistory, TierTimeline
from ._probes import (
    PriorityWeights,
    ProbeExecutor,
    ProbeResults,
    ProbeRound,
    ProbeRunner,
    ProbeSnapshot,
    ThreadProbeExecutor,
    priority_scores,
)
from ._recorder import RecordingConfig, RunRecorder
from ._retries import RetryQueue
from ._scheduler import Scheduler, SchedulerConfig
from ._serialize import dumps_state, loads_state, torch_safe_globals
from ._settings import Settings
from ._simulate import RunSummary, SimulationRun, run_simulation
from ._weights import Weights

# torch is imported only when its adapter is first used, so `import scheduler` stays light.
_LAZY = {
    "CurriculumBatchSampler": ".integrations._torch",
    "DatasetColumns": ".integrations._columns",
    "RowIndex": ".integrations._rows",
    "RayProbeExecutor": "._ray_probes",  # imports ray when built, not when imported
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'scheduler' has no attribute {name!r}")


__all__ = [
    "AttentionRow",
    "Batch",
    "BreakerConfig",
    "CircuitBreakers",
    "ConfigError",
    "CurriculumBatchSampler",
    "DatasetColumns",
    "Demand",
    "DetectorConfig",
    "Detectors",
    "DomainCurves",
    "Event",
    "EventCounts",
    "HackingConfig",
    "Outcome",
    "PlateauConfig",
    "PriorityWeights",
    "ProbeCurves",
    "ProbeExecutor",
    "ProbeResults",
    "ProbeRound",
    "ProbeRunner",
    "ProbeSnapshot",
    "RayProbeExecutor",
    "RecordingConfig",
    "RegressionConfig",
    "ReportError",
    "RetryQueue",
    "RowIndex",
    "RunHistory",
    "RunRecorder",
    "RunSummary",
    "Scheduler",
    "SchedulerConfig",
    "Settings",
    "SimulationRun",
    "Status",
    "TaskRef",
    "ThreadProbeExecutor",
    "TierTimeline",
    "UnlearnableConfig",
    "Weights",
    "dumps_state",
    "events_figure",
    "loads_state",
    "priority_scores",
    "probe_curves_figure",
    "run_simulation",
    "save_figures",
    "theil_sen",
    "tier_timeline_figure",
    "torch_safe_globals",
    "weights_heatmap_figure",
]
