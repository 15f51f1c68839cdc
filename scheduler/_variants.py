"""Variant choice: each arm cycles through its pool without replacement, epoch after epoch.

The order of an epoch is a pseudo-random permutation of [0, pool_size), computed on the fly
by a keyed swap-or-not shuffle (Hoang, Morris and Rogaway 2012), which is a bijection on any
domain size with no cycle walking. The key is a hash of seed, arm and epoch. So the only
state per arm is one cursor, a checkpoint stays small whatever the pool sizes, and every
rank derives the same order from the same seed.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_ROUNDS = 12


def splitmix64(x: U64) -> U64:
    """A well-mixed 64-bit hash of each element (Steele et al.'s SplitMix64 finaliser)."""
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    result: U64 = z ^ (z >> np.uint64(31))
    return result


def permuted_index(
    position: IntArray, size: IntArray, arm: IntArray, epoch: IntArray, seed: int
) -> IntArray:
    """Element ``position`` of the epoch's permutation of range(size), elementwise.

    Each swap-or-not round pairs x with k - x (mod size) and swaps the pair or not by a hash
    of the pair's larger member, so every round, and the whole shuffle, is a bijection.
    """
    n = size.astype(np.uint64)
    key = splitmix64(
        np.uint64(seed & 0xFFFFFFFFFFFFFFFF)
        ^ splitmix64(arm.astype(np.uint64) * np.uint64(0x100000001B3) + epoch.astype(np.uint64))
    )
    x = position.astype(np.uint64)
    one = np.uint64(1)
    for r in range(_ROUNDS):
        round_key = splitmix64(key + np.uint64(r))
        partner = (round_key % n + n - x) % n
        pair = np.maximum(x, partner)
        swap = (splitmix64(round_key ^ pair) >> np.uint64(17)) & one
        x = np.where(swap == one, partner, x)
    return x.astype(np.int64)


def occurrence_rank(values: IntArray) -> IntArray:
    """For each element, how many equal elements come before it (0 for the first).

    Applying elements rank by rank applies repeated ids in call order while each pass stays
    a vectorised update over distinct ids (curves, breakers); the variant cursor uses it to
    give repeated arms of one batch consecutive positions.
    """
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    first = np.searchsorted(sorted_values, sorted_values, side="left")
    rank = np.empty_like(values)
    rank[order] = np.arange(values.shape[0]) - first
    return rank
