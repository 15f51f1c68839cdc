"""A RepeatSampler-shaped torch Sampler whose blocks the curriculum draws, one at a time.

TRL's ``RepeatSampler`` fixes a whole epoch in one ``randperm``. This one has the same
shape (each row ``mini_repeat_count`` times in a row, blocks of ``batch_size`` rows, each
block ``repeat_count`` times, the same ``__len__``) but asks the curriculum for each block
only when the dataloader reaches it, so the rewards of earlier blocks steer later ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Sized

from torch.utils.data import Sampler

from .._errors import ConfigError
from ._stream import CurriculumStream


class CurriculumRepeatSampler(Sampler[int]):
    """Dataset rows in RepeatSampler's order, each block drawn lazily from the stream."""

    def __init__(
        self,
        stream: CurriculumStream,
        *,
        data_source: Sized,
        mini_repeat_count: int,
        batch_size: int = 1,
        repeat_count: int = 1,
    ) -> None:
        if mini_repeat_count < 1 or batch_size < 1 or repeat_count < 1:
            raise ConfigError(
                "CurriculumRepeatSampler: mini_repeat_count, batch_size and repeat_count must "
                f"be >= 1, got {mini_repeat_count}, {batch_size}, {repeat_count}"
            )
        self.stream = stream
        self.num_samples = len(data_source)
        if self.num_samples != stream.index.n_rows:
            raise ConfigError(
                f"CurriculumRepeatSampler: the dataset has {self.num_samples} rows, the "
                f"curriculum's RowIndex {stream.index.n_rows}; build both from one dataset"
            )
        self.mini_repeat_count = mini_repeat_count
        self.batch_size = batch_size
        self.repeat_count = repeat_count

    @property
    def blocks_per_epoch(self) -> int:
        return self.num_samples // self.batch_size

    def __len__(self) -> int:
        return self.blocks_per_epoch * self.batch_size * self.mini_repeat_count * self.repeat_count

    def __iter__(self) -> Iterator[int]:
        stream = self.stream
        while stream.block_in_epoch < self.blocks_per_epoch:
            batch = stream.next_block(self.batch_size)
            stream.block_in_epoch += 1
            rows = stream.index.rows(batch).tolist()
            for _ in range(self.repeat_count):
                for row in rows:
                    for _ in range(self.mini_repeat_count):
                        yield row
        stream.end_epoch()
