"""The scheduling core: batches out, outcomes and probes in, weights, quotas and tiers adjusted.

Every public name is imported when first read (``from scheduler import Scheduler`` works as
ever): ``import scheduler`` loads no numpy, scipy, SQLAlchemy, MLflow, pydantic-settings or
torch, so ``curriculum validate`` (``scheduler.app.cli``) pays only for what it uses. Where
each name lives is the table below; docs/design.md has the package map.
"""

from typing import TYPE_CHECKING

from ._lazy import lazy_getattr

if TYPE_CHECKING:
    from ._batch import (
        Batch,
        Outcome,
        Status,
        TaskRef,
    )
    from ._breakers import BreakerConfig, CircuitBreakers
    from ._config import SchedulerConfig
    from ._demand import Demand
    from ._errors import ConfigError, ReportError
    from ._events import Event
    from ._listeners import Listener, ProbesRecorded, Reported
    from ._retries import RetryQueue
    from ._scheduler import Scheduler
    from ._serialize import dumps_state, loads_state, torch_safe_globals
    from ._snapshot import SchedulerSnapshot
    from ._weights import Weights
    from .app._settings import Settings
    from .app._simulate import RunSummary, SimulationRun, run_simulation
    from .integrations._columns import DatasetColumns
    from .integrations._rows import RowIndex
    from .integrations._torch import CurriculumBatchSampler
    from .probing._curves import ProbeCurves, theil_sen
    from .probing._executors import ProbeExecutor, ThreadProbeExecutor
    from .probing._handover import ProbeResults, ProbeRound, ProbeSnapshot
    from .probing._ray import RayProbeExecutor
    from .probing._runner import PriorityWeights, ProbeRunner, priority_scores
    from .recording._config import RecordingConfig
    from .recording._figures import (
        events_figure,
        probe_curves_figure,
        save_figures,
        tier_timeline_figure,
        weights_heatmap_figure,
    )
    from .recording._history import (
        AttentionRow,
        DomainCurves,
        EventCounts,
        RunHistory,
        TierTimeline,
    )
    from .recording._mirror import RecorderMirror
    from .recording._recorder import RunRecorder

# name -> module (relative to this package) that defines it
_LAZY = {
    "Batch": "._batch",
    "Outcome": "._batch",
    "Status": "._batch",
    "TaskRef": "._batch",
    "BreakerConfig": "._breakers",
    "CircuitBreakers": "._breakers",
    "Demand": "._demand",
    "ConfigError": "._errors",
    "ReportError": "._errors",
    "Event": "._events",
    "Listener": "._listeners",
    "ProbesRecorded": "._listeners",
    "Reported": "._listeners",
    "RetryQueue": "._retries",
    "Scheduler": "._scheduler",
    "SchedulerConfig": "._config",
    "SchedulerSnapshot": "._snapshot",
    "dumps_state": "._serialize",
    "loads_state": "._serialize",
    "torch_safe_globals": "._serialize",
    "Weights": "._weights",
    "Settings": ".app._settings",
    "RunSummary": ".app._simulate",
    "SimulationRun": ".app._simulate",
    "run_simulation": ".app._simulate",
    "DatasetColumns": ".integrations._columns",
    "RowIndex": ".integrations._rows",
    "CurriculumBatchSampler": ".integrations._torch",
    "ProbeCurves": ".probing._curves",
    "theil_sen": ".probing._curves",
    "ProbeExecutor": ".probing._executors",
    "ThreadProbeExecutor": ".probing._executors",
    "ProbeResults": ".probing._handover",
    "ProbeRound": ".probing._handover",
    "ProbeSnapshot": ".probing._handover",
    "RayProbeExecutor": ".probing._ray",
    "PriorityWeights": ".probing._runner",
    "ProbeRunner": ".probing._runner",
    "priority_scores": ".probing._runner",
    "RecordingConfig": ".recording._config",
    "events_figure": ".recording._figures",
    "probe_curves_figure": ".recording._figures",
    "save_figures": ".recording._figures",
    "tier_timeline_figure": ".recording._figures",
    "weights_heatmap_figure": ".recording._figures",
    "AttentionRow": ".recording._history",
    "DomainCurves": ".recording._history",
    "EventCounts": ".recording._history",
    "RunHistory": ".recording._history",
    "TierTimeline": ".recording._history",
    "RunRecorder": ".recording._recorder",
    "RecorderMirror": ".recording._mirror",
}
__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = [
    "AttentionRow",
    "Batch",
    "BreakerConfig",
    "CircuitBreakers",
    "ConfigError",
    "CurriculumBatchSampler",
    "DatasetColumns",
    "Demand",
    "DomainCurves",
    "Event",
    "EventCounts",
    "Listener",
    "Outcome",
    "PriorityWeights",
    "ProbeCurves",
    "ProbeExecutor",
    "ProbeResults",
    "ProbeRound",
    "ProbeRunner",
    "ProbeSnapshot",
    "ProbesRecorded",
    "RayProbeExecutor",
    "RecorderMirror",
    "RecordingConfig",
    "ReportError",
    "Reported",
    "RetryQueue",
    "RowIndex",
    "RunHistory",
    "RunRecorder",
    "RunSummary",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerSnapshot",
    "Settings",
    "SimulationRun",
    "Status",
    "TaskRef",
    "ThreadProbeExecutor",
    "TierTimeline",
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
