"""Work arrays a policy reuses from one update to the next.

A fresh float64 array of 100,000 values is 800 KB, which glibc maps and unmaps on each
allocation: the page faults cost several times the arithmetic (an ``exp`` over 100,000
values took 0.96 ms into a new array and 0.12 ms into a kept one on the development
machine). A policy whose update touches every arm writes its intermediates here instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

# glibc's default mmap threshold: a smaller array comes from freed heap memory, with no
# page faults, so keeping it would only hold memory
KEEP_FROM_BYTES = 128 * 1024


class Workspace:
    """Named 1-D work arrays: one of ``KEEP_FROM_BYTES`` or more is made on first use and
    remade only when the size changes; a smaller one is made afresh at each call. Their
    contents are scratch: nothing may be kept in them across calls."""

    def __init__(self) -> None:
        self._arrays: dict[str, npt.NDArray[Any]] = {}

    def array(self, name: str, n: int, dtype: type[np.generic] = np.float64) -> npt.NDArray[Any]:
        if n * np.dtype(dtype).itemsize < KEEP_FROM_BYTES:
            return np.empty(n, dtype=dtype)
        kept = self._arrays.get(name)
        if kept is None or kept.shape[0] != n or kept.dtype != dtype:
            kept = np.empty(n, dtype=dtype)
            self._arrays[name] = kept
        return kept
