"""Per-arm statistics as struct-of-arrays, updated from a whole report at once."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ._statecheck import compare, finite_like, non_negative, rule

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]

_FLOAT_FIELDS = (
    "success_fast",
    "success_slow",
    "reward_fast",
    "reward_slow",
    "process_fast",
    "process_slow",
    "probe_score",
)
_INT_FIELDS = (
    "count",
    "process_count",
    "last_step",
    "probe_n",
    "probe_step",
)


def _unset(n: int, value: float, dtype: type[np.generic]) -> Any:
    """A read-only array of ``n`` times ``value`` that holds one element."""
    return np.broadcast_to(np.array(value, dtype=dtype), (n,))


class ArmStats:
    """EMAs, counts and the latest probe of every arm.

    Several outcomes of one arm in one report move its EMA as that many single updates with the
    batch mean would: alpha_eff = 1 - (1 - alpha) ** k. The first report of an arm sets its
    EMAs to the observed mean, so they do not start biased toward zero.
    """

    def __init__(self, n_arms: int, fast: float, slow: float) -> None:
        if not 0.0 < slow <= fast <= 1.0:
            raise ValueError(f"need 0 < ema_slow <= ema_fast <= 1, got {slow}, {fast}")
        self.fast = fast
        self.slow = slow
        self.n_arms = n_arms
        # counts and steps in 32 bits (2 billion episodes of one arm, or steps, is beyond
        # any run; a checkpoint past it is refused by the structural check)
        self.count: Int32Array = np.zeros(n_arms, dtype=np.int32)
        self.last_step: Int32Array = np.full(n_arms, -1, dtype=np.int32)
        self.success_fast: FloatArray = np.zeros(n_arms)
        self.success_slow: FloatArray = np.zeros(n_arms)
        self.reward_fast: FloatArray = np.zeros(n_arms)
        self.reward_slow: FloatArray = np.zeros(n_arms)
        self.process_count: Int32Array
        self.process_fast: FloatArray
        self.process_slow: FloatArray
        self._share_process()
        self.probe_score: FloatArray = np.full(n_arms, np.nan)
        self.probe_n: Int32Array = np.zeros(n_arms, dtype=np.int32)
        self.probe_step: Int32Array = np.full(n_arms, -1, dtype=np.int32)

    def _ema(
        self, name: str, touched: IntArray, mean: FloatArray, k: FloatArray, fresh: BoolArray
    ) -> None:
        """Move the EMA ``name`` of these arms toward ``mean`` as ``k`` single updates
        would; a ``fresh`` arm (or a nan EMA) starts at the mean."""
        rate = self.fast if name.endswith("_fast") else self.slow
        arr: FloatArray = getattr(self, name)
        alpha = 1.0 - (1.0 - rate) ** k
        old = arr[touched]
        arr[touched] = np.where(fresh | np.isnan(old), mean, old + alpha * (mean - old))

    def update(
        self,
        step: int,
        arm: IntArray,
        success: FloatArray,
        reward01: FloatArray,
        process: FloatArray,
    ) -> IntArray:
        """Apply outcomes (already filtered to those that count); returns the touched arms.
        Work is over the report's arms only (indices compressed with ``np.unique``)."""
        if arm.size == 0:
            return np.zeros(0, dtype=np.int64)
        touched, inverse = np.unique(arm, return_inverse=True)
        m = touched.shape[0]
        k = np.bincount(inverse, minlength=m).astype(np.float64)
        fresh = self.count[touched] == 0
        for prefix, values in (("success", success), ("reward", reward01)):
            mean = np.bincount(inverse, weights=values, minlength=m) / k
            for speed in ("_fast", "_slow"):
                self._ema(prefix + speed, touched, mean, k, fresh)
        has_process = ~np.isnan(process)
        if has_process.any():
            self._own_process()
            p_arm, p_inverse = np.unique(arm[has_process], return_inverse=True)
            kp = np.bincount(p_inverse, minlength=p_arm.shape[0]).astype(np.float64)
            mean = np.bincount(p_inverse, weights=process[has_process]) / kp
            never = np.zeros(p_arm.shape[0], dtype=bool)  # nan EMAs start at the mean anyway
            self._ema("process_fast", p_arm, mean, kp, never)
            self._ema("process_slow", p_arm, mean, kp, never)
            self.process_count[p_arm] += kp.astype(np.int32)
        self.count[touched] += k.astype(np.int32)
        self.last_step[touched] = step
        return touched

    def _share_process(self) -> None:
        """The process-score statistics before any process score: most trainers report
        none, so they are read-only views of one value (no memory per arm) until the first
        one arrives (``_own_process``)."""
        n, nan = self.n_arms, np.nan
        self.process_count = _unset(n, 0, np.int32)
        self.process_fast = _unset(n, nan, np.float64)
        self.process_slow = _unset(n, nan, np.float64)

    def _own_process(self) -> None:
        """Give the process-score statistics arrays of their own (a no-op once they have)."""
        if not self.process_count.flags.writeable:
            self.process_count = np.zeros(self.n_arms, dtype=np.int32)
            self.process_fast = np.full(self.n_arms, np.nan)
            self.process_slow = np.full(self.n_arms, np.nan)

    def state_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name).copy() for name in _FLOAT_FIELDS + _INT_FIELDS}

    def check_state(self, state: Any, where: str = "stats") -> list[str]:
        """Problems with ``state`` as this object's state (pure: nothing is applied)."""
        template = self.state_dict()
        problems = compare(template, state, where)
        if problems:
            return problems
        finite_like(problems, template, state, where)
        non_negative(problems, state, ("count", "process_count", "probe_n"), where)
        for name in ("last_step", "probe_step"):
            arr = np.asarray(state[name])
            rule(problems, f"{where}.{name}", arr, arr < -1, "must be a step >= -1 (-1: never)")
        for name in _FLOAT_FIELDS:
            if name.startswith(("success", "reward", "process", "probe")):
                arr = np.asarray(state[name], dtype=np.float64)
                rule(problems, f"{where}.{name}", arr, (arr < 0) | (arr > 1), "must be in [0, 1]")
        count, process_count = np.asarray(state["count"]), np.asarray(state["process_count"])
        rule(
            problems,
            f"{where}.process_count",
            process_count,
            process_count > count,
            "must be <= count",
        )
        probed = np.asarray(state["probe_n"]) > 0
        score = np.asarray(state["probe_score"], dtype=np.float64)
        rule(
            problems,
            f"{where}.probe_score",
            score,
            probed & np.isnan(score),
            "must be a score where probe_n > 0",
        )
        return problems

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name in _FLOAT_FIELDS + _INT_FIELDS:
            dtype = np.float64 if name in _FLOAT_FIELDS else np.int32
            value = np.asarray(state[name], dtype=dtype)
            if value.shape != (self.n_arms,):
                raise ValueError(
                    f"stats.{name}: expected shape ({self.n_arms},), got {value.shape}"
                )
            setattr(self, name, value.copy())
        if not self.process_count.any() and np.isnan(self.process_fast).all():
            self._share_process()  # a run that never had a process score
