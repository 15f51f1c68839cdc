"""Probes as Ray tasks: the same ProbeRunner (timeouts, retries with backoff, the scheduler's
circuit breakers downstream), with each call a task on a Ray cluster instead of a thread.

    ray.init(address="auto")  # or a local ray.init(num_cpus=2)
    runner = ProbeRunner(probe, catalog.family_names, budget=8, every_steps=50,
                         executor=RayProbeExecutor(num_cpus=1))

Ray is imported when the executor is built (extra ``[ray]``), so ``import scheduler`` stays
light. Two differences from the thread pool: Ray does not say when a task starts, so the
timeout counts from submission (queueing on a busy cluster counts too); and a task that runs
past it is cancelled (``ray.cancel(force=True)`` ends its worker), where a thread can only be
abandoned. Ray's own retries are off: the runner's backoff decides when to try again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

from .._errors import ConfigError
from ._handover import ProbeFn

log = logging.getLogger(__name__)


class RayProbeExecutor:
    """Runs ``probe_fn(family, tier)`` as a Ray task per call, on the cluster that
    ``ray.init`` connected to (``address`` connects if none is yet)."""

    def __init__(
        self,
        *,
        num_cpus: float = 1.0,
        resources: Mapping[str, float] | None = None,
        address: str | None = None,
    ) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError(
                "probes on Ray need the ray extra: pip install 'curriculum-scheduler[ray]'"
            ) from None
        if not ray.is_initialized():
            if address is None:
                raise ConfigError("RayProbeExecutor: call ray.init() first, or pass address")
            ray.init(address=address)
        self._ray = ray
        self._options: dict[str, Any] = {
            "num_cpus": float(num_cpus),
            "max_retries": 0,  # the runner retries, with its backoff
            "retry_exceptions": False,
        }
        if resources:
            self._options["resources"] = dict(resources)
        self._remote: dict[int, Any] = {}  # id(probe_fn) -> its ray.remote wrapper
        self._refs: dict[Future[Any], Any] = {}  # futures not done yet -> their ObjectRef
        self._lock = threading.Lock()

    def submit(
        self, probe_fn: ProbeFn, family: str, tier: int, on_start: Callable[[], None]
    ) -> Future[Any]:
        remote = self._remote.get(id(probe_fn))
        if remote is None:
            remote = self._ray.remote(probe_fn)
            self._remote[id(probe_fn)] = remote
        ref = remote.options(**self._options).remote(family, tier)
        on_start()  # Ray does not report a task's start: the timeout counts from here
        future: Future[Any] = Future()
        future.set_running_or_notify_cancel()
        with self._lock:
            self._refs[future] = ref
        ref.future().add_done_callback(lambda done: self._settle(future, done))
        return future

    def _settle(self, future: Future[Any], done: Future[Any]) -> None:
        """Hand the task's result on; a failed task raises its own exception, as in a
        thread (Ray wraps it in a RayTaskError with the remote traceback)."""
        self._forget(future)
        exc = done.exception()
        if exc is None:
            future.set_result(done.result())
            return
        cause = getattr(exc, "cause", None)
        future.set_exception(cause if isinstance(cause, BaseException) else exc)

    def _forget(self, future: Future[Any]) -> None:
        with self._lock:
            self._refs.pop(future, None)

    def abandon(self, future: Future[Any]) -> None:
        """Cancel a task that ran past its timeout (its worker process is ended)."""
        with self._lock:
            ref = self._refs.pop(future, None)
        if ref is not None:
            self._ray.cancel(ref, force=True)

    @property
    def running(self) -> int:
        """Tasks submitted whose result has not arrived."""
        with self._lock:
            return len(self._refs)

    def shutdown(self, *, wait: bool, cancel_futures: bool) -> None:
        """Cancel what is still running (``cancel_futures``), then wait for the rest."""
        with self._lock:
            refs = list(self._refs.values())
        if cancel_futures:
            for ref in refs:
                self._ray.cancel(ref, force=True)
        if wait and refs:
            self._ray.wait(refs, num_returns=len(refs), timeout=None)
