"""Curriculum quality on the simulated learner: every policy vs uniform and Syllabus.

Every runner (each registered policy, and Syllabus's curricula when it is installed) trains
its own copy of the same ``SimulatedLearner`` (same seed, same config, same catalog) for the
same number of steps and episodes. Scores are the learner's ground truth, which no runner
sees: the mean chance-normalised held-out skill over the families that can be learned
(impossible and noise families left out, as in ``scheduler._simulate.SimulationRun``).

    .venv-bench/bin/python bench/quality.py --markdown            # with Syllabus (see README)
    .venv/bin/python bench/quality.py --no-syllabus --markdown    # our policies only

Syllabus (PyPI ``syllabus-rl``) is wired with task = arm (family x tier), so it must discover
the tiers itself, exactly as it would be used on a task space of hundreds of families:

* ``DomainRandomization``: uniform over arms.
* ``LearningProgress`` and ``Learnability``: an ``Evaluator`` subclass answers
  ``evaluate_agent`` with a held-out probe of every arm (``learner.probe_many``), every
  ``probe_every * batch_size`` episodes, i.e. as often as our scheduler probes, but over all
  arms rather than one tier per family.
* ``CentralPrioritizedLevelReplay`` (Syllabus's PLR with batched updates) with the
  ``value_l1`` score; one-step episodes, and a tabular critic (per-arm EMA of success, the
  best value estimate a model-free scheduler has) as the value prediction.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from _common import (
    BenchError,
    Stat,
    emit,
    markdown_table,
    parse_assignments,
    policy_options,
    run_main,
    steps_to,
)
from pydantic import ValidationError

from domains import Catalog, CurriculumError, load_catalog
from policies import available_policies, make_policy
from scheduler import Batch, Scheduler, SchedulerConfig, Settings
from scheduler.backends import BatchOutcomes, FamilyKind, SimulatedLearner, SimulatedLearnerConfig

log = logging.getLogger("bench.quality")

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

FIXED_MIX = "uniform_arms"  # the no-curriculum baseline (FixedMixRunner)
SYLLABUS = ("DomainRandomization", "LearningProgress", "Learnability", "PrioritizedLevelReplay")

# Learner presets. "default" is SimulatedLearnerConfig() as shipped. "sparse" is the regime
# the product targets: hundreds of families whose skill starts below tier 0, so a family
# must be practised a while before it shows (and gains) much, and a budget far too small to
# take every family there. As in the default, 20 % of the families are traps (5 % impossible,
# 5 % noise, 10 % mastered).
PRESETS: dict[str, dict[str, Any]] = {
    "default": {},
    "sparse": {"initial_tiers": (-1.5, -0.5)},
}


@dataclass(frozen=True)
class Setup:
    """Everything that defines one benchmark cell except the runner and the seed."""

    catalog_spec: str
    learner: dict[str, Any]
    steps: int
    batch_size: int
    probe_every: int
    scheduler: dict[str, Any]
    options: dict[str, dict[str, Any]]  # policy name -> options


@dataclass
class RunResult:
    runner: str
    seed: int
    final: float
    p10: float
    auc: float
    waste: float
    seconds: float
    curve_steps: list[int]
    curve: list[float]
    steps_to_uniform: int | None = None
    waste_by_kind: dict[str, float] = dataclasses.field(default_factory=dict)  # share of all


class Runner(Protocol):
    """One curriculum under test: draws batches, learns from outcomes, probes on schedule."""

    def next_batch(self, n: int) -> Batch: ...
    def report(self, batch: Batch, out: BatchOutcomes) -> None: ...
    def probe_round(self) -> None: ...


# --------------------------------------------------------------------------- our scheduler
class OurRunner:
    """The Scheduler driven exactly like ``SimulationRun``: report, then probe every family
    at its current tier every ``probe_every`` steps, again where a probe promoted it
    (placement), and one tier it has left (retention)."""

    def __init__(self, sched: Scheduler, learner: SimulatedLearner) -> None:
        self.sched = sched
        self.learner = learner

    def next_batch(self, n: int) -> Batch:
        return self.sched.next_batch(n)

    def report(self, batch: Batch, out: BatchOutcomes) -> None:
        self.sched.report(batch, out)

    def probe_round(self) -> None:
        self.sched.probe_round(self.learner.probe_many)


def batch_of(catalog: Catalog, step: int, arm: IntArray) -> Batch:
    """A Batch of these arms (variant 0: the simulated learner does not model variants),
    for the runners that draw arms without a Scheduler."""
    return Batch(
        step=step,
        arm=arm,
        family=catalog.family_of_arm[arm],
        tier=catalog.tier_of_arm[arm],
        variant=np.zeros(arm.shape[0], dtype=np.int64),
        catalog=catalog,
    )


# --------------------------------------------------------------------------- fixed mix
class _OpenLoopRunner:
    """A runner that draws arms from its own distribution and learns nothing from outcomes
    or probes (the fixed mix, the oracle). Subclasses give ``draw``."""

    def __init__(self, catalog: Catalog, seed: int) -> None:
        self.catalog = catalog
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.step = 0

    def draw(self, n: int) -> IntArray:
        raise NotImplementedError

    def next_batch(self, n: int) -> Batch:
        batch = batch_of(self.catalog, self.step, self.draw(n))
        self.step += 1
        return batch

    def report(self, batch: Batch, out: BatchOutcomes) -> None:
        return None

    def probe_round(self) -> None:
        return None


class FixedMixRunner(_OpenLoopRunner):
    """No curriculum: every arm (family x tier) equally likely, every step, whatever happens.

    This is the mix a team trains on without a scheduler (all tasks shuffled together), and
    the baseline of the issue's "2x uniform" target. The registered ``uniform`` policy is
    not this: it still runs the scheduler's tier controller, quotas and detectors."""

    def draw(self, n: int) -> IntArray:
        return self.rng.integers(0, self.catalog.n_arms, size=n).astype(np.int64)


