"""The main job: a scheduler drives the simulated learner, step after step.

A SimulationRun is one (scheduler, learner) pair plus the running totals behind the final
table. Its state_dict covers all three, so a run killed mid-way resumes to the same result.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from domains import Catalog
from policies import policy_params

from .._batch import Batch
from .._scheduler import Scheduler
from ..backends import BatchOutcomes, FamilyKind, SimulatedLearner, SimulatedLearnerConfig
from ..probing import ProbeRound
from ._settings import Settings

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class RunSummary:
    """What one run achieved. Scores are the learner's true held-out scores (no probe noise),
    over the families that can be learned at all (impossible and noise families excluded)."""

    policy: str
    steps: int
    episodes: int
    final_score: float  # mean chance-normalised held-out score at the end
    p10: float  # 10th percentile of that score across families
    auc: float  # mean of the score curve over the run (area under it, normalised)
    waste: float  # share of episodes on impossible, noise, hackable or mastered tasks
    seconds: float
    curve_steps: npt.NDArray[np.int64]
    curve: FloatArray  # mean score at each probe round

    def steps_to(self, target: float) -> int | None:
        """First step at which the mean score reached ``target`` (None if never)."""
        hit = np.flatnonzero(self.curve >= target)
        return int(self.curve_steps[hit[0]]) if hit.size else None


def _summarize(run: SimulationRun | FixedMixRun, steps: int, score: FloatArray) -> RunSummary:
    """The summary of a run (either kind) at ``steps``, from its running totals."""
    curve = np.asarray(run.curve)
    return RunSummary(
        policy=run.policy_name,
        steps=steps,
        episodes=run.episodes,
        final_score=float(score.mean()),
        p10=float(np.percentile(score, 10)),
        auc=float(curve.mean()) if curve.size else float("nan"),
        waste=run.wasted / max(run.episodes, 1),
        seconds=run.seconds,
        curve_steps=np.asarray(run.curve_steps, dtype=np.int64),
        curve=curve,
    )


StepHook = Callable[["SimulationRun", Batch, BatchOutcomes, "ProbeRound | None"], None]


class SimulationRun:
    """A scheduler and a simulated learner on one seed, stepped together."""

    def __init__(
        self,
        catalog: Catalog,
        settings: Settings,
        policy: str | None = None,
    ) -> None:
        self.catalog = catalog
        self.settings = settings
        name = policy or settings.policy
        if name == settings.policy:  # the run's own policy: built as from_settings builds it
            self.scheduler = Scheduler.from_settings(settings, catalog)
        else:
            self.scheduler = Scheduler(
                catalog, name, seed=settings.seed, config=settings.scheduler_config()
            )
        self.learner = SimulatedLearner(
            catalog, seed=settings.seed, config=SimulatedLearnerConfig(**settings.simulator)
        )
        kind = self.learner.family_kind
        self.scored = ~np.isin(kind, [FamilyKind.IMPOSSIBLE, FamilyKind.NOISE])
        self.episodes = 0
        self.wasted = 0
        self.seconds = 0.0
        self.curve_steps: list[int] = []
        self.curve: list[float] = []

    @property
    def step(self) -> int:
        return self.scheduler.step

    @property
    def policy_name(self) -> str:
        return str(policy_params(self.scheduler.policy)["name"])

    def score(self) -> FloatArray:
        """True held-out score of every scored family."""
        result: FloatArray = self.learner.true_score()[self.scored]
        return result

    def advance(self) -> tuple[Batch, BatchOutcomes, ProbeRound | None]:
        """One training step, then a probe round if one is due."""
        start = time.perf_counter()
        sched = self.scheduler
        listening = sched.listeners.seconds  # a recorder's time is not the scheduler's
        batch = sched.next_batch(self.settings.batch_size)
        out = self.learner.run(batch)
        sched.report(batch, out)
        self.episodes += len(batch)
        self.wasted += int(self.learner.wasted(batch.family, batch.tier).sum())
        probes = None
        if sched.step % self.settings.probe_every == 0 or sched.step == 1:
            probes = self.probe()
        sched.weights()  # the next batch's weights: the scheduler's work, timed with it
        self.seconds += time.perf_counter() - start - (sched.listeners.seconds - listening)
        return batch, out, probes

    def probe(self) -> ProbeRound:
        """One probe round (``Scheduler.probe_round``) on the simulated learner's held-out
        probes, and the ground-truth score at this step. The round returned (what the store
        and the tracker see) holds the probes that made curve points."""
        probes = self.scheduler.probe_round(self.learner.probe_many)
        self.curve_steps.append(self.scheduler.step)
        self.curve.append(float(self.score().mean()))
        return probes

    def extra_metrics(self) -> dict[str, float]:
        """Simulation-only truths for the tracker (a real trainer has no such oracle)."""
        return {
            "sim/true_score": self.curve[-1] if self.curve else float("nan"),
            "sim/waste": self.wasted / max(self.episodes, 1),
        }

    def summary(self) -> RunSummary:
        return _summarize(self, self.scheduler.step, self.score())

    def state_dict(self) -> dict[str, Any]:
        return {
            "scheduler": self.scheduler.state_dict(),
            "learner": self.learner.state_dict(),
            "totals": {
                "episodes": self.episodes,
                "wasted": self.wasted,
                "seconds": self.seconds,
                "curve_steps": np.asarray(self.curve_steps, dtype=np.int64),
                "curve": np.asarray(self.curve, dtype=np.float64),
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(state["scheduler"])
        self.learner.load_state_dict(state["learner"])
        totals = state["totals"]
        self.episodes = int(totals["episodes"])
        self.wasted = int(totals["wasted"])
        self.seconds = float(totals["seconds"])
        self.curve_steps = [int(s) for s in np.asarray(totals["curve_steps"]).tolist()]
        self.curve = [float(c) for c in np.asarray(totals["curve"]).tolist()]


class FixedMixRun:
    """The fixed mix: every task (family x tier arm) equally likely at every step, with no
    scheduler at all; what a team trains on without a curriculum. The simulated learner and
    its seed are those of a SimulationRun, so the two are compared on the same student.

    It keeps nothing worth a checkpoint: it is cheap, and it is run again from its seed."""

    policy_name = "fixed mix"

    def __init__(self, catalog: Catalog, settings: Settings) -> None:
        self.catalog = catalog
        self.settings = settings
        self.learner = SimulatedLearner(
            catalog, seed=settings.seed, config=SimulatedLearnerConfig(**settings.simulator)
        )
        self.rng = np.random.Generator(np.random.PCG64(settings.seed))
        self.scored = ~np.isin(self.learner.family_kind, [FamilyKind.IMPOSSIBLE, FamilyKind.NOISE])
        self.step = 0
        self.episodes = 0
        self.wasted = 0
        self.seconds = 0.0
        self.curve_steps: list[int] = []
        self.curve: list[float] = []

    def advance(self) -> None:
        """One step: a uniform draw over the arms, trained on; the true score at the
        SimulationRun's probe steps."""
        start = time.perf_counter()
        cat = self.catalog
        arm = self.rng.integers(0, cat.n_arms, size=self.settings.batch_size, dtype=np.int64)
        batch = Batch(
            step=self.step,
            arm=arm,
            family=cat.family_of_arm[arm],
            tier=cat.tier_of_arm[arm],
            variant=np.zeros(arm.shape[0], dtype=np.int64),  # the learner has no variants
            catalog=cat,
        )
        self.learner.run(batch)
        self.step += 1
        self.episodes += arm.shape[0]
        self.wasted += int(self.learner.wasted(batch.family, batch.tier).sum())
        if self.step % self.settings.probe_every == 0 or self.step == 1:
            self.curve_steps.append(self.step)
            self.curve.append(float(self.learner.true_score()[self.scored].mean()))
        self.seconds += time.perf_counter() - start

    def run(self, steps: int) -> RunSummary:
        while self.step < steps:
            self.advance()
        score = self.learner.true_score()[self.scored]
        return _summarize(self, self.step, score)


def run_simulation(
    catalog: Catalog,
    settings: Settings,
    policy: str | None = None,
    *,
    steps: int | None = None,
    on_step: StepHook | None = None,
    run: SimulationRun | None = None,
) -> RunSummary:
    """Run (or continue) a simulation to ``steps`` total steps and summarise it."""
    sim = run or SimulationRun(catalog, settings, policy)
    target = settings.steps if steps is None else steps
    while sim.step < target:
        batch, out, probes = sim.advance()
        if on_step is not None:
            on_step(sim, batch, out, probes)
    return sim.summary()
