"""The hand-over between the scheduler and whatever probes for it: frozen arrays both ways.

``ProbeSnapshot`` goes out (what a runner needs to choose families, copied at one step);
``ProbeResults`` and ``ProbeRound`` come back. Neither side imports the other: the runner
never sees the Scheduler, and the scheduler never sees a thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._errors import ReportError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

ProbeFn = Callable[[str, int], float | tuple[float, int]]
# probe(families, tiers) -> (scores, n): many held-out probes at once, for Scheduler.probe_round;
# the contract is call_probe_many's docstring
ProbeMany = Callable[[IntArray, IntArray], tuple[npt.ArrayLike, npt.ArrayLike]]


@dataclass(frozen=True, eq=False)
class ProbeRound:
    """The probe points recorded at one step."""

    families: IntArray
    tiers: IntArray
    scores: FloatArray
    n: IntArray


@dataclass(frozen=True, eq=False)
class ProbeSnapshot:
    """What the priority needs from the scheduler, copied at one training step."""

    step: int
    tiers: IntArray  # int64 [n_families], the tier to probe
    weights: FloatArray  # float64 [n_families], current sampling weight
    last_probe_step: IntArray  # int64 [n_families], -1 when never probed
    change: FloatArray  # float64 [n_families], |slope| or |ema_fast - ema_slow|; NaN = unknown
    allowed: BoolArray | None = None  # bool [n_families], e.g. breakers.probe_allowed

    def validate(self, n_families: int) -> None:
        for name in ("tiers", "weights", "last_probe_step", "change", "allowed"):
            arr = getattr(self, name)
            if arr is not None and np.shape(arr) != (n_families,):
                raise ValueError(
                    f"ProbeSnapshot.{name}: shape {np.shape(arr)}, expected ({n_families},)"
                )


@dataclass(frozen=True, eq=False)
class ProbeResults:
    """Probe results that arrived since the last drain, aligned arrays, in arrival order."""

    families: IntArray  # int64 [m]
    tiers: IntArray  # int64 [m]
    scores: FloatArray  # float64 [m], NaN where the probe failed
    n: IntArray  # int64 [m], probe items; 0 where the probe failed
    ok: BoolArray  # bool [m]
    errors: tuple[str, ...]  # [m], "" where ok
    step: IntArray  # int64 [m], the snapshot step the probe was started at
    elapsed_s: FloatArray  # float64 [m], seconds from start to result (or to the timeout)

    def __len__(self) -> int:
        return int(self.families.shape[0])


def call_probe_many(
    probe: ProbeMany, families: IntArray, tiers: IntArray
) -> tuple[FloatArray, IntArray]:
    """Call a probe function as ``Scheduler.probe_round`` does, and hold it to its contract.

    ``probe(families, tiers)`` gets two aligned int64 arrays: family ids (index into
    ``catalog.family_names``) and tier indices (0 is the easiest). It returns ``(scores,
    n)``: ``scores`` one held-out pass rate in [0, 1] per requested (family, tier), in the
    same order, and ``n`` the items each score was measured on, either aligned with them
    or one number for all (``return scores, 32``). Anything else is a ReportError that
    says what came back; nothing is recorded from it."""
    got = probe(families, tiers)
    try:
        scores_like, n_like = got
    except (TypeError, ValueError):
        raise ReportError(
            [f"probe function: must return (scores, n), got {type(got).__name__}"]
        ) from None
    scores = np.asarray(scores_like, dtype=np.float64)
    n = np.asarray(n_like)
    problems = []
    if scores.shape != families.shape:
        problems.append(
            f"probe function: scores must have one value per family asked for "
            f"({families.shape[0]}), got shape {scores.shape}"
        )
    if n.ndim == 0:
        n = np.full(families.shape[0], n)
    if n.shape != families.shape:
        problems.append(
            f"probe function: n must be one number or one per family asked for "
            f"({families.shape[0]}), got shape {n.shape}"
        )
    elif (n.size and not np.issubdtype(n.dtype, np.integer)) and (
        not np.all(np.isfinite(n.astype(np.float64))) or np.any(n != np.round(n))
    ):
        problems.append("probe function: n must hold whole numbers of items")
    if problems:
        raise ReportError(problems)
    return scores, n.astype(np.int64)


def empty_results() -> ProbeResults:
    z = np.zeros(0, dtype=np.int64)
    return ProbeResults(
        families=z,
        tiers=z.copy(),
        scores=np.zeros(0),
        n=z.copy(),
        ok=np.zeros(0, dtype=bool),
        errors=(),
        step=z.copy(),
        elapsed_s=np.zeros(0),
    )
