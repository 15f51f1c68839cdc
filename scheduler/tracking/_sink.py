"""Where the tracker's worker sends batches: MLflow in a helper process, or in-thread.

MLflow's sqlite store spends ~0.1-0.3 ms of pure Python (SQLAlchemy ORM) per metric value.
Done on a thread, that work holds the GIL and slows a Python-heavy training loop by
milliseconds per step. So by default the worker thread only pickles a batch and waits on a
pipe (which releases the GIL), and a child process (``_sink_child.py``, run by path)
makes the MLflow call. The child is started with subprocess, not multiprocessing, so a
training script without an ``if __name__ == "__main__"`` guard is never re-imported, and it
imports only MLflow. It ignores Ctrl-C (the trainer's close() stops it), and exits when the
parent goes away. If it dies, the call fails like any MLflow error, is retried, and a new
child is started.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

logger = logging.getLogger(__name__)

# One record's worth: MLflow-safe keys, their values, timestamp (ms), step. Sent as arrays,
# not one tuple per value, so pickling on the worker thread holds the GIL only briefly.
MetricRows = tuple[tuple[str, ...], npt.NDArray[np.float64], int, int]
_CHILD = Path(__file__).with_name("_sink_child.py")


class SinkError(Exception):
    """An MLflow call that failed in the helper process, with MLflow's error code."""

    def __init__(self, message: str, error_code: str | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code


class Sink(Protocol):
    def log_batch(self, rows: list[MetricRows]) -> None: ...
    def log_artifact(self, local: str, artifact_path: str | None, directory: bool) -> None: ...
    def close(self) -> None: ...
    def kill(self) -> None: ...


class ClientSink:
    """MLflow calls on the calling thread (in the helper process, or as the fallback)."""

    def __init__(self, tracking_uri: str, run_id: str) -> None:
        self.tracking_uri = tracking_uri
        self.run_id = run_id
        self._client: Any = None

    def _mlflow(self) -> Any:
        if self._client is None:
            from mlflow import MlflowClient

            self._client = MlflowClient(tracking_uri=self.tracking_uri)
        return self._client

    def log_batch(self, rows: list[MetricRows]) -> None:
        from mlflow.entities import Metric

        metrics = [
            Metric(k, v, ts, step)
            for keys, values, ts, step in rows
            for k, v in zip(keys, values.tolist(), strict=True)
        ]
        self._mlflow().log_batch(self.run_id, metrics=metrics)

    def log_artifact(self, local: str, artifact_path: str | None, directory: bool) -> None:
        client = self._mlflow()
        if directory:
            client.log_artifacts(self.run_id, local, artifact_path=artifact_path)
        else:
            client.log_artifact(self.run_id, local, artifact_path=artifact_path)

    def close(self) -> None:
        return None

    def kill(self) -> None:
        return None


class ProcessSink:
    """MLflow calls in a child process, over a socket pair; restarted if it dies."""

    def __init__(self, tracking_uri: str, run_id: str) -> None:
        self.tracking_uri = tracking_uri
        self.run_id = run_id
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None

    def _ensure(self) -> Connection:
        if self._conn is not None and self._proc is not None and self._proc.poll() is None:
            return self._conn
        self._reset()
        ours, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-P", str(_CHILD), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )
        finally:
            theirs.close()
        self._conn = Connection(ours.detach())
        # The URI may hold a password: sent over the pipe, never on the command line.
        self._conn.send((self.tracking_uri, self.run_id))
        return self._conn

    def _call(self, op: str, *args: Any) -> None:
        try:
            conn = self._ensure()
            conn.send((op, args))
            reply = conn.recv()
        except (EOFError, OSError) as exc:
            self._reset()
            raise SinkError(f"the MLflow helper process stopped: {exc!r}") from exc
        if reply[0] != "ok":
            raise SinkError(reply[2], reply[1])

    def log_batch(self, rows: list[MetricRows]) -> None:
        self._call("log_batch", rows)

    def log_artifact(self, local: str, artifact_path: str | None, directory: bool) -> None:
        self._call("log_artifact", local, artifact_path, directory)

    def close(self) -> None:
        """Ask the child to exit, then make sure it has."""
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.send(("stop", ()))
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reset()

    def kill(self) -> None:
        """End the child now (it may be stuck in a call); a waiting recv() then fails."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)

    def _reset(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
            self._proc = None


def make_sink(tracking_uri: str, run_id: str, kind: str) -> Sink:
    if kind == "process" and os.name == "posix":
        return ProcessSink(tracking_uri, run_id)
    return ClientSink(tracking_uri, run_id)
