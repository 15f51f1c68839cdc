"""``curriculum ui``: an ``mlflow server`` on 127.0.0.1 over a run's tracking store."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .._redact import mask_secrets
from ._errors import TrackingError
from ._uri import file_store_path, is_file_store, is_http, resolve_tracking_uri, sqlite_path

logger = logging.getLogger(__name__)

# The UI needs no GenAI job runner (a second process tree, seconds of start-up) and sends
# no telemetry; a value set in the environment wins.
_SERVER_DEFAULTS = {
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    "MLFLOW_DISABLE_TELEMETRY": "true",
}


@dataclass
class UIServer:
    """A running ``mlflow server``; :meth:`stop` ends it and its worker processes.

    Its output goes to ``log_path`` while it runs (read it with :meth:`log_tail`)."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    _log: IO[bytes] | None = field(default=None, repr=False)

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the server's process group (it runs its own workers); kill if it hangs."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout)
        if self._log is not None:
            self._log.close()
            self._log = None
            self.log_path.unlink(missing_ok=True)

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def __enter__(self) -> UIServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port that is free now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _store_args(uri: str) -> tuple[list[str], dict[str, str]]:
    """Server flags and environment for a store; a missing local store is an error."""
    env: dict[str, str] = {}
    db = sqlite_path(uri)
    if db is not None:
        if not db.exists():
            raise TrackingError(
                f"tracking_uri {uri!r}: no tracking database at {db.resolve()}; "
                "run `curriculum simulate` first or pass the run's --tracking-uri"
            )
        artifacts = db.resolve().parent / "mlartifacts"
        return ["--artifacts-destination", str(artifacts)], env
    if is_file_store(uri):
        path = file_store_path(uri)
        if not path.is_dir():
            raise TrackingError(f"tracking_uri {uri!r}: no MLflow file store at {path.resolve()}")
        env["MLFLOW_ALLOW_FILE_STORE"] = "true"
    return [], env


def start_ui_server(
    tracking_uri: str | None,
    *,
    host: str = "127.0.0.1",
    port: int = 5000,
    wait_s: float = 60,
) -> UIServer:
    """Start ``python -m mlflow server`` on the store and wait until ``/health`` answers.

    ``port=0`` picks a free port. Raises TrackingError (with the server's last log lines)
    when the URI is already a server, the store or port is unusable, or it does not come up.
    """
    uri = resolve_tracking_uri(tracking_uri)
    if is_http(uri):
        raise TrackingError(
            f"tracking_uri {mask_secrets(uri)!r}: that is already a tracking server; open it in "
            "a browser, or pass the store it serves (sqlite:///path/mlflow.db)"
        )
    extra, env = _store_args(uri)
    if port == 0:
        port = free_port(host)
    elif not _port_free(host, port):
        raise TrackingError(f"port: {host}:{port} is in use; pass another --port (or 0 for any)")
    url = f"http://{host}:{port}"
    fd, name = tempfile.mkstemp(prefix="mlflow-server-", suffix=".log")
    log_path = Path(name)
    log = os.fdopen(fd, "wb")
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri]
    cmd += ["--host", host, "--port", str(port), "--workers", "1", *extra]
    process = subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env={**_SERVER_DEFAULTS, **os.environ, **env},
        start_new_session=True,  # its own process group, so stop() reaches its workers
    )
    server = UIServer(url=url, process=process, log_path=log_path, _log=log)
    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline:
            if _healthy(url):
                logger.info("mlflow server for %s at %s", mask_secrets(uri), url)
                return server
            if process.poll() is not None:
                break
            time.sleep(0.25)
    except BaseException:  # interrupted while it starts: take the server down with us
        server.stop()
        raise
    code = process.poll()
    tail = server.log_tail()
    server.stop()
    why = f"exited with code {code}" if code is not None else f"no answer after {wait_s:.0f}s"
    raise TrackingError(
        f"mlflow server for {mask_secrets(uri)!r} on {url} {why}; its log ends:\n{tail}"
    )
