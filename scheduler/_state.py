"""Per-arm statistics as struct-of-arrays, updated from a whole report at once."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ._statecheck import compare, finite_like, non_negative, rule

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_FLOAT_FIELDS = (
    "success_fast",
    "success_slow",
    "reward_fast",
    "reward_slow",
    "process_fast",
    "process_slow",
    "probe_score",
    "prev_probe_score",
    "lookahead_passed",
)
_INT_FIELDS = (
    "count",
    "process_count",
    "last_step",
    "probe_n",
    "probe_step",
    "prev_probe_step",
    "lookahead_n",
    "lookahead_from",
)
# Fields added after the first release: a state saved before them loads with these values.
_ADDED_FIELDS: dict[str, float] = {
    "prev_probe_score": np.nan,
    "prev_probe_step": -1,
    "lookahead_passed": 0.0,
    "lookahead_n": 0,
    "lookahead_from": -1,
}


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
        self.count: IntArray = np.zeros(n_arms, dtype=np.int64)
        self.process_count: IntArray = np.zeros(n_arms, dtype=np.int64)
        self.last_step: IntArray = np.full(n_arms, -1, dtype=np.int64)
        self.success_fast: FloatArray = np.zeros(n_arms)
        self.success_slow: FloatArray = np.zeros(n_arms)
        self.reward_fast: FloatArray = np.zeros(n_arms)
        self.reward_slow: FloatArray = np.zeros(n_arms)
        self.process_fast: FloatArray = np.full(n_arms, np.nan)
        self.process_slow: FloatArray = np.full(n_arms, np.nan)
        self.probe_score: FloatArray = np.full(n_arms, np.nan)
        self.probe_n: IntArray = np.zeros(n_arms, dtype=np.int64)
        self.probe_step: IntArray = np.full(n_arms, -1, dtype=np.int64)
        # The probe before the latest (a left tier's review needs two reads under retain_at).
        self.prev_probe_score: FloatArray = np.full(n_arms, np.nan)
        self.prev_probe_step: IntArray = np.full(n_arms, -1, dtype=np.int64)
        # Look-ahead probes of a tier above the family's current one, pooled since the first
        # of them after its latest tier change (the coin-flip check weighs all of them).
        self.lookahead_passed: FloatArray = np.zeros(n_arms)
        self.lookahead_n: IntArray = np.zeros(n_arms, dtype=np.int64)
        self.lookahead_from: IntArray = np.full(n_arms, -1, dtype=np.int64)

    def pool_lookahead(
        self, arm: IntArray, score: FloatArray, n: IntArray, since: IntArray, step: int
    ) -> None:
        """Add look-ahead probes; an arm whose pool predates ``since`` (its family's latest
        tier change) starts a new pool at ``step``."""
        stale = self.lookahead_from[arm] < since
        restart = arm[stale]
        self.lookahead_passed[restart] = 0.0
        self.lookahead_n[restart] = 0
        self.lookahead_from[restart] = step
        np.add.at(self.lookahead_passed, arm, score * n)
        np.add.at(self.lookahead_n, arm, n)

    def _ema(self, name: str, touched: IntArray, mean: FloatArray, k: FloatArray) -> None:
        rate = self.fast if name.endswith("_fast") else self.slow
        arr: FloatArray = getattr(self, name)
        alpha = 1.0 - (1.0 - rate) ** k
        old = arr[touched]
        arr[touched] = np.where(np.isnan(old), mean, old + alpha * (mean - old))

    def update(
        self,
        step: int,
        arm: IntArray,
        success: FloatArray,
        reward01: FloatArray,
        process: FloatArray,
    ) -> IntArray:
        """Apply outcomes (already filtered to those that count); returns the touched arms."""
        n = self.n_arms
        k_all = np.bincount(arm, minlength=n)
        touched = np.flatnonzero(k_all)
        if touched.size == 0:
            return touched
        k = k_all[touched].astype(np.float64)
        fresh = self.count[touched] == 0
        for prefix, values in (("success", success), ("reward", reward01)):
            mean = np.bincount(arm, weights=values, minlength=n)[touched] / k
            for speed in ("_fast", "_slow"):
                arr: FloatArray = getattr(self, prefix + speed)
                arr[touched[fresh]] = mean[fresh]
                self._ema(prefix + speed, touched[~fresh], mean[~fresh], k[~fresh])
        has_process = ~np.isnan(process)
        if has_process.any():
            p_arm = arm[has_process]
            kp_all = np.bincount(p_arm, minlength=n)
            p_touched = np.flatnonzero(kp_all)
            kp = kp_all[p_touched].astype(np.float64)
            mean = np.bincount(p_arm, weights=process[has_process], minlength=n)[p_touched] / kp
            self._ema("process_fast", p_touched, mean, kp)
            self._ema("process_slow", p_touched, mean, kp)
            self.process_count += kp_all
        self.count += k_all
        self.last_step[touched] = step
        return touched

    def state_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name).copy() for name in _FLOAT_FIELDS + _INT_FIELDS}

    def check_state(self, state: Any, where: str = "stats") -> list[str]:
        """Problems with ``state`` as this object's state (pure: nothing is applied)."""
        template = self.state_dict()
        problems = compare(template, state, where)
        if problems:
            return problems
        finite_like(problems, template, state, where)
        non_negative(problems, state, ("count", "process_count", "probe_n", "lookahead_n"), where)
        non_negative(problems, state, ("lookahead_passed",), where)
        for name in ("last_step", "probe_step", "prev_probe_step", "lookahead_from"):
            arr = np.asarray(state[name])
            rule(problems, f"{where}.{name}", arr, arr < -1, "must be a step >= -1 (-1: never)")
        for name in _FLOAT_FIELDS:
            if name.startswith(("success", "reward", "process", "probe", "prev_probe")):
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
            dtype = np.float64 if name in _FLOAT_FIELDS else np.int64
            if name not in state and name in _ADDED_FIELDS:
                setattr(self, name, np.full(self.n_arms, _ADDED_FIELDS[name], dtype=dtype))
                continue
            value = np.asarray(state[name], dtype=dtype)
            if value.shape != (self.n_arms,):
                raise ValueError(
                    f"stats.{name}: expected shape ({self.n_arms},), got {value.shape}"
                )
            setattr(self, name, value.copy())
