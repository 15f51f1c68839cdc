"""Creating or resuming the MLflow run and logging its params and tags: the one kind of
tracking work done before anything else, on the tracker's worker thread."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._redact import mask_secrets
from ._errors import TrackingError
from ._uri import default_artifact_location

logger = logging.getLogger(__name__)

MAX_PARAMS_PER_BATCH = 100
# MLflow error codes that a retry cannot fix: the batch is dropped (and counted) instead.
PERMANENT_ERRORS = frozenset(
    {"INVALID_PARAMETER_VALUE", "RESOURCE_DOES_NOT_EXIST", "INVALID_STATE", "BAD_REQUEST"}
)


def is_permanent(exc: BaseException) -> bool:
    return getattr(exc, "error_code", None) in PERMANENT_ERRORS


def server_was_busy(exc: BaseException) -> bool:
    """Whether the server is up but could not serve the call now, so a retry may fix it:
    it answered with a status its client would retry (MLflow's own retries are off, so
    requests reports it as a RetryError under MLflow's exception; since MLflow 3.18 a
    write that is not safe to repeat is not retried by the client, and the server's
    answer comes back as its error instead, ``_BUSY_CODES``), or it took the connection
    and then dropped it (reset, aborted, no answer in time), as a server does while it
    restarts a worker or sheds load. A refused connection is not: nothing listens there,
    which is a wrong URI far more often than a server still starting."""
    pending: list[BaseException] = [exc]
    seen: set[int] = set()
    while pending and len(seen) < 16:  # the chain is short; a bound keeps a cycle harmless
        err = pending.pop()
        if id(err) in seen:
            continue
        seen.add(id(err))
        if isinstance(err, _DROPPED) or type(err).__name__ in _BUSY_NAMES:
            return True
        if _answered_busy(err):
            return True
        # requests and urllib3 keep the cause in args and .reason rather than __cause__
        links = [err.__cause__, err.__context__, getattr(err, "reason", None), *err.args]
        pending.extend(e for e in links if isinstance(e, BaseException))
    return False


# Errors of a connection the server accepted and then lost: worth retrying.
_DROPPED = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)
# urllib3's and requests' names for a server that answered "retry" or read too slowly.
_BUSY_NAMES = frozenset({"RetryError", "ResponseError", "ReadTimeoutError", "ReadTimeout"})
# The error codes of a server's answer (500, 503, 429) that say "not now" rather than "no":
# MLflow's server answers INTERNAL_ERROR while its sqlite database is locked.
_BUSY_CODES = frozenset({"INTERNAL_ERROR", "TEMPORARILY_UNAVAILABLE", "REQUEST_LIMIT_EXCEEDED"})


def _answered_busy(err: BaseException) -> bool:
    """The server's own answer, a ``RestException`` (only a reply builds one, so a client's
    own fault, whose default code is INTERNAL_ERROR too, is not read as busy), says so."""
    from mlflow.exceptions import RestException

    return isinstance(err, RestException) and err.error_code in _BUSY_CODES


class RunStart:
    """Opens one MLflow run: a new one in ``experiment`` (created or restored if need be),
    or ``resume_run_id`` with its params kept, its running event counts and its
    ``events.jsonl`` (copied to ``events_path``) carried on."""

    def __init__(self, tracking_uri: str, experiment: str, events_path: Path) -> None:
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.events_path = events_path
        self.existing_params: dict[str, str] = {}  # of a resumed run
        self.event_counts: dict[str, int] = {}  # events/<kind> of a resumed run

    def create(
        self,
        run_name: str,
        flat: dict[str, str],
        safe_tags: dict[str, str],
        resume_run_id: str | None,
    ) -> str:
        """The run id; TrackingError (the URI masked) when MLflow refuses or is away."""
        from mlflow import MlflowClient
        from mlflow.entities import Param, RunTag

        try:
            client = MlflowClient(tracking_uri=self.tracking_uri)
            if resume_run_id is not None:
                run_id = self._resume(client, resume_run_id, flat)
                flat = {k: v for k, v in flat.items() if k not in self.existing_params}
            else:
                experiment_id = self._experiment_id(client)
                run = client.create_run(experiment_id, run_name=run_name, tags=safe_tags)
                run_id = run.info.run_id
            items = sorted(flat.items())
            for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
                chunk = items[i : i + MAX_PARAMS_PER_BATCH]
                client.log_batch(run_id, params=[Param(k, v) for k, v in chunk])
            if resume_run_id is not None and safe_tags:
                client.log_batch(run_id, tags=[RunTag(k, v) for k, v in safe_tags.items()])
        except TrackingError:
            raise
        except Exception as exc:
            raise TrackingError(
                mask_secrets(
                    f"tracking_uri {self.tracking_uri!r}: cannot start an MLflow run: "
                    f"{exc}. Check the URI (sqlite:///path/mlflow.db, file:./mlruns or "
                    "http://host:port) and that the server is up."
                ),
                busy=server_was_busy(exc),
            ) from None
        return str(run_id)

    def _experiment_id(self, client: Any) -> str:
        exp = client.get_experiment_by_name(self.experiment)
        if exp is not None:
            if exp.lifecycle_stage == "deleted":
                client.restore_experiment(exp.experiment_id)
            return str(exp.experiment_id)
        try:
            return str(
                client.create_experiment(
                    self.experiment,
                    artifact_location=default_artifact_location(self.tracking_uri),
                )
            )
        except Exception:
            exp = client.get_experiment_by_name(self.experiment)  # created by another process
            if exp is None:
                raise
            return str(exp.experiment_id)

    def _resume(self, client: Any, run_id: str, flat: Mapping[str, str]) -> str:
        try:
            run = client.get_run(run_id)
        except Exception as exc:
            if is_permanent(exc):
                raise TrackingError(
                    f"resume_run_id: no MLflow run {run_id!r} at {mask_secrets(self.tracking_uri)}"
                ) from exc
            raise
        if run.info.lifecycle_stage == "deleted":
            raise TrackingError(f"resume_run_id: MLflow run {run_id!r} was deleted")
        if run.info.status != "RUNNING":
            client.update_run(run_id, status="RUNNING")
        self.existing_params = dict(run.data.params)
        changed = sorted(k for k, v in flat.items() if self.existing_params.get(k, v) != v)
        if changed:
            logger.warning(
                "resumed run %s keeps its original params; %d changed and are not logged: %s",
                run_id,
                len(changed),
                ", ".join(changed[:10]),
            )
        self.event_counts = {
            key[len("events/") :]: int(value)
            for key, value in run.data.metrics.items()
            if key.startswith("events/")
        }
        self._download_events(client, run_id)
        return str(run_id)

    def _download_events(self, client: Any, run_id: str) -> None:
        try:
            names = {a.path for a in client.list_artifacts(run_id)}
            if self.events_path.name not in names:
                return
            staging = str(self.events_path.parent.parent)
            got = Path(client.download_artifacts(run_id, self.events_path.name, staging))
            shutil.move(got, self.events_path)
        except Exception as exc:  # the old events stay in MLflow; new ones go to a new file
            logger.warning(
                "could not read events.jsonl of run %s back: %s", run_id, mask_secrets(str(exc))
            )
