"""The hot path's shortcuts give what the long way gives: the projection memo, the cached
ArmView, the one-pass report checks and the all-ok breaker update."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domains import Catalog
from policies import project_quotas_compute
from scheduler import Scheduler, Status
from scheduler._breakers import CLOSED, HALF_OPEN, OPEN, BreakerConfig, CircuitBreakers
from scheduler._flags import Idle
from scheduler._memo import ArrayMemo, memo_key
from scheduler._report_checks import check_values, value_problems


def _run(sched: Scheduler, steps: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        batch = sched.next_batch(64)
        success = rng.random(64) < 0.5
        sched.report(batch, rewards=success.astype(float), success=success)


# ---------------------------------------------------------------------- ArrayMemo
def test_memo_answers_only_equal_arguments_and_keeps_copies() -> None:
    memo = ArrayMemo()
    a, b = np.arange(3.0), np.ones(2)
    assert memo.get(memo_key([a, b])) is None
    result = np.array([7.0, 8.0])
    memo.put(memo_key([a, b]), (result,))
    a[0] = 5.0  # a live argument moved on: the memo keyed what it was given
    result[0] = -1.0  # and the caller's result is its own
    assert memo.get(memo_key([a, b])) is None
    got = memo.get(memo_key([np.arange(3.0), np.ones(2)]))
    assert got is not None and got[0].tolist() == [7.0, 8.0]
    got[0][1] = 0.0  # writing into an answer changes nothing kept
    again = memo.get(memo_key([np.arange(3.0), np.ones(2)]))
    assert again is not None and again[0].tolist() == [7.0, 8.0]
    assert memo.hits == 2
    assert memo.get(memo_key([np.arange(3.0)])) is None  # another number of arguments
    assert memo.get(memo_key([np.arange(3), np.ones(2)])) is None  # another dtype
    assert memo.get(memo_key([np.arange(3.0)[::-1][::-1], np.ones(2)])) is not None  # a view
    memo.clear()
    assert memo.get(memo_key([np.arange(3.0), np.ones(2)])) is None


def test_the_memo_keeps_no_copy_of_its_arguments() -> None:
    """Its arguments are keyed by a digest: what it holds does not grow with them."""
    memo = ArrayMemo()
    big = np.ones(100_000)
    memo.put(memo_key([big, big]), (np.zeros(1),))
    held = [x for x in vars(memo).values() if isinstance(x, np.ndarray)]
    assert not held
    assert sum(r.nbytes for r in memo._result or ()) == 8


# ---------------------------------------------------------------------- projection memo
Call = tuple[tuple[object, ...], dict[str, object], tuple[np.ndarray, np.ndarray]]


def _projections(sched: Scheduler) -> list[Call]:
    """Record every call of the pipeline's projection: its arguments (copied) and answer."""
    seen: list[Call] = []
    project = sched.pipeline._project

    def spy(*args: object, **kwargs: object) -> tuple[np.ndarray, np.ndarray]:
        kept = copy.deepcopy((args, kwargs))
        family, ratio = project(*args, **kwargs)  # type: ignore[arg-type]
        seen.append((kept[0], kept[1], (family.copy(), ratio.copy())))
        return family, ratio

    sched.pipeline._project = spy  # type: ignore[method-assign]
    return seen


def _check_against_recompute(seen: list[Call]) -> None:
    assert seen
    for args, kwargs, (family, ratio) in seen:
        want, want_ratio = project_quotas_compute(*args, **kwargs)  # type: ignore[arg-type]
        assert np.array_equal(family, want) and np.array_equal(ratio, want_ratio)


def test_a_memoised_projection_is_the_one_a_recompute_gives() -> None:
    sched = Scheduler(Catalog.synthetic(4, 6, 3, min_share=0.1), seed=0)
    seen = _projections(sched)
    _run(sched, 60)
    assert sched.pipeline._projected.hits > 0  # the run had hits, not only misses
    _check_against_recompute(seen)


