"""Issue 16, defects 3-5: bad checkpoints, probes and reports are refused whole, with a
reason naming the field, and leave the scheduler byte-for-byte as it was."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domains import Catalog
from scheduler import (
    Batch,
    ConfigError,
    Outcome,
    ReportError,
    Scheduler,
    SchedulerConfig,
    dumps_state,
    loads_state,
)
from scheduler._checkpoint import STATE_FORMAT


def _catalog() -> Catalog:
    return Catalog.synthetic(n_domains=3, families_per_domain=4, n_tiers=3)


def _played(policy: str = "exp3s", steps: int = 12, **config: Any) -> Scheduler:
    """A scheduler with some history: reports, probes, a tier change or two."""
    sched = Scheduler(_catalog(), policy, seed=2, config=SchedulerConfig(**config))
    rng = np.random.default_rng(0)
    for step in range(steps):
        batch = sched.next_batch(16)
        success = (rng.random(len(batch)) < 0.7).astype(float)
        sched.report(batch, rewards=success, success=success, cost=np.ones(len(batch)))
        if step % 4 == 0:
            sched.probe_round(lambda f, t: (np.full(f.size, 0.8), np.full(f.size, 32)))
    sched.weights()  # cached in the state
    return sched


def _snapshot(sched: Scheduler) -> bytes:
    return dumps_state(sched.state_dict())


# ---------------------------------------------------------------------- defect 3: checkpoints
PARTS = [
    "stats",
    "tiers",
    "breakers",
    "retries",
    "cursor",
    "curves",
    "rng",
    "pending",
    "events",
    "policy_state",
    "step",
    "seed",
    "cost",
    "family_factor",
    "skill",
    "skill_flags",
]


@pytest.mark.parametrize("part", PARTS)
def test_a_state_missing_any_part_is_refused_naming_it_and_changes_nothing(part: str) -> None:
    sched = _played()
    state = sched.state_dict()
    del state[part]
    before = _snapshot(sched)
    with pytest.raises(ConfigError, match=rf"checkpoint: {part}: missing"):
        sched.load_state_dict(state)
    assert _snapshot(sched) == before


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation that sets state[a][b]... = value (or value(old) if callable)."""

    def mutate(state: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = state
        for key in parents:
            node = node[key]
        node[last] = value(node[last]) if callable(value) else value

    return mutate


def _at(index: int, value: Any) -> Callable[[np.ndarray], np.ndarray]:
    def put(arr: np.ndarray) -> np.ndarray:
        out = np.array(arr, copy=True)
        out.reshape(-1)[index] = value
        return out

    return put


BAD_STATES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("cost of shape (3,)", _set("cost", np.ones(3)), r"cost: expected shape \(12,\), got \(3,\)"),
    (
        "NaN cached weights",
        _set("cached_weights.family", _at(0, np.nan)),
        r"cached_weights\.family",
    ),
    ("weights off a distribution", _set("cached_weights.family", lambda a: a * 2), "sum to 1"),
    (
        "NaN policy weights",
        _set("policy_state.log_weight", _at(1, np.nan)),
        "policy_state.log_weight",
    ),
    (
        "tier = 99",
        _set("tiers.tier", _at(2, 99)),
        r"tiers\.tier: must be in \[0, 3\), got 99 at \[2\]",
    ),
    ("step = -5", _set("step", -5), "step: must be >= 0, got -5"),
    ("step = True", _set("step", True), "step: must be an integer"),
    ("step as a string", _set("step", "12"), "step: must be an integer"),
    (
        "rng of another kind",
        _set("rng.bit_generator", "MT19937"),
        "rng: must be the state of a PCG64",
    ),
    ("rng with a bad state", _set("rng.state", {"state": "x", "inc": 1}), "rng: not a valid PCG64"),
    ("pending in the old form", _set("pending", {"3": 16}), "pending"),
    (
        "pending of another catalog",
        _set(
            "pending",
            {
                "step": np.array([0]),
                "token": np.array([5]),
                "size": np.array([1]),
                "arm": np.array([999]),
                "variant": np.array([0]),
                "attempt": np.array([0]),
                "done": np.array([False]),
            },
        ),
        r"pending\.arm: arm ids outside",
    ),
    ("event without a kind", _set("events", [{"step": 1}]), r"events\[0\]"),
    ("event in the future", _set("events", [{"step": 999, "kind": "x"}]), r"events\[0\]\.step"),
    (
        "policy state of another shape",
        _set("policy_state.count", np.zeros(5)),
        "policy_state.count",
    ),
    ("NaN success EMA", _set("stats.success_fast", _at(0, np.nan)), r"stats\.success_fast"),
    ("negative count", _set("stats.count", _at(0, -3)), r"stats\.count: must be >= 0"),
    (
        "float counts",
        _set("stats.count", lambda a: a + 0.5),
        r"stats\.count: must be an array of int32",
    ),
    ("breaker state 7", _set("breakers.state", _at(0, 7)), r"breakers\.state"),
    ("retry of an unknown arm", _set("retries.arm", np.array([999])), "retries"),
    ("probe curve over 1", _set("curves.latest", _at(0, 2.0)), r"curves\.latest"),
    ("infinite slope test", _set("skill.slope_test", _at(0, np.inf)), r"skill\.slope_test"),
    (
        "a grader's floor passing more than it read",
        _set("skill.verifier_floor", np.array([5.0, 2.0, 1.0, 0.0, 1.0, 0.0, 0.0])),
        r"skill\.verifier_floor",
    ),
    ("tier of a float", _set("tiers.tier", np.zeros(12)), r"tiers\.tier: must be an array of int"),
    ("string cursor", _set("cursor", np.array(["a"] * 36)), "cursor: must be an array of int32"),
    ("zero cost", _set("cost", _at(0, 0.0)), "cost: must be > 0"),
    (
        "NaN skill belief",
        _set("skill.train_mu", _at(0, np.nan)),
        r"skill\.train_mu: must be finite",
    ),
    (
        "negative skill variance",
        _set("skill.train_var", _at(0, -1.0)),
        "skill: variances must be positive",
    ),
    (
        "skill flags of another shape",
        _set("skill_flags", np.zeros((2, 12), dtype=bool)),
        r"skill_flags: expected shape \(3, 12\)",
    ),
]


