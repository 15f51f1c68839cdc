"""A stateful property test (issue 16): next_batch, report, record_probe(s), state_dict and
load_state_dict interleaved with bad calls. After every rejected call the state is
byte-equal to before; throughout, the weights are a distribution, the quotas hold, counts
never decrease (except by loading an older checkpoint), and a model of which batches await
a report agrees with the scheduler about every report it accepts or refuses."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

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

MIN_SHARE, MAX_SHARE, WINDOW = 0.15, 0.5, 4
CATALOG = Catalog.synthetic(3, 3, 3, pool_size=4, min_share=MIN_SHARE, max_share=MAX_SHARE)
OTHER = Scheduler(CATALOG, "exp3s", seed=5)  # a second scheduler: its batches are foreign


def _key(batch: Batch) -> tuple[int, int, bytes]:
    """A batch as the scheduler knows it: after a rollback to an older checkpoint the same
    scheduler may draw another batch at the same step, with other tasks."""
    assert batch.attempt is not None
    return batch.step, batch.token, np.stack([batch.arm, batch.variant, batch.attempt]).tobytes()


def _config(lazy: bool) -> SchedulerConfig:
    if lazy:  # weights recomputed after four episodes per family: the refresh rule's count
        return SchedulerConfig(report_window=WINDOW, refresh_per_family=4.0)
    return SchedulerConfig(report_window=WINDOW)


class SchedulerMachine(RuleBasedStateMachine):
    lazy = False

    def __init__(self) -> None:
        super().__init__()
        self.sched = Scheduler(CATALOG, "exp3s", seed=3, config=_config(self.lazy))
        self.batches: list[Batch] = []
        # the model: (step, token) of every batch that awaits a report
        self.awaiting: set[tuple[int, int, bytes]] = set()
        self.saved: list[tuple[bytes, set[tuple[int, int, bytes]]]] = []
        # every batch drawn that a report may still match, by key (_overlaps)
        self.drawn: dict[tuple[int, int, bytes], Batch] = {}
        self.count = self.sched.stats.count.copy()
        self.rng = np.random.default_rng(0)

    # ------------------------------------------------------------------ helpers
    def _snap(self) -> bytes:
        return dumps_state(self.sched.state_dict())

    def _refused(self, error: type[Exception], call: Any, *args: Any, **kwargs: Any) -> None:
        before = self._snap()
        with pytest.raises(error):
            call(*args, **kwargs)
        assert self._snap() == before, "a rejected call changed the state"

    def _remember(self, batch: Batch) -> None:
        """Every batch a report may still match, by key: the awaiting ones, now or in a
        saved checkpoint (they may have left ``batches``), and the ones a rule may pick."""
        self.drawn[_key(batch)] = batch
        keep = self.awaiting.union({_key(b) for b in self.batches}, *(a for _, a in self.saved))
        self.drawn = {key: b for key, b in self.drawn.items() if key in keep}

    def _expire(self) -> None:
        """The model of report_window: drawing step s expires steps before s - WINDOW."""
        now = self.sched.step - 1
        self.awaiting = {key for key in self.awaiting if key[0] >= now - WINDOW}

    def _pick(self, data: st.DataObject) -> Batch:
        return data.draw(st.sampled_from(self.batches), label="batch")

    def _columns(self, n: int) -> dict[str, Any]:
        success = (self.rng.random(n) < 0.6).astype(float)
        status = self.rng.choice(["ok", "failed", "timeout"], size=n, p=[0.8, 0.17, 0.03])
        return {"rewards": success, "success": success, "cost": np.ones(n), "status": status}

    # ------------------------------------------------------------------ good calls
    @rule(n=st.integers(1, 12))
    def draw(self, n: int) -> None:
        batch = self.sched.next_batch(n)
        self.batches = [*self.batches[-7:], batch]
        self.awaiting.add(_key(batch))
        self._expire()
        self._remember(batch)

    @rule(n=st.integers(1, 24))
    def draw_and_report(self, n: int) -> None:
        batch = self.sched.next_batch(n)
        self.batches = [*self.batches[-7:], batch]
        self._expire()
        self.sched.report(batch, **self._columns(n))

    @precondition(lambda self: bool(self.batches))
    @rule(data=st.data())
    def report_batch(self, data: st.DataObject) -> None:
        batch = self._pick(data)
        columns = self._columns(len(batch))
        if _key(batch) in self.awaiting:
            self.sched.report(batch, **columns)
            self.awaiting.discard(_key(batch))
        else:  # reported already, or too late: the model says it must be refused
            self._refused(ReportError, self.sched.report, batch, **columns)

    @precondition(lambda self: bool(self.batches))
    @rule(data=st.data())
    def report_outcomes(self, data: st.DataObject) -> None:
        batch = self._pick(data)
        outcomes = [
            Outcome(arm=int(a), variant=int(v), reward=1.0, success=True)
            for a, v in zip(batch.arm, batch.variant, strict=True)
        ]
        if _key(batch) in self.awaiting and not self._overlaps(batch):
            self.sched.report(outcomes)
            self.awaiting.discard(_key(batch))
            self._refused(ReportError, self.sched.report, outcomes)  # the same list again
        elif _key(batch) not in self.awaiting and not self._overlaps(batch):
            self._refused(ReportError, self.sched.report, outcomes)

    def _overlaps(self, batch: Batch) -> bool:
        """Another awaiting batch holds one of its (arm, variant) pairs: a list of Outcome
        then takes the oldest row, which the model does not follow."""
        mine = set(zip(batch.arm.tolist(), batch.variant.tolist(), strict=True))
        return any(
            key != _key(batch)
            and key in self.awaiting
            and mine & set(zip(b.arm.tolist(), b.variant.tolist(), strict=True))
            for key, b in self.drawn.items()
        )

    @rule(
        families=st.lists(
            st.integers(0, CATALOG.n_families - 1), min_size=1, max_size=5, unique=True
        ),
        score=st.floats(0, 1),
        n=st.integers(1, 64),
    )
    def probe(self, families: list[int], score: float, n: int) -> None:
        k = len(families)
        self.sched.record_probes(families, [score] * k, n=[n] * k)

    @rule(
        family=st.integers(0, CATALOG.n_families - 1), tier=st.integers(0, 2), score=st.floats(0, 1)
    )
    def probe_one(self, family: int, tier: int, score: float) -> None:
        self.sched.record_probe(CATALOG.family_names[family], score, tier=tier, n=16)

    @rule()
    def save(self) -> None:
        self.saved = [*self.saved[-3:], (self._snap(), set(self.awaiting))]

    @precondition(lambda self: bool(self.saved))
    @rule(data=st.data(), fresh=st.booleans())
    def load(self, data: st.DataObject, fresh: bool) -> None:
        blob, awaiting = data.draw(st.sampled_from(self.saved), label="checkpoint")
        if fresh:  # a resume in a new scheduler: the checkpoint's batches still report
            self.sched = Scheduler(CATALOG, "exp3s", seed=99, config=_config(self.lazy))
        self.sched.load_state_dict(loads_state(blob))
        assert self._snap() == blob, "a resume is not exact"
        self.awaiting = set(awaiting)
        self.count = self.sched.stats.count.copy()

    # ------------------------------------------------------------------ bad calls
    @precondition(lambda self: bool(self.batches))
    @rule(data=st.data(), kind=st.sampled_from(
        ["shape", "nan", "string", "complex", "status_true", "status_frac", "status_none",
         "cut", "forged_arm", "forged_family", "forged_variant", "foreign", "none", "junk_outcome"]
    ))  # fmt: skip
    def bad_report(self, data: st.DataObject, kind: str) -> None:
        batch = self._pick(data)
        n = len(batch)
        good = self._columns(n)
        target: Any = batch
        if kind == "shape":
            good["rewards"] = np.ones((n, 2))
        elif kind == "nan":
            good["rewards"] = np.r_[np.nan, np.ones(n - 1)]
        elif kind == "string":
            good["rewards"] = ["1"] * n
        elif kind == "complex":
            good["rewards"] = np.ones(n) * (1 + 1j)
        elif kind == "status_true":
            good["status"] = [True] * n
        elif kind == "status_frac":
            good["status"] = np.full(n, 1.7)
        elif kind == "status_none":
            good["status"] = [None] * n
        elif kind == "cut":
            if n < 2:
                return
            target = dataclasses.replace(batch, arm=batch.arm[:-1], variant=batch.variant[:-1])
        elif kind.startswith("forged"):
            name = kind.split("_")[1]
            arr = np.array(getattr(batch, name), copy=True)
            arr[0] = arr[0] + 1 if name != "arm" else 10**6
            target = dataclasses.replace(batch, **{name: arr})
        elif kind == "foreign":
            target = OTHER.next_batch(n)
            good = self._columns(len(target))
        elif kind == "none":
            self._refused(ReportError, self.sched.report, None)
            return
        else:
            self._refused(
                ReportError, self.sched.report, [Outcome(arm=-1, variant=0, reward=1.0, success=1)]
            )
            return
        self._refused(ReportError, self.sched.report, target, **good)

    @rule(kind=st.sampled_from(["step", "family", "n", "dup", "2d", "nan", "tier", "name"]))
    def bad_probe(self, kind: str) -> None:
        args: dict[str, Any] = {"families": [0, 1], "scores": [0.5, 0.5]}
        if kind == "step":
            self._refused(ReportError, self.sched.record_probe, 0, 0.5, n=4, step=-1)
            return
        if kind == "name":
            self._refused(ReportError, self.sched.record_probe, "no.such_family", 0.5)
            return
        if kind == "family":
            args["families"] = [0, 1.9]
        elif kind == "n":
            args["n"] = [2, 2.7]
        elif kind == "dup":
            args["families"] = [1, 1]
        elif kind == "2d":
            args = {"families": [[0, 1]], "scores": [[0.5, 0.5]]}
        elif kind == "nan":
            args["scores"] = [0.5, float("nan")]
        else:
            args["tiers"] = [0, 3]
        self._refused(ReportError, self.sched.record_probes, **args)

    @rule(kind=st.sampled_from(
        ["missing", "nan_weights", "tier", "step", "rng", "pending", "events", "cost", "policy"]
    ))  # fmt: skip
    def bad_load(self, kind: str) -> None:
        state = loads_state(self._snap())
        if kind == "missing":
            del state["skill"]
        elif kind == "nan_weights":
            state["cached_weights"] = {
                "step": 0,
                "arm": np.full(CATALOG.n_arms, np.nan),
                "family": np.full(CATALOG.n_families, np.nan),
                "domain": np.full(CATALOG.n_domains, np.nan),
                "tier": np.full(CATALOG.n_arms, np.nan),
            }
        elif kind == "tier":
            state["tiers"]["tier"][0] = 99
        elif kind == "step":
            state["step"] = -5
        elif kind == "rng":
            state["rng"] = {"bit_generator": "PCG64", "state": "garbage"}
        elif kind == "pending":
            state["pending"] = {"0": 5}
        elif kind == "events":
            state["events"] = [{"kind": 1}]
        elif kind == "cost":
            state["cost"] = np.ones(3)
        else:
            state["policy_state"]["log_weight"][:] = np.inf
        self._refused(ConfigError, self.sched.load_state_dict, state)

    # ------------------------------------------------------------------ invariants
    @invariant()
    def weights_are_a_distribution_within_quotas(self) -> None:
        w = self.sched.weights()
        for level in (w.arm, w.family, w.domain):
            assert np.isfinite(level).all() and (level >= 0).all()
            assert level.sum() == pytest.approx(1.0, abs=1e-9)
        assert (w.domain <= MAX_SHARE + 1e-6).all()
        held = ~self.sched.pipeline.quota_short
        assert (w.domain[held] >= MIN_SHARE - 1e-6).all()

    @invariant()
    def counts_never_decrease(self) -> None:
        count = self.sched.stats.count
        assert (count >= self.count).all()
        self.count = count.copy()

    @invariant()
    def pending_stays_bounded(self) -> None:
        assert len(self.sched._pending) <= WINDOW + 1


class LazySchedulerMachine(SchedulerMachine):
    """The same with weights recomputed less often than every step (their age is state)."""

    lazy = True


_SETTINGS = settings(
    max_examples=30,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
SchedulerMachine.TestCase.settings = _SETTINGS
LazySchedulerMachine.TestCase.settings = _SETTINGS
test_scheduler_state_machine = SchedulerMachine.TestCase
test_scheduler_state_machine_with_lazy_weights = LazySchedulerMachine.TestCase
