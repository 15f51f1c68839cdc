"""The curriculum as a stream of blocks: drawn lazily, reported in order, lag bounded.

A GRPO sampler hands the trainer blocks of prompts, one generation round each. This module
is the trainer-neutral core behind it: it draws each block from the scheduler at the moment
the dataloader asks for its first index (so a weight change acts within the epoch), keeps
the blocks awaiting their rewards, folds each round's completions into one report per task,
and saves all of it so a resumed run yields the same stream.

Lag. A dataloader that prefetches one item (accelerate's ``DataLoaderShard`` does) asks
for block k+1 before the rewards of block k exist, so feedback from block k first shapes
block k+2. ``max_lag`` (default 2) is enforced: asking for a block while ``max_lag``
blocks still wait for rewards raises, instead of silently drawing from stale state.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from .._batch import Batch, Outcome
from .._errors import ConfigError
from .._scheduler import Scheduler
from ._groups import Completions, GroupReport, aggregate_groups
from ._rows import RowIndex

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
STREAM_FORMAT = 1


def batch_state(batch: Batch) -> dict[str, Any]:
    """A Batch as plain arrays, for a checkpoint."""
    attempt = batch.attempt if batch.attempt is not None else np.zeros_like(batch.arm)
    return {
        "step": batch.step,
        "arm": batch.arm.copy(),
        "family": batch.family.copy(),
        "tier": batch.tier.copy(),
        "variant": batch.variant.copy(),
        "attempt": attempt.copy(),
        "token": int(batch.token),
    }


def batch_from_state(scheduler: Scheduler, state: Mapping[str, Any]) -> Batch:
    return Batch(
        step=int(state["step"]),
        arm=np.asarray(state["arm"], dtype=np.int64),
        family=np.asarray(state["family"], dtype=np.int64),
        tier=np.asarray(state["tier"], dtype=np.int64),
        variant=np.asarray(state["variant"], dtype=np.int64),
        catalog=scheduler.catalog,
        attempt=np.asarray(state["attempt"], dtype=np.int64),
        token=int(state.get("token", 0)),
    )


def sub_batch(batch: Batch, keep: npt.NDArray[np.bool_]) -> Batch:
    """The tasks of ``batch`` where ``keep``, under the same step (for a partial report)."""
    attempt = batch.attempt if batch.attempt is not None else np.zeros_like(batch.arm)
    return Batch(
        step=batch.step,
        arm=batch.arm[keep],
        family=batch.family[keep],
        tier=batch.tier[keep],
        variant=batch.variant[keep],
        catalog=batch.catalog,
        attempt=attempt[keep],
        token=batch.token,
    )


class CurriculumStream:
    """Blocks of tasks out, one report per block back, in order."""

    def __init__(self, scheduler: Scheduler, rows: RowIndex, *, max_lag: int = 2) -> None:
        if max_lag < 1:
            raise ConfigError(f"max_lag must be >= 1, got {max_lag}")
        if rows.catalog is not scheduler.catalog:
            raise ConfigError("CurriculumStream: the RowIndex was built for another catalog")
        self.scheduler = scheduler
        self.index = rows
        self.max_lag = max_lag
        self.drawn = 0  # blocks drawn so far (replayed ones count once, when first drawn)
        self.reported = 0  # blocks whose rewards came back
        self.block_in_epoch = 0  # blocks started in the current pass over the dataset
        self._pending: deque[Batch] = deque()  # drawn, awaiting rewards, oldest first
        self._replay: deque[Batch] = deque()  # restored from a checkpoint, to yield again
        # reports received when each block was drawn: block j then knew blocks < that value
        self.reports_at_draw: list[int] = []
        self._first_logged = 0  # block index of reports_at_draw[0] (a resume starts anew)
        n = rows.catalog.n_arms
        self.groups: IntArray = np.zeros(n, dtype=np.int64)  # int64 [n_arms]: groups reported
        self.zero_variance: IntArray = np.zeros(n, dtype=np.int64)  # int64 [n_arms]: of which flat
        self.last_round: GroupReport | None = None

    # ------------------------------------------------------------------ out
    def next_block(self, size: int) -> Batch:
        """The next block: one restored from a checkpoint, else a fresh draw."""
        if self._replay:
            batch = self._replay.popleft()
            if len(batch) != size:
                raise ConfigError(
                    f"resume: the checkpoint's next block has {len(batch)} tasks, the sampler "
                    f"asks for {size}; resume with the same batch sizes"
                )
            return batch
        if len(self._pending) >= self.max_lag:
            waiting = [b.step for b in self._pending]
            raise ConfigError(
                f"feedback lag: block {self.drawn} was asked for while blocks {waiting} still "
                f"wait for rewards (max_lag={self.max_lag}); report every generation round "
                "(wrap a reward function with curriculum.reward) and keep "
                "dataloader_num_workers=0 so the loader prefetches at most one block"
            )
        batch = self.scheduler.next_batch(size)
        self._pending.append(batch)
        self.reports_at_draw.append(self.reported)
        self.drawn += 1
        return batch

    def feedback_lag(self) -> int:
        """The largest lag seen: block j drawn knowing the rewards of blocks < r has lag j-r+1."""
        base = self._first_logged
        lags = [base + j - r + 1 for j, r in enumerate(self.reports_at_draw) if r > 0]
        return max(lags, default=0)

    @property
    def pending(self) -> list[Batch]:
        return list(self._pending)

    # ------------------------------------------------------------------ back
    def report_round(self, completions: Completions, *, complete: bool = True) -> GroupReport:
        """Fold one round's completions into a report of the oldest pending block.

        ``complete`` (all ranks' completions gathered) demands that the round covers the
        block: every row of it, and nothing else. Without it (one rank's share), the tasks
        seen are reported and the rest of the block is dropped."""
        if not self._pending:
            raise ConfigError(
                "rewards came in, but no block awaits them: was the sampler replaced, or is "
                "this an evaluation round with curriculum.training left on?"
            )
        batch = self._pending[0]
        groups = aggregate_groups(completions)
        rows = self.index.rows(batch)
        at = np.clip(np.searchsorted(groups.row, rows), 0, max(groups.row.shape[0] - 1, 0))
        seen = groups.row.shape[0] > 0
        found = (groups.row[at] == rows) if seen else np.zeros(rows.shape[0], dtype=bool)
        if complete:
            stray = np.setdiff1d(groups.row, rows)
            if not found.all() or stray.size:
                missing = np.setdiff1d(rows, groups.row)
                raise ConfigError(
                    f"rewards for block {batch.step} do not match its rows: missing "
                    f"{missing[:5].tolist()}, unexpected {stray[:5].tolist()}; every rank's "
                    "completions must be gathered, and the dataloader must come from "
                    "curriculum.sampler"
                )
        keep = found & (groups.scored[at] > 0 if seen else found)
        self._pending.popleft()
        self.reported += 1
        if keep.any():
            g = at[keep]
            part = batch if keep.all() else sub_batch(batch, keep)
            success = np.clip(groups.success[g], 0.0, 1.0)
            if keep.all():
                self.scheduler.report(
                    part,
                    rewards=groups.reward[g],
                    success=success,
                    process=groups.process[g],
                    cost=groups.cost[g],
                )
            else:  # a batch is reported whole or task by task: the scored tasks as Outcomes
                self.scheduler.report(
                    [
                        Outcome(int(a), int(v), float(r), float(s), float(pr), float(c))
                        for a, v, r, s, pr, c in zip(
                            part.arm,
                            part.variant,
                            groups.reward[g],
                            success,
                            groups.process[g],
                            groups.cost[g],
                            strict=True,
                        )
                    ]
                )
            n = self.index.catalog.n_arms
            self.groups += np.bincount(part.arm, minlength=n)
            flat = groups.zero_variance[g].astype(np.float64)
            self.zero_variance += np.bincount(part.arm, weights=flat, minlength=n).astype(np.int64)
        else:
            log.warning("block %d: no scored completion; nothing reported", batch.step)
        self.last_round = groups
        return groups

    # ------------------------------------------------------------------ epochs
    def end_epoch(self) -> None:
        self.block_in_epoch = 0

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The scheduler, the blocks drawn but not yet rewarded (yielded again first on
        resume) and the position in the pass, as plain arrays."""
        return {
            "format": STREAM_FORMAT,
            "scheduler": self.scheduler.state_dict(),
            "pending": [batch_state(b) for b in self._pending],
            "drawn": self.drawn,
            "reported": self.reported,
            # the pending blocks are yielded again after a resume, so they are not counted
            "block_in_epoch": max(self.block_in_epoch - len(self._pending), 0),
            "groups": self.groups.copy(),
            "zero_variance": self.zero_variance.copy(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("format") != STREAM_FORMAT:
            raise ConfigError(f"curriculum checkpoint: unknown format {state.get('format')!r}")
        try:
            pending = [batch_from_state(self.scheduler, b) for b in state["pending"]]
            groups = np.asarray(state["groups"], dtype=np.int64)
            flat = np.asarray(state["zero_variance"], dtype=np.int64)
            counters = (int(state["drawn"]), int(state["reported"]), int(state["block_in_epoch"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"curriculum checkpoint: {exc}") from None
        n = self.index.catalog.n_arms
        if groups.shape != (n,) or flat.shape != (n,):
            raise ConfigError("curriculum checkpoint: made for another catalog")
        self.scheduler.load_state_dict(state["scheduler"])
        self._pending = deque(pending)
        self._replay = deque(pending)
        self.drawn, self.reported, self.block_in_epoch = counters
        self.groups, self.zero_variance = groups.copy(), flat.copy()
        self.reports_at_draw = []
        self._first_logged = self.drawn
