"""Bidirectional learning progress (Kanitscheider et al. 2021).

The score of an arm is |p_fast - p_slow| of its chance-normalised success: large while a
family is learning or forgetting, near zero once it is mastered, unlearnable, or a coin flip
(a coin flip's EMAs agree on 0.5, and normalising by chance maps 0.5 to 0 for a binary task).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from ._registry import PolicyState, Stateless, register
from ._view import ArmView


@register("learning_progress")
@dataclass(frozen=True)
class LearningProgress(Stateless):
    """Learning-progress scores per arm, with optimism for arms seen too little to judge.

    ``signal``: "success" reads the pass rate; "process" the dense process score; "auto" reads
    success, but falls back to the process score where success is sparse (both EMAs of the
    normalised success below ``sparse_below``), so a hard tier at 0% still shows progress.

    ``mastery``: above this normalised pass rate, progress is scaled down linearly to 0 at a
    perfect rate: an arm near the ceiling has no room left to learn, though its EMAs still
    lag (1.0 turns it off). ``probe_optimism``: an unexplored arm that a held-out probe has
    already measured gets its optimism scaled by 4p(1-p) of that probe, so an arm a probe
    shows mastered (or far out of reach) is not explored on faith.
    """

    signal: Literal["success", "process", "auto"] = "auto"
    min_samples: int = 16
    optimism: float = 1.0
    sparse_below: float = 0.05
    noise_z: float = 0.0  # subtract this many noise SDs of |fast - slow| (0: raw progress)
    mastery: float = 0.9
    probe_optimism: bool = True

    def __post_init__(self) -> None:
        if self.signal not in ("success", "process", "auto"):
            raise ValueError(f"signal must be success, process or auto, got {self.signal!r}")
        if self.min_samples < 0 or self.optimism < 0 or self.noise_z < 0:
            raise ValueError("min_samples, optimism and noise_z must be non-negative")
        if not 0.0 <= self.mastery <= 1.0:
            raise ValueError(f"mastery must be in [0, 1], got {self.mastery!r}")

    def weights(self, view: ArmView, state: PolicyState) -> npt.NDArray[np.float64]:
        fast = view.normalized(view.success_fast)
        slow = view.normalized(view.success_slow)
        progress = np.abs(fast - slow)
        if self.noise_z > 0:
            # A coin-flip arm's EMAs disagree by sampling noise alone; only the excess over
            # that noise is progress (in normalised units, so divided by 1 - chance).
            noise = view.progress_noise(view.success_slow) / (1.0 - view.chance)
            progress = np.clip(progress - self.noise_z * noise, 0.0, None)
        if self.signal != "success":
            dense = np.nan_to_num(np.abs(view.process_fast - view.process_slow), nan=0.0)
            if self.signal == "process":
                progress = dense
            else:
                sparse = (fast < self.sparse_below) & (slow < self.sparse_below)
                progress = np.where(sparse, dense, progress)
        if self.mastery < 1.0:
            progress = progress * np.clip((1.0 - fast) / (1.0 - self.mastery), 0.0, 1.0)
        unexplored = view.count < self.min_samples
        seen = progress[~unexplored]
        reference = float(seen.max()) if seen.size and seen.max() > 0 else 1.0
        optimism = np.full(progress.shape, self.optimism * reference)
        if self.probe_optimism:
            probed = view.normalized(np.nan_to_num(view.probe_score, nan=0.5))
            optimism = np.where(
                view.probe_step >= 0, optimism * 4 * probed * (1 - probed), optimism
            )
        return np.where(unexplored, optimism, progress)