@pytest.mark.parametrize(
    "mutate,field", [c[1:] for c in BAD_STATES], ids=[c[0] for c in BAD_STATES]
)
def test_a_bad_state_is_refused_naming_the_field_and_changes_nothing(
    mutate: Callable[[dict[str, Any]], None], field: str
) -> None:
    sched = _played()
    state = loads_state(dumps_state(sched.state_dict()))  # a deep copy, as read back
    mutate(state)
    before = _snapshot(sched)
    with pytest.raises(ConfigError, match=field):
        sched.load_state_dict(state)
    assert _snapshot(sched) == before
    fresh = Scheduler(_catalog(), "exp3s", seed=2)
    untouched = _snapshot(fresh)
    with pytest.raises(ConfigError, match=field):
        fresh.load_state_dict(state)
    assert _snapshot(fresh) == untouched


def test_every_problem_of_a_state_is_listed_at_once() -> None:
    sched = _played()
    state = sched.state_dict()
    state["step"] = -1
    state["tiers"]["tier"] = np.full(12, 99)
    del state["curves"]["latest"]
    with pytest.raises(ConfigError) as info:
        Scheduler(_catalog(), "exp3s").load_state_dict(state)
    text = str(info.value)
    assert (
        "step: must be >= 0" in text and "tiers.tier" in text and "curves.latest: missing" in text
    )


def test_a_state_of_a_newer_format_asks_for_an_upgrade() -> None:
    state = _played().state_dict()
    state["format"] = 99
    with pytest.raises(ConfigError, match="newer version"):
        Scheduler(_catalog(), "exp3s").load_state_dict(state)


def test_a_format_1_state_migrates_and_drops_its_unreportable_pending_batches() -> None:
    sched = _played()
    sched.next_batch(4)  # awaiting a report when saved
    state = sched.state_dict()
    state["format"], state["pending"] = 1, {str(sched.step - 1): 4}  # format 1's pending
    again = Scheduler(_catalog(), "exp3s", seed=2)
    again.load_state_dict(state)
    assert again.state_dict()["format"] == STATE_FORMAT and len(again._pending) == 0
    np.testing.assert_array_equal(again.stats.count, sched.stats.count)


def _after_six_passing_batches() -> tuple[Scheduler, dict[str, Any]]:
    """A default scheduler after six batches of 16 that all passed, and its state: the
    set-up of the checkpoint-format tests below."""
    sched = Scheduler(_catalog(), seed=0)
    for _ in range(6):
        batch = sched.next_batch(16)
        sched.report(batch, rewards=np.ones(16), success=np.ones(16))
    return sched, sched.state_dict()


