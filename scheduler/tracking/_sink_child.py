"""The MLflow helper process (see ``_sink``). Run by path, so it imports only the standard
library and MLflow, never the scheduler package: it starts in the time MLflow's import
takes. Protocol on the socket: first (tracking_uri, run_id), then (op, args) requests, each
answered ("ok",) or ("err", error_code, message); ("stop", ()), EOF or a broken socket (the
parent died) ends it quietly: a dying trainer's terminal gets no traceback from us."""

from __future__ import annotations

import logging
import signal
import sys
from multiprocessing.connection import Connection
from typing import Any


def main(fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the trainer; it stops us
    logging.basicConfig(level=logging.WARNING)
    conn = Connection(fd)
    try:
        tracking_uri, run_id = conn.recv()
    except (EOFError, OSError):
        return
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    client = MlflowClient(tracking_uri=tracking_uri)

    def log_batch(rows: list[tuple[tuple[str, ...], Any, int, int]]) -> None:
        metrics = [
            Metric(k, v, ts, step)
            for keys, values, ts, step in rows
            for k, v in zip(keys, values.tolist(), strict=True)
        ]
        client.log_batch(run_id, metrics=metrics)

    def log_artifact(local: str, artifact_path: str | None, directory: bool) -> None:
        if directory:
            client.log_artifacts(run_id, local, artifact_path=artifact_path)
        else:
            client.log_artifact(run_id, local, artifact_path=artifact_path)

    ops: dict[str, Any] = {"log_batch": log_batch, "log_artifact": log_artifact}
    while True:
        try:
            op, args = conn.recv()
        except (EOFError, OSError):  # the parent exited or died: nothing is left to do
            return
        if op == "stop":
            return
        try:
            ops[op](*args)
            reply: tuple[Any, ...] = ("ok",)
        except Exception as exc:
            reply = ("err", getattr(exc, "error_code", None), f"{type(exc).__name__}: {exc}")
        try:
            conn.send(reply)
        except OSError:  # BrokenPipeError, ConnectionResetError: the parent is gone
            return


if __name__ == "__main__":
    main(int(sys.argv[1]))
