"""Where a resume starts: a store that passes its integrity check, and the newest
checkpoint that still decodes. A damaged store is never written on; a damaged checkpoint
is skipped for the one before it, and the log says so."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from ._protocol import Store, StoreError

log = logging.getLogger(__name__)
T = TypeVar("T")


def resume_point(
    store: Store, run_id: int, run_name: str, decode: Callable[[bytes], T]
) -> tuple[int, T] | None:
    """The step and decoded state to resume ``run_id`` from, or None if it has none.

    Raises StoreError when the database fails ``integrity_check`` or when checkpoints
    exist but none decodes; each names the store and what to do.
    """
    verdict = store.integrity_check()
    if verdict != "ok":
        first = "; ".join(verdict.splitlines()[:3])
        raise StoreError(
            f"the store fails its integrity check ({first}), so run {run_name!r} is not "
            "resumed or written on: recover it with `sqlite3 DB .recover | sqlite3 "
            "recovered.db` and resume with --db pointing at the copy, or restore a backup"
        )
    steps = store.checkpoint_steps(run_id)
    failures: list[str] = []
    for step in steps:
        blob = store.checkpoint(run_id, step)
        if blob is None:
            continue
        try:
            state = decode(blob)
        except Exception as exc:  # any damage: truncated zip, bad JSON, wrong arrays
            failures.append(f"step {step}: {type(exc).__name__}: {exc}")
            log.warning(
                "checkpoint of run %r at step %d is damaged (%s: %s); trying an older one",
                run_name,
                step,
                type(exc).__name__,
                exc,
            )
            continue
        if failures:
            log.warning("run %r resumes from its checkpoint at step %d", run_name, step)
        return step, state
    if failures:
        raise StoreError(
            f"no checkpoint of run {run_name!r} can be read ({'; '.join(failures)}): its "
            "rows are kept; start the run again under a new --run-name, or restore a backup"
        )
    return None
