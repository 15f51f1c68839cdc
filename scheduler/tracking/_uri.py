"""Tracking URIs: the project default, and what each kind of store needs before use."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"


def resolve_tracking_uri(uri: str | None) -> str:
    """The URI to use: the argument, else $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db."""
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI


def scheme(uri: str) -> str:
    parsed = urlsplit(uri)
    return parsed.scheme.lower() if len(parsed.scheme) > 1 else ""  # "C:\x" is a path


def is_http(uri: str) -> bool:
    return scheme(uri) in ("http", "https")


def is_file_store(uri: str) -> bool:
    return scheme(uri) in ("", "file")


def sqlite_path(uri: str) -> Path | None:
    """The database file of a sqlite:/// URI (relative to the working directory), else None."""
    if scheme(uri) != "sqlite" or not uri.lower().startswith("sqlite:///"):
        return None
    rest = uri[len("sqlite:///") :].split("?", 1)[0]
    return Path(rest) if rest and rest != ":memory:" else None


def file_store_path(uri: str) -> Path:
    return Path(urlsplit(uri).path) if scheme(uri) == "file" else Path(uri)


def default_artifact_location(uri: str) -> str | None:
    """Artifacts of a sqlite store live beside the database (``<dir>/mlartifacts``)."""
    db = sqlite_path(uri)
    return (db.resolve().parent / "mlartifacts").as_uri() if db is not None else None


def prepare_environment(uri: str) -> None:
    """Process-wide MLflow settings a store needs; a value the user already set is kept.

    A file store is refused by MLflow 3 unless MLFLOW_ALLOW_FILE_STORE=true, so that is set
    only when the user chose a file store. Over HTTP, MLflow's own stdout lines are turned
    off; and the tracker retries on its own with backoff, so MLflow's own retries (up to
    ~4 minutes per call) are turned off and the request timeout shortened: a dead server
    must not hold the worker for minutes.
    """
    if is_file_store(uri):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    if is_http(uri):
        # MLflow writes "View run ... at: <uri>" to stdout at the end of a run: a library
        # must not print, and the URI may hold a password (the CLI prints it masked).
        os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
