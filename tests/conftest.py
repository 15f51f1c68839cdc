"""Shared fixtures. Tests that train set torch to one thread (2-core machines)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")


@pytest.fixture(autouse=True)
def _quiet_cwd(tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep stray files (curriculum.db, mlflow.db) out of the checkout."""
    monkeypatch.setenv("CURRICULUM_DB", f"sqlite:///{tmp_path}/curriculum.db")
    monkeypatch.setenv("CURRICULUM_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
