"""Non-stationary bandits over arms: Exp3.S (Graves et al. 2017) and the TSCL teachers
(Matiisen et al. 2017).

The policy owns no RNG: where the papers sample an arm, this policy returns the probability
vector (Exp3.S) or the quantity the sampler would rank by (TSCL), and the scheduler draws.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy.special import logsumexp, softmax

from domains import Catalog

from ._registry import PolicyState, register
from ._signal import Signal, check_signal, read_signal
from ._view import ArmView
from ._workspace import Workspace

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
VARIANTS = ("exp3s", "tscl_window", "tscl_sampling")


def _push_rows(ring: FloatArray, count: IntArray, rows: IntArray, values: FloatArray) -> None:
    """Append one value to each of ``rows`` (distinct) of a ``[rows, K]`` ring, in place."""
    slot = count[rows] % ring.shape[1]
    ring[rows, slot] = values
    count[rows] += 1


def _masked_slope(x: FloatArray, y: FloatArray) -> tuple[FloatArray, IntArray]:
    """Least-squares slope of every row of ``[rows, K]`` arrays; NaN marks a missing point.

    Returns the slope (NaN with fewer than two distinct x) and the number of points per row.
    """
    valid = np.isfinite(x) & np.isfinite(y)
    n = valid.sum(axis=1)
    safe_n = np.maximum(n, 1)
    xv = np.where(valid, x, 0.0)
    yv = np.where(valid, y, 0.0)
    xm = xv.sum(axis=1) / safe_n
    ym = yv.sum(axis=1) / safe_n
    dx = np.where(valid, x - xm[:, None], 0.0)
    dy = np.where(valid, y - ym[:, None], 0.0)
    sxx = (dx * dx).sum(axis=1)
    sxy = (dx * dy).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where((n >= 2) & (sxx > 0), sxy / np.where(sxx > 0, sxx, 1.0), np.nan)
    return slope, n.astype(np.int64)


@register("exp3s")
@dataclass(frozen=True)
class Exp3S:
    """A bandit over arms rewarded by learning progress, for non-stationary curricula.

    ``variant``:

    - "exp3s" (Graves et al. 2017): log-weights per arm. After each report every touched arm's
      reward is its learning progress on the chosen ``signal``: with ``progress: window``
      (default) ``|slope|`` of its last ``window`` scores as in "tscl_window", with
      ``progress: ema`` ``|fast - slow|`` (cheaper, but with many outcomes per arm per report
      the scheduler's EMAs move fast and the gap is mostly sampling noise). It is mapped into
      [-1, 1] by the ``q_low``/``q_high`` quantiles of a reservoir of the last ``reservoir``
      rewards (a ring array in the state). Each arm then gets the importance-weighted reward
      ``(r_i [i touched] + beta) / P_i``, the log-weights move by ``eta`` times it, and a
      fixed share ``alpha`` of the mass is spread over the other arms (the ".S" that lets the
      bandit track a moving best arm). ``weights`` returns
      ``pi = (1 - epsilon) softmax(log_weight) + epsilon / n_arms`` and has no side effects;
      ``observe`` recomputes ``pi`` from the stored log-weights. Graves pulls one arm per round,
      so ``P_i = pi_i``; a report here holds ``B`` outcomes (counted from the arms' count
      deltas), so ``P_i = 1 - (1 - q_i) ** B``, the chance that arm i is in the batch, with
      ``q_i`` = ``pi_i`` renormalised over the families' current arms (what the scheduler draws
      from, before its own exploration floor). With ``B = 1`` and one tier this is Exp3.S.
    - "tscl_window" (TSCL "Window"): each arm keeps its last ``window`` (step, score) points,
      score = fast EMA of the signal when the arm was reported; the weight is ``|slope|`` of a
      least-squares line through them (progress or forgetting both attract samples).
    - "tscl_sampling" (TSCL "Sampling"): each arm keeps its last ``window`` score changes
      between consecutive reports. TSCL draws one change per arm and picks the largest
      ``|change|``; with no RNG in the policy, the weight is the expected magnitude of that
      draw, the mean ``|change|`` over the buffer. Like the paper's, it chases noise: an arm
      whose score jitters from batch to batch looks as good as one that is learning. Prefer
      "tscl_window" or "exp3s" when per-report scores are noisy.

    Arms with fewer than ``min_points`` points (TSCL variants) get ``optimism`` times the best
    seen weight, so every arm is measured before it is judged.
    """

    variant: Literal["exp3s", "tscl_window", "tscl_sampling"] = "exp3s"
    signal: Signal = "auto"
    sparse_below: float = 0.05
    progress: Literal["ema", "window"] = "window"
    eta: float = 0.1
    beta: float = 0.0
    epsilon: float = 0.05
    alpha: float = 0.001
    reservoir: int = 1000
    q_low: float = 0.2
    q_high: float = 0.8
    window: int = 32
    min_points: int = 3
    optimism: float = 1.0
    # work arrays of the update over every arm (not an option: no init, compare or repr)
    _work: Workspace = field(default_factory=Workspace, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        check_signal(self.signal, self.sparse_below)
        if self.progress not in ("ema", "window"):
            raise ValueError(f"progress must be ema or window, got {self.progress!r}")
        if not (np.isfinite(self.eta) and self.eta > 0):
            raise ValueError(f"eta must be a positive number, got {self.eta}")
        if not (np.isfinite(self.beta) and self.beta >= 0):
            raise ValueError(f"beta must be >= 0, got {self.beta}")
        if not 0.0 < self.epsilon <= 1.0:
            raise ValueError(f"epsilon must be in (0, 1], got {self.epsilon}")
        if not 0.0 <= self.alpha < 1.0:
            raise ValueError(f"alpha (fixed share) must be in [0, 1), got {self.alpha}")
        if self.reservoir < 2:
            raise ValueError(f"reservoir must be >= 2 rewards, got {self.reservoir}")
        if not 0.0 <= self.q_low < self.q_high <= 1.0:
            raise ValueError(
                f"need 0 <= q_low < q_high <= 1, got q_low={self.q_low}, q_high={self.q_high}"
            )
        if self.window < 2:
            raise ValueError(f"window must be >= 2, got {self.window}")
        if not 2 <= self.min_points <= self.window:
            raise ValueError(
                f"min_points must be in [2, window={self.window}], got {self.min_points}"
            )
        if not (np.isfinite(self.optimism) and self.optimism >= 0):
            raise ValueError(f"optimism must be >= 0, got {self.optimism}")

    # ------------------------------------------------------------------ state
    def init_state(self, catalog: Catalog) -> PolicyState:
        n = catalog.n_arms
        state: PolicyState = {}
        if self.variant == "tscl_sampling":
            state["delta"] = np.full((n, self.window), np.nan)  # float64 [n_arms, window]
            state["count"] = np.zeros(n, dtype=np.int64)  # int64 [n_arms], changes ever
            state["last_score"] = np.full(n, np.nan)  # float64 [n_arms], NaN before the first
            state["score"] = np.zeros(n)  # float64 [n_arms], mean |change| (cached)
        elif self.variant == "tscl_window" or self.progress == "window":
            state["x"] = np.full((n, self.window), np.nan)  # float64 [n_arms, window], step
            state["y"] = np.full((n, self.window), np.nan)  # float64 [n_arms, window], score
            state["count"] = np.zeros(n, dtype=np.int64)  # int64 [n_arms], points ever
            state["score"] = np.zeros(n)  # float64 [n_arms], |slope| (cached)
        if self.variant == "exp3s":
            state["log_weight"] = np.zeros(n)  # float64 [n_arms], shifted to logsumexp 0
            state["history"] = np.full(self.reservoir, np.nan)  # float64 [reservoir], rewards
            state["history_count"] = np.zeros(1, dtype=np.int64)  # int64 [1], rewards ever
            state["count_seen"] = np.zeros(n, dtype=np.int64)  # int64 [n_arms], view.count
        return state

    def probabilities(self, state: PolicyState) -> FloatArray:
        """Exp3.S arm probabilities from the stored log-weights."""
        lw = np.asarray(state["log_weight"], dtype=np.float64)
        p: FloatArray = (1.0 - self.epsilon) * softmax(lw) + self.epsilon / lw.shape[0]
        return p

    # ------------------------------------------------------------------ weights
    def weights(self, view: ArmView, state: PolicyState) -> FloatArray:
        if self.variant == "exp3s":
            return self.probabilities(state)
        score = np.asarray(state["score"], dtype=np.float64)
        n = np.minimum(state["count"], self.window)
        unexplored = n < self.min_points
        seen = score[~unexplored]
        reference = float(seen.max()) if seen.size and seen.max() > 0 else 1.0
        w: FloatArray = np.where(unexplored, self.optimism * reference, score)
        return w

    # ------------------------------------------------------------------ learning
    def observe(self, view: ArmView, state: PolicyState, touched: IntArray) -> None:
        if touched.size == 0:
            return
        # only the batch's arms learn: their signal is all that is read
        fast, slow = read_signal(view, self.signal, self.sparse_below, touched)
        if self.variant == "exp3s" and self.progress == "ema":
            self._observe_exp3s(view, state, touched, np.abs(fast - slow))
            return
        if self.variant == "tscl_sampling":
            last = state["last_score"]
            prev = last[touched]
            has = np.isfinite(prev)
            _push_rows(state["delta"], state["count"], touched[has], (fast - prev)[has])
            last[touched] = fast
            delta = state["delta"][touched]
            valid = np.isfinite(delta)
            total = np.where(valid, np.abs(delta), 0.0).sum(axis=1)
            state["score"][touched] = total / np.maximum(valid.sum(axis=1), 1)
            return
        # A window: only the touched rows change, so only their slopes are refitted.
        slot = state["count"][touched] % self.window
        state["x"][touched, slot] = float(view.step)
        state["y"][touched, slot] = fast
        state["count"][touched] += 1
        slope, _ = _masked_slope(state["x"][touched], state["y"][touched])
        progress = np.abs(np.nan_to_num(slope, nan=0.0))
        state["score"][touched] = progress
        if self.variant == "exp3s":
            self._observe_exp3s(view, state, touched, progress)

    def _observe_exp3s(
        self, view: ArmView, state: PolicyState, touched: IntArray, reward: FloatArray
    ) -> None:
        history = state["history"]
        filled = state["history_count"]
        size = history.shape[0]
        new = reward[-size:]
        history[(int(filled[0]) + np.arange(new.shape[0])) % size] = new
        filled[0] += new.shape[0]
        lo, hi = np.nanquantile(history, [self.q_low, self.q_high])
        span = hi - lo
        middle = 2.0 * (reward - lo) / span - 1.0 if span > 0 else np.zeros_like(reward)
        scaled = np.where(reward < lo, -1.0, np.where(reward > hi, 1.0, middle))

        # Every arm's weight moves, so the arithmetic below runs over every arm, into work
        # arrays kept between calls (``Workspace``); each line is the expression in its
        # comment, with the same operations in the same order (the same bits).
        lw = state["log_weight"]
        n = lw.shape[0]
        work = self._work
        a, b, c, d = (work.array(name, n) for name in "abcd")
        seen = state["count_seen"]
        moved = np.subtract(view.count, seen, out=work.array("moved", n, np.int64))
        draws = max(int(moved.sum()), 1)  # draws = max(sum(view.count - seen), 1)
        seen[...] = view.count
        # p = (1 - epsilon) * softmax(lw) + epsilon / n
        np.subtract(lw, np.max(lw, keepdims=True), out=a)
        np.exp(a, out=a)
        np.divide(a, np.sum(a, keepdims=True), out=a)
        np.multiply(a, 1.0 - self.epsilon, out=a)
        p = np.add(a, self.epsilon / n, out=a)
        # drawn = 1 - (1 - q) ** B, q = min(p / sum of p over the current arms, 1 - 1e-12)
        np.divide(p, p[view.current_arm].sum(), out=b)
        np.minimum(b, 1.0 - 1e-12, out=b)
        np.negative(b, out=c)
        np.log1p(c, out=c)
        np.multiply(c, draws, out=c)
        np.expm1(c, out=c)
        drawn = np.negative(c, out=c)
        # v = lw + eta * gain / drawn, gain = beta (+ the scaled reward where touched)
        gain = d
        gain.fill(self.beta)
        gain[touched] += scaled
        np.multiply(gain, self.eta, out=d)
        np.divide(d, drawn, out=d)
        v = np.add(lw, d, out=d)
        if n > 1 and self.alpha > 0:
            # Fixed share: w_i = log((1 - a) e^v_i + a / (n - 1) * sum_{j != i} e^v_j). The
            # shared weights sum to what the weights before the share did (sum_i e^v_i), so
            # that sum normalises them: no second pass of exp over every arm.
            e = np.exp(np.subtract(v, v.max(), out=a), out=a)  # e = exp(v - max(v))
            total = e.sum()
            rest = np.maximum(np.subtract(total, e, out=b), 0.0, out=b)  # max(total - e, 0)
            np.multiply(e, 1.0 - self.alpha, out=e)
            np.multiply(rest, self.alpha / (n - 1), out=rest)
            shared = np.add(e, rest, out=e)
            np.subtract(np.log(shared, out=shared), np.log(total), out=lw)
            return
        lw[...] = v - logsumexp(v)
