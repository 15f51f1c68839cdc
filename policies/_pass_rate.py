"""The zone of proximal development: sample what the model solves about half the time.

Group-relative RL (GRPO and kin) learns only from groups whose rewards differ: a prompt the
model always passes or always fails gives every rollout the same reward and so zero advantage.
Online difficulty filtering and DAPO's dynamic sampling therefore keep pass rates near 0.5;
DUMP and SEC run a bandit on the expected |advantage| instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from ._registry import PolicyState, Stateless, register
from ._signal import Signal, check_signal, read_signal
from ._view import ArmView

FloatArray = npt.NDArray[np.float64]
VARIANTS = ("band", "variance", "advantage")


@register("pass_rate_band")
@dataclass(frozen=True)
class PassRateBand(Stateless):
    """Weights that peak where the pass rate ``p`` of an arm sits near ``target``.

    ``p`` is the fast EMA of the chosen ``signal`` (default "auto": chance-normalised success,
    or the dense process score where success is sparse, so a hard tier at 0% whose tests are
    starting to pass is not written off). ``variant``:

    - "band": ``exp(-((p - target) / width) ** 2)``, a bump around the target;
    - "variance": ``4 p (1 - p)``, the Bernoulli variance, i.e. how much of a GRPO group carries
      a non-zero advantage (peak 1 at p = 0.5; ``target`` and ``width`` are not used);
    - "advantage" (DUMP / SEC style): expected |advantage| plus a UCB bonus,
      ``2 p (1 - p) + ucb * sqrt(log(N) / n_arm)``. For a reward in [0, 1] with mean p the
      mean absolute deviation is at most ``2 p (1 - p)``, with equality for binary rewards; the
      view holds means, not second moments, so this bound stands in for the measured
      |r - group mean|. (An EMA of |batch mean - EMA| from count deltas would measure the noise
      of the batch mean, which shrinks with batch size, not the per-rollout advantage.)

    DAPO-style filtering: arms seen ``min_samples`` times whose ``p`` lies outside
    ``[low, high]`` (all-fail or all-pass) get ``filtered_weight``. Arms seen fewer times get at
    least the peak weight 1, so that they are measured.

    Caveat: a noise family that pays off at random sits at p = 0.5 and looks ideal here. Declare
    its chance level in the manifest (it is normalised away), or mix in learning progress.
    """

    variant: Literal["band", "variance", "advantage"] = "band"
    signal: Signal = "auto"
    sparse_below: float = 0.05
    target: float = 0.5
    width: float = 0.25
    low: float = 0.02
    high: float = 0.98
    filtered_weight: float = 0.0
    ucb: float = 0.1
    min_samples: int = 8

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        check_signal(self.signal, self.sparse_below)
        if not 0.0 <= self.target <= 1.0:
            raise ValueError(f"target must be a pass rate in [0, 1], got {self.target}")
        if not (np.isfinite(self.width) and self.width > 0):
            raise ValueError(f"width must be positive, got {self.width}")
        if not 0.0 <= self.low < self.high <= 1.0:
            raise ValueError(f"need 0 <= low < high <= 1, got low={self.low}, high={self.high}")
        if not 0.0 <= self.filtered_weight <= 1.0:
            raise ValueError(f"filtered_weight must be in [0, 1], got {self.filtered_weight}")
        if not (np.isfinite(self.ucb) and self.ucb >= 0):
            raise ValueError(f"ucb must be >= 0, got {self.ucb}")
        if self.min_samples < 0:
            raise ValueError(f"min_samples must be >= 0, got {self.min_samples}")

    def weights(self, view: ArmView, state: PolicyState) -> FloatArray:
        p, _ = read_signal(view, self.signal, self.sparse_below)
        if self.variant == "band":
            score = np.exp(-(((p - self.target) / self.width) ** 2))
        elif self.variant == "variance":
            score = 4.0 * p * (1.0 - p)
        else:
            n = view.count.astype(np.float64)
            total = max(float(n.sum()), 1.0)
            score = 2.0 * p * (1.0 - p) + self.ucb * np.sqrt(np.log1p(total) / (n + 1.0))
        score = np.where((p < self.low) | (p > self.high), self.filtered_weight, score)
        w: FloatArray = np.where(view.count < self.min_samples, np.maximum(score, 1.0), score)
        return w
