"""The tracker under hostile conditions: a parent that dies or exits on an error (the MLflow
helper process goes quietly), a server that accepts connections but never answers (the
run starts in the background; training never waits on it), and one too busy to create the
run at first (its 5xx answers are retried)."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from scheduler.tracking import MLflowTracker, TrackingError, free_port, start_ui_server

PARENT = textwrap.dedent(
    """
    import os, signal, sys, time
    from scheduler.tracking import MLflowTracker

    tracker = MLflowTracker(sys.argv[1], flush_interval_s=0.01)
    tracker.start("noise", params={})
    keys = [f"m{i}" for i in range(1000)]
    for step in range(5):
        tracker.log_metrics(dict.fromkeys(keys, 1.0), step)
    tracker.flush(timeout=60)
    for step in range(5, 200):  # a backlog: the helper is busy when the parent goes
        tracker.log_metrics(dict.fromkeys(keys, 1.0), step)
    time.sleep(0.3)
    if sys.argv[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit("error: the trainer gave up")
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["kill", "error"])
def test_the_mlflow_helper_prints_no_traceback_when_its_parent_goes(
    how: str, tmp_path: Path, sqlite_store: str
) -> None:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    proc = subprocess.Popen(
        [sys.executable, str(script), sqlite_store, how],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = proc.communicate(timeout=180)  # EOF once the helper, which shares it, is gone
    assert proc.returncode != 0
    assert "Traceback" not in err, err
    assert "BrokenPipeError" not in err and "ConnectionResetError" not in err, err


class _Silent:
    """A TCP server that completes the handshake and then never answers."""

    def __init__(self, port: int = 0) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


def test_a_server_that_never_answers_does_not_block_the_run_start(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "3")
    silent = _Silent()
    tracker = MLflowTracker(
        f"http://127.0.0.1:{silent.port}",
        start_wait_s=1.0,
        retry_backoff_s=0.2,
        max_retry_s=0.5,
        stall_timeout_s=2.0,
    )
    try:
        t0 = time.monotonic()
        assert tracker.start("hung", params={"seed": 0}) is None
        started = time.monotonic() - t0
        slowest = 0.0
        for step in range(50):
            t1 = time.perf_counter()
            tracker.log_metrics({"loss": float(step)}, step)
            slowest = max(slowest, time.perf_counter() - t1)
        t2 = time.monotonic()
        stats = tracker.close()
        closed = time.monotonic() - t2
    finally:
        silent.close()
    assert started < 2.5  # not the 3 s request timeout, let alone 30 s
    assert slowest < 0.05
    assert closed < 15
    assert tracker.run_id is None and stats.dropped == 50
    assert "has not answered" in caplog.text


def test_a_server_that_refuses_at_once_still_fails_the_start() -> None:
    tracker = MLflowTracker(f"http://127.0.0.1:{free_port()}", start_wait_s=30.0)
    t0 = time.monotonic()
    with pytest.raises(TrackingError, match="cannot start an MLflow run"):
        tracker.start("refused", params={})
    assert time.monotonic() - t0 < 20
    tracker.close()


@pytest.mark.slow
@pytest.mark.mlflow_server
def test_a_run_started_in_the_background_is_created_once_the_server_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow import MlflowClient

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    backend = f"sqlite:///{tmp_path}/server.db"
    MlflowClient(tracking_uri=backend).search_experiments()
    port = free_port()
    silent = _Silent(port)
    tracker = MLflowTracker(
        f"http://127.0.0.1:{port}", start_wait_s=0.5, retry_backoff_s=0.2, max_retry_s=1.0
    )
    assert tracker.start("late", params={"seed": 0}) is None
    for step in range(20):
        tracker.log_metrics({"loss": float(step)}, step)
    silent.close()
    try:
        server = start_ui_server(backend, port=port, wait_s=90)
    except TrackingError as exc:
        tracker.close()
        pytest.skip(f"mlflow server could not start here: {exc}")
    try:
        deadline = time.monotonic() + 60
        while tracker.run_id is None and time.monotonic() < deadline:
            time.sleep(0.2)
        stats = tracker.close()
    finally:
        server.stop()
    assert tracker.run_id is not None
    assert stats.dropped == 0 and stats.sent == 20
    history = MlflowClient(tracking_uri=backend).get_metric_history(tracker.run_id, "loss")
    assert sorted(m.step for m in history) == list(range(20))
    assert os.environ.get("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT") == "true"


class _Busy:
    """A stand-in tracking server whose first ``failures`` calls answer 500, as MLflow's
    server does while its sqlite database is locked; then it serves the few calls a run's
    start and close make."""

    def __init__(self, failures: int, *, drop: bool = False) -> None:
        self.failures = failures
        self.drop = drop  # fail by resetting the connection instead of answering 500
        self.paths: list[tuple[int, str]] = []
        busy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                del body
                path = self.path.split("?")[0]
                status, reply = busy.answer(path)
                busy.paths.append((status, path))
                if status != 200 and busy.drop:  # as a server restarting its worker does
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.close_connection = True
                    return
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_GET

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str) -> tuple[int, dict[str, Any]]:
        if len(self.paths) < self.failures:
            return 500, {"error_code": "INTERNAL_ERROR", "message": "database is locked"}
        info = {"run_id": "r1", "experiment_id": "1", "status": "RUNNING"}
        if path.endswith("experiments/get-by-name"):
            return 200, {"experiment": {"experiment_id": "1", "name": "curriculum"}}
        if path.endswith("runs/create"):
            return 200, {"run": {"info": info, "data": {}}}
        return 200, {}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("drop", [False, True], ids=["answers_500", "drops_connection"])
