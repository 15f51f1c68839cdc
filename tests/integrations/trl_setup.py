"""Shared by the TRL tests and their torchrun worker: the example's trainer, with spies.

The spies record what the dataloader pulled from the sampler and what each reward call
saw, without changing either."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.data import Sampler

from scheduler.integrations.trl import (
    Completions,
    CurriculumGRPOTrainer,
    CurriculumRepeatSampler,
    GRPOCurriculum,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "grpo_curriculum.py"


def example() -> Any:
    """The example script as a module (the tests run the very code the README shows)."""
    if "grpo_curriculum" not in sys.modules:
        spec = importlib.util.spec_from_file_location("grpo_curriculum", EXAMPLE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["grpo_curriculum"] = module
        spec.loader.exec_module(module)
    return sys.modules["grpo_curriculum"]


class Recording(Sampler[int]):
    """Passes a sampler through, keeping every index the dataloader pulled."""

    def __init__(self, inner: CurriculumRepeatSampler, pulled: list[int]) -> None:
        self.inner = inner
        self.pulled = pulled

    def __len__(self) -> int:
        return len(self.inner)

    def __iter__(self) -> Iterator[int]:
        for i in self.inner:
            self.pulled.append(i)
            yield i


class Spied:
    """A trainer from the example, with the pulled stream, the rows of each reward call and
    each round's local completions recorded."""

    def __init__(self, output_dir: str, steps: int, *, gather: bool = True, **overrides: Any):
        ex = example()
        self.pulled: list[int] = []
        self.reward_rows: list[list[int]] = []
        self.rounds: list[Completions] = []
        self.blocks: list[Any] = []  # the Batch behind each block, in the order drawn
        self.trainer, self.curriculum = ex.build(output_dir, steps, **overrides)
        self.curriculum.gather = gather
        trainer, curriculum = self.trainer, self.curriculum
        make = trainer._get_train_sampler
        pulled = self.pulled

        blocks = self.blocks

        def recording_sampler(dataset: Any = None) -> Recording:
            sampler = make(dataset)
            stream = sampler.stream
            draw = stream.next_block

            def spy_draw(size: int) -> Any:
                batch = draw(size)
                blocks.append(batch)
                return batch

            stream.next_block = spy_draw  # type: ignore[method-assign]
            return Recording(sampler, pulled)

        trainer._get_train_sampler = recording_sampler
        report = curriculum.report_completions

        def spy_report(local: Completions, log_metric: Any = None) -> Any:
            self.rounds.append(local)
            self.reward_rows.append(local.row.tolist())
            return report(local, log_metric)

        curriculum.report_completions = spy_report  # type: ignore[method-assign]

    @property
    def scheduler(self) -> Any:
        return self.curriculum.scheduler


def blocks_of(curriculum: GRPOCurriculum, batches: list[Any]) -> list[list[int]]:
    return [curriculum.stream.index.rows(b).tolist() for b in batches]


def repeat_shape(rows: list[int], mini: int, repeat: int) -> list[int]:
    """One block in RepeatSampler's order."""
    return [r for _ in range(repeat) for r in rows for _ in range(mini)]


def trainer_type() -> type[CurriculumGRPOTrainer]:
    return CurriculumGRPOTrainer


__all__ = ["Spied", "blocks_of", "example", "np", "repeat_shape"]
