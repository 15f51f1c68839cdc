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
the position in the epoch, so a resumed loader yields exactly the rows the uninterrupted one
would have.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from torch.utils.data import Sampler

from domains import Catalog

from ._batch import Batch
from ._errors import ConfigError
from ._scheduler import Scheduler

IntArray = npt.NDArray[np.int64]


class RowIndex:
    """Dataset row of every (arm, variant): a sorted key table searched in one call."""

    def __init__(self, catalog: Catalog, keys: IntArray, rows: IntArray) -> None:
        self.catalog = catalog
        self._stride = int(catalog.pool_size.max()) if catalog.n_arms else 1
        order = np.argsort(keys, kind="stable")
        self._keys = keys[order]
        self._rows = rows[order]

    @classmethod
    def from_columns(
        cls,
        catalog: Catalog,
        *,
        family: Sequence[str] | npt.ArrayLike,
        tier: npt.ArrayLike,
        variant: npt.ArrayLike,
    ) -> RowIndex:
        """Build from a dataset's columns (row i has family, tier and variant id i).

        Every variant of every pool must have exactly one row; ConfigError lists the first
        few that are missing, duplicated or outside the catalog.
        """
        fam_col = np.asarray(family)
        fam = (
            catalog.family_ids([str(f) for f in fam_col.tolist()])
            if fam_col.dtype.kind in "OUS"
            else fam_col.astype(np.int64)
        )
        tr = np.asarray(tier, dtype=np.int64)
        var = np.asarray(variant, dtype=np.int64)
        if not (fam.shape == tr.shape == var.shape) or fam.ndim != 1:
            raise ConfigError("RowIndex: family, tier and variant must be 1-D and aligned")
        bad_family = (fam < 0) | (fam >= catalog.n_families)
        safe_fam = np.where(bad_family, 0, fam)
        bad = bad_family | (tr < 0) | (tr >= catalog.n_tiers[safe_fam])
        arm = np.where(bad, 0, catalog.arm_start[safe_fam] + tr)
        bad |= (var < 0) | (var >= catalog.pool_size[arm])
        if bad.any():
            first = np.flatnonzero(bad)[:5].tolist()
            raise ConfigError(
                f"RowIndex: rows {first} name a family, tier or variant the catalog does not "
                "have (variant ids run from 0 to the pool size of their tier)"
            )
        stride = int(catalog.pool_size.max())
        keys = arm * stride + var
        unique, counts = np.unique(keys, return_counts=True)
        if (counts > 1).any():
            dup = unique[counts > 1][:5]
            raise ConfigError(
                f"RowIndex: {int((counts > 1).sum())} (arm, variant) pairs have several rows, "
                f"e.g. arm {int(dup[0] // stride)} variant {int(dup[0] % stride)}"
            )
        expected = int(catalog.pool_size.sum())
        if unique.shape[0] != expected:
            raise ConfigError(
                f"RowIndex: the dataset has rows for {unique.shape[0]} of the catalog's "
                f"{expected} variants; every variant of every tier needs a row"
            )
        return cls(catalog, keys, np.arange(keys.shape[0], dtype=np.int64))

    def rows(self, batch: Batch) -> IntArray:
        """The dataset rows of a batch's tasks, in batch order."""
        keys = batch.arm * self._stride + batch.variant
        where = np.searchsorted(self._keys, keys)
        result: IntArray = self._rows[where]
        return result


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
