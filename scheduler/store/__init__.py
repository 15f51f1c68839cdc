"""The durable store: runs, probe curves, events, weights, outcomes and checkpoints."""

from ._existing import require_existing
from ._migrations import SCHEMA_VERSION, Migration
from ._protocol import OutcomeRows, ProbePoints, RunInfo, Store, StoreError
from ._recovery import resume_point
from ._sql import DEFAULT_LOCK_TIMEOUT_S, DEFAULT_URL, SqlStore, open_store
from ._writer import StepWriter

__all__ = [
    "DEFAULT_LOCK_TIMEOUT_S",
    "DEFAULT_URL",
    "SCHEMA_VERSION",
    "Migration",
    "OutcomeRows",
    "ProbePoints",
    "RunInfo",
    "SqlStore",
    "StepWriter",
    "Store",
    "StoreError",
    "open_store",
    "require_existing",
    "resume_point",
]