def test_the_memo_with_a_compute_quota_keys_on_cost_and_warm_start() -> None:
    base = Catalog.synthetic(3, 4, 3, min_share=0.2)
    cat = replace(
        base,
        domain_compute_basis=np.array([True, False, False]),
        cost_s=np.linspace(0.5, 3.0, base.n_families),
    )
    sched = Scheduler(cat, seed=0)
    seen = _projections(sched)
    rng = np.random.default_rng(0)
    for i in range(40):
        batch = sched.next_batch(64)
        ok = rng.random(64) < 0.5
        cost = None if i >= 20 else rng.random(64) * 3  # then the costs stop moving
        sched.report(batch, rewards=ok.astype(float), success=ok, cost=cost)
    _check_against_recompute(seen)
    # a call with the costs and the warm start of the last one is answered from the memo
    args, kwargs, _ = seen[-1]
    hits = sched.pipeline._projected.hits
    sched.pipeline._project(*args, **kwargs)  # type: ignore[arg-type]
    assert sched.pipeline._projected.hits == hits + 1
    moved = dict(kwargs, ratio=np.asarray(kwargs["ratio"]) * 1.01)
    sched.pipeline._project(*args, **moved)  # type: ignore[arg-type]
    assert sched.pipeline._projected.hits == hits + 1


def test_the_memo_recomputes_when_a_flag_moves_the_caps() -> None:
    sched = Scheduler(Catalog.synthetic(2, 4, 3), seed=0)
    sched.weights()
    hits = sched.pipeline._projected.hits
    sched.pipeline.invalidate()
    sched.weights()  # nothing moved: the memo answers
    assert sched.pipeline._projected.hits == hits + 1
    board = sched.flags
    flags = board.flags.copy()
    flags[[d.name for d in board.detectors].index("mastered"), 2] = True
    board.flags = flags
    board.read_at = (id(sched.skill), sched.skill.version)  # as if the model said so
    sched.pipeline.invalidate()
    weights = sched.weights()
    assert sched.pipeline._projected.hits == hits + 1  # recomputed
    assert weights.family[2] < weights.family[3]  # the mastered family is held back


def test_held_caps_from_the_memo_are_the_ones_hold_flagged_gives() -> None:
    """The flagged caps held to the batch are kept with their arguments: a refresh with
    the same caps takes them, and every answer equals a fresh ``hold_flagged``."""
    sched = Scheduler(Catalog.synthetic(4, 6, 3, min_share=0.1), seed=0)
    seen: list[tuple[tuple[np.ndarray, ...], np.ndarray]] = []
    hold = sched.pipeline._hold

    def spy(base: np.ndarray, flag_caps: np.ndarray, first: np.ndarray) -> np.ndarray:
        caps = hold(base, flag_caps, first)
        seen.append(((base.copy(), flag_caps.copy(), first.copy()), caps.copy()))
        return caps

    sched.pipeline._hold = spy  # type: ignore[method-assign]
    _run(sched, 60)
    assert sched.pipeline._held.hits > 0
    ceiling = sched.config.skill.max_weight / sched.catalog.n_families
    for (base, flag_caps, first), caps in seen:
        want = sched.gates.hold_flagged(base, flag_caps, first=first, ceiling=ceiling)
        assert np.array_equal(caps, want)
    hits = sched.pipeline._held.hits
    (base, flag_caps, first), _ = seen[-1]
    sched.pipeline._hold(base, flag_caps * 2.0, first)  # other caps: computed afresh
    assert sched.pipeline._held.hits == hits


def test_the_memo_recomputes_when_a_breaker_moves_the_factor() -> None:
    sched = Scheduler(Catalog.synthetic(2, 4, 3), seed=0)
    before = sched.weights().family.copy()
    hits = sched.pipeline._projected.hits
    for _ in range(sched.breakers.config.probe_failures):
        sched.breakers.record_probe_results([1], [False], 0)
    after = sched.weights().family
    assert sched.pipeline._projected.hits == hits
    assert after[1] == 0.0 and before[1] > 0.0


def test_loading_a_state_clears_the_memo_and_resumes_exactly() -> None:
    cat = Catalog.synthetic(3, 5, 3, min_share=0.1)
    a = Scheduler(cat, seed=3)
    _run(a, 25)
    state = a.state_dict()
    b = Scheduler(cat, seed=3)
    _run(b, 40, seed=9)  # a memo of another run's inputs
    b.load_state_dict(copy.deepcopy(state))
    assert b.pipeline._projected._key is None
    _run(a, 20, seed=5)
    _run(b, 20, seed=5)
    assert np.array_equal(a.weights().family, b.weights().family)
    assert a.next_batch(32).arm.tolist() == b.next_batch(32).arm.tolist()


