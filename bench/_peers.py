"""Peers for ``throughput.py``: other ways to draw 256 arms by weight and feed outcomes back.

Each peer does, per step, what a curriculum must do at the least: draw ``batch`` arms from
``n_arms`` by their weights, then take the ``batch`` outcomes back. They are measured with
the same outcomes and step loop as the scheduler, so the rows compare like with like.

* ``numpy choice``: ``Generator.choice(n, batch, p=w / w.sum())``, then the drawn arms'
  weights are set from their outcomes;
* ``torch WeightedRandomSampler``: one sampler over a float64 weight tensor, drawn
  ``batch`` at a time (``list(sampler)``, as a DataLoader does), the drawn arms' weights
  set in place (the sampler keeps a reference to the tensor, so no re-creation);
* two floors, no curriculum in them, for what a numpy step cannot go under (issue 17's
  targets are judged against them): ``numpy floor: draw + count`` draws from a fixed CDF
  (``searchsorted``), checks the outcomes and counts them per arm; ``numpy floor: + weights``
  also sets the drawn arms' weights from their counts and rebuilds the CDF (a ``cumsum``),
  as a curriculum that re-weights at every step must; ``numpy floor: sum tree`` does the
  same with a sum tree (drawn by descending it level by level, the drawn arms' leaves and
  their ancestors updated), the O(k log n) structure issue 17 names;
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
FLOOR_DRAW = "numpy floor: draw + count"
FLOOR_WEIGHTS = "numpy floor: + weights"
FLOOR_TREE = "numpy floor: sum tree"
FLOORS = (FLOOR_DRAW, FLOOR_WEIGHTS, FLOOR_TREE)
PEERS = (NUMPY, TORCH, SYLLABUS, *FLOORS)


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


def _counted_rates(
    count: FloatArray, passed: FloatArray, drawn: IntArray, outcome: FloatArray
) -> FloatArray:
    """Check the outcomes, count them per drawn arm, and return the drawn arms' new
    weights (a smoothed p(1 - p)): what every floor does after its draw."""
    if outcome.shape != drawn.shape or not np.isfinite(outcome).all():
        raise ValueError("outcomes must be finite, one per task")
    np.add.at(count, drawn, 1.0)
    np.add.at(passed, drawn, outcome)
    rate = (passed[drawn] + 1.0) / (count[drawn] + 2.0)
    weight: FloatArray = rate * (1.0 - rate) + 0.01
    return weight


class NumpyFloor:
    """The least a numpy step does: draw ``batch`` arms from a CDF, check their outcomes
    and count them per arm; with ``reweight``, also set the drawn arms' weights from their
    counts (a smoothed p(1 - p)) and rebuild the CDF."""

    def __init__(self, n_arms: int, batch: int, seed: int, *, reweight: bool) -> None:
        self.rng = np.random.default_rng(seed)
        self.batch, self.reweight = batch, reweight
        self.weights = np.ones(n_arms)  # float64 [n_arms]
        self.cdf = np.cumsum(self.weights)
        self.count = np.zeros(n_arms)
        self.passed = np.zeros(n_arms)

    def step(self, outcome: FloatArray) -> None:
        drawn = np.searchsorted(self.cdf, self.rng.random(self.batch) * self.cdf[-1], "right")
        weight = _counted_rates(self.count, self.passed, drawn, outcome)
        if self.reweight:
            self.weights[drawn] = weight
            self.cdf = np.cumsum(self.weights)


class NumpySumTree:
    """``NumpyFloor`` with reweighting, drawing from a sum tree instead of a CDF: node i
    holds the sum of nodes 2i and 2i + 1, leaves from ``size`` on."""

    def __init__(self, n_arms: int, batch: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.batch, self.n_arms = batch, n_arms
        self.levels = max(1, int(np.ceil(np.log2(n_arms))))
        self.size = 1 << self.levels
        self.tree = np.zeros(2 * self.size)
        self.tree[self.size : self.size + n_arms] = 1.0
        for level in range(self.levels - 1, -1, -1):  # every parent from its children
            lo, hi = 1 << level, 2 << level
            self.tree[lo:hi] = self.tree[2 * lo : 2 * hi : 2] + self.tree[2 * lo + 1 : 2 * hi : 2]
        self.count = np.zeros(n_arms)
        self.passed = np.zeros(n_arms)

    def _draw(self) -> IntArray:
        u = self.rng.random(self.batch) * self.tree[1]
        node = np.ones(self.batch, dtype=np.int64)
        for _ in range(self.levels):
            left = 2 * node
            mass = self.tree[left]
            right = u >= mass
            u = np.where(right, u - mass, u)
            node = left + right
        drawn: IntArray = np.minimum(node - self.size, self.n_arms - 1)
        return drawn

    def step(self, outcome: FloatArray) -> None:
        drawn = self._draw()
        node = drawn + self.size
        self.tree[node] = _counted_rates(self.count, self.passed, drawn, outcome)
        for _ in range(self.levels):
            node = np.unique(node >> 1)
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]


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
    if name in (FLOOR_DRAW, FLOOR_WEIGHTS):
        return NumpyFloor(n_arms, batch, seed, reweight=name == FLOOR_WEIGHTS)
    if name == FLOOR_TREE:
        return NumpySumTree(n_arms, batch, seed)
    raise ValueError(f"unknown peer {name!r}; expected one of {PEERS}")


def peer_missing(name: str) -> str | None:
    """Why the peer ``name`` cannot run here, or None."""
    checks: dict[str, Callable[[], str | None]] = {
        NUMPY: lambda: None,
        **{floor: lambda: None for floor in FLOORS},
        TORCH: torch_missing,
        SYLLABUS: syllabus_missing,
    }
    return checks[name]()