# --------------------------------------------------------------------------- oracle
class OracleRunner(_OpenLoopRunner):
    """A myopic upper reference that reads the simulator's ground truth (no real scheduler
    can): each arm is weighted by the squared score it would add per episode now, i.e. the
    skill gain ``lr * 4 q (1 - q)`` (gated by the prerequisite) times the slope of the
    family's mean-over-tiers score in skill. It shows how much room the simulator leaves."""

    def __init__(self, catalog: Catalog, learner: SimulatedLearner, seed: int) -> None:
        from scipy.special import expit

        super().__init__(catalog, seed)
        self.expit = expit
        self.learner = learner
        scored = ~np.isin(learner.family_kind, [FamilyKind.IMPOSSIBLE, FamilyKind.NOISE])
        self.scored = scored.astype(np.float64)

    def draw(self, n: int) -> IntArray:
        cat, sim = self.catalog, self.learner
        k = sim.config.slope_k
        fam = cat.family_of_arm
        q = self.expit(k * (sim._skill[fam] - sim._difficulty))  # private: an oracle reads them
        slope = np.bincount(fam, weights=k * q * (1 - q), minlength=cat.n_families) / cat.n_tiers
        gate = np.ones(cat.n_families)
        if sim._has_prereq:
            gate = self.expit(k * (sim._skill[sim._prereq] - sim._threshold))
        value = sim._lr4[fam] * q * (1 - q) * (gate * slope * self.scored)[fam]
        weight = value**2
        total = weight.sum()
        p = weight / total if total > 0 else np.full(cat.n_arms, 1.0 / cat.n_arms)
        arm: IntArray = self.rng.choice(cat.n_arms, size=n, p=p).astype(np.int64)
        return arm


