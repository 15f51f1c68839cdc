"""Shared fixtures. Tests that train set torch to one thread (2-core machines)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Test helper modules (devtools.py) import by name; importlib mode adds no test dirs itself.
sys.path.insert(0, str(Path(__file__).parent))

os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")


@pytest.fixture(autouse=True)
def _quiet_cwd(tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep stray files (curriculum.db, mlflow.db) out of the checkout."""
    monkeypatch.setenv("CURRICULUM_DB", f"sqlite:///{tmp_path}/curriculum.db")
    monkeypatch.setenv("CURRICULUM_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