def test_a_format_3_state_without_the_skill_fields_added_then_loads() -> None:
    """``episodes_at_probe``, ``trained_low`` and ``built`` came while format 3 was
    current; a checkpoint written before them resumes with the values read before them
    (it was refused as missing)."""
    sched, state = _after_six_passing_batches()
    old = ("episodes_at_probe", "trained_low", "built")
    state["format"] = 3
    state["skill"] = {k: v for k, v in state["skill"].items() if k not in old}
    again = Scheduler(_catalog(), seed=0)
    again.load_state_dict(state)
    skill = again.skill
    np.testing.assert_array_equal(skill.built, sched.skill.episodes)
    assert not hasattr(skill, "trained_low") and not hasattr(skill, "episodes_at_probe")
    np.testing.assert_array_equal(skill.train_mu, sched.skill.train_mu)
    with pytest.raises(ConfigError, match=r"skill\.built: missing"):
        Scheduler(_catalog(), seed=0).load_state_dict(dict(state, format=4))


def test_a_format_4_state_with_the_lowest_tier_trained_loads_without_it() -> None:
    """Format 4 kept the skill model's ``trained_low``; format 5 does not (the rule it
    served moved nothing on the grid's ablation), so a format-4 checkpoint drops it."""
    sched, state = _after_six_passing_batches()
    state["format"] = 4
    state["skill"] = dict(state["skill"], trained_low=np.zeros(sched.catalog.n_families))
    again = Scheduler(_catalog(), seed=0)
    again.load_state_dict(state)
    assert "trained_low" not in again.state_dict()["skill"]
    np.testing.assert_array_equal(again.next_batch(16).arm, sched.next_batch(16).arm)


def test_a_format_5_state_loads_with_empty_hack_windows_and_draws_the_same() -> None:
    """Format 5 kept ``episodes_at_probe``; format 6 keeps the training per arm since
    each family's last probe instead. A format-5 checkpoint starts those windows empty
    and draws exactly what the saved scheduler draws next."""
    sched, state = _after_six_passing_batches()
    assert state["skill"]["since_n"].sum() == 6 * 16
    state["format"] = 5
    dropped = ("since_n", "since_k", "window_closed")
    skill = {k: v for k, v in state["skill"].items() if k not in dropped}
    state["skill"] = dict(skill, episodes_at_probe=sched.skill.episodes.copy())
    again = Scheduler(_catalog(), seed=0)
    again.load_state_dict(state)
    loaded = again.state_dict()["skill"]
    assert "episodes_at_probe" not in loaded and loaded["since_n"].sum() == 0
    assert (loaded["window_closed"] == -1.0).all()
    np.testing.assert_array_equal(again.next_batch(16).arm, sched.next_batch(16).arm)
    with pytest.raises(ConfigError, match=r"skill\.since_n: missing"):
        Scheduler(_catalog(), seed=0).load_state_dict(dict(state, format=6))


def test_a_format_6_checkpoint_resumes_with_the_top_tiers_counts_empty() -> None:
    """Format 7 added the skill model's counts of each family's top tier. A format-6
    checkpoint starts them at zero (the belief alone decides mastery until the top tier is
    trained and probed again), and a format-7 state without them is refused by name."""
    sched, state = _after_six_passing_batches()
    state["format"] = 6
    old = ("top_tier", "top_tier_start")
    state["skill"] = {k: v for k, v in state["skill"].items() if k not in old}
    again = Scheduler(_catalog(), seed=0)
    again.load_state_dict(state)
    loaded = again.state_dict()
    assert loaded["format"] == STATE_FORMAT and not loaded["skill"]["top_tier"].any()
    np.testing.assert_array_equal(again.next_batch(16).arm, sched.next_batch(16).arm)
    with pytest.raises(ConfigError, match=r"skill\.top_tier: missing"):
        Scheduler(_catalog(), seed=0).load_state_dict(dict(state, format=7))


def test_a_format_7_checkpoint_resumes_with_no_first_top_tier_probes() -> None:
    """Format 8 added each family's first top-tier probe items. A format-7 checkpoint
    starts them at zero (the first items after the resume are the start) and draws what
    the saved scheduler draws; a format-8 state without them is refused by name."""
    sched, _ = _after_six_passing_batches()
    cat = sched.catalog
    top = cat.n_tiers - 1
    families = np.arange(cat.n_families)
    sched.record_probes(
        families, np.full(cat.n_families, 0.5), tiers=top, n=np.full(cat.n_families, 8)
    )
    state = sched.state_dict()
    assert state["skill"]["top_tier_start"][1].sum() == 8 * cat.n_families
    _resumes_with_a_new_skill_field_at_zero(sched, state, "top_tier_start", old_format=7)


