"""Recording: a run written to the store and the tracker (the recorder, a listener on the
scheduler), its metrics, and the run read back (history, figures).

Everything but ``RecordingConfig`` imports the store (SQLAlchemy) or the tracker, so it is
imported when first read: settings read ``RecordingConfig`` without loading either.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr
from ._config import RecordingConfig

if TYPE_CHECKING:
    from ._figures import (
        events_figure,
        probe_curves_figure,
        save_figures,
        tier_timeline_figure,
        weights_heatmap_figure,
    )
    from ._history import (
        AttentionRow,
        DomainCurves,
        EventCounts,
        RunHistory,
        TierTimeline,
        active_attention,
    )
    from ._metrics import RunMetrics
    from ._mirror import RecorderMirror
    from ._recorder import RunRecorder

_LAZY = {
    "AttentionRow": "._history",
    "DomainCurves": "._history",
    "EventCounts": "._history",
    "RunHistory": "._history",
    "TierTimeline": "._history",
    "active_attention": "._history",
    "RunMetrics": "._metrics",
    "RecorderMirror": "._mirror",
    "RunRecorder": "._recorder",
    "events_figure": "._figures",
    "probe_curves_figure": "._figures",
    "save_figures": "._figures",
    "tier_timeline_figure": "._figures",
    "weights_heatmap_figure": "._figures",
}
__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = [
    "AttentionRow",
    "DomainCurves",
    "EventCounts",
    "RecorderMirror",
    "RecordingConfig",
    "RunHistory",
    "RunMetrics",
    "RunRecorder",
    "TierTimeline",
    "active_attention",
    "events_figure",
    "probe_curves_figure",
    "save_figures",
    "tier_timeline_figure",
    "weights_heatmap_figure",
]
