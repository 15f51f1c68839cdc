"""Curricula under test, all behind one small protocol, and the probe protocols that feed them.

A runner proposes a batch, observes its outcomes, and receives probe readings when the
user's evaluator delivers them. What the evaluator probes is the protocol's choice (the top
tier only, every tier, the tiers the runner asks for, none), and when it delivers (late,
with readings missing, drifting) too: a curriculum must take probe timing and tier as
inputs, not assume them.

Baselines, chosen to be hard to beat:
* ``fixed``: every arm equally likely (no curriculum);
* ``ladder``: family-uniform, each family on a tier ladder: promote at a pass rate over 0.8
  over the last 8 episodes at the tier, demote under 0.2;
* ``ladder_probe``: the same, and a family whose latest top-tier probe reads >= 0.9 is drawn
  10x less (the issue's 30-line baseline);
* ``syllabus:*``: Syllabus's curricula over task = arm, with their own evaluator probing
  every arm every probe interval (more held-out evidence than any protocol here gives);
* ``oracle``: reads the student's hidden state.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from _students import Student

from domains import Catalog
from scheduler import Batch, Scheduler
from scheduler.backends import BatchOutcomes

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Readings:
    """Probe readings as an evaluator delivers them: measured at ``step``."""

    families: IntArray
    tiers: IntArray
    scores: FloatArray
    n: int
    step: int


class Runner(Protocol):
    def propose(self, n: int) -> Batch: ...
    def observe(self, batch: Batch, out: BatchOutcomes) -> None: ...
    def on_probe(self, readings: Readings) -> None: ...
    def wants(self) -> tuple[IntArray, IntArray] | None: ...


def batch_of(catalog: Catalog, step: int, arm: IntArray) -> Batch:
    return Batch(
        step=step,
        arm=arm,
        family=catalog.family_of_arm[arm],
        tier=catalog.tier_of_arm[arm],
        variant=np.zeros(arm.shape[0], dtype=np.int64),
        catalog=catalog,
    )


# --------------------------------------------------------------------------- ours
class SchedulerRunner:
    """The project's Scheduler through its public API, as a trainer drives it."""

    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched

    def propose(self, n: int) -> Batch:
        return self.sched.next_batch(n)

    def observe(self, batch: Batch, out: BatchOutcomes) -> None:
        self.sched.report(batch, out)

    def on_probe(self, r: Readings) -> None:
        if r.families.size:
            self.sched.record_probes(
                r.families,
                r.scores,
                tiers=r.tiers,
                n=np.full(r.families.size, r.n),
                step=max(r.step - 1, 0),
            )

    def wants(self) -> tuple[IntArray, IntArray] | None:
        return self.sched.probe_targets()


# --------------------------------------------------------------------------- open loop
class _OpenLoop:
    def __init__(self, catalog: Catalog, seed: int) -> None:
        self.catalog = catalog
        self.rng = np.random.Generator(np.random.PCG64([seed, 3]))
        self.step = 0

    def draw(self, n: int) -> IntArray:
        raise NotImplementedError

    def propose(self, n: int) -> Batch:
        batch = batch_of(self.catalog, self.step, self.draw(n))
        self.step += 1
        return batch

    def observe(self, batch: Batch, out: BatchOutcomes) -> None:
        return None

    def on_probe(self, readings: Readings) -> None:
        return None

    def wants(self) -> tuple[IntArray, IntArray] | None:
        return None


class FixedRunner(_OpenLoop):
    def draw(self, n: int) -> IntArray:
        return self.rng.integers(0, self.catalog.n_arms, size=n).astype(np.int64)


class OracleRunner(_OpenLoop):
    def __init__(self, catalog: Catalog, seed: int, student: Student) -> None:
        super().__init__(catalog, seed)
        self.student = student

    def draw(self, n: int) -> IntArray:
        return self.student.oracle_arms(n, self.rng)