# ---------------------------------------------------------------------- the ArmView
def test_the_cached_view_sees_new_values_and_is_read_only() -> None:
    sched = Scheduler(Catalog.synthetic(2, 3, 3), seed=0)
    view = sched.view()
    assert sched.view() is view  # same step, same arrays: the same view
    _run(sched, 3)
    later = sched.view()
    assert later.step == sched.step == 3
    assert later.count is view.count  # the same read-only views of the live arrays
    assert np.array_equal(later.count, sched.stats.count) and later.count.sum() == 3 * 64
    assert np.array_equal(later.tier, sched.tiers.tier)
    for name in ("count", "success_fast", "probe_score", "tier", "last_step"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(later, name)[0] = 1


def test_the_view_follows_arrays_that_a_load_replaces() -> None:
    sched = Scheduler(Catalog.synthetic(2, 3, 3), seed=0)
    _run(sched, 2)
    state = sched.state_dict()
    old = sched.view()
    _run(sched, 2)
    sched.load_state_dict(state)  # ArmStats and CurrentTiers take fresh arrays
    new = sched.view()
    assert new is not old and new.step == 2
    assert new.count.base is sched.stats.count
    assert new.tier.base is sched.tiers.tier
    assert np.array_equal(new.count, state["stats"]["count"])


# ---------------------------------------------------------------------- report checks
_VALUE = st.sampled_from([0.0, 0.5, 1.0, 1.0 + 1e-10, -1e-10, 1.5, -0.5, np.nan, np.inf, -np.inf])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_VALUE, _VALUE, _VALUE, _VALUE), min_size=1, max_size=12))
def test_the_one_pass_check_finds_a_problem_exactly_where_the_detailed_one_does(
    rows: list[tuple[float, float, float, float]],
) -> None:
    cat = Catalog.synthetic(2, 3, 2)
    family = np.arange(len(rows)) % cat.n_families
    reward, success, process, cost = np.array(rows, dtype=np.float64).T
    problems: list[str] = []
    check_values(cat, family, reward, success, process, cost, problems)
    detailed: list[str] = []
    value_problems(cat, family, reward, success, process, cost, detailed)
    assert problems == detailed


# ---------------------------------------------------------------------- breakers
def _random_breakers(rng: np.random.Generator) -> CircuitBreakers:
    cfg = BreakerConfig(fault_window=4, fault_threshold=2, half_open_successes=2)
    br = CircuitBreakers(Catalog.synthetic(2, 3, 2), cfg)
    n = br.catalog.n_families
    br.state[:] = rng.choice([CLOSED, CLOSED, HALF_OPEN, OPEN], n)
    br.ring[:] = rng.random(br.ring.shape) < 0.3  # a loaded state may hold anything
    br.ring_cursor[:] = rng.integers(0, 20, n)
    br.ring_filled[:] = np.minimum(br.ring_cursor, cfg.fault_window)
    br.failed_streak[:] = rng.integers(0, 3, n)
    br.half_open_ok[:] = rng.integers(0, 2, n)
    br._changed()
    return br


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 30))
def test_all_ok_outcomes_take_a_shortcut_to_the_general_result(seed: int, size: int) -> None:
    rng = np.random.default_rng(seed)
    fast = _random_breakers(rng)
    slow = copy.deepcopy(fast)
    families = rng.integers(0, fast.catalog.n_families, size)
    fam = families[fast.state[families] != OPEN] if fast._any_open else families
    events = fast.record_outcomes(families, np.zeros(size, dtype=np.int64), 7)
    want: list[object] = []
    if fam.size:
        touched, local = np.unique(fam, return_inverse=True)
        want = slow._record_mixed(7, touched, local, np.full(fam.size, int(Status.OK)))
    assert events == want
    for name, value in fast.state_dict().items():
        if name != "config":
            assert np.array_equal(value, getattr(slow, name)), name


# ---------------------------------------------------------------------- idle reasons
class _Reasons:
    """Stands in for the skill model: three reasons per family, any may hold, whether
    each family is on trial, and whether a stall is an early one."""

    def __init__(self, rng: np.random.Generator, n: int) -> None:
        self.masks = [rng.random(n) < 0.4 for _ in range(3)]
        self.trial_mask = rng.random(n) < 0.5
        self.early_mask = self.masks[2] & (rng.random(n) < 0.5)

    def on_trial(self) -> np.ndarray:
        return self.trial_mask

    def out_of_reach(self) -> np.ndarray:
        return self.masks[0]

    def flat(self) -> np.ndarray:
        return self.masks[1]

    def stalled(self) -> np.ndarray:
        return self.masks[2]

    def stalled_early(self) -> np.ndarray:
        return self.early_mask


