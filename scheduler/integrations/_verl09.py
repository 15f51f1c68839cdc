"""verl 0.8 and later: the scheduler behind verl's training dataset (``data.custom_cls``).

verl 0.8 removed the sampler hook. What is left in ``RayPPOTrainer.fit`` is a call to the
training dataset's ``on_batch_end(batch=batch)`` after each step. ``CurriculumDataset`` is an
``RLHFDataset`` that ignores the index the loader's sampler passes: the i-th row fetched in a
step is the scheduler's i-th task of that step, and ``on_batch_end`` reports the batch back.
verl builds the validation set with the same class; a ``CurriculumDataset`` over any files but
``data.train_files`` is a plain ``RLHFDataset``.

Limits (docs/integrations.md): the loader must not fetch ahead of the step
(``data.dataloader_num_workers=0``); where a trainer does run ahead (an async rollout that
fetches step k+1 before step k's feedback), the lag is measured (``stats.lag_max``) and
bounded by ``max_lag``. The dataset is torchdata ``Stateful``, so verl's ``data.pt`` carries
the scheduler and a resumed run draws the same rows.
"""

from __future__ import annotations

from typing import Any

from verl.utils.dataset.rl_dataset import RLHFDataset

from ._verl_feed import CurriculumFeed, FeedStats, RowTable, VerlOptions, plain

__all__ = ["CurriculumDataset"]


def _files(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


class CurriculumDataset(RLHFDataset):  # type: ignore[misc]
    """``data.custom_cls.path=pkg://scheduler.integrations.verl``,
    ``data.custom_cls.name=CurriculumDataset``; options as ``+data.curriculum.<key>=...``
    (:class:`~scheduler.integrations._verl_feed.VerlOptions`)."""

    def __init__(
        self,
        data_files: str | list[str],
        tokenizer: Any,
        config: Any,
        processor: Any = None,
        max_samples: int = -1,
    ) -> None:
        super().__init__(
            data_files=data_files,
            tokenizer=tokenizer,
            config=config,
            processor=processor,
            max_samples=max_samples,
        )
        self.feed: CurriculumFeed | None = None
        if _files(data_files) != _files(config.get("train_files")):
            return  # the validation set: rows in the loader's order
        if config.get("dataloader_num_workers", 0) != 0:
            raise ValueError(
                "data.dataloader_num_workers: must be 0 with the curriculum dataset (workers "
                "would fetch rows before the previous step's feedback arrives)"
            )
        options = VerlOptions.from_config(
            plain(config.get("curriculum")), config, "data.curriculum"
        )
        scheduler = options.scheduler()
        self.feed = CurriculumFeed(
            scheduler, RowTable(scheduler.catalog, options, self.dataframe), options
        )

    def __getitem__(self, item: int) -> dict[str, Any]:
        if self.feed is None:
            return super().__getitem__(item)  # type: ignore[no-any-return]
        return super().__getitem__(self.feed.next_row())  # type: ignore[no-any-return]

    def on_batch_end(self, batch: Any) -> None:
        """Report the trained batch: one outcome per uid group."""
        if self.feed is not None:
            self.feed.report(batch)

    @property
    def stats(self) -> FeedStats | None:
        return None if self.feed is None else self.feed.stats

    def state_dict(self) -> dict[str, Any]:
        return {} if self.feed is None else {"feed": self.feed.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.feed is not None and state:
            self.feed.load_state_dict(state["feed"])
