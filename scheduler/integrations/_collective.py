"""The few torch.distributed collectives the replicas need, and one process as a world of one.

Everything here is a no-op (a list of one) when torch.distributed is not initialised, so the
same adapter code runs in one process and under torchrun.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from .._scheduler import Scheduler
from ..probing import ProbeRound

T = TypeVar("T")
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
ProbeMany = Callable[[IntArray, IntArray], tuple[npt.ArrayLike, npt.ArrayLike]]


def _dist() -> Any:
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def rank_and_world(group: Any = None) -> tuple[int, int]:
    dist = _dist()
    if dist is None:
        return 0, 1
    return int(dist.get_rank(group)), int(dist.get_world_size(group))


def all_gather(obj: T, group: Any = None) -> list[T]:
    """Every rank's ``obj``, in rank order, on every rank."""
    dist = _dist()
    if dist is None or dist.get_world_size(group) == 1:
        return [obj]
    out: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, obj, group=group)
    return out


def broadcast(obj: Any, src: int = 0, group: Any = None) -> Any:
    """Rank ``src``'s ``obj`` on every rank (the others pass anything, usually None)."""
    dist = _dist()
    if dist is None or dist.get_world_size(group) == 1:
        return obj
    box: list[Any] = [obj]
    dist.broadcast_object_list(box, src=src, group=group)
    return box[0]


def replicated_probe_round(
    scheduler: Scheduler, probe: ProbeMany, *, src: int = 0, group: Any = None
) -> ProbeRound:
    """``scheduler.probe_round(probe)`` with ``probe`` run on rank ``src`` only.

    A probe round is adaptive (a promotion asks for a placement probe), so rank ``src``
    runs it and records each answer; the other ranks run the same round against those
    answers, in order. Every replica ends in the same state, and the evaluator (often a
    model generating on one device) runs once."""
    rank, world = rank_and_world(group)
    if world == 1:
        return scheduler.probe_round(probe)
    answers: list[tuple[list[float], list[int]]] = []
    if rank == src:

        def recording(families: IntArray, tiers: IntArray) -> tuple[FloatArray, IntArray]:
            scores, n = probe(families, tiers)
            s = np.asarray(scores, dtype=np.float64)
            c = np.asarray(n, dtype=np.int64)
            answers.append((s.tolist(), c.tolist()))
            return s, c

        result = scheduler.probe_round(recording)
        broadcast(answers, src=src, group=group)
        return result
    told: list[tuple[list[float], list[int]]] = broadcast(None, src=src, group=group)
    queue = iter(told)

    def replay(families: IntArray, tiers: IntArray) -> tuple[FloatArray, IntArray]:
        s, c = next(queue)
        return np.asarray(s, dtype=np.float64), np.asarray(c, dtype=np.int64)

    return scheduler.probe_round(replay)
