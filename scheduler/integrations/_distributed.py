"""The scheduler replicated over torch.distributed ranks as a deterministic state machine.

Every rank holds a full Scheduler built from the same catalog, policy and seed. Each step,
every rank draws the same global batch and keeps its own shard (contiguous, disjoint, all
ranks together covering the batch). After the rollouts, each rank's outcomes for its shard
are all-gathered and every rank reports the whole batch, so every replica makes the same
update and draws the same next batch. ``checksum()`` / ``verify()`` compare the replicas.
Only rank 0 writes: the recorder (store and MLflow) runs there alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .._batch import Batch
from .._errors import ConfigError, ReportError
from .._scheduler import Scheduler
from .._serialize import dumps_state, loads_state
from ..probing import ProbeRound
from ..recording._mirror import RecorderMirror
from ._collective import ProbeMany, all_gather, broadcast, rank_and_world, replicated_probe_round
from ._stream import batch_from_state, batch_state, sub_batch

if TYPE_CHECKING:
    from ..recording import RunRecorder

IntArray = npt.NDArray[np.int64]
_FIELDS = ("rewards", "success", "process", "cost", "status")


@dataclass(frozen=True, eq=False)
class Shard:
    """This rank's part of a global batch: ``positions`` index into ``batch``."""

    batch: Batch  # the global batch, the same on every rank
    positions: IntArray  # int64 [m]: this rank's tasks, ascending
    rank: int

    @property
    def tasks(self) -> Batch:
        """This rank's tasks as a Batch (same step), to hand to the rollout workers."""
        keep = np.zeros(len(self.batch), dtype=bool)
        keep[self.positions] = True
        return sub_batch(self.batch, keep)

    def __len__(self) -> int:
        return int(self.positions.shape[0])


