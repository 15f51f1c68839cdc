"""The trainer backend protocol: what runs a batch and what answers a probe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from .._batch import Batch


@dataclass(frozen=True, eq=False)
class BatchOutcomes:
    """Outcome arrays aligned with a Batch (element i is the result of task i)."""

    reward: npt.NDArray[np.float64]  # [n]
    success: npt.NDArray[np.float64]  # [n], 0.0 or 1.0
    process: npt.NDArray[np.float64]  # [n], dense process score in [0, 1]; NaN when absent
    cost: npt.NDArray[np.float64]  # [n], seconds
    status: npt.NDArray[np.int64]  # [n], Status codes


@runtime_checkable
class TrainerBackend(Protocol):
    """Runs batches and answers probes. The scheduler never imports a trainer directly."""

    def run(self, batch: Batch) -> BatchOutcomes:
        """Train on the batch and return one outcome per task."""
        ...

    def probe(self, family: int, tier: int) -> tuple[float, int]:
        """Held-out score of one family at one tier: (mean score, number of probe items)."""
        ...
