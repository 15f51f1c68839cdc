"""Variant choice: each arm cycles through its pool without replacement, epoch after epoch.

The order of an epoch is a pseudo-random permutation of [0, pool_size), computed on the fly by
a keyed Feistel network with cycle walking (the key is a hash of seed, arm and epoch). So the
only state per arm is one cursor, a checkpoint stays small whatever the pool sizes, and every
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
_ROUNDS = 4


def splitmix64(x: U64) -> U64:
    """A well-mixed 64-bit hash of each element (Steele et al.'s SplitMix64 finaliser)."""
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    result: U64 = z ^ (z >> np.uint64(31))
    return result


def _feistel(x: U64, key: U64, half_bits: U64) -> U64:
    mask = (np.uint64(1) << half_bits) - np.uint64(1)
    left, right = x >> half_bits, x & mask
    for r in range(_ROUNDS):
        f = splitmix64(right ^ key ^ np.uint64(r * 0x632BE59BD9B4E019 & 0xFFFFFFFFFFFFFFFF))
        left, right = right, (left ^ f) & mask
    result: U64 = (left << half_bits) | right
    return result


def permuted_index(
    position: IntArray, size: IntArray, arm: IntArray, epoch: IntArray, seed: int
) -> IntArray:
    """Element ``position`` of the epoch's permutation of range(size), elementwise."""
    size_u = size.astype(np.uint64)
    bits = np.ceil(np.log2(np.maximum(size, 2))).astype(np.uint64)
    half_bits = (bits + np.uint64(1)) // np.uint64(2)
    key = splitmix64(
        np.uint64(seed & 0xFFFFFFFFFFFFFFFF)
        ^ splitmix64(arm.astype(np.uint64) * np.uint64(0x100000001B3) + epoch.astype(np.uint64))
    )
    y = _feistel(position.astype(np.uint64), key, half_bits)
    outside = y >= size_u
    while outside.any():  # cycle walking: at most a few rounds, the domain is < 4 * size
        y[outside] = _feistel(y[outside], key[outside], half_bits[outside])
        outside = y >= size_u
    return np.where(size <= 1, 0, y.astype(np.int64))


def occurrence_rank(values: IntArray) -> IntArray:
    """For each element, how many equal elements come before it (0 for the first)."""
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    first = np.searchsorted(sorted_values, sorted_values, side="left")
    rank = np.empty_like(values)
    rank[order] = np.arange(values.shape[0]) - first
    return rank
