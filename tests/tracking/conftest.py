"""Fixtures for the tracking tests: one sqlite tracking store per session (its schema
migration takes seconds), and a real `mlflow server` when a test needs one."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


@pytest.fixture(scope="session")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from mlflow import MlflowClient

    db = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    uri = f"sqlite:///{db}"
    MlflowClient(tracking_uri=uri).search_experiments()  # creates the schema once
    yield uri


@pytest.fixture
def client(sqlite_store: str):  # type: ignore[no-untyped-def]
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=sqlite_store)