def test_a_format_8_checkpoint_resumes_with_no_training_under_the_top_tier() -> None:
    """Format 9 added each family's recent training under its top tier. A format-8
    checkpoint starts it at zero (no top tier reads under the training until the family
    trains under it again) and draws what the saved scheduler draws; a format-9 state
    without it is refused by name."""
    sched, state = _after_six_passing_batches()
    assert state["skill"]["top_tier_below"][1].sum() > 0  # the batches trained under the top
    _resumes_with_a_new_skill_field_at_zero(sched, state, "top_tier_below", old_format=8)


def test_a_format_9_checkpoint_resumes_with_no_family_coin_like() -> None:
    """Format 10 added each family's first 16 training episodes. A format-9 checkpoint
    counts them as run and none passed (no family reads coin-like, so its flatness test
    waits for the information it waited for before) and draws what the saved scheduler
    draws; a format-10 state without them is refused by name."""
    sched, state = _after_six_passing_batches()
    assert state["skill"]["top_tier_first"][0].sum() > 0  # the first episodes passed
    unknown = np.zeros_like(state["skill"]["top_tier_first"])
    unknown[1] = 16
    _resumes_with_a_new_skill_field_at_zero(
        sched, state, "top_tier_first", old_format=9, expected=unknown
    )


def _resumes_with_a_new_skill_field_at_zero(
    sched: Scheduler,
    state: dict[str, Any],
    field: str,
    old_format: int,
    expected: npt.NDArray[np.generic] | None = None,
) -> None:
    """``state`` without the skill model's ``field``, saved as ``old_format`` (the format
    before the one that added it), resumes with the field at zero (or ``expected``), the
    other top-tier counts as saved, and the saved scheduler's next draw; as the next
    format it is refused by name."""
    old = dict(state, format=old_format)
    old["skill"] = {k: v for k, v in state["skill"].items() if k != field}
    again = Scheduler(_catalog(), seed=0)
    again.load_state_dict(old)
    loaded = again.state_dict()
    assert loaded["format"] == STATE_FORMAT
    if expected is None:
        assert not loaded["skill"][field].any()
    else:
        np.testing.assert_array_equal(loaded["skill"][field], expected)
    np.testing.assert_array_equal(loaded["skill"]["top_tier"], state["skill"]["top_tier"])
    np.testing.assert_array_equal(again.next_batch(16).arm, sched.next_batch(16).arm)
    with pytest.raises(ConfigError, match=rf"skill\.{field}: missing"):
        Scheduler(_catalog(), seed=0).load_state_dict(dict(old, format=old_format + 1))


@pytest.mark.parametrize("policy", ["uniform", "learning_progress", "exp3s", "regression_guard"])
@pytest.mark.parametrize("tier_mode", ["ladder", "separate"])
def test_real_states_pass_the_checks_after_a_run_with_faults(policy: str, tier_mode: str) -> None:
    cat = Catalog.synthetic(n_domains=2, families_per_domain=3, n_tiers=3, tier_mode=tier_mode)
    sched = Scheduler(cat, policy, seed=4)
    rng = np.random.default_rng(1)
    for step in range(40):
        batch = sched.next_batch(24)
        success = (rng.random(len(batch)) < 0.5).astype(float)
        status = np.where(rng.random(len(batch)) < 0.08, "timeout", "ok")
        if step % 7 == 0:  # leave some batches waiting
            continue
        sched.report(batch, rewards=success, success=success, process=success, status=status)
        if step % 5 == 0:
            sched.probe_round(lambda f, t: (rng.random(f.size), np.full(f.size, 16)))
    blob = dumps_state(sched.state_dict())
    again = Scheduler(cat, policy, seed=0)
    again.load_state_dict(loads_state(blob))
    assert dumps_state(again.state_dict()) == blob


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_loads_state_on_damaged_bytes_raises_config_error(data: st.DataObject) -> None:
    blob = _BLOB
    kind = data.draw(st.sampled_from(["truncate", "random", "flip", "zero"]))
    if kind == "truncate":
        damaged = blob[: data.draw(st.integers(0, len(blob) - 1))]
    elif kind == "random":
        damaged = data.draw(st.binary(max_size=2000))
    elif kind == "flip":
        at = data.draw(st.integers(0, len(blob) - 1))
        damaged = blob[:at] + bytes([blob[at] ^ data.draw(st.integers(1, 255))]) + blob[at + 1 :]
    else:
        at = data.draw(st.integers(0, len(blob) - 1))
        damaged = blob[:at] + bytes(min(64, len(blob) - at)) + blob[at + 64 :]
    try:
        state = loads_state(damaged)
    except ConfigError as exc:
        assert str(exc).startswith("checkpoint:")
        return
    # A flip the archive's checks cannot see (a timestamp, a padding byte) still decodes;
    # then the scheduler's own checks stand between it and the run.
    with contextlib.suppress(ConfigError):
        Scheduler(_catalog(), "exp3s", seed=2).load_state_dict(state)


