"""The floors of bench/throughput.py draw by weight and keep their structures consistent:
the figures issue 17 is judged against are only as good as these."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from _peers import FLOORS, NumpyFloor, NumpySumTree, make_peer  # noqa: E402


def _parents_are_sums(tree: NumpySumTree) -> bool:
    inner = np.arange(1, tree.size)
    return bool(np.allclose(tree.tree[inner], tree.tree[2 * inner] + tree.tree[2 * inner + 1]))


@pytest.mark.parametrize("n_arms", [1, 5, 1000, 1025])
def test_the_sum_tree_keeps_every_parent_the_sum_of_its_children(n_arms: int) -> None:
    tree = NumpySumTree(n_arms, 64, seed=0)
    assert tree.tree[1] == pytest.approx(n_arms)
    rng = np.random.default_rng(1)
    for _ in range(20):
        tree.step(rng.random(64))
    assert _parents_are_sums(tree)
    assert tree.tree[1] == pytest.approx(tree.tree[tree.size : tree.size + n_arms].sum())
    assert tree.count.sum() == 20 * 64


def test_the_sum_tree_draws_in_proportion_to_the_weights() -> None:
    tree = NumpySumTree(100, 20_000, seed=0)
    leaves = np.zeros(tree.size)
    leaves[[3, 50, 99]] = [1.0, 2.0, 7.0]
    tree.tree[tree.size :] = leaves
    for level in range(tree.levels - 1, -1, -1):
        lo, hi = 1 << level, 2 << level
        tree.tree[lo:hi] = tree.tree[2 * lo : 2 * hi : 2] + tree.tree[2 * lo + 1 : 2 * hi : 2]
    drawn = tree._draw()
    share = np.bincount(drawn, minlength=100)[[3, 50, 99]] / drawn.size
    assert share == pytest.approx([0.1, 0.2, 0.7], abs=0.02)


def test_the_cdf_floor_counts_every_outcome_and_reweights_only_when_asked() -> None:
    still = NumpyFloor(50, 32, seed=0, reweight=False)
    moving = NumpyFloor(50, 32, seed=0, reweight=True)
    for floor in (still, moving):
        floor.step(np.ones(32))
        assert floor.count.sum() == 32 and floor.passed.sum() == 32
    assert np.all(still.weights == 1.0)
    assert np.any(moving.weights != 1.0)
    with pytest.raises(ValueError, match="finite"):
        moving.step(np.full(32, np.nan))


def test_every_floor_is_a_peer() -> None:
    for name in FLOORS:
        make_peer(name, 10, 4, 0, np.zeros((1, 10)), 10).step(np.zeros(4))
