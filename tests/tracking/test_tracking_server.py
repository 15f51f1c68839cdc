"""Against a real `mlflow server`: the UI helper, and a server that dies mid-run."""

from __future__ import annotations

import socket
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from scheduler.tracking import MLflowTracker, TrackingError, free_port, start_ui_server
from scheduler.tracking._ui import UIServer


def server_or_skip(uri: str, port: int) -> UIServer:
    try:
        return start_ui_server(uri, port=port, wait_s=90)
    except TrackingError as exc:
        pytest.skip(f"mlflow server could not start here: {exc}")


def test_ui_refuses_what_it_cannot_serve(tmp_path: Path) -> None:
    with pytest.raises(TrackingError, match="already a tracking server"):
        start_ui_server("http://127.0.0.1:5000")
    with pytest.raises(TrackingError, match="no tracking database"):
        start_ui_server(f"sqlite:///{tmp_path}/missing.db")
    (tmp_path / "present.db").touch()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(TrackingError, match="in use"):
            start_ui_server(f"sqlite:///{tmp_path}/present.db", port=port)


@pytest.mark.slow
@pytest.mark.mlflow_server
def test_ui_server_starts_answers_and_stops(sqlite_store: str, client: Any) -> None:
    if client.get_experiment_by_name("ui-check") is None:
        client.create_experiment("ui-check")
    server = server_or_skip(sqlite_store, 0)
    try:
        assert server.url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(f"{server.url}/health", timeout=5) as resp:
            assert resp.status == 200
        api = f"{server.url}/api/2.0/mlflow/experiments/get-by-name?experiment_name=ui-check"
        with urllib.request.urlopen(api, timeout=10) as resp:
            assert b'"ui-check"' in resp.read()
    finally:
        server.stop()
    assert server.process.poll() is not None
    port = int(server.url.rsplit(":", 1)[1])
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0  # nothing listens any more


@pytest.mark.slow
@pytest.mark.mlflow_server
def test_training_goes_on_while_the_server_is_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow import MlflowClient

    # Scoped here; MLflowTracker would set the same values process-wide for an http URI.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    backend = f"sqlite:///{tmp_path}/server.db"
    MlflowClient(tracking_uri=backend).search_experiments()  # the store exists before the UI
    port = free_port()
    server = server_or_skip(backend, port)
    tracker = MLflowTracker(server.url, retry_backoff_s=0.1, max_retry_s=0.5, flush_interval_s=0.05)
    keys = [f"probe/d{f % 3}/family_{f}" for f in range(50)]
    try:
        run_id = tracker.start("outage", params={"seed": 0})
        assert run_id is not None
        for step in range(20):
            tracker.log_metrics(dict.fromkeys(keys, float(step)), step)
        assert tracker.flush(timeout=60)
        server.stop()  # the server goes down mid-run

        slowest = 0.0
        for step in range(20, 60):
            t0 = time.perf_counter()
            tracker.log_metrics(dict.fromkeys(keys, float(step)), step)
            slowest = max(slowest, time.perf_counter() - t0)
            time.sleep(0.02)
        deadline = time.monotonic() + 30
        while tracker.stats.failed_batches == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        down = tracker.stats
        assert down.failed_batches >= 1 and down.pending > 0
        assert slowest < 0.05  # the caller never waited on the dead server

        server = server_or_skip(backend, port)  # same port, same store
        stats = tracker.close()
    finally:
        server.stop()
    assert stats.dropped == 0 and stats.pending == 0
    assert stats.sent == stats.queued == 60 * 50
    assert stats.retries >= 1
    client: Any = MlflowClient(tracking_uri=backend)
    for key in (keys[0], keys[-1]):
        got = sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))
        assert got == [(s, float(s)) for s in range(60)]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.metrics["tracking/dropped"] == 0.0
    assert run.data.metrics["tracking/failed_batches"] == stats.failed_batches


@pytest.mark.slow
@pytest.mark.mlflow_server
def test_a_server_that_stays_down_loses_exactly_what_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mlflow import MlflowClient

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    backend = f"sqlite:///{tmp_path}/server.db"
    MlflowClient(tracking_uri=backend).search_experiments()
    server = server_or_skip(backend, free_port())
    tracker = MLflowTracker(
        server.url, retry_backoff_s=0.1, max_retry_s=0.3, flush_interval_s=0.05, stall_timeout_s=2
    )
    try:
        run_id = tracker.start("lost", params={})
        assert run_id is not None
        tracker.log_metrics({"loss": 0.0}, 0)
        assert tracker.flush(timeout=60)
    finally:
        server.stop()
    for step in range(1, 11):
        tracker.log_metrics({"loss": float(step), "weight/a": 1.0}, step)
    t0 = time.monotonic()
    stats = tracker.close()
    assert time.monotonic() - t0 < 30  # gave up after the stall timeout, not never
    assert stats.sent == 1 and stats.dropped == 20 and stats.pending == 0
    assert stats.queued == stats.sent + stats.dropped
    assert "lost 20 metric values" in caplog.text
    assert "could not log the final tracking/* metrics" in caplog.text
    history = MlflowClient(tracking_uri=backend).get_metric_history(run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(0, 0.0)]