# --------------------------------------------------------------------------- ladders
class LadderRunner(_OpenLoop):
    """The plain tier ladder (``probe_aware``: and the top-tier probe discount)."""

    def __init__(self, catalog: Catalog, seed: int, probe_aware: bool) -> None:
        super().__init__(catalog, seed)
        self.probe_aware = probe_aware
        nf = catalog.n_families
        self.tier = np.zeros(nf, dtype=np.int64)
        self.window = np.zeros((nf, 8))  # the last 8 outcomes at the tier (ring)
        self.filled = np.zeros(nf, dtype=np.int64)
        self.top_probe = np.full(nf, np.nan)

    def draw(self, n: int) -> IntArray:
        cat = self.catalog
        weight = np.ones(cat.n_families)
        if self.probe_aware:
            weight[np.nan_to_num(self.top_probe, nan=0.0) >= 0.9] = 0.1
        fam = self.rng.choice(cat.n_families, size=n, p=weight / weight.sum())
        result: IntArray = cat.arm_start[fam] + self.tier[fam]
        return result

    def observe(self, batch: Batch, out: BatchOutcomes) -> None:
        cat = self.catalog
        at = batch.tier == self.tier[batch.family]
        fams, succ = batch.family[at], out.success[at]
        # ring-buffer writes in order (families repeat within a batch: a short loop over
        # occurrences, at most the largest count per family in one batch)
        order = np.argsort(fams, kind="stable")
        fams, succ = fams[order], succ[order]
        first = np.searchsorted(fams, fams, side="left")
        rank = np.arange(fams.size) - first
        slot = (self.filled[fams] + rank) % 8
        self.window[fams, slot] = succ
        self.filled += np.bincount(fams, minlength=cat.n_families)
        full = self.filled >= 8
        rate = self.window.mean(axis=1)
        top = cat.n_tiers - 1
        up = full & (rate > 0.8) & (self.tier < top)
        down = full & (rate < 0.2) & (self.tier > 0)
        moved = up | down
        self.tier[up] += 1
        self.tier[down] -= 1
        self.filled[moved] = 0
        self.window[moved] = 0.0

    def on_probe(self, r: Readings) -> None:
        top = self.catalog.n_tiers[r.families] - 1
        at_top = r.tiers == top
        self.top_probe[r.families[at_top]] = r.scores[at_top]


# --------------------------------------------------------------------------- Syllabus
SYLLABUS = ("Learnability", "LearningProgress", "PrioritizedLevelReplay")