def test_a_busy_server_is_retried_while_the_start_waits(
    monkeypatch: pytest.MonkeyPatch, drop: bool
) -> None:
    """A 500 (its database locked) or a connection taken and dropped without an answer (a
    worker restarted under load): the server is up, so the start retries, unlike a refused
    connection, which fails fast."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    busy = _Busy(failures=3, drop=drop)
    tracker = MLflowTracker(busy.url, start_wait_s=20.0, retry_backoff_s=0.05)
    try:
        assert tracker.start("busy", params={"seed": 0}) == "r1"
        tracker.log_metrics({"loss": 1.0}, 0)
        stats = tracker.close()
    finally:
        busy.close()
    assert [status for status, _ in busy.paths[:3]] == [500, 500, 500]
    assert stats.dropped == 0 and stats.sent == 1


def test_a_server_busy_past_the_start_wait_starts_the_run_in_the_background(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    busy = _Busy(failures=10**6)
    tracker = MLflowTracker(
        busy.url, start_wait_s=0.5, retry_backoff_s=0.05, max_retry_s=0.1, stall_timeout_s=20.0
    )
    try:
        assert tracker.start("busy", params={"seed": 0}) is None
        busy.failures = 0  # the lock is released: the background start goes through
        deadline = time.monotonic() + 30
        while tracker.run_id is None and time.monotonic() < deadline:
            time.sleep(0.05)
        tracker.log_metrics({"loss": 1.0}, 0)
        stats = tracker.close()
    finally:
        busy.close()
    assert tracker.run_id == "r1"
    assert stats.sent == 1
    assert "has not answered with a run" in caplog.text


def test_a_servers_own_busy_answer_is_busy_and_a_clients_fault_is_not() -> None:
    """Since MLflow 3.18 a write that is unsafe to repeat is not retried by MLflow's client,
    so the server's 500 comes back as its own error (a RestException) instead of requests'
    RetryError: that answer is still "not now". A RestException carries only what a server
    said; MLflow's own client-side errors default to the same INTERNAL_ERROR code and are
    not a server's answer."""
    from mlflow.exceptions import MlflowException, RestException

    from scheduler.tracking._start import server_was_busy

    locked = RestException({"error_code": "INTERNAL_ERROR", "message": "database is locked"})
    assert server_was_busy(locked)
    assert server_was_busy(RestException({"error_code": "TEMPORARILY_UNAVAILABLE"}))
    wrapped = MlflowException("create failed")
    wrapped.__cause__ = locked  # found down the chain too
    assert server_was_busy(wrapped)
    assert not server_was_busy(RestException({"error_code": "INVALID_PARAMETER_VALUE"}))
    assert not server_was_busy(MlflowException("a client-side fault"))  # INTERNAL_ERROR too
    assert not server_was_busy(ConnectionRefusedError())  # nothing listens: a wrong URI
