"""The scheduling core: batches out, outcomes and probes in, weights, quotas and tiers adjusted."""

from ._batch import Batch, Outcome, Status, TaskRef
from ._events import Event

__all__ = ["Batch", "Event", "Outcome", "Status", "TaskRef"]
