"""verl 0.5 to 0.7: the scheduler as verl's curriculum sampler (``data.sampler``).

verl builds the sampler as ``CurriculumSampler(data_source=dataset, data_config=config.data)``
and, once per step after the actor update, calls ``update(batch=batch)``. Its dataloader
runs in the driver with ``dataloader_num_workers=0`` (verl asserts it), so each batch's rows
are drawn only when the loader asks for them: the report of step k reaches the draw of step
k+1. The sampler is torchdata ``Stateful``: verl's ``data.pt`` (the StatefulDataLoader's
state) carries the scheduler's state and the position in the epoch, and a resumed run draws
what the uninterrupted one would have.
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Any

from verl import DataProto
from verl.experimental.dataset.sampler import AbstractCurriculumSampler

from ._verl_feed import CurriculumFeed, FeedStats, RowTable, VerlOptions, plain

__all__ = ["CurriculumSampler"]


class CurriculumSampler(AbstractCurriculumSampler):  # type: ignore[misc]
    """``data.sampler.class_path=pkg://scheduler.integrations.verl``,
    ``data.sampler.class_name=CurriculumSampler``; options as ``+data.sampler.<key>=...``
    (:class:`~scheduler.integrations._verl_feed.VerlOptions`)."""

    def __init__(self, data_source: Sized, data_config: Any) -> None:
        options = VerlOptions.from_config(
            plain(data_config.get("sampler")), data_config, "data.sampler"
        )
        self.options = options
        self.scheduler = options.scheduler()
        self.table = RowTable(self.scheduler.catalog, options, data_source.dataframe)  # type: ignore[attr-defined]
        self.feed = CurriculumFeed(self.scheduler, self.table, options)
        assert options.batch_size is not None
        # an epoch is the dataset's length in whole batches (the loader drops the rest)
        self.num_samples = len(data_source) // options.batch_size * options.batch_size
        self._yielded = 0  # rows served in the current epoch

    def __len__(self) -> int:
        return self.num_samples

    def __iter__(self) -> Iterator[int]:
        while self._yielded < self.num_samples:
            row = self.feed.next_row()
            self._yielded += 1
            yield row
        self._yielded = 0  # the next iter() is a new epoch

    def update(self, batch: DataProto) -> None:
        """Report the trained batch: one outcome per uid group."""
        self.feed.report(batch)

    @property
    def stats(self) -> FeedStats:
        return self.feed.stats

    def state_dict(self) -> dict[str, Any]:
        return {"feed": self.feed.state_dict(), "yielded": self._yielded}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.feed.load_state_dict(state["feed"])
        self._yielded = int(state["yielded"])
