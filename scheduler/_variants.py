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
    of the pair's larger member, so every round, and the whole shuffle, is a bijection. The
    round keys of every element come from one hash call; a round then costs a few array
    operations over the batch (the swap bit is the top bit of a multiply-xorshift mix).
    """
    n = size.astype(np.uint64)
    key = splitmix64(
        np.uint64(seed & 0xFFFFFFFFFFFFFFFF)
        ^ splitmix64(arm.astype(np.uint64) * np.uint64(0x100000001B3) + epoch.astype(np.uint64))
    )
    round_key = splitmix64(key[None, :] + np.arange(_ROUNDS, dtype=np.uint64)[:, None])
    offset = round_key % n + n  # partner = (offset - x) % n
    x = position.astype(np.uint64)
    shift, top = np.uint64(29), np.uint64(1 << 63)  # top: z >= top where its top bit is set
    for r in range(_ROUNDS):
        partner = (offset[r] - x) % n
        z = (round_key[r] ^ np.maximum(x, partner)) * _MIX1
        z ^= z >> shift
        z *= _MIX2
        x = np.where(z >= top, partner, x)
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


class VariantCursor:
    """Where each arm stands in its pool: one cursor per arm (draws so far), and the
    variant of each task drawn, epoch after epoch without replacement."""

    def __init__(self, pool_size: IntArray, seed: int) -> None:
        self._pool_size = pool_size
        self.seed = int(seed)
        # int32: 2 billion draws of one arm is beyond any run (a checkpoint past it is refused)
        self.cursor: npt.NDArray[np.int32] = np.zeros(pool_size.shape[0], dtype=np.int32)

    def take(self, arm: IntArray) -> IntArray:
        """The variants of tasks drawn at ``arm`` (repeats of an arm get consecutive
        positions), advancing the cursors: work is over the batch only."""
        if arm.size == 0:
            return np.zeros(0, dtype=np.int64)
        order = np.argsort(arm, kind="stable")
        ordered = arm[order]
        first = np.searchsorted(ordered, ordered, side="left")
        rank = np.empty_like(arm)
        rank[order] = np.arange(arm.shape[0]) - first
        position = self.cursor[arm].astype(np.int64) + rank
        size = self._pool_size[arm]
        variant = permuted_index(position % size, size, arm, position // size, self.seed)
        last = np.flatnonzero(np.append(ordered[1:] != ordered[:-1], True))
        self.cursor[ordered[last]] += last - np.append(-1, last[:-1])
        return variant
