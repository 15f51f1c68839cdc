"""Where probe calls run: the ``ProbeExecutor`` protocol and its default, a thread pool."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from ._handover import ProbeFn


class ProbeExecutor(Protocol):
    """Where probe calls run: a thread pool here, Ray tasks in ``RayProbeExecutor``.

    ``submit`` calls ``on_start()`` when the call starts (the timeout counts from then) and
    returns a Future of ``probe_fn(family, tier)``. ``abandon`` is told of a call that ran
    past its timeout (a thread cannot be stopped; a Ray task can be cancelled)."""

    def submit(
        self, probe_fn: ProbeFn, family: str, tier: int, on_start: Callable[[], None]
    ) -> Future[Any]: ...

    def abandon(self, future: Future[Any]) -> None: ...

    def shutdown(self, *, wait: bool, cancel_futures: bool) -> None: ...


class ThreadProbeExecutor:
    """The default executor: a thread pool in this process."""

    def __init__(self, max_workers: int = 4) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="probe")

    def submit(
        self, probe_fn: ProbeFn, family: str, tier: int, on_start: Callable[[], None]
    ) -> Future[Any]:
        def run() -> Any:
            on_start()
            return probe_fn(family, tier)

        return self._pool.submit(run)

    def abandon(self, future: Future[Any]) -> None:
        """Nothing to do: the thread runs on, and its result is ignored."""

    def shutdown(self, *, wait: bool, cancel_futures: bool) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)