# --------------------------------------------------------------------------- Syllabus
class SyllabusRunner:
    """A Syllabus curriculum over task = arm, updated through its public API."""

    def __init__(
        self, name: str, catalog: Catalog, learner: SimulatedLearner, seed: int, setup: Setup
    ) -> None:
        import torch
        from syllabus.core.evaluator import Evaluator  # type: ignore[import-not-found,unused-ignore]
        from syllabus.curricula import (  # type: ignore[import-not-found,unused-ignore]
            CentralPrioritizedLevelReplay,
            DomainRandomization,
            Learnability,
            LearningProgress,
        )
        from syllabus.task_space import DiscreteTaskSpace  # type: ignore[import-not-found,unused-ignore]

        np.random.seed(seed)  # noqa: NPY002 (Syllabus draws from numpy's global RNG)
        torch.manual_seed(seed)
        self.name = name
        self.catalog = catalog
        self.learner = learner
        self.step = 0
        n_tasks = catalog.n_arms
        space = DiscreteTaskSpace(n_tasks)
        every = setup.probe_every * setup.batch_size  # episodes between evaluations
        fam, tier = catalog.family_of_arm, catalog.tier_of_arm

        class ProbeEvaluator(Evaluator):  # type: ignore[misc]
            """Answers Syllabus's evaluation with a held-out probe of every task (arm).

            LearningProgress calls ``.numpy()`` on the rates (torch tensors, as Syllabus's
            own evaluators return); Learnability indexes them as numpy arrays.
            """

            as_numpy = False

            def evaluate_agent(
                self, num_episodes: int = 1, verbose: bool = False, store_all: bool = False
            ) -> tuple[Any, Any, Any, dict[str, Any]]:
                scores, _ = learner.probe_many(fam, tier)
                if self.as_numpy:
                    return np.zeros(1), scores, scores.copy(), {}
                rates = torch.as_tensor(scores, dtype=torch.float64)
                return torch.zeros(1), rates, rates.clone(), {}

        def listed(cls: type[Any]) -> type[Any]:
            # Syllabus 0.7's Curriculum.sample tests ``task_dist != []``, which raises on an
            # ndarray (numpy >= 1.25); the same distribution handed over as a list works.
            class Listed(cls):  # type: ignore[misc]
                def _sample_distribution(self) -> list[float]:
                    return list(super()._sample_distribution())

            Listed.__name__ = cls.__name__
            return Listed

        LearningProgress, Learnability = listed(LearningProgress), listed(Learnability)
        self.per_episode = name in ("LearningProgress", "Learnability", "DomainRandomization")
        self.value: FloatArray = np.zeros(n_tasks)  # tabular critic for PLR
        if name == "DomainRandomization":
            self.curriculum: Any = DomainRandomization(space)
        elif name == "LearningProgress":
            evaluator = ProbeEvaluator(None, copy_agent=False, task_space=space)
            self.curriculum = LearningProgress(evaluator, space, eval_interval=every)
        elif name == "Learnability":
            # topk defaults to 1000, which on ~1,000 tasks is uniform; keep the top tenth.
            evaluator = ProbeEvaluator(None, copy_agent=False, task_space=space)
            evaluator.as_numpy = True
            self.curriculum = Learnability(
                evaluator, space, eval_interval=every, topk=max(1, n_tasks // 10)
            )
        elif name == "PrioritizedLevelReplay":
            # replay_schedule "fixed" with rho = 1: try every task once, then always replay
            # (the "proportionate" default needs a Robust-PLR evaluator once all are seen).
            self.curriculum = CentralPrioritizedLevelReplay(
                space,
                num_steps=4,
                num_processes=setup.batch_size,
                gamma=0.999,
                gae_lambda=0.95,
                task_sampler_kwargs_dict={"strategy": "value_l1", "replay_schedule": "fixed"},
            )
        else:
            raise BenchError(f"--syllabus-curricula: unknown curriculum {name!r}; known {SYLLABUS}")

    def next_batch(self, n: int) -> Batch:
        arm = np.asarray(self.curriculum.sample(k=n), dtype=np.int64).reshape(-1)[:n]
        if arm.shape[0] < n:  # startup sampling hands out one task per call
            more = [int(self.curriculum.sample(k=1)[0]) for _ in range(n - arm.shape[0])]
            arm = np.concatenate([arm, np.asarray(more, dtype=np.int64)])
        cat = self.catalog
        batch = batch_of(cat, self.step, arm)
        self.step += 1
        return batch

    def report(self, batch: Batch, out: BatchOutcomes) -> None:
        arms = batch.arm.tolist()
        if self.per_episode:
            for task, ret, success in zip(
                arms, out.reward.tolist(), out.success.tolist(), strict=True
            ):
                self.curriculum.update_task_progress(task, success)
                self.curriculum.update_on_episode(ret, 1, task, success)
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
        # Tabular critic: per-arm EMA (rate 0.1 per batch) of the success seen this batch.
        counts = np.bincount(batch.arm, minlength=self.catalog.n_arms)
        sums = np.bincount(batch.arm, weights=out.success, minlength=self.catalog.n_arms)
        seen = counts > 0
        self.value[seen] += 0.1 * (sums[seen] / counts[seen] - self.value[seen])

    def probe_round(self) -> None:
        return None  # LearningProgress and Learnability evaluate through their Evaluator


# --------------------------------------------------------------------------- driver
def make_catalog(spec: str) -> Catalog:
    if spec == "repo":
        return load_catalog("configs/domains")
    if spec.startswith("synthetic:"):
        try:
            d, f, t = (int(x) for x in spec.removeprefix("synthetic:").split("x"))
        except ValueError:
            raise BenchError(
                f"--families {spec!r}: expected synthetic:DOMAINSxFAMILIESxTIERS, "
                "e.g. synthetic:30x10x4"
            ) from None
        return Catalog.synthetic(n_domains=d, families_per_domain=f, n_tiers=t)
    raise BenchError(f"--families {spec!r}: expected 'repo' or synthetic:DxFxT")


def scheduler_config(values: dict[str, Any]) -> SchedulerConfig:
    """A SchedulerConfig from dotted ``--scheduler`` assignments (``tiers.promote_at=0.6``,
    ``detectors.unlearnable.min_probes=8``), validated by the project's own Settings."""
    nested: dict[str, Any] = {}
    for key, value in values.items():
        *parents, leaf = key.split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    try:
        return Settings(**nested).scheduler_config()
    except (CurriculumError, ValidationError) as exc:
        raise BenchError(f"--scheduler: {exc}") from None


def learner_config(values: dict[str, Any]) -> SimulatedLearnerConfig:
    known = {f.name for f in dataclasses.fields(SimulatedLearnerConfig)}
    for key in sorted(set(values) - known):
        raise BenchError(f"--learner {key}: unknown field; known: {sorted(known)}")
    fixed: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    config = SimulatedLearnerConfig(**fixed)
    config.validate()
    return config


def run_one(runner_name: str, seed: int, setup: Setup) -> RunResult:
    """Train one learner with one runner on one seed and measure it against ground truth."""
    catalog = make_catalog(setup.catalog_spec)
    learner = SimulatedLearner(catalog, seed=seed, config=learner_config(setup.learner))
    runner: Runner
    if runner_name == "oracle":
        runner = OracleRunner(catalog, learner, seed)
    elif runner_name == FIXED_MIX:
        runner = FixedMixRunner(catalog, seed)
    elif runner_name.startswith("syllabus:"):
        name = runner_name.removeprefix("syllabus:")
        runner = SyllabusRunner(name, catalog, learner, seed, setup)
    else:
        sched = Scheduler(
            catalog,
            runner_name,
            seed=seed,
            config=scheduler_config(setup.scheduler),
            **setup.options.get(runner_name, {}),
        )
        runner = OurRunner(sched, learner)
    scored = ~np.isin(learner.family_kind, [FamilyKind.IMPOSSIBLE, FamilyKind.NOISE])
    curve_steps = [0]
    curve = [float(learner.true_score()[scored].mean())]
    episodes = wasted = 0
    wasted_kind = np.zeros(len(FamilyKind))
    start = time.perf_counter()
    runner.probe_round()  # a baseline evaluation before training, as a real run starts
    for step in range(1, setup.steps + 1):
        batch = runner.next_batch(setup.batch_size)
        out = learner.run(batch)
        runner.report(batch, out)
        episodes += len(batch)
        useless = learner.wasted(batch.family, batch.tier)
        wasted += int(useless.sum())
        kind = learner.family_kind[batch.family[useless]]
        wasted_kind += np.bincount(kind, minlength=len(FamilyKind))
        if step % setup.probe_every == 0 or step == setup.steps:
            runner.probe_round()
            curve_steps.append(step)
            curve.append(float(learner.true_score()[scored].mean()))
    seconds = time.perf_counter() - start
    score = learner.true_score()[scored]
    return RunResult(
        runner=runner_name,
        seed=seed,
        final=float(score.mean()),
        p10=float(np.percentile(score, 10)),
        auc=float(np.mean(curve)),
        waste=wasted / max(episodes, 1),
        seconds=seconds,
        curve_steps=curve_steps,
        curve=curve,
        waste_by_kind={
            k.name.lower(): float(wasted_kind[k] / max(episodes, 1))
            for k in FamilyKind
            if wasted_kind[k] > 0
        },
    )


def _run_task(task: tuple[str, int, Setup]) -> RunResult:
    return run_one(*task)


def run_all(
    runners: Sequence[str], seeds: Sequence[int], setup: Setup, jobs: int = 1
) -> list[RunResult]:
    """Every runner on every seed; fills ``steps_to_uniform`` from the fixed mix's final
    score (``uniform_arms``, or the ``uniform`` policy's when the fixed mix did not run)."""
    tasks = [(r, s, setup) for r in runners for s in seeds]
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(_run_task, tasks))
    else:
        results = []
        for task in tasks:
            results.append(_run_task(task))
            r = results[-1]
            log.info("%-32s seed %d: final %.3f (%.1f s)", r.runner, r.seed, r.final, r.seconds)
    reference = FIXED_MIX if any(r.runner == FIXED_MIX for r in results) else "uniform"
    uniform = {r.seed: r.final for r in results if r.runner == reference}
    for r in results:
        if r.seed in uniform:
            r.steps_to_uniform = steps_to(r.curve_steps, r.curve, uniform[r.seed])
    return results


