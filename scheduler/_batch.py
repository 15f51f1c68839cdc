"""What the scheduler hands to the trainer (Batch) and what comes back (Outcome)."""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from domains import Catalog


class Status(enum.IntEnum):
    """How an episode ended. Only OK and FAILED say anything about the model."""

    OK = 0
    FAILED = 1
    TIMEOUT = 2
    ENV_ERROR = 3

    @classmethod
    def parse(cls, value: str | int | Status) -> Status:
        if isinstance(value, str):
            return cls[value.upper()]
        return cls(int(value))


@dataclass(frozen=True)
class TaskRef:
    """One task of a batch, as a trainer consumes it."""

    index: int
    arm: int
    family: str
    domain: str
    tier: int
    variant: int
    item: Mapping[str, Any] | None  # the manifest's inline/JSONL variant, if it has one
    attempt: int = 0  # 0 for a fresh task, k for the k-th retry after an environment fault


@dataclass(frozen=True, eq=False)
class Batch:
    """The tasks drawn at one step. Arrays are aligned: element i is task i."""

    step: int
    arm: npt.NDArray[np.int64]  # [n]
    family: npt.NDArray[np.int64]  # [n]
    tier: npt.NDArray[np.int64]  # [n]
    variant: npt.NDArray[np.int64]  # [n]
    catalog: Catalog
    attempt: npt.NDArray[np.int64] | None = None  # [n], 0 for a fresh task, k for its k-th retry
    # the drawing scheduler's random token: a report to any other scheduler is refused
    token: int = 0

    def __len__(self) -> int:
        return int(self.arm.shape[0])

    def task(self, i: int) -> TaskRef:
        arm, fam = int(self.arm[i]), int(self.family[i])
        return TaskRef(
            index=i,
            arm=arm,
            family=self.catalog.family_names[fam],
            domain=self.catalog.domain_names[int(self.catalog.domain_of_family[fam])],
            tier=int(self.tier[i]),
            variant=int(self.variant[i]),
            item=self.catalog.variant(arm, int(self.variant[i])),
            attempt=0 if self.attempt is None else int(self.attempt[i]),
        )

    def __iter__(self) -> Iterator[TaskRef]:
        return (self.task(i) for i in range(len(self)))

    @property
    def family_names(self) -> list[str]:
        names = self.catalog.family_names
        return [names[f] for f in self.family.tolist()]


@dataclass(frozen=True)
class Outcome:
    """The result of one task, for callers that report outcome by outcome."""

    arm: int
    variant: int
    reward: float
    success: bool | float
    process: float = float("nan")  # dense process score in [0, 1], NaN when absent
    cost: float = float("nan")  # seconds spent, NaN when unknown
    status: Status | str = Status.OK
