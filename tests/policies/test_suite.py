"""Conformance suite over every registered policy, and the behaviour of each policy.

Every policy must give finite non-negative weights of shape [n_arms], keep its memory in a
state that survives ``dumps_state`` / ``loads_state`` with identical next batches, and turn a
bad option into a PolicyConfigError that names the option.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from domains import Catalog
from policies import (
    ArmView,
    Exp3S,
    Mixture,
    PassRateBand,
    Policy,
    PolicyConfigError,
    PrioritizedReplay,
    RegressionGuard,
    Uniform,
    available_policies,
    make_policy,
    policy_params,
)
from scheduler import Outcome, Scheduler, dumps_state, loads_state
from scheduler.probing._curves import ProbeCurves

MIXTURE = {
    "name": "mixture",
    "components": [
        {"policy": {"name": "learning_progress"}, "weight": 0.7},
        {"policy": {"name": "regression_guard"}, "weight": 0.3},
    ],
}
# Options a registered policy needs beyond its defaults (most need none).
REQUIRED: dict[str, dict[str, Any]] = {"mixture": MIXTURE}
VARIANTS: list[dict[str, Any]] = [
    {"name": "exp3s", "variant": "tscl_window"},
    {"name": "exp3s", "variant": "tscl_sampling"},
    {"name": "exp3s", "signal": "process", "beta": 0.1},
    {"name": "exp3s", "progress": "ema", "signal": "success"},
    {"name": "pass_rate_band", "variant": "variance"},
    {"name": "pass_rate_band", "variant": "advantage", "signal": "reward"},
    {"name": "prioritized_replay", "score": "failure"},
    {"name": "prioritized_replay", "score": "progress"},
    {"name": "regression_guard", "reference": "ema_slow"},
    {
        "name": "mixture",
        "components": [
            {"policy": "exp3s", "weight": 1},
            {"policy": "pass_rate_band", "weight": 2},
            {"policy": MIXTURE, "weight": 1},
        ],
    },
]


def _spec(name: str) -> str | dict[str, Any]:
    return REQUIRED.get(name, name)


SPECS = [_spec(n) for n in available_policies()] + VARIANTS
IDS = [s if isinstance(s, str) else "-".join(f"{v}" for v in s.values())[:40] for s in SPECS]


def _catalog() -> Catalog:
    return Catalog.synthetic(n_domains=3, families_per_domain=4, n_tiers=3, pool_size=8)


def _drive(sched: Scheduler, steps: int, seed: int, batch: int = 48) -> None:
    """Report a mix of outcomes: per-family skill, a process score, sparse hard families, and a
    few environment errors (which must not count)."""
    rng = np.random.default_rng(seed)
    skill = np.linspace(0.0, 1.0, sched.catalog.n_families)
    for _ in range(steps):
        b = sched.next_batch(batch)
        p = skill[b.family] * (1.0 - 0.3 * b.tier)
        success = (rng.random(batch) < p).astype(np.float64)
        process = np.clip(p + rng.normal(0, 0.1, batch), 0, 1)
        status = np.where(rng.random(batch) < 0.05, "env_error", "ok")
        sched.report(b, rewards=success, success=success, process=process, status=status)


def _check_weights(w: np.ndarray, n_arms: int) -> None:
    assert w.shape == (n_arms,)
    assert np.all(np.isfinite(w)) and (w >= 0).all()


# ---------------------------------------------------------------------------- conformance
@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_weights_are_valid_fresh_and_after_many_reports(spec: Any) -> None:
    cat = _catalog()
    sched = Scheduler(cat, spec, seed=3)
    _check_weights(sched.policy.weights(sched.view(), sched.policy_state), cat.n_arms)
    _drive(sched, 60, seed=1)
    _check_weights(sched.policy.weights(sched.view(), sched.policy_state), cat.n_arms)
    family = sched.weights().family
    assert family.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_weights_are_valid_with_probe_curves(spec: Any) -> None:
    """The same contract when the view carries probe curves (a dropping one included)."""
    cat = _catalog()
    sched = Scheduler(cat, spec, seed=3)
    policy, state = sched.policy, sched.policy_state
    curves = ProbeCurves.from_catalog(cat)
    fams = np.arange(cat.n_families)
    for step, level in enumerate([0.9, 0.9, 0.4, 0.3, 0.2]):
        _drive(sched, 2, seed=step)
        scores = np.where(fams % 2 == 0, level, 0.6)
        curves.record(fams, scores, np.full(cat.n_families, 64), np.full(cat.n_families, step))
        view = dataclasses.replace(sched.view(), curves=curves)
        policy.observe(view, state, np.arange(cat.n_arms))
        _check_weights(policy.weights(view, state), cat.n_arms)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_state_survives_serialisation_with_identical_batches(spec: Any) -> None:
    cat = _catalog()
    original = Scheduler(cat, spec, seed=7)
    _drive(original, 25, seed=2)
    blob = dumps_state(original.state_dict())
    resumed = Scheduler(cat, spec, seed=0)
    resumed.load_state_dict(loads_state(blob))
    # Same outcomes from here on: the batches must agree step after step, which only holds if
    # the policy's own state came back exactly (the cached weights cover only the first).
    for step in range(8):
        a, b = original.next_batch(32), resumed.next_batch(32)
        np.testing.assert_array_equal(a.arm, b.arm)
        np.testing.assert_array_equal(a.variant, b.variant)
        rng = np.random.default_rng(step)
        success = (rng.random(32) < 0.4).astype(np.float64)
        process = rng.random(32)
        for s in (original, resumed):
            batch = a if s is original else b
            s.report(batch, rewards=success, success=success, process=process)
    np.testing.assert_array_equal(original.weights().family, resumed.weights().family)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_logged_params_rebuild_the_same_policy(spec: Any) -> None:
    policy = make_policy(spec)
    params = policy_params(policy)
    rebuilt = make_policy(loads_state(dumps_state({"p": params}))["p"])
    assert policy_params(rebuilt) == params


BAD: list[tuple[dict[str, Any], str]] = [
    ({"name": "exp3s", "variant": "ucb"}, "variant must be one of"),
    ({"name": "exp3s", "eta": 0}, "eta must be"),
    ({"name": "exp3s", "epsilon": 0}, "epsilon must be"),
    ({"name": "exp3s", "alpha": 1.0}, "alpha"),
    ({"name": "exp3s", "q_low": 0.9}, "q_low < q_high"),
    ({"name": "exp3s", "window": 5, "min_points": 6}, "min_points"),
    ({"name": "exp3s", "signal": "vibes"}, "signal must be one of"),
    ({"name": "exp3s", "progress": "delta"}, "progress must be"),
    ({"name": "pass_rate_band", "target": 1.5}, "target must be"),
    ({"name": "pass_rate_band", "width": 0}, "width must be"),
    ({"name": "pass_rate_band", "low": 0.9, "high": 0.1}, "low < high"),
    ({"name": "pass_rate_band", "variant": "dapo"}, "variant must be one of"),
    ({"name": "prioritized_replay", "beta": -1}, "beta"),
    ({"name": "prioritized_replay", "rho": 2}, "rho"),
    ({"name": "prioritized_replay", "score": "loss"}, "score must be one of"),
    ({"name": "regression_guard", "k": 0}, "k "),
    ({"name": "regression_guard", "consecutive": 0}, "consecutive"),
    ({"name": "regression_guard", "reference": "first"}, "reference"),
    ({"name": "mixture"}, "at least one"),
    ({"name": "mixture", "components": "uniform"}, "must be a list"),
    ({"name": "mixture", "components": [{"policy": "nope"}]}, r"components\[0\]\.policy"),
    ({"name": "mixture", "components": [{"weight": 1}]}, r"components\[0\]: needs"),
    (
        {"name": "mixture", "components": [{"policy": "uniform", "weight": -1}]},
        r"components\[0\]\.weight",
    ),
    ({"name": "mixture", "components": [{"policy": "uniform", "weight": 0}]}, "positive"),
    (
        {"name": "mixture", "components": [{"policy": {"name": "exp3s", "eta": -1}}]},
        r"components\[0\]\.policy: policy 'exp3s': eta",
    ),
]


@pytest.mark.parametrize(("spec", "match"), BAD, ids=[m for _, m in BAD])
def test_bad_config_is_a_policy_config_error(spec: dict[str, Any], match: str) -> None:
    with pytest.raises(PolicyConfigError, match=match):
        make_policy(spec)


def test_every_registered_policy_is_covered_by_bad_config_or_has_no_options() -> None:
    covered = {spec["name"] for spec, _ in BAD}
    for name in available_policies():
        policy = make_policy(_spec(name))
        has_options = dataclasses.is_dataclass(policy) and dataclasses.fields(policy)
        assert name in covered or not has_options or name == "learning_progress", name


@settings(max_examples=15, deadline=None)
@given(
    spec=st.sampled_from(SPECS),
    success=st.lists(st.floats(0, 1), min_size=24, max_size=24),
    process=st.lists(st.one_of(st.floats(0, 1), st.just(float("nan"))), min_size=24, max_size=24),
)
def test_weights_stay_valid_for_any_outcomes(
    spec: Any, success: list[float], process: list[float]
) -> None:
    cat = Catalog.synthetic(2, 3, 2, pool_size=4)
    sched = Scheduler(cat, spec, seed=0)
    for _ in range(3):
        b = sched.next_batch(24)
        sched.report(b, rewards=success, success=success, process=process)
        _check_weights(sched.policy.weights(sched.view(), sched.policy_state), cat.n_arms)


# ---------------------------------------------------------------------------- helpers
def _single_tier_run(spec: Any, prob: Any, steps: int, seed: int = 0, n_fam: int = 4) -> Scheduler:
    """A scheduler over ``n_fam`` one-tier families; ``prob(t)`` gives each family's success
    probability at step t."""
    cat = Catalog.synthetic(1, n_fam, 1, pool_size=8)
    sched = Scheduler(cat, spec, seed=seed)
    rng = np.random.default_rng(seed)
    for t in range(steps):
        b = sched.next_batch(64)
        s = (rng.random(64) < np.asarray(prob(t))[b.family]).astype(np.float64)
        sched.report(b, rewards=s, success=s)
    return sched


def _report_each(
    sched: Scheduler, success: list[float], process: list[float] | None = None
) -> None:
    """One outcome per arm (arm i gets success[i]) after advancing a step."""
    sched.next_batch(1)
    proc = process if process is not None else [float("nan")] * len(success)
    sched.record_outcomes(
        [
            Outcome(arm=i, variant=0, reward=s, success=s, process=p)
            for i, (s, p) in enumerate(zip(success, proc, strict=True))
        ]
    )


def _w(sched: Scheduler) -> np.ndarray:
    return np.asarray(sched.policy.weights(sched.view(), sched.policy_state))


# ---------------------------------------------------------------------------- exp3s
@pytest.mark.parametrize("variant", ["exp3s", "tscl_window", "tscl_sampling"])
def test_exp3s_moves_mass_to_the_family_that_is_learning(variant: str) -> None:
    steps = 150

    def prob(t: int) -> list[float]:
        return [min(t / steps, 1.0), 0.0, 1.0, 0.3]  # rising, impossible, mastered, flat

    sched = _single_tier_run({"name": "exp3s", "variant": variant}, prob, steps)
    w = _w(sched)
    assert w[0] > 3 * w[1:3].max(), w  # beats the arms that cannot move
    if variant != "tscl_sampling":  # that one chases noise by design (see its docstring)
        assert w[0] > 1.5 * w[3], w  # and the arm whose score only jitters
    if variant == "exp3s":
        assert w.sum() == pytest.approx(1.0)  # Exp3.S returns its probability vector
        assert w[0] > 0.9  # docs/policies.md quotes this run (0.956)


def test_exp3s_rescales_rewards_by_reservoir_quantiles() -> None:
    policy = Exp3S(reservoir=4)
    sched = Scheduler(Catalog.synthetic(1, 2, 1), policy, seed=0)
    for _ in range(6):
        _report_each(sched, [1.0, 0.0])
    history = sched.policy_state["history"]
    assert history.shape == (4,) and np.isfinite(history).all()  # a ring, not a growing list
    assert int(sched.policy_state["history_count"][0]) == 12


def test_exp3s_fixed_share_keeps_every_arm_alive() -> None:
    """After a long run favouring one arm, the others keep at least the epsilon share."""
    sched = _single_tier_run("exp3s", lambda t: [min(t / 50, 1.0), 0.0, 0.0, 0.0], 120)
    w = _w(sched)
    assert w.min() >= 0.05 / 4 - 1e-12


def test_exp3s_log_weights_stay_normalised_after_the_fixed_share() -> None:
    """The shared weights are normalised by the sum before the share (the two are equal),
    not by a second logsumexp: the stored log-weights still sum to one in probability."""
    sched = _single_tier_run("exp3s", lambda t: [min(t / 50, 1.0), 0.2, 0.0, 0.9], 200)
    lw = np.asarray(sched.policy_state["log_weight"])
    assert abs(float(np.log(np.exp(lw).sum()))) < 1e-12
    assert np.isfinite(lw).all()


# ---------------------------------------------------------------------------- pass-rate band
@pytest.mark.parametrize("variant", ["band", "variance", "advantage"])
def test_pass_rate_band_prefers_half_over_never_and_always(variant: str) -> None:
    sched = Scheduler(Catalog.synthetic(1, 3, 1), {"name": "pass_rate_band", "variant": variant})
    rng = np.random.default_rng(0)
    for _ in range(40):
        half = float(rng.random() < 0.5)
        _report_each(sched, [0.0, half, 1.0])
    w = _w(sched)
    assert w[1] > 5 * max(w[0], w[2]), w


def test_pass_rate_band_reads_the_process_score_where_success_is_zero() -> None:
    cat = Catalog.synthetic(1, 3, 1)
    auto = Scheduler(cat, "pass_rate_band")
    for _ in range(20):
        # A hard family at 0% with half its unit tests passing; one with no process score.
        _report_each(auto, [0.0, 0.0, 1.0], [0.5, float("nan"), 1.0])
    w_auto = _w(auto)
    w_success = PassRateBand(signal="success").weights(auto.view(), {})
    assert w_auto[0] > 0.9 and w_auto[1] == 0.0 and w_auto[2] == 0.0
    assert w_success[0] == 0.0  # reading success only, the hard family looks hopeless


def test_pass_rate_band_explores_unseen_arms_and_filters_extremes() -> None:
    sched = Scheduler(Catalog.synthetic(1, 2, 2), PassRateBand(min_samples=4))
    np.testing.assert_allclose(_w(sched), 1.0)  # nothing seen: everything worth measuring
    for _ in range(5):
        _report_each(sched, [1.0, 1.0, 0.0, 0.0])
    np.testing.assert_allclose(_w(sched), 0.0)  # all-pass and all-fail: no GRPO signal


def test_advantage_variant_gives_a_ucb_bonus_to_rarely_seen_arms() -> None:
    cat = Catalog.synthetic(1, 2, 1)
    sched = Scheduler(cat, PassRateBand(variant="advantage", min_samples=0, ucb=1.0))
    sched.next_batch(1)
    outcomes = [Outcome(arm=0, variant=0, reward=0.5, success=0.5)] * 50
    sched.record_outcomes([*outcomes, Outcome(arm=1, variant=0, reward=0.5, success=0.5)])
    w = _w(sched)
    assert w[1] > w[0] > 0.5  # same pass rate, fewer samples: larger bonus


# ---------------------------------------------------------------------------- replay
def test_prioritized_replay_prefers_stale_arms() -> None:
    sched = Scheduler(Catalog.synthetic(1, 3, 1), PrioritizedReplay(score="failure", rho=1.0))
    _report_each(sched, [0.5, 0.5, 0.5])
    for _ in range(10):
        sched.next_batch(1)
        sched.record_outcomes([Outcome(arm=a, variant=0, reward=0.5, success=0.5) for a in (1, 2)])
    w = _w(sched)
    assert w[0] > w[1] and w[1] == pytest.approx(w[2])


def test_prioritized_replay_ranks_by_score_and_puts_unseen_first() -> None:
    cat = Catalog.synthetic(1, 4, 1)
    sched = Scheduler(cat, PrioritizedReplay(score="failure", rho=0.0))
    sched.next_batch(1)
    sched.record_outcomes(
        [Outcome(arm=a, variant=0, reward=s, success=s) for a, s in enumerate([0.9, 0.1])]
    )
    w = _w(sched)
    assert w[2] == w[3] > w[1] > w[0]  # unseen, then failing more often, then passing
    # Ranks 1, 1 (tied unseen), 3, 4; with beta = 0.1 the PLR transform puts rank 3 and
    # rank 4 a factor (4/3) ** 10 apart.
    assert w[1] / w[0] == pytest.approx((4 / 3) ** 10)


def test_prioritized_replay_weights_only_current_tier_arms() -> None:
    cat = Catalog.synthetic(1, 2, 3)
    sched = Scheduler(cat, "prioritized_replay")
    w = _w(sched)
    current = sched.view().current_arm
    assert w.sum() == pytest.approx(1.0) and w[current].sum() == pytest.approx(1.0)


# ---------------------------------------------------------------------------- guard
def _guard_view(sched: Scheduler, curves: ProbeCurves) -> ArmView:
    return dataclasses.replace(sched.view(), curves=curves)


def test_regression_guard_boosts_a_family_whose_probe_curve_drops() -> None:
    cat = Catalog.synthetic(1, 3, 1)
    sched = Scheduler(cat, "regression_guard")
    guard, state = sched.policy, sched.policy_state
    assert isinstance(guard, RegressionGuard)
    curves = ProbeCurves.from_catalog(cat)
    fams = np.arange(3)
    n = np.full(3, 100)

    def probe(step: int, scores: list[float]) -> np.ndarray:
        curves.record(fams, scores, n, np.full(3, step))
        view = _guard_view(sched, curves)
        guard.observe(view, state, np.arange(3))
        return np.asarray(guard.weights(view, state))

    probe(0, [0.8, 0.8, 0.5])
    probe(1, [0.82, 0.8, 0.5])
    w = probe(2, [0.81, 0.55, 0.48])  # family 1 fell ~4 standard errors: one probe only
    assert not guard.flagged(state).any()
    guard.observe(_guard_view(sched, curves), state, np.arange(3))  # same point: not recounted
    assert int(state["streak"][1]) == 1
    w = probe(3, [0.8, 0.5, 0.52])  # second significant drop in a row
    assert guard.flagged(state).tolist() == [False, True, False]
    assert w[1] > 0 and w[0] == w[2] == 0.0
    w = probe(4, [0.8, 0.79, 0.5])  # recovered to within k errors of its best
    assert not guard.flagged(state).any()
    np.testing.assert_allclose(w, 0.0)


def test_regression_guard_ignores_small_dips_and_restarts_at_a_new_tier() -> None:
    cat = Catalog.synthetic(1, 2, 2)
    guard = RegressionGuard(consecutive=1)
    sched = Scheduler(cat, guard)
    state = sched.policy_state
    curves = ProbeCurves.from_catalog(cat)
    curves.record([0, 1], [0.9, 0.9], [20, 20], [0, 0])
    guard.observe(_guard_view(sched, curves), state, np.arange(0))
    curves.record([0, 1], [0.8, 0.5], [20, 20], [1, 1])  # 0.1 on 20 items is noise; 0.4 is not
    guard.observe(_guard_view(sched, curves), state, np.arange(0))
    assert guard.flagged(state).tolist() == [False, True]
    sched.tiers.tier[1] = 1  # family 1 moved up: its old best no longer applies
    guard.observe(_guard_view(sched, curves), state, np.arange(0))
    assert not guard.flagged(state).any() and np.isnan(state["best"][1])


def test_regression_guard_without_curves_is_uniform() -> None:
    sched = _single_tier_run("regression_guard", lambda t: [0.5, 0.5, 0.5, 0.5], 5)
    view = dataclasses.replace(sched.view(), curves=None)
    np.testing.assert_allclose(sched.policy.weights(view, sched.policy_state), 1.0)


def test_regression_guard_through_the_scheduler_probes() -> None:
    """record_probes then report: the guard sees each new probe point once, at observe."""
    cat = Catalog.synthetic(1, 3, 1)
    sched = Scheduler(cat, "regression_guard", seed=0)
    if sched.view().curves is None:
        pytest.skip("this Scheduler does not put probe curves in the view")
    fams = np.arange(3)
    for scores in ([0.8, 0.8, 0.5], [0.8, 0.5, 0.5], [0.8, 0.45, 0.5]):
        b = sched.next_batch(12)
        sched.record_probes(fams, scores, n=np.full(3, 100))
        sched.report(b, rewards=np.full(12, 0.5), success=np.full(12, 0.5))
    w = _w(sched)
    assert w[1] == 1.0 and w[0] == w[2] == 0.0
    assert int(np.argmax(sched.weights().family)) == 1


# ---------------------------------------------------------------------------- mixture
def test_mixture_is_the_weighted_sum_of_normalised_components() -> None:
    cat = Catalog.synthetic(1, 3, 2)
    band = PassRateBand(min_samples=0)
    replay = PrioritizedReplay()
    mix = Mixture(components=[(band, 3.0), (replay, 1.0)])
    sched = Scheduler(cat, mix, seed=0)
    for _ in range(5):
        _report_each(sched, [0.0, 0.5, 1.0, 0.5, 0.5, 0.0])
    view = sched.view()
    cur = view.current_arm
    wa = band.weights(view, {})
    wb = replay.weights(view, {})
    expected = 0.75 * wa / wa[cur].sum() + 0.25 * wb / wb[cur].sum()
    np.testing.assert_allclose(mix.weights(view, sched.policy_state), expected)


def test_mixture_from_yaml_keeps_component_states_and_forwards_observe() -> None:
    spec = yaml.safe_load(
        """
        name: mixture
        components:
          - policy: {name: exp3s, variant: tscl_sampling}
            weight: 0.7
          - policy: {name: regression_guard}
            weight: 0.3
        """
    )
    sched = Scheduler(_catalog(), spec, seed=0)
    policy = sched.policy
    assert isinstance(policy, Mixture)
    assert [w for _, w in policy.parts] == pytest.approx([0.7, 0.3])
    assert set(sched.policy_state) == {"0", "1"}
    _drive(sched, 3, seed=0)
    assert (sched.policy_state["0"]["count"] > 0).any()  # the TSCL buffer was filled
    assert policy_params(policy)["components"][1] == {
        "policy": policy_params(RegressionGuard()),
        "weight": 0.3,
    }


def test_mixture_of_a_silent_component_counts_it_as_uniform() -> None:
    cat = Catalog.synthetic(1, 4, 1)
    sched = Scheduler(cat, Mixture(components=[("regression_guard", 1.0)]))
    np.testing.assert_allclose(_w(sched), 0.25)  # the guard gives 1s without curves
    view = dataclasses.replace(sched.view(), curves=ProbeCurves.from_catalog(cat))
    np.testing.assert_allclose(sched.policy.weights(view, sched.policy_state), 0.25)


def test_every_policy_satisfies_the_protocol() -> None:
    for name in available_policies():
        assert isinstance(make_policy(_spec(name)), Policy)
    assert hash(make_policy(MIXTURE)) == hash(make_policy(MIXTURE))
    assert make_policy(MIXTURE) == make_policy(MIXTURE)
    assert isinstance(Uniform(), Policy)