def table(results: Sequence[RunResult], steps: int) -> str:
    order = list(dict.fromkeys(r.runner for r in results))
    reference = FIXED_MIX if FIXED_MIX in order else "uniform"
    base = {r.seed: r.final for r in results if r.runner == reference}
    rows = []
    for name in order:
        mine = [r for r in results if r.runner == name]

        def stat(get: Callable[[RunResult], float | None], rs: list[RunResult] = mine) -> Stat:
            return Stat.of_values([get(r) for r in rs])

        reach = stat(lambda r: r.steps_to_uniform)
        reach_text = reach.fmt(integer=True) if reach.n else f"> {steps:,}"
        rows.append(
            [
                name,
                stat(lambda r: r.final).fmt(),
                stat(lambda r: r.final / base[r.seed] if base.get(r.seed) else None).fmt(2),
                stat(lambda r: r.auc).fmt(),
                reach_text,
                stat(lambda r: r.p10).fmt(),
                stat(lambda r: 100.0 * r.waste).fmt(1),
                stat(lambda r: r.seconds).fmt(1),
            ]
        )
    header = [
        "runner",
        "final score",
        f"× {reference}",
        "AUC",
        f"steps to {reference}'s final",
        "p10 across families",
        "waste %",
        "seconds/run",
    ]
    return markdown_table(header, rows)