_BLOB = dumps_state(_played(steps=4).state_dict())


# ---------------------------------------------------------------------- defect 4: probes
def test_record_probe_with_a_negative_step_changes_nothing() -> None:
    sched = _played()
    before = _snapshot(sched)
    with pytest.raises(ReportError, match=r"step: must be an integer step in \[0, \d+\], got -1"):
        sched.record_probe(0, 0.5, n=8, step=-1)
    assert _snapshot(sched) == before


BAD_PROBES: list[tuple[str, dict[str, Any], str]] = [
    (
        "family 1.9",
        {"families": [0, 1.9], "scores": [0.5, 0.5]},
        r"probe\[1\]\.families: must be an integer",
    ),
    (
        "n 2.7",
        {"families": [0, 1], "scores": [0.5, 0.5], "n": [4, 2.7]},
        r"probe\[1\]\.n: must be an integer",
    ),
    ("2-D families", {"families": [[0, 1]], "scores": [[0.5, 0.5]]}, "one-dimensional"),
    (
        "2-D scores",
        {"families": [0, 1], "scores": [[0.5], [0.5]]},
        "scores: must be one-dimensional",
    ),
    (
        "same family and tier twice",
        {"families": [3, 1, 3], "scores": [0.5, 0.5, 0.6], "tiers": [0, 0, 0]},
        r"probe\[2\]: family 3 at tier 0 again \(first at probe\[0\]\)",
    ),
    ("string scores", {"families": [0], "scores": ["0.5"]}, "scores: must be real numbers"),
    ("complex scores", {"families": [0], "scores": [0.5 + 1j]}, "scores: must be real numbers"),
    ("bool families", {"families": [True], "scores": [0.5]}, "families: must be integers"),
    ("step True", {"families": [0], "scores": [0.5], "step": True}, "step: must be an integer"),
    ("lengths differ", {"families": [0, 1], "scores": [0.5]}, "one length"),
    ("n 0", {"families": [0], "scores": [0.5], "n": [0]}, r"probe\[0\]\.n: must be >= 1"),
]


@pytest.mark.parametrize(
    "kwargs,match", [c[1:] for c in BAD_PROBES], ids=[c[0] for c in BAD_PROBES]
)
def test_bad_probes_are_refused_with_index_and_reason_and_change_nothing(
    kwargs: dict[str, Any], match: str
) -> None:
    sched = _played()
    before = _snapshot(sched)
    with pytest.raises(ReportError, match=match):
        sched.record_probes(**kwargs)
    assert _snapshot(sched) == before


def test_one_arm_at_two_tiers_in_one_call_is_fine() -> None:
    sched = _played()
    sched.record_probes([0, 0], [0.4, 0.6], tiers=[0, 1], n=[8, 8])
    assert sched.stats.probe_score[[0, 1]].tolist() == [0.4, 0.6]


def test_a_drain_holding_two_rounds_of_one_family_is_recorded_in_order() -> None:
    from scheduler import ProbeResults

    sched = _played()
    results = ProbeResults(
        families=np.array([2, 2, 5]),
        tiers=np.array([0, 0, 0]),
        scores=np.array([0.3, 0.9, 0.5]),
        n=np.array([8, 8, 8]),
        ok=np.ones(3, dtype=bool),
        errors=("", "", ""),
        step=np.array([0, 1, 1]),
        elapsed_s=np.zeros(3),
    )
    once = _played()
    once.record_probes([2, 5], [0.3, 0.5], tiers=[0, 0], n=[8, 8])
    once.record_probes([2], [0.9], tiers=[0], n=[8])
    sched.apply_probe_results(results)
    assert sched.stats.probe_score[sched.catalog.arm_id(2, 0)] == 0.9
    # the skill model heard 0.3 and then 0.9, as the two calls in arrival order give
    np.testing.assert_array_equal(sched.skill.probe_mu, once.skill.probe_mu)


# ---------------------------------------------------------------------- defect 5: reports
def _refused(sched: Scheduler, batch: Any, match: str, **arrays: Any) -> None:
    before = _snapshot(sched)
    with pytest.raises(ReportError, match=match):
        sched.report(batch, **arrays)
    assert _snapshot(sched) == before


