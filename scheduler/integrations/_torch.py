"""The scheduler as a torch.utils.data batch sampler, for a plain torch training loop.

A dataset holds one row per task variant. ``RowIndex`` maps each (arm, variant) the
scheduler can draw to its row; ``CurriculumBatchSampler`` yields the rows of each batch the
scheduler draws, and keeps the ``Batch`` so the trainer can report outcomes against it:

    rows = RowIndex.from_columns(catalog, family=ds.family, tier=ds.tier, variant=ds.variant)
    sampler = CurriculumBatchSampler(sched, rows, batch_size=64, num_batches=1000)
    for examples in DataLoader(ds, batch_sampler=sampler):
        ...
        sched.report(sampler.take_batch(), rewards=r, success=s)

It follows torchdata's Stateful protocol: ``state_dict()`` holds the scheduler state and
the position in the epoch, so torchdata's ``StatefulDataLoader`` resumes it mid-epoch and
yields exactly the rows the uninterrupted loader would have.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from torch.utils.data import Sampler

from .._batch import Batch
from .._errors import ConfigError
from .._scheduler import Scheduler
from ._rows import RowIndex


class CurriculumBatchSampler(Sampler[list[int]]):
    """Yields one list of dataset rows per scheduler batch; ``num_batches`` per epoch."""

    def __init__(
        self,
        scheduler: Scheduler,
        rows: RowIndex,
        *,
        batch_size: int,
        num_batches: int,
        keep: int = 64,
    ) -> None:
        if batch_size < 1 or num_batches < 1:
            raise ConfigError("CurriculumBatchSampler: batch_size and num_batches must be >= 1")
        if rows.catalog is not scheduler.catalog:
            raise ConfigError("CurriculumBatchSampler: the RowIndex was built for another catalog")
        self.scheduler = scheduler
        self.index = rows
        self.batch_size = batch_size
        self.num_batches = num_batches
        self._keep = keep  # batches remembered for report(), oldest dropped first
        self._batches: OrderedDict[int, Batch] = OrderedDict()
        self._yielded = 0  # batches yielded in the current epoch

    def __len__(self) -> int:
        return self.num_batches

    def __iter__(self) -> Iterator[list[int]]:
        while self._yielded < self.num_batches:
            batch = self.scheduler.next_batch(self.batch_size)
            self._batches[batch.step] = batch
            while len(self._batches) > self._keep:
                self._batches.popitem(last=False)
            self._yielded += 1
            yield self.index.rows(batch).tolist()
        self._yielded = 0  # the next iter() is a new epoch

    def take_batch(self) -> Batch:
        """The Batch of the oldest rows not yet taken: call it once per loader item.

        A DataLoader hands batches back in the order the sampler yielded them, even when its
        workers prefetch ahead, so first-in first-out pairs each item with its Batch."""
        if not self._batches:
            raise LookupError("no batch is waiting: take_batch() was called more than once")
        return self._batches.popitem(last=False)[1]

    def batch(self, step: int) -> Batch:
        """The Batch drawn at scheduler step ``step``, if it is still kept and not taken."""
        try:
            return self._batches[step]
        except KeyError:
            raise KeyError(
                f"no batch {step} is kept (the last {self._keep} are); report batches promptly"
            ) from None

    @property
    def last_batch(self) -> Batch | None:
        return next(reversed(self._batches.values())) if self._batches else None

    def state_dict(self) -> dict[str, Any]:
        return {"scheduler": self.scheduler.state_dict(), "yielded": self._yielded}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(state["scheduler"])
        self._yielded = int(state["yielded"])
        self._batches.clear()