class SyllabusRunner(_OpenLoop):
    """A Syllabus curriculum over task = arm; its evaluator probes every arm with ``n``
    items every ``probe_every`` steps."""

    def __init__(
        self,
        name: str,
        catalog: Catalog,
        seed: int,
        student: Student,
        probe_every: int,
        probe_n: int,
        batch_size: int,
    ) -> None:
        import torch

        # importing syllabus.curricula sets np.seterr(all="raise") for the whole process;
        # import_syllabus puts numpy's error state back, so our runners are not changed
        from _peers import import_syllabus

        import_syllabus()
        from syllabus.core.evaluator import Evaluator  # type: ignore[import-not-found,unused-ignore]
        from syllabus.curricula import (  # type: ignore[import-not-found,unused-ignore]
            CentralPrioritizedLevelReplay,
            Learnability,
            LearningProgress,
        )
        from syllabus.task_space import DiscreteTaskSpace  # type: ignore[import-not-found,unused-ignore]

        super().__init__(catalog, seed)
        np.random.seed(seed)  # noqa: NPY002 (Syllabus draws from numpy's global RNG)
        torch.manual_seed(seed)
        space = DiscreteTaskSpace(catalog.n_arms)
        fam, tier = catalog.family_of_arm, catalog.tier_of_arm
        every = max(1, probe_every) * batch_size

        class ProbeEvaluator(Evaluator):  # type: ignore[misc]
            as_numpy = False

            def evaluate_agent(
                self, num_episodes: int = 1, verbose: bool = False, store_all: bool = False
            ) -> tuple[Any, Any, Any, dict[str, Any]]:
                scores = student.probe(fam, tier, probe_n)
                if self.as_numpy:
                    return np.zeros(1), scores, scores.copy(), {}
                rates = torch.as_tensor(scores, dtype=torch.float64)
                return torch.zeros(1), rates, rates.clone(), {}

        def listed(cls: type[Any]) -> type[Any]:
            class Listed(cls):  # type: ignore[misc]
                def _sample_distribution(self) -> list[float]:
                    return list(super()._sample_distribution())

            Listed.__name__ = cls.__name__
            return Listed

        self.per_episode = name != "PrioritizedLevelReplay"
        self.value = np.zeros(catalog.n_arms)
        if name == "LearningProgress":
            ev = ProbeEvaluator(None, copy_agent=False, task_space=space)
            self.curriculum: Any = listed(LearningProgress)(ev, space, eval_interval=every)
        elif name == "Learnability":
            ev = ProbeEvaluator(None, copy_agent=False, task_space=space)
            ev.as_numpy = True
            self.curriculum = listed(Learnability)(
                ev, space, eval_interval=every, topk=max(1, catalog.n_arms // 10)
            )
        else:
            self.curriculum = CentralPrioritizedLevelReplay(
                space,
                num_steps=4,
                num_processes=batch_size,
                gamma=0.999,
                gae_lambda=0.95,
                task_sampler_kwargs_dict={"strategy": "value_l1", "replay_schedule": "fixed"},
            )

    def draw(self, n: int) -> IntArray:
        arm = np.asarray(self.curriculum.sample(k=n), dtype=np.int64).reshape(-1)[:n]
        if arm.shape[0] < n:
            more = [int(self.curriculum.sample(k=1)[0]) for _ in range(n - arm.shape[0])]
            arm = np.concatenate([arm, np.asarray(more, dtype=np.int64)])
        return arm

    def observe(self, batch: Batch, out: BatchOutcomes) -> None:
        arms = batch.arm.tolist()
        if self.per_episode:
            for task, success in zip(arms, out.success.tolist(), strict=True):
                self.curriculum.update_task_progress(task, success)
                self.curriculum.update_on_episode(success, 1, task, success)
            return
        n = len(arms)
        self.curriculum.update(
            {
                "tasks": arms,
                "dones": np.ones(n, dtype=np.float32),
                "value": self.value[batch.arm].astype(np.float32),
                "rew": out.success.astype(np.float32),
                "next_value": np.zeros(n, dtype=np.float32),
            }
        )
        counts = np.bincount(batch.arm, minlength=self.catalog.n_arms)
        sums = np.bincount(batch.arm, weights=out.success, minlength=self.catalog.n_arms)
        seen = counts > 0
        self.value[seen] += 0.1 * (sums[seen] / counts[seen] - self.value[seen])


# --------------------------------------------------------------------------- protocols
@dataclass(frozen=True)
class Protocol_:
    """How the user's evaluator probes: which tiers, how often, from how many items, and
    how the readings arrive."""

    tiers: str = "top"  # top | all | asked | none
    every: int = 10
    n: int = 8
    late: int = 0  # steps between measuring and delivering
    missing: float = 0.0  # share of readings lost
    drift: float = 0.0  # sd of a shared per-round shift of every reading (a random walk)


class Evaluator:
    """Runs a protocol against a student for one runner."""

    def __init__(self, protocol: Protocol_, student: Student, seed: int) -> None:
        self.p = protocol
        self.student = student
        self.rng = np.random.Generator(np.random.PCG64([seed, 17]))
        self.queue: deque[Readings] = deque()
        self.offset = 0.0

    def tick(self, step: int, runner: Runner) -> None:
        """Measure on schedule, deliver what is due."""
        p, cat = self.p, self.student.catalog
        if p.tiers != "none" and step % p.every == 0:
            if p.tiers == "top":
                fam = np.arange(cat.n_families)
                tier = cat.n_tiers - 1
            elif p.tiers == "all":
                fam, tier = cat.family_of_arm.copy(), cat.tier_of_arm.copy()
            else:
                asked = runner.wants()
                if asked is None:  # a runner that asks nothing gets the top tier
                    fam, tier = np.arange(cat.n_families), cat.n_tiers - 1
                else:
                    fam, tier = (np.asarray(a, dtype=np.int64) for a in asked)
            tier = np.asarray(tier, dtype=np.int64)
            scores = self.student.probe(fam, tier, p.n)
            if p.drift > 0:
                self.offset += p.drift * self.rng.standard_normal()
                scores = np.clip(scores + self.offset, 0.0, 1.0)
            if p.missing > 0:
                keep = self.rng.random(fam.size) >= p.missing
                fam, tier, scores = fam[keep], tier[keep], scores[keep]
            self.queue.append(Readings(fam, tier, scores, p.n, step))
        while self.queue and self.queue[0].step + self.p.late <= step:
            runner.on_probe(self.queue.popleft())