def test_another_schedulers_batch_at_the_same_step_is_refused() -> None:
    cat = _catalog()
    mine, theirs = Scheduler(cat, "uniform", seed=0), Scheduler(cat, "uniform", seed=0)
    mine.next_batch(8)
    foreign = theirs.next_batch(8)  # same step, same catalog, same seed: the same tasks
    _refused(mine, foreign, "drawn by another scheduler", rewards=np.ones(8))


def test_a_resumed_scheduler_accepts_the_batch_its_checkpoint_awaited() -> None:
    cat = _catalog()
    original = Scheduler(cat, "uniform", seed=0)
    batch = original.next_batch(8)
    resumed = Scheduler(cat, "uniform", seed=0)
    resumed.load_state_dict(original.state_dict())
    resumed.report(batch, rewards=np.ones(8))
    assert resumed.stats.count.sum() == 8


def _cut(batch: Batch, k: int) -> Batch:
    return dataclasses.replace(
        batch,
        arm=batch.arm[:k],
        family=batch.family[:k],
        tier=batch.tier[:k],
        variant=batch.variant[:k],
        attempt=None if batch.attempt is None else batch.attempt[:k],
    )


def _forged(batch: Batch, name: str, value: Any) -> Batch:
    arr = np.array(getattr(batch, name), copy=True)
    arr[0] = value
    return dataclasses.replace(batch, **{name: arr})


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda b: _cut(b, 5), r"has 5 tasks, 8 were drawn"),
        (lambda b: _forged(b, "family", (int(b.family[0]) + 1) % 12), r"\.family: differs"),
        (lambda b: _forged(b, "variant", int(b.variant[0]) + 1), r"\.variant: differs"),
        (lambda b: _forged(b, "arm", 10**9), r"\.arm: differs"),
        (lambda b: _forged(b, "arm", -1), r"\.arm: differs"),
        (lambda b: _forged(b, "tier", 2), r"\.tier: differs|\.tier"),
        (lambda b: dataclasses.replace(b, arm=b.arm.astype(float)), r"\.arm: not the array"),
        (lambda b: dataclasses.replace(b, step=b.step + 5), "not drawn by this scheduler"),
    ],
    ids=[
        "cut short",
        "forged family",
        "forged variant",
        "forged arm",
        "negative arm",
        "forged tier",
        "float arms",
        "future step",
    ],
)
def test_a_cut_or_forged_batch_is_refused(make: Callable[[Batch], Batch], match: str) -> None:
    sched = _played("uniform")
    batch = sched.next_batch(8)
    if make(batch).tier[0] == batch.tier[0] and "tier" in match:
        pytest.skip("the drawn tier is already 2")
    k = len(make(batch))
    _refused(sched, make(batch), match, rewards=np.ones(k), success=np.ones(k))
    sched.report(batch, rewards=np.ones(8))  # the real one still goes through


@pytest.mark.parametrize(
    "arrays,match",
    [
        ({"rewards": np.ones((8, 2))}, r"rewards: must have shape \(16,\)"),
        ({"rewards": ["1"] * 16}, "rewards: must be real numbers, got dtype <U1"),
        ({"rewards": np.ones(16) + 1j}, "rewards: must be real numbers, got dtype complex128"),
        ({"rewards": np.ones(16), "success": np.ones((16, 1))}, "success: must have shape"),
        (
            {"rewards": np.ones(16), "status": [True] * 16},
            r"status\[0\]: must be one of .*got True",
        ),
        ({"rewards": np.ones(16), "status": np.full(16, 1.7)}, r"status\[0\].*got 1\.7"),
        ({"rewards": np.ones(16), "status": [None] * 16}, r"status\[0\].*got None"),
        ({"rewards": np.ones(16), "status": ["ok"] * 15 + [None]}, r"status\[15\].*got None"),
        ({"rewards": np.ones(16), "status": [[0]] * 16}, "status: must have shape"),
        ({"rewards": np.ones(16), "cost": [object()] * 16}, "cost: must be real numbers"),
    ],
    ids=[
        "rewards (8,2)",
        "string rewards",
        "complex rewards",
        "2-D success",
        "status True",
        "status 1.7",
        "status None",
        "one None status",
        "nested status",
        "object cost",
    ],
)
def test_malformed_report_arrays_are_refused(arrays: dict[str, Any], match: str) -> None:
    sched = _played("uniform")
    batch = sched.next_batch(16)
    _refused(sched, batch, match, **arrays)


