"""RecordingConfig: how often a run is committed, and how much of it is logged.

Kept apart from the recorder so that settings can read its fields without importing the
store (SQLAlchemy) or the tracker (MLflow).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RecordingConfig:
    checkpoint_every: int = 100  # steps per store commit (rows + checkpoint, one transaction)
    checkpoint_seconds: float | None = None  # ... or seconds since the last, whichever first
    domain_every: int = 1  # steps between per-domain metrics
    detail_every: int = 50  # steps between per-family metrics
    detail: bool = True  # log per-domain and per-family metrics at all
    figures_every: int = 500  # steps between figure artifacts (from the store; 0: at close only)
    background_commits: bool = False  # store transactions on a writer thread (GIL: slower here)