def _syllabus_available() -> bool:
    try:
        import syllabus.curricula  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds (0..N-1)")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--probe-every", type=int, default=25)
    parser.add_argument(
        "--families",
        default="repo",
        help="'repo' (configs/domains: 304 families, 1,040 arms) or synthetic:DxFxT",
    )
    parser.add_argument("--preset", choices=sorted(PRESETS), default="sparse")
    parser.add_argument("--learner", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--scheduler", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--option", action="append", default=[], metavar="POLICY.FIELD=VALUE")
    parser.add_argument(
        "--policies", nargs="*", default=None, help="default: every registered policy"
    )
    parser.add_argument("--syllabus", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--syllabus-curricula", nargs="*", default=list(SYLLABUS))
    parser.add_argument(
        "--oracle",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="add the ground-truth reference runner",
    )
    parser.add_argument("--jobs", type=int, default=1, help="processes (the runs are serial)")
    parser.add_argument("--out", type=Path, help="write every run's results as JSON")
    parser.add_argument(
        "--render",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="print the table of saved runs (several files are merged; later ones win)",
    )
    parser.add_argument("--markdown", action="store_true", help="print the markdown table")
    parser.add_argument("-v", "--verbose", action="store_true")
    return run_main(_main, parser.parse_args(argv), log)


def _main(args: argparse.Namespace) -> int:
    if args.render:
        merged: dict[tuple[str, int], RunResult] = {}
        for path in args.render:
            for raw in json.loads(path.read_text())["runs"]:
                run = RunResult(**raw)
                merged[(run.runner, run.seed)] = run
        print(table(list(merged.values()), args.steps))
        return 0
    if args.seeds < 1 or args.steps < 1 or args.batch_size < 1 or args.probe_every < 1:
        raise BenchError("--seeds, --steps, --batch-size and --probe-every must be >= 1")
    known = available_policies()
    options = policy_options(args.option, known)
    policies = list(args.policies) if args.policies else known
    unknown = sorted(set(policies) - set(known))
    if unknown:
        raise BenchError(f"--policies: unknown {unknown}; registered: {known}")
    skipped: list[str] = []
    for name in list(policies):  # a policy that cannot run on its defaults needs --option
        try:
            make_policy(name, **options.get(name, {}))
        except CurriculumError as exc:
            policies.remove(name)
            skipped.append(f"{name} ({exc})")
            log.warning("skipped %s: %s", name, exc)
    if "uniform" not in policies:
        policies.insert(0, "uniform")  # the reference for "steps to uniform's final"
    policies.sort(key=lambda p: p != "uniform")
    use_syllabus = args.syllabus
    if use_syllabus is None:
        use_syllabus = _syllabus_available()
        if not use_syllabus:
            log.warning("syllabus-rl is not installed: Syllabus curricula skipped (README)")
    elif use_syllabus and not _syllabus_available():
        raise BenchError(
            "--syllabus: syllabus-rl is not importable; run with .venv-bench/bin/python "
            "(bench/README.md) or pass --no-syllabus"
        )
    runners = (
        [FIXED_MIX]
        + policies
        + (["oracle"] if args.oracle else [])
        + ([f"syllabus:{c}" for c in args.syllabus_curricula] if use_syllabus else [])
    )
    learner = {**PRESETS[args.preset], **parse_assignments("--learner", args.learner)}
    setup = Setup(
        catalog_spec=args.families,
        learner=learner,
        steps=args.steps,
        batch_size=args.batch_size,
        probe_every=args.probe_every,
        scheduler=parse_assignments("--scheduler", args.scheduler),
        options=options,
    )
    learner_config(setup.learner)  # fail fast on a bad field
    scheduler_config(setup.scheduler)
    make_catalog(setup.catalog_spec)
    start = time.perf_counter()
    results = run_all(runners, range(args.seeds), setup, jobs=args.jobs)
    elapsed = time.perf_counter() - start
    emit(
        table(results, args.steps),
        out=args.out,
        markdown=args.markdown,
        setup=setup,
        results=results,
        elapsed=elapsed,
        skipped=skipped,
    )
    for note in skipped:
        print(f"\nskipped: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