def test_status_names_codes_and_members_are_all_accepted() -> None:
    from scheduler import Status

    sched = _played("uniform")
    for status in (["OK", "failed"] * 4, [0, 1] * 4, np.array([2.0, 0.0] * 4), [Status.OK] * 8):
        batch = sched.next_batch(8)
        sched.report(batch, rewards=np.ones(8), status=status)


def test_report_of_none_or_junk_is_a_report_error() -> None:
    sched = _played("uniform")
    sched.next_batch(4)
    _refused(sched, None, "expected a Batch or a list of Outcome, got NoneType")
    _refused(sched, "batch", "expected a Batch or a list of Outcome, got str")
    _refused(sched, [None], r"outcome\[0\]: expected Outcome, got NoneType")


def _outcomes(batch: Batch, **fields: Any) -> list[Outcome]:
    return [
        Outcome(arm=int(a), variant=int(v), reward=1.0, success=True, **fields)
        for a, v in zip(batch.arm, batch.variant, strict=True)
    ]


def test_the_same_outcome_list_reported_twice_is_refused() -> None:
    sched = _played("uniform")
    outcomes = _outcomes(sched.next_batch(8))
    sched.report(outcomes)
    _refused(sched, outcomes, r"outcome\[0\]: arm \d+, variant \d+ is no task awaiting a report")


def test_an_outcome_list_clears_its_pending_batch_and_a_batch_can_be_reported_in_pieces() -> None:
    sched = _played("uniform")
    batch = sched.next_batch(8)
    outcomes = _outcomes(batch)
    sched.report(outcomes[:3])
    assert sched._pending.steps == [batch.step]
    _refused(sched, batch, "3 of its 8 tasks were already reported", rewards=np.ones(8))
    sched.report(outcomes[3:])
    assert len(sched._pending) == 0
    _refused(sched, batch, "already reported", rewards=np.ones(8))


def test_bad_outcome_fields_are_report_errors() -> None:
    sched = _played("uniform")
    batch = sched.next_batch(2)
    a, v = int(batch.arm[0]), int(batch.variant[0])
    cases = [
        (Outcome(arm=a, variant=v, reward=1.0, success=True, status=None), r"status\[0\].*None"),  # type: ignore[arg-type]
        (Outcome(arm=a, variant=v, reward=1.0, success=True, status=True), r"status\[0\].*True"),  # type: ignore[arg-type]
        (Outcome(arm=a, variant=v, reward="1", success=True), r"outcome\[0\]\.reward"),  # type: ignore[arg-type]
        (Outcome(arm=a, variant=v, reward=1 + 2j, success=True), r"outcome\[0\]\.reward"),  # type: ignore[arg-type]
        (Outcome(arm=True, variant=v, reward=1.0, success=True), r"outcome\[0\]\.arm"),
        (Outcome(arm=2**70, variant=v, reward=1.0, success=True), r"outcome\[0\]\.arm"),
        (Outcome(arm=None, variant=v, reward=1.0, success=True), r"outcome\[0\]\.arm"),  # type: ignore[arg-type]
    ]
    for outcome, match in cases:
        _refused(sched, [outcome], match)


def test_pending_batches_are_bounded_and_a_late_report_is_refused_with_the_reason() -> None:
    sched = Scheduler(_catalog(), "uniform", config=SchedulerConfig(report_window=8))
    first = sched.next_batch(4)
    for _ in range(8):
        sched.next_batch(4)
    sched.report(first, rewards=np.ones(4))  # 8 batches drawn after it: still in time
    late = sched.next_batch(4)
    for _ in range(200):
        sched.next_batch(4)
    assert len(sched._pending) == 9  # the newest and the 8 before it
    _refused(sched, late, "reported too late: 200 batches were drawn after it", rewards=np.ones(4))
    _refused(sched, _outcomes(late), "no task awaiting a report")


def test_record_outcomes_feeds_tasks_no_batch_drew() -> None:
    sched = Scheduler(_catalog(), "uniform")
    outcome = Outcome(arm=0, variant=0, reward=1.0, success=True)
    sched.record_outcomes([outcome, outcome])
    assert sched.stats.count[0] == 2
    with pytest.raises(ReportError, match="unknown arm"):
        sched.record_outcomes([Outcome(arm=-1, variant=0, reward=1.0, success=True)])


def test_the_report_window_is_a_setting() -> None:
    from scheduler import Settings

    assert Settings(report_window=8).scheduler_config().report_window == 8
    assert Settings().scheduler_config().report_window == 64
    with pytest.raises(ValueError, match="report_window"):
        SchedulerConfig(report_window=-1)