class ReplicatedScheduler:
    """One replica of the scheduler per rank, kept identical by gathering every report.

    ``group`` is a torch.distributed process group (default: the world); without an
    initialised process group this is a world of one. ``recorder`` builds the run's
    recorder (store, MLflow) and is called on rank 0 only, so no other rank opens the store
    or the tracking server; pass the same function on every rank."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        group: Any = None,
        recorder: Callable[[Scheduler], RunRecorder] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.group = group
        self.rank, self.world_size = rank_and_world(group)
        self.recorder = recorder(scheduler) if recorder is not None and self.rank == 0 else None
        # rank 0's recorder drains events and caches weights as each step begins; from
        # open() on, the other replicas do the same there, so every state stays byte-equal
        mirrored = recorder is not None and self.rank != 0
        self._mirror = RecorderMirror(scheduler) if mirrored else None
        self._batches: dict[int, Batch] = {}  # global batches awaiting their report
        # every replica carries rank 0's batch token, so their states are byte-equal
        if not scheduler.awaiting_report():
            token = broadcast(scheduler.batch_token if self.rank == 0 else None, group=group)
            scheduler.adopt_token(int(token))

    def open(self, *, resume: bool = False) -> int | None:
        """Open the run on rank 0; with ``resume``, rank 0 restores the store's latest
        checkpoint and every rank takes that state. Returns the restored step (or None)."""
        restored = self.recorder.open(resume=resume) if self.recorder is not None else None
        if self._mirror is not None:
            self.scheduler.add_listener(self._mirror)
        if resume:
            self.sync_from(0)
        step: int | None = broadcast(restored if self.rank == 0 else None, group=self.group)
        return step

    def close(self, summary: Mapping[str, Any] | None = None) -> None:
        if self.recorder is not None:
            self.recorder.close(summary)
        if self._mirror is not None:  # as the recorder's close does on rank 0
            self.scheduler.remove_listener(self._mirror)
            self.scheduler.drain_events()

    @property
    def is_writer(self) -> bool:
        return self.rank == 0

    def shard_positions(self, n: int) -> IntArray:
        """This rank's positions in a batch of ``n``: contiguous, sizes differing by one."""
        bounds = np.linspace(0, n, self.world_size + 1).round().astype(np.int64)
        return np.arange(bounds[self.rank], bounds[self.rank + 1], dtype=np.int64)

    def next_shard(self, n: int) -> Shard:
        """Draw the global batch of ``n`` (the same on every rank) and take this rank's shard."""
        batch = self.scheduler.next_batch(n)
        self._batches[batch.step] = batch
        return Shard(batch=batch, positions=self.shard_positions(n), rank=self.rank)

    def report(
        self,
        shard: Shard,
        rewards: npt.ArrayLike,
        success: npt.ArrayLike | None = None,
        process: npt.ArrayLike | None = None,
        cost: npt.ArrayLike | None = None,
        status: npt.ArrayLike | None = None,
    ) -> None:
        """Report this rank's outcomes (aligned with its shard); every rank must call it.

        The shards are gathered into whole-batch arrays and reported on every rank. A bad
        value anywhere is refused on every rank with the same ReportError, so the replicas
        stay identical either way."""
        n_local = len(shard)
        mine: dict[str, Any] = {"step": shard.batch.step, "positions": shard.positions.tolist()}
        for name, value in zip(_FIELDS, (rewards, success, process, cost, status), strict=True):
            if value is None:
                mine[name] = None
                continue
            arr = np.asarray(value).reshape(-1)
            if arr.shape[0] != n_local:
                arr = np.full(n_local, np.nan)  # refused below, on every rank alike
                mine["bad"] = f"rank {self.rank}: {name} has the wrong length"
            mine[name] = arr.tolist()
        parts = all_gather(mine, self.group)
        batch = self._batches[shard.batch.step]
        problems = [str(p["bad"]) for p in parts if "bad" in p]
        problems += [
            f"rank {r}: reported batch {p['step']}, the others {shard.batch.step}"
            for r, p in enumerate(parts)
            if p["step"] != shard.batch.step
        ]
        if problems:
            raise ReportError(problems)
        order = np.concatenate([np.asarray(p["positions"], dtype=np.int64) for p in parts])
        if not np.array_equal(np.sort(order), np.arange(len(batch))):
            raise ReportError([f"the ranks' shards do not cover batch {batch.step} once"])
        columns: dict[str, Any] = {}
        for name in _FIELDS:
            if all(p[name] is None for p in parts):
                columns[name] = None
                continue
            if any(p[name] is None for p in parts):
                raise ReportError([f"{name}: given by some ranks and not others"])
            values = np.concatenate([np.asarray(p[name], dtype=object) for p in parts])
            full = np.empty(len(batch), dtype=object)
            full[order] = values
            columns[name] = full if name == "status" else full.astype(np.float64)
        self.scheduler.report(batch, **columns)  # rank 0's recorder hears it as a listener
        del self._batches[batch.step]

    def probe_round(self, probe: ProbeMany) -> ProbeRound:
        """A probe round evaluated on rank 0, replayed on the others (the same probes land
        on every replica). ``probe`` need only work on rank 0."""
        return replicated_probe_round(self.scheduler, probe, group=self.group)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {
            "scheduler": self.scheduler.state_dict(),
            "batches": {str(k): batch_state(b) for k, b in self._batches.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.scheduler.load_state_dict(state["scheduler"])
        self._batches = {
            int(k): batch_from_state(self.scheduler, v) for k, v in state["batches"].items()
        }

    def checksum(self) -> str:
        """A digest of the whole replica state; equal on every rank while they agree."""
        return hashlib.sha256(dumps_state(self.state_dict())).hexdigest()

    def verify(self) -> str:
        """Compare the checksums of every rank; raise naming the ranks that differ."""
        sums = all_gather(self.checksum(), self.group)
        odd = [r for r, s in enumerate(sums) if s != sums[0]]
        if odd:
            raise ConfigError(f"replicas diverged: ranks {odd} differ from rank 0")
        return sums[0]

    def sync_from(self, src: int = 0) -> None:
        """Take rank ``src``'s state: a restarted rank calls this (every rank does) to rejoin."""
        blob = dumps_state(self.state_dict()) if self.rank == src else None
        self.load_state_dict(loads_state(broadcast(blob, src=src, group=self.group)))
