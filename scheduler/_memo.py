"""The last answer of a pure computation over arrays, kept with a digest of its arguments.

The quota projection is the largest part of a weight refresh, and many refreshes hand it
the very arrays they handed it last time (the flags and caps did not move, the policy's
weights are constant). ``ArrayMemo`` keeps the last result and a digest of the arguments it
answered (each array's dtype, shape and a 128-bit BLAKE2b hash of its bytes); a call whose
arguments have the same digest takes the result instead of recomputing it. Equal arguments
to a pure function give an equal result, so nothing drawn changes.

A digest, not a copy, of the arguments: copies held five family-sized arrays, 10 bytes an
arm at 1,000 arms, where the state's budget is 300 (issue 17). Hashing 2 KB takes about 2
µs, a little more than comparing it; a false hit needs two different arrays with one
128-bit hash. The result is kept as a copy, and each answer is a fresh copy of it, so a
caller that writes into what it got changes nothing here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.generic]
Key = tuple[tuple[str, tuple[int, ...], bytes], ...]


def memo_key(args: Sequence[Array]) -> Key:
    """What identifies ``args`` to the memo: each one's dtype, shape and content hash."""
    return tuple(
        (a.dtype.str, a.shape, hashlib.blake2b(_bytes(a), digest_size=16).digest()) for a in args
    )


def _bytes(a: Array) -> memoryview:
    """The array's bytes as a buffer, without a copy where it is contiguous already."""
    return np.ascontiguousarray(a).data.cast("B")


class ArrayMemo:
    """The result of the latest call of one pure array function, and its arguments' key."""

    def __init__(self) -> None:
        self._key: Key | None = None
        self._result: tuple[Array, ...] | None = None
        self.hits = 0  # calls answered from the memo (for tests and profiles)

    def clear(self) -> None:
        self._key = self._result = None

    def get(self, key: Key) -> tuple[Array, ...] | None:
        """A copy of the result kept for arguments with this ``key`` (``memo_key``), or
        None."""
        if self._result is None or key != self._key:
            return None
        self.hits += 1
        return tuple(r.copy() for r in self._result)

    def put(self, key: Key, result: Sequence[Array]) -> None:
        """Keep ``result`` as the answer to the arguments with this ``key``."""
        self._key = key
        self._result = tuple(np.array(r, copy=True) for r in result)