def _junk(n: int) -> st.SearchStrategy[Any]:
    """Anything a caller might pass for a column of an n-task report or probe call."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.complex_numbers(max_magnitude=10),
        st.text(max_size=3),
        st.sampled_from(["ok", "failed", "timeout", "env_error", "OK"]),
    )
    return st.one_of(
        scalars,
        st.lists(scalars, min_size=n, max_size=n),
        st.lists(scalars, max_size=n + 2),
        st.lists(st.lists(st.floats(0, 1), min_size=2, max_size=2), min_size=n, max_size=n),
        st.builds(lambda x: np.full(n, x), st.floats(allow_nan=True)),
        st.builds(lambda s: np.zeros(s), st.sampled_from([(n, 2), (0,), (n + 1,), ()])),
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_junk_in_a_report_is_accepted_or_a_report_error_that_changes_nothing(
    data: st.DataObject,
) -> None:
    sched = Scheduler(_catalog(), "exp3s", seed=1)
    batch = sched.next_batch(6)
    columns = {
        name: data.draw(
            st.one_of(st.none(), _junk(6)) if name != "rewards" else _junk(6), label=name
        )
        for name in ("rewards", "success", "process", "cost", "status")
    }
    before = _snapshot(sched)
    try:
        sched.report(batch, **columns)
    except ReportError:
        assert _snapshot(sched) == before
    else:  # accepted: applied once, and the batch is no longer awaited
        with pytest.raises(ReportError, match="already reported"):
            sched.report(batch, rewards=np.ones(6))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_junk_in_a_probe_call_is_accepted_or_a_report_error_that_changes_nothing(
    data: st.DataObject,
) -> None:
    sched = Scheduler(_catalog(), "exp3s", seed=1)
    args = {name: data.draw(_junk(3), label=name) for name in ("families", "scores")}
    for name in ("tiers", "n", "step"):
        args[name] = data.draw(st.one_of(st.none(), _junk(3)), label=name)
    before = _snapshot(sched)
    try:
        sched.record_probes(**args)
    except ReportError:
        assert _snapshot(sched) == before


def test_a_field_added_to_a_component_is_checked_with_no_new_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The checks read the structure from state_dict(): a new skill-model array (as the
    policy work may add) is required, shaped and kept finite without touching the checks."""
    from policies import SkillModel

    plain = SkillModel.state_dict

    def with_extra(self: SkillModel) -> dict[str, Any]:
        return {**plain(self), "extra": np.zeros(self._catalog.n_families)}

    plain_load = SkillModel.load_state_dict

    def load_extra(self: SkillModel, state: dict[str, Any]) -> None:
        self.extra = np.asarray(state["extra"], dtype=np.float64).copy()
        plain_load(self, state)

    monkeypatch.setattr(SkillModel, "state_dict", with_extra)
    monkeypatch.setattr(SkillModel, "load_state_dict", load_extra)
    sched = _played()
    good = sched.state_dict()
    Scheduler(_catalog(), "exp3s", seed=2).load_state_dict(good)
    for value, match in (
        (None, r"skill\.extra: missing"),
        (np.zeros(3), r"skill\.extra: expected shape \(12,\), got \(3,\)"),
        (np.full(12, np.nan), r"skill\.extra: must be finite"),
    ):
        state = sched.state_dict()
        if value is None:
            del state["skill"]["extra"]
        else:
            state["skill"]["extra"] = value
        with pytest.raises(ConfigError, match=match):
            Scheduler(_catalog(), "exp3s", seed=2).load_state_dict(state)


def test_a_probe_too_large_for_the_curves_is_refused() -> None:
    """The curves keep steps and item counts in 32 bits: a probe or a state beyond that is
    refused, never wrapped around."""
    sched = _played()
    before = _snapshot(sched)
    with pytest.raises(ReportError, match=r"n: must be at most 2147483647 items"):
        sched.record_probes([0], [0.5], n=[2**31])
    with pytest.raises(ReportError, match=r"step: must be an integer step in \[0, 2147483647\]"):
        sched.record_probes([0], [0.5], n=[8], step=2**31)
    assert _snapshot(sched) == before
    state = sched.state_dict()
    ring = state["curves"]["ring"]
    ring["step"] = np.full(ring["step"].shape, 2**31, dtype=np.int64)
    with pytest.raises(ConfigError, match=r"curves\.ring\.step: values outside int32"):
        Scheduler(_catalog(), "exp3s", seed=2).load_state_dict(state)
