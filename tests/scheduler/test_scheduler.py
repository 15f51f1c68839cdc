from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domains import Catalog
from policies import SkillConfig
from scheduler import (
    ConfigError,
    Outcome,
    ReportError,
    Scheduler,
    SchedulerConfig,
    dumps_state,
    loads_state,
)


def _catalog(**kw: Any) -> Catalog:
    return Catalog.synthetic(n_domains=3, families_per_domain=4, n_tiers=3, **kw)


def _probe_all(families: np.ndarray, tiers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A fixed held-out score per (family, tier), for probe rounds in tests."""
    return np.clip(0.95 - 0.2 * tiers - 0.05 * (families % 3), 0, 1), np.full(families.size, 32)


def _play(
    sched: Scheduler, steps: int, seed: int = 0, n: int = 32, probe_every: int = 0
) -> list[np.ndarray]:
    """Draw and report `steps` batches with outcomes from a fixed RNG (and a probe round
    every `probe_every` steps); return the arms drawn."""
    rng = np.random.default_rng(seed)
    drawn = []
    for step in range(steps):
        batch = sched.next_batch(n)
        p = (batch.family % 4) / 4.0 + 0.1
        success = (rng.random(len(batch)) < p).astype(float)
        sched.report(batch, rewards=success, success=success, process=p * np.ones(len(batch)))
        drawn.append(np.stack([batch.arm, batch.variant]))
        if probe_every and step % probe_every == 0:
            sched.probe_round(_probe_all)
    return drawn


def _assert_states_equal(a: Any, b: Any) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_states_equal(a[k], b[k])
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


@pytest.mark.parametrize("policy", ["uniform", "learning_progress", "static"])
def test_same_seed_same_batches(policy: str) -> None:
    cat = _catalog()
    a = _play(Scheduler(cat, policy, seed=3), 15)
    b = _play(Scheduler(cat, policy, seed=3), 15)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    c = _play(Scheduler(cat, policy, seed=4), 15)
    assert any(not np.array_equal(x, y) for x, y in zip(a, c, strict=True))


@pytest.mark.parametrize("tier_mode", ["ladder", "separate"])
@pytest.mark.parametrize("refresh", [1.0, 4.0])
def test_resume_continues_exactly(refresh: float, tier_mode: str) -> None:
    cat = _catalog(tier_mode=tier_mode)
    config = SchedulerConfig(refresh_per_family=refresh)
    original = Scheduler(cat, "learning_progress", seed=1, config=config)
    _play(original, 20, seed=5, probe_every=4)
    saved = dumps_state(original.state_dict())
    tail = _play(original, 10, seed=6, probe_every=4)

    resumed = Scheduler(cat, "learning_progress", seed=99, config=config)
    resumed.load_state_dict(loads_state(saved))
    again = _play(resumed, 10, seed=6, probe_every=4)
    for x, y in zip(tail, again, strict=True):
        np.testing.assert_array_equal(x, y)
    _assert_states_equal(original.state_dict(), resumed.state_dict())


def test_resume_rejects_other_catalog_and_policy() -> None:
    cat = _catalog()
    state = Scheduler(cat, "uniform").state_dict()
    with pytest.raises(ConfigError, match="different catalog"):
        Scheduler(Catalog.synthetic(2, 2, 2), "uniform").load_state_dict(state)
    with pytest.raises(ConfigError, match="policy"):
        Scheduler(cat, "learning_progress").load_state_dict(state)


def _bad_reports(n: int) -> list[dict[str, Any]]:
    ok = np.ones(n)
    return [
        {"rewards": np.ones(n - 1), "success": ok},
        {"rewards": np.r_[np.nan, np.ones(n - 1)], "success": ok},
        {"rewards": np.r_[np.inf, np.ones(n - 1)], "success": ok},
        {"rewards": np.r_[1.5, np.ones(n - 1)], "success": ok},
        {"rewards": ok, "success": np.r_[2.0, np.ones(n - 1)]},
        {"rewards": ok, "success": ok, "process": np.r_[-0.1, np.ones(n - 1)]},
        {"rewards": ok, "success": ok, "cost": np.r_[-1.0, np.ones(n - 1)]},
        {"rewards": ok, "success": ok, "status": ["ok"] * (n - 1) + ["exploded"]},
        {"rewards": ["a"] * n, "success": ok},
    ]


@pytest.mark.parametrize("case", range(9))
def test_bad_report_is_rejected_and_changes_nothing(case: int) -> None:
    sched = Scheduler(_catalog(), "learning_progress", seed=0)
    _play(sched, 3)
    batch = sched.next_batch(8)
    before = sched.state_dict()
    with pytest.raises(ReportError) as info:
        sched.report(batch, **_bad_reports(8)[case])
    assert "report rejected" in str(info.value)
    _assert_states_equal(before, sched.state_dict())
    sched.report(batch, rewards=np.ones(8), success=np.ones(8))  # still reportable afterwards


def test_report_names_the_field_and_the_range() -> None:
    sched = Scheduler(_catalog(), "uniform")
    batch = sched.next_batch(4)
    with pytest.raises(ReportError, match=r"rewards\[2\] \(domain_\d\.family_\d\): outside"):
        sched.report(batch, rewards=[0.0, 1.0, 7.0, 0.5], success=[0, 1, 1, 0])


def test_double_and_foreign_reports_are_rejected() -> None:
    cat = _catalog()
    sched = Scheduler(cat, "uniform")
    batch = sched.next_batch(4)
    sched.report(batch, rewards=np.zeros(4))
    with pytest.raises(ReportError, match="already reported"):
        sched.report(batch, rewards=np.zeros(4))
    other = Scheduler(cat, "uniform").next_batch(4)
    other_sched = Scheduler(Catalog.synthetic(3, 4, 3), "uniform")
    with pytest.raises(ReportError, match="another catalog"):
        other_sched.report(other, rewards=np.zeros(4))


def test_outcome_list_report_and_unknown_arm() -> None:
    cat = _catalog()
    sched = Scheduler(cat, "uniform")
    batch = sched.next_batch(2)
    arm, variant = int(batch.arm[0]), int(batch.variant[0])
    sched.report([Outcome(arm=arm, variant=variant, reward=1.0, success=True, status="ok")])
    assert sched.stats.count[arm] == 1
    before = sched.state_dict()
    with pytest.raises(ReportError, match="unknown arm"):
        sched.report(
            [
                Outcome(arm=1, variant=0, reward=1.0, success=True),
                Outcome(arm=10_000, variant=0, reward=1.0, success=True),
            ]
        )
    with pytest.raises(ReportError, match="variant"):
        sched.report([Outcome(arm=1, variant=999, reward=1.0, success=True)])
    _assert_states_equal(before, sched.state_dict())


def test_environment_faults_do_not_count_as_failures() -> None:
    sched = Scheduler(_catalog(), "uniform")
    batch = sched.next_batch(64)
    sched.report(batch, rewards=np.zeros(64), success=np.zeros(64), status=["env_error"] * 64)
    assert sched.stats.count.sum() == 0
    assert sched.skill.episodes.sum() == 0


def test_quotas_hold_over_many_draws() -> None:
    cat = Catalog.synthetic(4, 5, 2, min_share=0.1, max_share=0.4)
    # Make domain 0 overwhelmingly attractive: its share must still stop at max_share.
    # (Every family fails, so all go idle: an idle cap of the whole share lets none bind.)
    idle = SkillConfig(stalled_weight=float(cat.n_families))
    sched = Scheduler(cat, "static", config=SchedulerConfig(exploration_floor=0.0, skill=idle))
    object.__setattr__(cat, "family_weight", np.where(cat.domain_of_family == 0, 100.0, 0.01))
    counts = np.zeros(cat.n_domains)
    for _ in range(200):
        batch = sched.next_batch(500)
        counts += np.bincount(cat.domain_of_family[batch.family], minlength=cat.n_domains)
        sched.report(batch, rewards=np.zeros(500))
    share = counts / counts.sum()
    assert share[0] == pytest.approx(0.4, abs=0.01)
    assert (share >= 0.1 - 0.01).all()
    np.testing.assert_allclose(sched.weights().domain, [0.4, 0.2, 0.2, 0.2], atol=1e-9)


def test_tiers_move_up_then_down_with_events() -> None:
    cat = _catalog()
    # Flag caps of one uniform share do not bind under `uniform`: every family keeps being
    # drawn, so all of them see the collapse (the caps themselves are tested below).
    skill = SkillConfig(mastered_weight=1.0, stalled_weight=1.0)
    sched = Scheduler(cat, "uniform", config=SchedulerConfig(skill=skill))
    for _ in range(30):
        batch = sched.next_batch(128)
        sched.report(batch, rewards=np.ones(128), success=np.ones(128))
    assert (sched.tiers.tier == cat.n_tiers - 1).all()
    events = [e for e in sched.drain_events() if e.kind.startswith("tier_")]
    assert {e.kind for e in events} == {"tier_promoted"}
    assert all(0 <= e.payload["ci"][0] <= e.payload["pass_rate"] for e in events)
    for _ in range(40):
        batch = sched.next_batch(128)
        sched.report(batch, rewards=np.zeros(128), success=np.zeros(128))
    assert (sched.tiers.tier == 0).all()
    kinds = {e.kind for e in sched.drain_events() if e.kind.startswith("tier_")}
    assert kinds == {"tier_demoted"}


def test_variants_cycle_without_replacement() -> None:
    cat = Catalog.synthetic(1, 1, 1, pool_size=7)
    sched = Scheduler(cat, "uniform", seed=2)
    seen: list[int] = []
    for _ in range(10):
        batch = sched.next_batch(5)
        seen += batch.variant.tolist()
        sched.report(batch, rewards=np.zeros(5))
    for epoch in range(len(seen) // 7):
        assert sorted(seen[epoch * 7 : (epoch + 1) * 7]) == list(range(7))
    assert seen[:7] != seen[7:14]  # each epoch has its own order


def test_record_probe_validation() -> None:
    cat = _catalog()
    sched = Scheduler(cat, "uniform")
    sched.record_probe(cat.family_names[2], 0.6, tier=1, n=32)
    assert sched.stats.probe_score[cat.arm_id(2, 1)] == 0.6
    with pytest.raises(ReportError, match="unknown family"):
        sched.record_probe("nope", 0.5)
    with pytest.raises(ReportError, match="must be in"):
        sched.record_probe(0, 1.5)
    with pytest.raises(ReportError, match="no tier"):
        sched.record_probe(0, 0.5, tier=9)


def test_batch_tasks_carry_names() -> None:
    cat = _catalog()
    batch = Scheduler(cat, "uniform").next_batch(3)
    tasks = list(batch)
    assert [t.family for t in tasks] == batch.family_names
    assert tasks[0].domain == cat.domain_names[cat.domain_of_family[batch.family[0]]]


@settings(max_examples=30, deadline=None)
@given(
    n_domains=st.integers(1, 4),
    per_domain=st.integers(1, 5),
    tiers=st.integers(1, 4),
    seed=st.integers(0, 2**16),
    policy=st.sampled_from(["uniform", "learning_progress", "static"]),
)
def test_weights_are_a_distribution_within_quotas(
    n_domains: int, per_domain: int, tiers: int, seed: int, policy: str
) -> None:
    rng = np.random.default_rng(seed)
    min_share = float(rng.uniform(0, 1 / n_domains))
    max_share = float(rng.uniform(1 / n_domains, 1))
    cat = Catalog.synthetic(n_domains, per_domain, tiers, min_share=min_share, max_share=max_share)
    sched = Scheduler(cat, policy, seed=seed)
    _play(sched, 5, seed=seed, n=16)
    w = sched.weights()
    assert w.family.sum() == pytest.approx(1.0)
    assert (w.family >= 0).all()
    assert (w.domain >= min_share - 1e-9).all() and (w.domain <= max_share + 1e-9).all()
    np.testing.assert_allclose(w.domain, np.bincount(cat.domain_of_family, w.family))


def _master(sched: Scheduler, families: list[int], steps: int = 20) -> None:
    """Report perfect outcomes for these families' draws (and failures elsewhere)."""
    for _ in range(steps):
        batch = sched.next_batch(64)
        ok = np.isin(batch.family, families).astype(float)
        sched.report(batch, rewards=ok, success=ok)


def test_a_mastered_family_keeps_only_a_floor_share_however_large_its_weight() -> None:
    cat = Catalog.synthetic(2, 4, 1)
    object.__setattr__(cat, "family_weight", np.where(np.arange(8) == 0, 100.0, 1.0))
    # the others fail: not held; and no ceiling, so family 0's weight shows whole
    idle = SkillConfig(stalled_weight=float(cat.n_families), max_weight=float(cat.n_families))
    sched = Scheduler(cat, "static", config=SchedulerConfig(exploration_floor=0.0, skill=idle))
    assert sched.weights().family[0] > 0.9
    _master(sched, [0])
    assert sched.mastered.tolist() == [True] + [False] * 7
    cap = sched.config.skill.mastered_weight / cat.n_families
    assert sched.weights().family[0] == pytest.approx(cap)
    drawn = np.concatenate([sched.next_batch(1000).family for _ in range(20)])
    assert (drawn == 0).mean() == pytest.approx(cap, abs=0.002)


def test_a_domain_min_share_still_lifts_its_flagged_families() -> None:
    cat = Catalog.synthetic(2, 2, 1, min_share=0.3)
    idle = SkillConfig(stalled_weight=float(cat.n_families))  # the others fail: not held
    sched = Scheduler(cat, "uniform", config=SchedulerConfig(exploration_floor=0.0, skill=idle))
    _master(sched, [0, 1], steps=40)  # all of domain 0 is mastered
    assert sched.mastered.tolist() == [True, True, False, False]
    w = sched.weights()
    assert w.domain[0] == pytest.approx(0.3, abs=1e-3)  # the quota holds ...
    # ... lifting both flagged families far above their caps (a mastered family's cap
    # follows the training that built it: the two may differ)
    assert w.family[:2].min() > 0.1
    assert not any(e.kind == "quota_unreachable" for e in sched.drain_events())


def test_a_format_1_state_still_loads() -> None:
    cat = _catalog()
    sched = Scheduler(cat, "uniform", seed=1)
    _play(sched, 10, probe_every=3)
    state = sched.state_dict()
    state["format"], state["pending"] = 1, {}  # as format 1 wrote it
    again = Scheduler(cat, "uniform", seed=1)
    again.load_state_dict(state)
    np.testing.assert_array_equal(again.stats.probe_score, sched.stats.probe_score)
    np.testing.assert_array_equal(again.skill.train_mu, sched.skill.train_mu)


def test_a_legacy_format_2_state_loads_with_a_fresh_skill_model() -> None:
    """A format-2 checkpoint of the removed tier controller: its legacy fields are
    dropped, its statistics kept, and the skill model starts afresh."""
    cat = _catalog()
    sched = Scheduler(cat, "uniform", seed=1)
    _play(sched, 10, probe_every=3)
    state = sched.state_dict()
    n_arms, n_fam = cat.n_arms, cat.n_families
    state["format"], state["skill"], state["skill_flags"] = 2, None, None
    state["detectors"] = {"quarantined": np.zeros(n_fam, dtype=bool)}
    state["stats"] |= {
        "prev_probe_score": np.full(n_arms, np.nan),
        "lookahead_n": np.zeros(n_arms, dtype=np.int64),
    }
    state["tiers"] |= {"trials": np.zeros(n_fam), "taught": np.zeros(n_fam)}
    again = Scheduler(cat, "uniform", seed=1)
    again.load_state_dict(state)
    np.testing.assert_array_equal(again.stats.count, sched.stats.count)
    assert again.skill.episodes.sum() == 0
    _play(again, 2)  # and it runs on


def test_detail_metrics_count_mastered_families() -> None:
    from scheduler.recording._metrics import RunMetrics

    cat = Catalog.synthetic(2, 4, 1)
    sched = Scheduler(cat, "uniform")
    _master(sched, [0, 1], steps=40)  # families 0 and 1 taught to mastery
    metrics = RunMetrics(cat).per_family(sched.snapshot())
    assert metrics["run/mastered"] == sched.mastered.sum() == 2
    assert "run/innate" not in metrics  # the legacy path's count is gone


def test_probe_bounds_kept_probe_by_probe_match_a_fresh_computation() -> None:
    cat = _catalog()
    sched = Scheduler(cat, "uniform", seed=3)
    _play(sched, 12, probe_every=2)
    sched.evidence.bounds()  # kept from here on, probe by probe
    sched.record_probes([0, 5], [0.25, 1.0], tiers=[1, 0], n=[8, 32])
    sched.record_probes([0], [0.75], tiers=[1], n=[8])  # one arm twice: two calls
    kept = sched.evidence.bounds()
    again = Scheduler(cat, "uniform", seed=3)
    again.load_state_dict(sched.state_dict())  # recomputes every arm's bounds at once
    fresh = again.evidence.bounds()
    assert np.isfinite(kept[0]).sum() > cat.n_families  # most arms were probed
    for a, b in zip(kept, fresh, strict=True):
        np.testing.assert_array_equal(a, b)
