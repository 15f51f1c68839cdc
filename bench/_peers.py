"""Peers for ``throughput.py``: other ways to draw 256 arms by weight and feed outcomes back.

Each peer does, per step, what a curriculum must do at the least: draw ``batch`` arms from
``n_arms`` by their weights, then take the ``batch`` outcomes back. They are measured with
the same outcomes and step loop as the scheduler, so the rows compare like with like.

* ``numpy choice``: ``Generator.choice(n, batch, p=w / w.sum())``, then the drawn arms'
  weights are set from their outcomes;
* ``torch WeightedRandomSampler``: one sampler over a float64 weight tensor, drawn
  ``batch`` at a time (``list(sampler)``, as a DataLoader does), the drawn arms' weights
  set in place (the sampler keeps a reference to the tensor, so no re-creation);
* ``Syllabus LearningProgress`` (``syllabus-rl``, optional): ``sample(k=batch)``, then the
  per-episode update API for every task (``update_task_progress`` and
  ``update_on_episode``); its evaluator returns a score for every task, and runs every
  ``probe_every`` steps (``eval_interval`` in episodes), as the scheduler is probed.

Two Syllabus 0.7 problems are worked around. It compares its distribution with ``[]``
(``task_dist != []``), which numpy 2 refuses for an array; the distribution is handed back
as a zero-copy ndarray view whose ``!=`` against a list answers True, so no O(n)
conversion is added to its step. And importing ``syllabus.curricula`` calls
``np.seterr(all="raise")`` for the whole process (``plr/task_sampler.py``), after which an
underflow in any policy raises; ``import_syllabus`` puts numpy's error state back.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

NUMPY = "numpy choice"
TORCH = "torch WeightedRandomSampler"
SYLLABUS = "Syllabus LearningProgress"
PEERS = (NUMPY, TORCH, SYLLABUS)


class Peer(Protocol):
    def step(self, outcome: FloatArray) -> None:
        """Draw one batch, then take ``outcome`` (float64 [batch]) back for it."""


class NumpyChoice:
    """``Generator.choice`` over normalised weights; the drawn arms' weights updated."""

    def __init__(self, n_arms: int, batch: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.weights = np.ones(n_arms)  # float64 [n_arms]
        self.n_arms, self.batch = n_arms, batch

    def step(self, outcome: FloatArray) -> None:
        drawn = self.rng.choice(self.n_arms, self.batch, p=self.weights / self.weights.sum())
        self.weights[drawn] = 0.5 + outcome


class TorchSampler:
    """``torch.utils.data.WeightedRandomSampler`` drawing ``batch`` indices per step."""

    def __init__(self, n_arms: int, batch: int, seed: int) -> None:
        import torch
        from torch.utils.data import WeightedRandomSampler

        self.torch = torch
        self.weights = torch.ones(n_arms, dtype=torch.float64)
        generator = torch.Generator().manual_seed(seed)
        self.sampler = WeightedRandomSampler(
            self.weights,  # type: ignore[arg-type]  # a float64 tensor, kept by reference
            batch,
            replacement=True,
            generator=generator,
        )

    def step(self, outcome: FloatArray) -> None:
        drawn = self.torch.tensor(list(self.sampler), dtype=self.torch.int64)
        self.weights[drawn] = self.torch.from_numpy(0.5 + outcome)


class _Dist(np.ndarray):
    """A view of Syllabus's distribution that answers ``!= []`` with True (see above)."""

    def __ne__(self, other: object) -> Any:
        if isinstance(other, list) and not other:
            return True
        return np.asarray(self) != other


def _syllabus_curriculum(n_arms: int, scores: Callable[[], FloatArray], every: int) -> Any:
    """A Syllabus LearningProgress over ``n_arms`` discrete tasks whose evaluator returns
    ``scores()`` for every task, run every ``every`` episodes."""
    import torch

    import_syllabus()
    from syllabus.core.evaluator import Evaluator  # type: ignore[import-not-found,unused-ignore]
    from syllabus.curricula import LearningProgress  # type: ignore[import-not-found,unused-ignore]
    from syllabus.task_space import DiscreteTaskSpace  # type: ignore[import-not-found,unused-ignore]

    class ScoreEvaluator(Evaluator):  # type: ignore[misc]
        def evaluate_agent(
            self, num_episodes: int = 1, verbose: bool = False, store_all: bool = False
        ) -> tuple[Any, Any, Any, dict[str, Any]]:
            rates = torch.from_numpy(scores())
            return torch.zeros(1), rates, rates, {}

    class ViewedLearningProgress(LearningProgress):  # type: ignore[misc]
        def _sample_distribution(self) -> Any:
            return np.asarray(super()._sample_distribution()).view(_Dist)

    space = DiscreteTaskSpace(n_arms)
    evaluator = ScoreEvaluator(None, copy_agent=False, task_space=space)
    return ViewedLearningProgress(evaluator, space, eval_interval=every)


class SyllabusLearningProgress:
    """Syllabus's LearningProgress through its public API: ``sample`` and the per-episode
    updates; probed by its evaluator every ``probe_every`` steps."""

    def __init__(
        self, n_arms: int, batch: int, seed: int, probe_scores: FloatArray, probe_every: int
    ) -> None:
        np.random.seed(seed)  # noqa: NPY002 (Syllabus draws from numpy's global RNG)
        # its first evaluation is taken as a random agent's baseline, and uniform scores
        # make it warn about every task above 0.75
        warnings.filterwarnings("ignore", category=UserWarning, module=r"syllabus\.")
        self.batch = batch
        self._scores = probe_scores  # float64 [rounds, n_arms], cycled
        self._round = 0
        self.curriculum = _syllabus_curriculum(n_arms, self._next_scores, probe_every * batch)

    def _next_scores(self) -> FloatArray:
        row: FloatArray = self._scores[self._round % self._scores.shape[0]]
        self._round += 1
        return row

    def step(self, outcome: FloatArray) -> None:
        tasks = self.curriculum.sample(k=self.batch)
        cur = self.curriculum
        for task, success in zip(np.asarray(tasks).tolist(), outcome.tolist(), strict=True):
            cur.update_task_progress(task, success)
            cur.update_on_episode(success, 1, task, success)


def import_syllabus() -> None:
    """Import Syllabus's curricula, keeping numpy's error state (it sets ``all="raise"``)."""
    saved = np.geterr()
    try:
        import syllabus.curricula  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    finally:
        np.seterr(**saved)


def syllabus_missing() -> str | None:
    """Why Syllabus cannot run here (``"not installed"``), or None when it can."""
    try:
        import_syllabus()
    except ImportError:
        return "not installed"
    return None


def torch_missing() -> str | None:
    try:
        import torch  # noqa: F401
    except ImportError:
        return "not installed"
    return None


def make_peer(
    name: str, n_arms: int, batch: int, seed: int, probe_scores: FloatArray, probe_every: int
) -> Peer:
    """The peer called ``name`` (one of ``PEERS``), over ``n_arms`` arms."""
    if name == NUMPY:
        return NumpyChoice(n_arms, batch, seed)
    if name == TORCH:
        return TorchSampler(n_arms, batch, seed)
    if name == SYLLABUS:
        return SyllabusLearningProgress(n_arms, batch, seed, probe_scores, probe_every)
    raise ValueError(f"unknown peer {name!r}; expected one of {PEERS}")


def peer_missing(name: str) -> str | None:
    """Why the peer ``name`` cannot run here, or None."""
    checks: dict[str, Callable[[], str | None]] = {
        NUMPY: lambda: None,
        TORCH: torch_missing,
        SYLLABUS: syllabus_missing,
    }
    return checks[name]()
