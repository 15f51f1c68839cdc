"""The last answer of a pure computation over arrays, kept with the arrays it was given.

The quota projection is the largest part of a weight refresh, and many refreshes hand it
the very arrays they handed it last time (the flags and caps did not move, the policy's
weights are constant). ``ArrayMemo`` keeps the last arguments and the result; a call whose
arguments are all equal, element for element, takes the result instead of recomputing it.
Equal arguments to a pure function give an equal result, so nothing drawn changes.

The memo validates itself (every argument is compared, none is assumed unchanged), and it
keeps copies, both of the arguments (some are live arrays that later steps update in
place) and of the result (so a caller that writes into what it got changes nothing here).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.generic]


class ArrayMemo:
    """The arguments and the result of the latest call of one pure array function."""

    def __init__(self) -> None:
        self._args: tuple[Array, ...] | None = None
        self._result: tuple[Array, ...] | None = None
        self.hits = 0  # calls answered from the memo (for tests and profiles)

    def clear(self) -> None:
        self._args = self._result = None

    def get(self, args: Sequence[Array]) -> tuple[Array, ...] | None:
        """A copy of the result kept for ``args``, or None when any argument differs."""
        kept, result = self._args, self._result
        if kept is None or result is None or len(kept) != len(args):
            return None
        if not all(np.array_equal(a, b) for a, b in zip(args, kept, strict=True)):
            return None
        self.hits += 1
        return tuple(r.copy() for r in result)

    def put(self, args: Sequence[Array], result: Sequence[Array]) -> None:
        """Keep ``result`` as the answer to ``args``."""
        self._args = tuple(np.array(a, copy=True) for a in args)
        self._result = tuple(np.array(r, copy=True) for r in result)
