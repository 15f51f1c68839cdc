"""Exp3.S's update over every arm runs in kept work arrays: the same bits as the update
written as plain array expressions, and the work arrays are no option of the policy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.special import logsumexp, softmax

from domains import Catalog
from policies import Exp3S, policy_params
from scheduler import Scheduler


def _reference(
    policy: Exp3S,
    lw: np.ndarray,
    current: np.ndarray,
    touched: np.ndarray,
    scaled: np.ndarray,
    draws: int,
) -> np.ndarray:
    """The update as expressions (each makes its own arrays), as it was first written."""
    p = (1.0 - policy.epsilon) * softmax(lw) + policy.epsilon / lw.shape[0]
    n = p.shape[0]
    q = np.minimum(p / p[current].sum(), 1.0 - 1e-12)
    drawn = -np.expm1(draws * np.log1p(-q))
    gain = np.full(n, policy.beta)
    gain[touched] += scaled
    v = lw + policy.eta * gain / drawn
    if n > 1 and policy.alpha > 0:
        e = np.exp(v - v.max())
        total = e.sum()
        rest = np.clip(total - e, 0.0, None)
        shared = (1.0 - policy.alpha) * e + policy.alpha / (n - 1) * rest
        return np.log(shared) - np.log(total)
    return v - logsumexp(v)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"progress": "ema", "signal": "success"},
        {"beta": 0.05},
        {"alpha": 0.0},
        {"epsilon": 1.0},
    ],
)
def test_the_update_in_work_arrays_gives_the_bits_of_the_expressions(
    options: dict[str, Any],
) -> None:
    cat = Catalog.synthetic(4, 30, 4)
    sched = Scheduler(cat, {"name": "exp3s", **options}, seed=2)
    policy = sched.policy
    assert isinstance(policy, Exp3S)
    rng = np.random.default_rng(0)
    seen_updates = 0
    original = policy._observe_exp3s

    def checked(view: Any, state: Any, touched: Any, reward: Any) -> None:
        nonlocal seen_updates
        lw = state["log_weight"].copy()
        draws = max(int((view.count - state["count_seen"]).sum()), 1)
        history_before = state["history"].copy(), state["history_count"].copy()
        original(view, state, touched, reward)
        # the scaled rewards, from the reservoir as the update saw it
        history, filled = history_before[0].copy(), history_before[1].copy()
        size = history.shape[0]
        new = reward[-size:]
        history[(int(filled[0]) + np.arange(new.shape[0])) % size] = new
        lo, hi = np.nanquantile(history, [policy.q_low, policy.q_high])
        span = hi - lo
        middle = 2.0 * (reward - lo) / span - 1.0 if span > 0 else np.zeros_like(reward)
        scaled = np.where(reward < lo, -1.0, np.where(reward > hi, 1.0, middle))
        expected = _reference(policy, lw, view.current_arm, touched, scaled, draws)
        np.testing.assert_array_equal(state["log_weight"], expected)
        seen_updates += 1

    object.__setattr__(policy, "_observe_exp3s", checked)
    for _ in range(40):
        batch = sched.next_batch(64)
        ok = (rng.random(len(batch)) < 0.5).astype(np.float64)
        sched.report(batch, rewards=ok, success=ok)
    assert seen_updates == 40


def test_the_work_arrays_are_not_an_option() -> None:
    params = policy_params(Exp3S())
    assert not any(key.startswith("_") for key in params)
    assert Exp3S() == Exp3S()  # two policies of the same options are equal