def test_an_idle_family_takes_the_first_reason_that_holds() -> None:
    idle = Idle()
    skill = _Reasons(np.random.default_rng(4), 200)
    flags = idle.flags(skill)  # type: ignore[arg-type]
    reach = np.where(skill.trial_mask, 4, 1)  # out of reach, on trial or not
    stall = np.where(skill.early_mask, 5, 3)  # stalled early or on patience's test
    want = np.select(skill.masks, [reach, 2, stall], default=0)
    assert idle.codes is not None and idle.codes.dtype == np.int8
    assert np.array_equal(idle.codes, want) and np.array_equal(flags, want > 0)
    assert set(np.unique(want).tolist()) == {0, 1, 2, 3, 4, 5}


# ---------------------------------------------------------------------- cached reads
class _CountingUniform:
    """``uniform``'s weights, counting how often they are asked for."""

    def __init__(self, constant: bool) -> None:
        self.constant = constant
        self.asked = 0

    def init_state(self, catalog: Catalog) -> dict[str, object]:
        return {}

    def observe(self, view: object, state: object, touched: object) -> None:
        return None

    def weights(self, view: object, state: object) -> np.ndarray:
        self.asked += 1
        return np.ones(view.catalog.n_arms)  # type: ignore[attr-defined]


def test_a_constant_policy_is_asked_once_and_draws_what_asking_every_time_draws() -> None:
    cat = Catalog.synthetic(3, 5, 3)
    runs = {}
    for constant in (True, False):
        policy = _CountingUniform(constant)
        sched = Scheduler(cat, policy, seed=0)  # type: ignore[arg-type]
        _run(sched, 30)
        runs[constant] = (policy.asked, sched.next_batch(64).arm)
    assert runs[True][0] == 1 and runs[False][0] > 20
    np.testing.assert_array_equal(runs[True][1], runs[False][1])


def test_the_cached_flag_reads_follow_every_update_and_cannot_be_written() -> None:
    """out_of_reach() is kept until the beliefs move, hacked() until the probes move;
    each equals a fresh read at every point."""
    from policies import SkillModel

    cat = Catalog.synthetic(2, 6, 3)
    sched = Scheduler(cat, seed=0)
    sk = sched.skill
    rng = np.random.default_rng(1)
    families = np.arange(cat.n_families)
    for step in range(40):
        _run(sched, 1, seed=step)
        if step % 4 == 3:
            scores = np.where(families % 3 == 0, 0.0, rng.random(cat.n_families))
            sched.record_probes(families, scores, n=np.full(cat.n_families, 8))
        fresh = SkillModel(cat, sk.config)
        fresh.load_state_dict(sk.state_dict())
        np.testing.assert_array_equal(sk.out_of_reach(), fresh.out_of_reach())
        np.testing.assert_array_equal(sk.hacked(), fresh.hacked())
        np.testing.assert_array_equal(sk.stalled(), fresh.stalled())
    with pytest.raises(ValueError, match="read-only"):
        sk.hacked()[0] = True
    with pytest.raises(ValueError, match="read-only"):
        sk.out_of_reach()[0] = True


def test_process_statistics_take_memory_only_once_a_process_score_arrives() -> None:
    """Most trainers report no process score: their arms hold no process statistics (a
    read-only view of one value), the view and the state read as before, and a load of a
    state without process scores keeps it so."""
    cat = Catalog.synthetic(2, 5, 4)
    sched = Scheduler(cat, "learning_progress", seed=0)
    for _ in range(3):
        batch = sched.next_batch(32)
        ones = np.ones(len(batch))
        sched.report(batch, rewards=ones, success=ones)
    stats = sched.stats
    assert stats.process_fast.nbytes == cat.n_arms * 8 and stats.process_fast.base is not None
    assert all(a.strides == (0,) for a in (stats.process_fast, stats.process_count))
    state = sched.state_dict()
    assert np.isnan(state["stats"]["process_fast"]).all()
    assert state["stats"]["process_count"].tolist() == [0] * cat.n_arms
    assert state["stats"]["process_fast"].strides != (0,)  # a checkpoint holds plain arrays
    other = Scheduler(cat, "learning_progress", seed=0)
    other.load_state_dict(state)
    assert other.stats.process_fast.strides == (0,)
    # the first process score: arrays of their own, and the view follows them
    batch = sched.next_batch(32)
    ones = np.ones(len(batch))
    process = np.full(len(batch), np.nan)
    process[0] = 0.25
    sched.report(batch, rewards=ones, success=ones, process=process)
    arm = int(batch.arm[0])
    assert stats.process_fast.strides == (8,) and stats.process_count[arm] == 1
    assert stats.process_fast[arm] == 0.25 and np.isnan(np.delete(stats.process_fast, arm)).all()
    assert sched.view().process_fast[arm] == 0.25
