"""The batches a scheduler has drawn and not yet had reported: what a report must match.

Every batch is recorded with the drawing scheduler's token (a random number of that
scheduler object, carried in ``Batch.token``) and its rows (arm, variant, attempt). A
report is accepted only for rows recorded here and not yet reported, so these are refused
with a reason: a batch of another scheduler (even at the same step on the same catalog),
a batch cut short or padded, forged arms, variants, attempts, families or tiers, and the
same batch or the same ``Outcome`` reported twice. A list of ``Outcome`` reports rows one
by one (each outcome takes the oldest matching row still waiting), so a trainer may report
a batch in pieces; a batch leaves the ledger once every row is reported.

Late reports: a batch may be reported until ``window`` more batches have been drawn after
it. Then it expires (a warning names it, at the 1st, 2nd, 4th, 8th... expiry so a trainer
that never reports does not flood the log; its outcomes are lost to the statistics) and a
report of it is refused as late. The ledger so holds at most ``window + 1`` batches, and a
trainer that never reports cannot grow it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ._batch import Batch
from ._statecheck import as_array
from ._variants import occurrence_rank

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_ROWS = ("arm", "variant", "attempt")


@dataclass
class _Drawn:
    """One batch awaiting its report."""

    token: int
    arm: IntArray  # int64 [n]
    variant: IntArray  # int64 [n]
    attempt: IntArray  # int64 [n]
    done: BoolArray  # bool [n], rows already reported (as Outcome)


@dataclass(frozen=True, eq=False)
class Matched:
    """Rows of pending batches that a list of outcomes reports, aligned with the outcomes."""

    step: IntArray  # int64 [m], the step of the batch each outcome belongs to
    attempt: IntArray  # int64 [m], the attempt that row ran as
    row: IntArray  # int64 [m], its index in that batch


class PendingBatches:
    """Batches drawn and not yet (fully) reported, keyed by step, oldest first."""

    def __init__(self, window: int, family_of_arm: IntArray, tier_of_arm: IntArray) -> None:
        self.window = int(window)
        self._family_of_arm = family_of_arm
        self._tier_of_arm = tier_of_arm
        self._drawn: dict[int, _Drawn] = {}
        self.expired = 0  # batches that expired unreported in this process (logged)

    def __len__(self) -> int:
        return len(self._drawn)

    @property
    def steps(self) -> list[int]:
        return list(self._drawn)

    # ------------------------------------------------------------------ drawing
    def add(
        self, step: int, token: int, arm: IntArray, variant: IntArray, attempt: IntArray
    ) -> None:
        """Record a batch just drawn, and expire those drawn more than ``window`` batches
        before it."""
        for old in [s for s in self._drawn if s < step - self.window]:
            drawn = self._drawn.pop(old)
            self.expired += 1
            if self.expired & (self.expired - 1) == 0:  # the 1st, 2nd, 4th, 8th... expiry
                log.warning(
                    "batch %d expired with %d of %d outcomes unreported (report_window=%d; "
                    "%d batches expired so far)",
                    old,
                    int((~drawn.done).sum()),
                    drawn.done.shape[0],
                    self.window,
                    self.expired,
                )
        n = arm.shape[0]
        self._drawn[int(step)] = _Drawn(
            int(token), arm.copy(), variant.copy(), attempt.copy(), np.zeros(n, dtype=bool)
        )

    # ------------------------------------------------------------------ checks (pure)
    def _missing(self, step: int, now: int) -> str:
        """Why a step has no batch awaiting a report; ``now`` is the next step to draw."""
        if step < 0 or step >= now:
            drawn = f"steps 0..{now - 1}" if now else "no batch yet"
            return f"batch {step}: not drawn by this scheduler (it has drawn {drawn})"
        if step < now - 1 - self.window:
            return (
                f"batch {step}: reported too late: {now - 1 - step} batches were drawn after it, "
                f"and a batch may be reported until {self.window} have been "
                "(SchedulerConfig.report_window)"
            )
        return f"batch {step}: already reported"

    def check_batch(self, batch: Batch, now: int) -> list[str]:
        """Problems with ``batch`` as one of these pending batches, reported whole."""
        step = batch.step
        if not isinstance(step, int | np.integer) or isinstance(step, bool | np.bool_):
            return [f"batch.step: must be an integer, got {step!r}"]
        step = int(step)
        drawn = self._drawn.get(step)
        if drawn is None:
            return [self._missing(step, now)]
        if batch.token != drawn.token:
            return [f"batch {step}: drawn by another scheduler (its token does not match)"]
        n = drawn.arm.shape[0]
        try:
            size = len(batch)
        except TypeError:
            size = -1
        problems: list[str] = []
        if size != n:
            problems.append(f"batch {step}: has {size} tasks, {n} were drawn (cut short or padded)")
            return problems
        arm = drawn.arm
        want = {
            "arm": arm,
            "variant": drawn.variant,
            "attempt": drawn.attempt,
            "family": self._family_of_arm[arm],
            "tier": self._tier_of_arm[arm],
        }
        given: dict[str, npt.NDArray[Any]] = {}
        for name, expected in want.items():
            value = getattr(batch, name, None)
            if name == "attempt" and value is None:
                value = np.zeros(n, dtype=np.int64)
            got = as_array(value)
            if got is None or got.shape != expected.shape or got.dtype.kind not in "iu":
                problems.append(f"batch {step}.{name}: not the array that was drawn")
                continue
            given[name] = got
        # one test of every array for the common case, a batch exactly as it was drawn
        same = [got == want[name] for name, got in given.items()]
        if not np.logical_and.reduce(same, axis=None):
            self._differences(step, given, want, problems)
        if not problems and drawn.done.any():
            problems.append(
                f"batch {step}: {int(drawn.done.sum())} of its {n} tasks were already reported "
                "as Outcome; report the rest as Outcome too"
            )
        return problems

    @staticmethod
    def _differences(
        step: int,
        given: Mapping[str, npt.NDArray[Any]],
        want: Mapping[str, IntArray],
        problems: list[str],
    ) -> None:
        """A problem for each array of the batch that differs from what was drawn."""
        for name, got in given.items():
            expected = want[name]
            differs = got != expected
            if differs.any():
                i = int(np.flatnonzero(differs)[0])
                problems.append(
                    f"batch {step}.{name}: differs from what was drawn at {int(differs.sum())} "
                    f"tasks (first: task {i}, drawn {int(expected[i])}, got {got[i].item()!r})"
                )

    def match(self, arm: IntArray, variant: IntArray, now: int) -> tuple[Matched, list[str]]:
        """The pending rows that outcomes (arm, variant) report: each takes the oldest row
        of its (arm, variant) not yet reported; outcomes repeating a pair take the next
        ones. Problems name every outcome without a row (reported twice, never drawn or
        expired)."""
        m = arm.shape[0]
        steps = list(self._drawn)
        if steps:
            rows = [self._drawn[s] for s in steps]
            p_arm = np.concatenate([d.arm for d in rows])
            p_var = np.concatenate([d.variant for d in rows])
            p_done = np.concatenate([d.done for d in rows])
            p_step = np.concatenate(
                [np.full(d.arm.shape[0], s, np.int64) for s, d in zip(steps, rows, strict=True)]
            )
            p_row = np.concatenate([np.arange(d.arm.shape[0], dtype=np.int64) for d in rows])
            p_att = np.concatenate([d.attempt for d in rows])
            live = ~p_done
            p_arm, p_var, p_step, p_row, p_att = (
                x[live] for x in (p_arm, p_var, p_step, p_row, p_att)
            )
        else:
            p_arm = p_var = p_step = p_row = p_att = np.zeros(0, dtype=np.int64)
        # One id per distinct (arm, variant), then the k-th outcome of a pair takes the k-th
        # waiting row of that pair (rows are in draw order, so the oldest first).
        n_p = p_arm.shape[0]
        found = np.zeros(m, dtype=bool)
        hit = np.zeros(m, dtype=np.int64)
        if n_p and m:
            pairs = np.concatenate([np.stack([p_arm, p_var], 1), np.stack([arm, variant], 1)])
            ids = np.unique(pairs, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
            width = np.int64(n_p + m + 1)
            p_key = ids[:n_p] * width + occurrence_rank(ids[:n_p])
            o_key = ids[n_p:] * width + occurrence_rank(ids[n_p:])
            order = np.argsort(p_key, kind="stable")
            pos = np.minimum(np.searchsorted(p_key[order], o_key), n_p - 1)
            found = p_key[order][pos] == o_key
            hit = order[pos]
        problems = [
            f"outcome[{i}]: arm {int(arm[i])}, variant {int(variant[i])} is no task awaiting a "
            f"report (already reported, not drawn by this scheduler, or drawn more than "
            f"{self.window} batches ago)"
            for i in np.flatnonzero(~found)[:10].tolist()
        ]
        if (~found).sum() > 10:
            problems.append(f"outcomes: {int((~found).sum()) - 10} more without a task")
        if problems:
            return Matched(*(np.zeros(0, dtype=np.int64),) * 3), problems
        return Matched(step=p_step[hit], attempt=p_att[hit], row=p_row[hit]), []

    # ------------------------------------------------------------------ applying
    def take_batch(self, step: int) -> None:
        """The whole batch was reported."""
        del self._drawn[int(step)]

    def take_rows(self, matched: Matched) -> None:
        """These rows were reported; batches with every row reported leave the ledger."""
        for step in np.unique(matched.step).tolist():
            drawn = self._drawn[step]
            drawn.done[matched.row[matched.step == step]] = True
            if drawn.done.all():
                del self._drawn[step]

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        drawn = list(self._drawn.items())
        sizes = np.array([d.arm.shape[0] for _, d in drawn], dtype=np.int64)

        def cat(name: str, dtype: Any) -> npt.NDArray[Any]:
            parts = [getattr(d, name) for _, d in drawn]
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)

        return {
            "step": np.array([s for s, _ in drawn], dtype=np.int64),
            "token": np.array([d.token for _, d in drawn], dtype=np.int64),
            "size": sizes,
            **{name: cat(name, np.int64) for name in _ROWS},
            "done": cat("done", bool),
        }

    def check_state(self, state: Any, now: int, n_arms: int, where: str = "pending") -> list[str]:
        """Problems with ``state`` as this ledger's state (pure); ``now`` is the state's step."""
        if not isinstance(state, Mapping):
            return [f"{where}: must be a mapping, got {type(state).__name__}"]
        problems: list[str] = []
        arrays: dict[str, npt.NDArray[Any]] = {}
        for name in ("step", "token", "size", *_ROWS, "done"):
            arr = as_array(state.get(name)) if name in state else None
            kinds, what = ("b", "booleans") if name == "done" else ("iu", "integers")
            if arr is None or arr.ndim != 1 or arr.dtype.kind not in kinds:
                got = "missing" if name not in state else type(state[name]).__name__
                if arr is not None:
                    got = f"dtype {arr.dtype}, shape {arr.shape}"
                problems.append(f"{where}.{name}: must be a 1-d array of {what}, got {got}")
            else:
                arrays[name] = arr
        if problems:
            return problems
        step, size = arrays["step"], arrays["size"]
        if not (step.shape == arrays["token"].shape == size.shape):
            return [f"{where}: step, token and size differ in length"]
        rows = {arrays[name].shape for name in (*_ROWS, "done")}
        if (size < 0).any() or len(rows) != 1 or rows.pop() != (int(size.sum()),):
            return [f"{where}: row arrays do not add up to the batch sizes"]
        if step.size and ((step < 0).any() or (step >= now).any() or (np.diff(step) <= 0).any()):
            problems.append(
                f"{where}.step: must be increasing steps in [0, {now}), got {step.tolist()}"
            )
        if step.size > self.window + 1:
            problems.append(f"{where}: {step.size} batches, more than report_window + 1")
        arm = arrays["arm"]
        if arm.size and (arm.min() < 0 or arm.max() >= n_arms):
            problems.append(f"{where}.arm: arm ids outside this catalog")
        if arrays["variant"].size and arrays["variant"].min() < 0:
            problems.append(f"{where}.variant: must be >= 0")
        if arrays["attempt"].size and arrays["attempt"].min() < 0:
            problems.append(f"{where}.attempt: must be >= 0")
        return problems

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state that ``check_state`` passed."""
        sizes = np.asarray(state["size"], dtype=np.int64)
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        rows = {name: np.asarray(state[name], dtype=np.int64) for name in _ROWS}
        done = np.asarray(state["done"], dtype=bool)
        self._drawn = {}
        for i, (step, token) in enumerate(
            zip(
                np.asarray(state["step"]).tolist(), np.asarray(state["token"]).tolist(), strict=True
            )
        ):
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            arm, variant, attempt = (rows[name][lo:hi].copy() for name in _ROWS)
            self._drawn[int(step)] = _Drawn(int(token), arm, variant, attempt, done[lo:hi].copy())
