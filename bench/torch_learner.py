"""A real learner: small torch MLPs trained on many synthetic task families with tiers.

Families (binary labels on ``n_bits`` random bits; each family has its own random support,
an ordered subset of the bits, and tier ``t`` reads the first bits of it):

* ``parity``: label = XOR of the first ``t + 1`` support bits (tier 3 is a 4-sparse parity,
  which SGD finds far more easily after the lower orders: the support is shared);
* ``majority``: label = majority of the first ``2 t + 1`` support bits;
* ``noise``: a random label on every example (nothing to learn; a coin flip to a pass-rate
  scorer);
* ``copy``: label = the first support bit at every tier (mastered within a few steps).

Two suites, the same families. By default the tiers are separate rules: tier ``t`` reads the
first support bits and the model gets the tier as an input, so a family's tiers are
different functions of the bits that one network must hold at once (parity tier 0 is one
bit, tier 3 the XOR of four). ``--suite nested=true``: every tier is the top tier's rule over
the whole support, on inputs whose support bits past tier ``t``'s are pinned (alternately 1
and 0), i.e. a sub-case of the top tier's task with ``t + 1`` (parity) or ``2 t + 1``
(majority) free bits, as 2-digit sums are of 4-digit ones; the model gets no tier input,
and a model that masters the top tier masters every tier. The score averages all tiers in
both, so with separate rules it also measures how well the tiers a curriculum has moved
past are retained.

The regime is sample-limited, as RL post-training is: every step has a fixed budget of
``batch_size`` episodes shared by all families, and a family learns in proportion to the
episodes it gets. Two choices make that hold (``--check-share`` measures it):

* the learner is one small MLP per family (±1 bits and a one-hot tier, none with nested
  tiers -> ``hidden`` ReLU units -> 2 logits), batched as one module; no parameter is
  shared between families, so a family learns from its own examples only (a shared trunk
  lets families learn from each other's examples, which blurs the premise);
* plain SGD with momentum on the mean loss of the batch: the gradient reaching a family's
  parameters is proportional to its share of the batch. (Adam normalises every parameter's
  step, so a family's learning speed hardly depends on its share: the run is then
  step-limited and no reallocation of the batch can help.)

Each step draws ``batch_size`` (family, tier) arms, one fresh example each; the model's
prediction *before* the update is the episode's outcome (on-policy: success = correct,
process = the probability it gave the right label), then one optimizer step trains on the
batch. Runners, all on the same seeds (same initial weights, same held-out sets):

* ``uniform_arms``: no curriculum, the fixed mix: every (family, tier) arm equally likely,
  drawn here with numpy (no Scheduler). The baseline of the target.
* ``ladder`` and ``ladder_probe`` (``--baselines``, both by default): the simple baselines
  of ``bench/quality.py`` (``bench/_runners.py``): family-uniform draws on a tier ladder
  (promote at a pass rate over 0.8 over the last 8 episodes at the tier, demote under 0.2),
  and the same ladder drawing a family 10x less once its top-tier held-out accuracy reads
  >= 0.9 (every family's top tier, every ``probe_every`` steps, from the same held-out items
  the scheduler's probes read). Raw pass rates, as the issue defined them: at chance 0.5 a
  rate over 0.8 is 0.6 of the way from chance to perfect.
* ``syllabus:Learnability``, ``syllabus:LearningProgress``,
  ``syllabus:PrioritizedLevelReplay`` (``--syllabus``; syllabus-rl in the bench venv):
  Syllabus's curricula over task = arm, their evaluator reading every arm's held-out
  accuracy every ``probe_every`` steps.
* ``uniform``: the registered ``uniform`` policy through the Scheduler (uniform family
  weights; the skill model moves the tiers). It is the default's policy, so the two rows
  read the same: the pair checks that ``Scheduler(catalog)`` ships it.
* ``default``: ``Scheduler(catalog, seed=seed, config=SchedulerConfig())`` with no policy
  argument, i.e. whatever policy the scheduler ships as its default.
* any registered policy named with ``--policies``.

Scheduler runners get, every ``probe_every`` steps, one ``Scheduler.probe_round``: a
held-out accuracy of every family at the tier ``probe_targets`` asks for (``--probe top``:
every family's top tier instead, ``all``: every arm, ``none``: no probe at all). Success is
normalised by the chance level (0.5): the catalog declares it and the scheduler rescales
by it.

The score is ground truth no runner sees: the chance-normalised held-out accuracy
``clip((acc - 0.5) / 0.5, 0, 1)`` of every learnable (parity, majority) family, averaged over
all its tiers and then over families. The target, 0.9 by default (held-out accuracy about
95 % on every tier), was fixed before any curriculum was compared, from the learner alone
on the fixed mix; the table reports the steps to it and to two lower marks (0.7, 0.8), read
off the same curves. The nested suite was added after the first comparison (separate rules)
had shown the scheduler's runners losing the tiers they move past; its target was left at
0.9.

    .venv/bin/python bench/torch_learner.py --seeds 3 --markdown
    .venv/bin/python bench/torch_learner.py --seeds 3 --markdown --suite nested=true
    .venv/bin/python bench/torch_learner.py --check-share --seeds 3 --markdown
    .venv-bench/bin/python bench/torch_learner.py --seeds 16 --max-steps 3000 --jobs 2 \\
        --suite nested=true --syllabus --markdown        # every baseline beside ours

The table: steps to each mark (mean ± sd over seeds; ``(×r)``: the ratio of the means to
``uniform_arms``'s, shown when every seed of both reached it), the same ratio to the
``uniform`` runner at the target, the score when the run stopped, the waste share, the share
of episodes per kind, and seconds per run.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from _common import (
    BenchError,
    Stat,
    emit,
    markdown_table,
    parse_assignments,
    policy_options,
    run_all,
    run_main,
    set_constants,
    steps_to,
)
from _runners import SYLLABUS, LadderRunner, Readings, Runner, SyllabusRunner
from torch import nn

from domains import Catalog, CurriculumError
from policies import available_policies, make_policy
from scheduler import Batch, Scheduler, SchedulerConfig, Status
from scheduler.backends import BatchOutcomes

log = logging.getLogger("bench.torch_learner")

KINDS = ("parity", "majority", "noise", "copy")
LEARNABLE = (0, 1)
BASELINE = "uniform_arms"  # the fixed mix, no Scheduler
DEFAULT = "default"  # Scheduler(...) with no policy argument
# the simple baselines of bench/quality.py, open loop (no Scheduler): the plain tier ladder,
# the same ladder reading a top-tier probe, and Syllabus's curricula (bench venv only)
LADDERS = {"ladder": False, "ladder_probe": True}
SYLLABUS_RUNNERS = tuple(f"syllabus:{name}" for name in SYLLABUS)
MASTERED = 0.95  # held-out accuracy at which an arm counts as mastered (waste)
# what the evaluator probes (--probe): the tiers the scheduler asks for, every family's top
# tier, every tier, or nothing (ladder_probe reads the top tier unless "none"; Syllabus's
# evaluators read every arm whatever this says, as in bench/quality.py)
PROBES = ("asked", "top", "all", "none")


@dataclass(frozen=True)
class SuiteConfig:
    """The task families. Shares are counts per kind; every family has ``n_tiers`` tiers."""

    n_bits: int = 12
    parity: int = 16
    majority: int = 16
    noise: int = 16
    copy: int = 16
    n_tiers: int = 4
    # False: tier t is its own rule over the first support bits (the tier is an input, and
    # the rules of different tiers are different functions of the bits). True: every tier is
    # the top tier's rule over the whole support, on inputs whose support bits past the
    # first ones of tier t are pinned: a sub-case of the top tier's task, as 2-digit sums are
    # of 4-digit ones (no tier input; a model that masters the top tier masters them all).
    nested: bool = False
    # True: the scheduler's catalog declares every (family, tier) as a family of one tier,
    # as docs/manifests.md advises for tiers that are separate skills (the learner and the
    # score are unchanged; only the scheduler's view of the tasks differs).
    arms_as_families: bool = False
    # How the catalog declares the tiers to the scheduler (the manifest's tier_mode):
    # "auto" is "separate" for separate rules and "ladder" for nested tiers; "ladder" with
    # separate rules is the ablation (one current tier, left tiers kept by review draws).
    tier_mode: str = "auto"

    def declared_tier_mode(self) -> str:
        if self.tier_mode not in ("auto", "ladder", "separate"):
            raise ValueError(f"tier_mode must be auto, ladder or separate, got {self.tier_mode!r}")
        if self.tier_mode != "auto":
            return self.tier_mode
        return "ladder" if self.nested else "separate"


class TaskSuite:
    """Family kinds and supports, and vectorised labelling of (bits, family, tier)."""

    def __init__(self, config: SuiteConfig, seed: int) -> None:
        self.config = config
        counts = [config.parity, config.majority, config.noise, config.copy]
        self.kind = torch.repeat_interleave(torch.arange(4), torch.tensor(counts))  # [F]
        n_fam = int(self.kind.shape[0])
        gen = torch.Generator().manual_seed(10_000 + seed)
        width = max(2 * config.n_tiers - 1, config.n_tiers)
        if width > config.n_bits:
            raise BenchError(f"--suite n_bits: need at least {width} bits for the top tier")
        support = torch.stack([torch.randperm(config.n_bits, generator=gen) for _ in range(n_fam)])
        tiers = torch.arange(config.n_tiers)
        # bits read at each tier: parity t + 1, majority 2 t + 1, copy 1, noise 0
        reads = torch.stack(
            [tiers + 1, 2 * tiers + 1, torch.zeros_like(tiers), torch.ones_like(tiers)]
        )[self.kind]  # [F, T]
        rank = torch.empty_like(support)
        rank.scatter_(1, support, torch.arange(config.n_bits).expand(n_fam, -1))
        # mask[f, t, b] = 1 when bit b is among the first reads[f, t] support bits of f
        self.mask = (rank[:, None, :] < reads[:, :, None]).float()  # [F, T, n_bits]
        self.reads = reads
        # nested: the label reads the top tier's bits; the support bits between tier t's and
        # the top tier's are pinned alternately to 1 and 0 (an even number of them for a
        # majority, so half are 1: the vote is decided by the free bits)
        self.pinned = torch.zeros_like(self.mask)
        self.pin_value = torch.zeros_like(self.mask)
        self.label_mask, self.label_reads = self.mask, reads
        if config.nested:
            top = reads[:, -1:]  # [F, 1]
            r = rank[:, None, :]
            self.pinned = ((r >= reads[:, :, None]) & (r < top[:, :, None])).float()
            self.pin_value = self.pinned * ((r - reads[:, :, None]) % 2 == 0).float()
            self.label_mask = self.mask[:, -1:, :].expand_as(self.mask)
            self.label_reads = top.expand_as(reads)
        self.names = tuple(f"{KINDS[int(k)]}_{i}" for i, k in enumerate(self.kind.tolist()))

    @property
    def n_families(self) -> int:
        return int(self.kind.shape[0])

    def sample(
        self, family: torch.Tensor, tier: torch.Tensor, gen: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Fresh examples: bits in {0, 1} [n, n_bits] and labels [n]."""
        n = int(family.shape[0])
        x = torch.randint(0, 2, (n, self.config.n_bits), generator=gen).float()
        x = x * (1.0 - self.pinned[family, tier]) + self.pin_value[family, tier]
        hits = (x * self.label_mask[family, tier]).sum(1)
        kind = self.kind[family]
        parity = hits.remainder(2)
        majority = (hits > self.label_reads[family, tier] / 2).float()
        noise = torch.randint(0, 2, (n,), generator=gen).float()
        y = torch.where(kind == 0, parity, torch.where(kind == 1, majority, hits))
        y = torch.where(kind == 2, noise, y)
        return x, y.long()


class FamilyMLP(nn.Module):
    """One MLP per family, batched: ±1 bits and a one-hot tier -> ``hidden`` ReLU -> 2 logits.

    No parameter is shared between families, so a family learns only from its own examples.
    ``n_tiers=0``: no tier input (nested tiers, where the rule does not depend on the tier).
    """

    def __init__(self, n_bits: int, n_families: int, n_tiers: int, hidden: int) -> None:
        super().__init__()
        n_in = n_bits + n_tiers
        self.n_tiers = n_tiers
        self.w1 = nn.Parameter(torch.randn(n_families, n_in, hidden) / n_in**0.5)
        self.b1 = nn.Parameter(torch.zeros(n_families, 1, hidden))
        self.w2 = nn.Parameter(torch.randn(n_families, hidden, 2) / hidden**0.5)
        self.b2 = nn.Parameter(torch.zeros(n_families, 1, 2))

    def _inputs(self, x: torch.Tensor, tier: torch.Tensor) -> torch.Tensor:
        if not self.n_tiers:
            return 2.0 * x - 1.0
        one_hot = nn.functional.one_hot(tier, self.n_tiers).float()
        return torch.cat([2.0 * x - 1.0, one_hot], dim=-1)

    def forward(self, x: torch.Tensor, family: torch.Tensor, tier: torch.Tensor) -> torch.Tensor:
        """Logits [n, 2] of examples x [n, n_bits] of the given families and tiers [n]."""
        inp = self._inputs(x, tier)[:, None, :]  # [n, 1, n_in]
        h = torch.relu(torch.bmm(inp, self.w1[family]) + self.b1[family])
        out: torch.Tensor = (torch.bmm(h, self.w2[family]) + self.b2[family])[:, 0]
        return out

    def grouped(self, x: torch.Tensor, tier: torch.Tensor) -> torch.Tensor:
        """Logits [F, m, 2] of m examples of every family: x [F, m, n_bits], tier [F, m]."""
        h = torch.relu(torch.bmm(self._inputs(x, tier), self.w1) + self.b1)
        out: torch.Tensor = torch.bmm(h, self.w2) + self.b2
        return out


def make_catalog(suite: TaskSuite) -> Catalog:
    """One domain per kind, ``n_tiers`` tiers per family, chance level 0.5 (or, with
    ``arms_as_families``, one family of one tier per (family, tier))."""
    cfg = suite.config
    split = cfg.arms_as_families
    n_tiers = 1 if split else cfg.n_tiers
    repeat = cfg.n_tiers if split else 1
    names = (
        tuple(f"{name}.t{t}" for name in suite.names for t in range(cfg.n_tiers))
        if split
        else suite.names
    )
    base = Catalog.synthetic(
        n_domains=1,
        families_per_domain=suite.n_families * repeat,
        n_tiers=n_tiers,
        pool_size=1_000_000,
        chance_success=0.5,
        tier_mode="ladder" if split else cfg.declared_tier_mode(),
    )
    return dataclasses.replace(
        base,
        domain_names=KINDS,
        family_names=names,
        domain_of_family=np.repeat(suite.kind.numpy().astype(np.int64), repeat),
        domain_min_share=np.zeros(4),
        domain_max_share=np.ones(4),
        domain_priority=np.ones(4),
    )


@dataclass(frozen=True)
class Setup:
    suite: SuiteConfig
    batch_size: int
    max_steps: int
    probe_every: int
    eval_every: int
    probe_items: int
    eval_items: int
    target: float
    hidden: int
    optimizer: str
    lr: float
    momentum: float
    scheduler: dict[str, Any]
    options: dict[str, dict[str, Any]]
    probe: str = "asked"  # what the evaluator probes every probe_every steps (PROBES)
    without: tuple[str, ...] = ()  # mechanisms of the default switched off (quality.py's)


@dataclass
class RunResult:
    policy: str  # the runner: uniform_arms, default, or a registered policy
    seed: int
    steps_to_target: int | None
    final: float  # score when the run stopped (at the target or at max_steps)
    waste: float  # share of episodes on noise families or arms already >= 95 % accurate
    seconds: float
    curve_steps: list[int]
    curve: list[float]
    kind_share: list[float] = field(default_factory=list)  # episodes per kind (KINDS order)
    final_accuracy: list[list[float]] = field(default_factory=list)  # [kind][tier] at stop
    final_tiers: list[float] = field(default_factory=list)  # mean scheduler tier per kind
    # families of each kind held back when the run stopped (idle or suspected of hacking:
    # a learnable one is a false verdict); empty for the fixed mix
    held_back: list[int] = field(default_factory=list)


class Learner:
    """The model, its optimizer, the example stream and the fixed held-out sets of one seed."""

    def __init__(self, setup: Setup, seed: int) -> None:
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        self.setup = setup
        self.suite = TaskSuite(setup.suite, seed)
        self.n_fam, self.n_tiers = self.suite.n_families, setup.suite.n_tiers
        tier_input = 0 if setup.suite.nested else self.n_tiers
        self.model = FamilyMLP(setup.suite.n_bits, self.n_fam, tier_input, setup.hidden)
        params = list(self.model.parameters())
        self.opt: torch.optim.Optimizer
        if setup.optimizer == "sgd":
            self.opt = torch.optim.SGD(params, lr=setup.lr, momentum=setup.momentum)
        else:
            self.opt = torch.optim.Adam(params, lr=setup.lr)
        self.gen = torch.Generator().manual_seed(seed)
        self.probe_x, self.probe_y = self._fixed(setup.probe_items, 20_000 + seed)
        self.test_x, self.test_y = self._fixed(setup.eval_items, 30_000 + seed)
        self.learnable = torch.isin(self.suite.kind, torch.tensor(LEARNABLE))

    def _fixed(self, items: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Held-out bits [F, T, items, n_bits] and labels [F, T, items] of every arm."""
        n_fam, n_tiers = self.n_fam, self.n_tiers
        fam = torch.arange(n_fam).repeat_interleave(n_tiers * items)
        tier = torch.arange(n_tiers).repeat_interleave(items).repeat(n_fam)
        x, y = self.suite.sample(fam, tier, torch.Generator().manual_seed(seed))
        return x.view(n_fam, n_tiers, items, -1), y.view(n_fam, n_tiers, items)

    def train(self, family: torch.Tensor, tier: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """One fresh example per arm, outcome before the update, then one optimizer step."""
        x, y = self.suite.sample(family, tier, self.gen)
        logits = self.model(x, family, tier)
        with torch.no_grad():
            prob = logits.softmax(1)
            success = (prob.argmax(1) == y).double().numpy()
            process = prob.gather(1, y[:, None])[:, 0].double().numpy()
        loss = nn.functional.cross_entropy(logits, y)  # the mean over the batch
        self.opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        self.opt.step()
        return success, process

    def accuracy(self) -> torch.Tensor:
        """Held-out accuracy [F, T] of every arm (ground truth, never shown to a runner)."""
        items = self.setup.eval_items
        x = self.test_x.view(self.n_fam, self.n_tiers * items, -1)
        tier = torch.arange(self.n_tiers).repeat_interleave(items).expand(self.n_fam, -1)
        with torch.no_grad():
            hit = (
                self.model.grouped(x, tier).argmax(2) == self.test_y.view(self.n_fam, -1)
            ).float()
        return hit.view(self.n_fam, self.n_tiers, items).mean(2)

    def probe(self, tiers: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Held-out accuracy of every family at the given tier (the scheduler's probes)."""
        rows, t = torch.arange(self.n_fam), torch.from_numpy(tiers)
        x, y = self.probe_x[rows, t], self.probe_y[rows, t]  # [F, m, n_bits], [F, m]
        with torch.no_grad():
            hit = (self.model.grouped(x, t[:, None].expand_as(y)).argmax(2) == y).double()
        result: npt.NDArray[np.float64] = hit.mean(1).numpy()
        return result

    def probe_all(self) -> npt.NDArray[np.float64]:
        """Held-out accuracy of every arm, flattened family-major [F * T] (the scheduler's
        probes when every arm is a family of its own)."""
        items = self.setup.probe_items
        x = self.probe_x.view(self.n_fam, self.n_tiers * items, -1)
        tier = torch.arange(self.n_tiers).repeat_interleave(items).expand(self.n_fam, -1)
        with torch.no_grad():
            hit = self.model.grouped(x, tier).argmax(2) == self.probe_y.view(self.n_fam, -1)
        result: npt.NDArray[np.float64] = (
            hit.double().view(self.n_fam, self.n_tiers, items).mean(2).reshape(-1).numpy()
        )
        return result

    def family_score(self, acc: torch.Tensor) -> torch.Tensor:
        """Chance-normalised accuracy [F] of every family, mean over its tiers."""
        return ((acc - 0.5) / 0.5).clamp(0.0, 1.0).mean(1)

    def score(self, acc: torch.Tensor) -> float:
        return float(self.family_score(acc)[self.learnable].mean())


def _make_scheduler(runner: str, catalog: Catalog, seed: int, setup: Setup) -> Scheduler:
    config = _scheduler_config(setup.scheduler) if setup.scheduler else SchedulerConfig()
    if runner == DEFAULT:  # whatever policy the scheduler ships as its default
        sched = Scheduler(catalog, seed=seed, config=config)
        for mechanism in setup.without:
            switch_off(sched, mechanism)
        return sched
    return Scheduler(catalog, runner, seed=seed, config=config, **setup.options.get(runner, {}))


def _probe_scheduler(sched: Scheduler, table: npt.NDArray[np.float64], setup: Setup) -> None:
    """The evaluator's readings of the held-out accuracy ``table`` [F, T] of every arm, as
    ``setup.probe`` says: the tiers the scheduler asks for (its ``probe_round``), every
    family's top tier, every tier, or nothing."""
    if setup.probe == "asked":
        _probe_round(sched, table, setup)
        return
    cat = sched.catalog
    if setup.probe == "top":
        families, tiers = _top_arms(cat)
    elif setup.probe == "all":
        families, tiers = cat.family_of_arm, cat.tier_of_arm
    else:
        return
    n = np.full(families.shape[0], setup.probe_items)
    sched.record_probes(families, table[families, tiers], tiers=tiers, n=n)


def _probe_round(sched: Scheduler, table: npt.NDArray[np.float64], setup: Setup) -> None:
    """One ``Scheduler.probe_round`` read off the held-out accuracy ``table`` [F, T] of every
    arm (the model does not change within a round, so one forward pass serves it all)."""

    def probe(
        families: npt.NDArray[np.int64], tiers: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
        return table[families, tiers], np.full(families.size, setup.probe_items)

    sched.probe_round(probe)


class _HeldOut:
    """The learner's held-out accuracy of any arms, as a Syllabus evaluator asks for it
    (``probe(families, tiers, n)`` of bench/_students.py): fresh from the model each call."""

    def __init__(self, learner: Learner, catalog: Catalog) -> None:
        self.learner, self.catalog = learner, catalog

    def probe(
        self, families: npt.NDArray[np.int64], tiers: npt.NDArray[np.int64], n: int
    ) -> npt.NDArray[np.float64]:
        result: npt.NDArray[np.float64] = self.learner.probe_all()[
            self.catalog.arm_start[families] + tiers
        ]
        return result


def _open_loop(runner: str, learner: Learner, catalog: Catalog, seed: int, setup: Setup) -> Runner:
    """A simple baseline of bench/quality.py over this learner's catalog."""
    if runner in LADDERS:
        return LadderRunner(catalog, seed, probe_aware=LADDERS[runner])
    held_out: Any = _HeldOut(learner, catalog)
    return SyllabusRunner(
        runner.removeprefix("syllabus:"),
        catalog,
        seed,
        held_out,
        setup.probe_every,
        setup.probe_items,
        setup.batch_size,
    )


def _outcomes(success: npt.NDArray[np.float64], process: npt.NDArray[np.float64]) -> BatchOutcomes:
    n = success.shape[0]
    return BatchOutcomes(
        reward=success,
        success=success,
        process=process,
        cost=np.zeros(n),
        status=np.full(n, int(Status.OK), dtype=np.int64),
    )


def _top_readings(
    table: npt.NDArray[np.float64], catalog: Catalog, setup: Setup, step: int
) -> Readings:
    """Every family's held-out accuracy at its top tier, from the table [families, tiers]."""
    families, top = _top_arms(catalog)
    return Readings(families, top, table[families, top], setup.probe_items, step)


def _top_arms(catalog: Catalog) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(every family, its top tier): what a top-tier probe reads."""
    return np.arange(catalog.n_families, dtype=np.int64), (catalog.n_tiers - 1).astype(np.int64)


def run_one(runner: str, seed: int, setup: Setup) -> RunResult:
    """Train one model under one runner until the score reaches the target (or max_steps)."""
    learner = Learner(setup, seed)
    suite, n_fam, n_tiers = learner.suite, learner.n_fam, learner.n_tiers
    catalog = make_catalog(suite)
    baseline = runner in LADDERS or runner in SYLLABUS_RUNNERS
    open_loop = _open_loop(runner, learner, catalog, seed, setup) if baseline else None
    sched = None
    if runner != BASELINE and not baseline:
        sched = _make_scheduler(runner, catalog, seed, setup)
    split = setup.suite.arms_as_families
    rng = np.random.default_rng(seed)  # the fixed mix's draws
    kind = suite.kind.numpy()
    acc = learner.accuracy()
    curve_steps, curve = [0], [learner.score(acc)]
    reached: int | None = None
    wasted = 0
    by_kind = np.zeros(len(KINDS), dtype=np.int64)
    start = time.perf_counter()
    step = 0
    while step < setup.max_steps and reached is None:
        step += 1
        batch: Batch | None = None
        if sched is not None:
            batch = sched.next_batch(setup.batch_size)
        elif open_loop is not None:
            batch = open_loop.propose(setup.batch_size)
        if batch is None:
            arm = rng.integers(0, n_fam * n_tiers, setup.batch_size)
            fam_np, tier_np = arm // n_tiers, arm % n_tiers
        else:
            fam_np, tier_np = batch.family, batch.tier
            if split:  # a scheduler family is one (family, tier) arm of the learner
                fam_np, tier_np = np.divmod(batch.family, n_tiers)
        fam, tier = torch.from_numpy(fam_np), torch.from_numpy(tier_np)
        by_kind += np.bincount(kind[fam_np], minlength=len(KINDS))
        wasted += int(((suite.kind[fam] == 2) | (acc[fam, tier] >= MASTERED)).sum())
        success, process = learner.train(fam, tier)
        if sched is not None and batch is not None:
            sched.report(batch, rewards=success, success=success, process=process)
        elif open_loop is not None and batch is not None:
            open_loop.observe(batch, _outcomes(success, process))
        # the scheduler hears every round; of the baselines only ladder_probe reads one
        reads_probes = sched is not None or (LADDERS.get(runner, False) and setup.probe != "none")
        if step % setup.probe_every == 0 and reads_probes:
            # (split: every arm is a family of one tier)
            table = learner.probe_all().reshape(-1, 1 if split else n_tiers)
            if sched is not None:
                _probe_scheduler(sched, table, setup)
            elif open_loop is not None:
                open_loop.on_probe(_top_readings(table, catalog, setup, step))
        if step % setup.eval_every == 0:
            acc = learner.accuracy()
            curve_steps.append(step)
            curve.append(learner.score(acc))
            if curve[-1] >= setup.target:
                reached = step
    episodes = max(int(by_kind.sum()), 1)
    final_tiers: list[float] = []
    held_back: list[int] = []
    if sched is not None:
        if not split:
            cur = sched.tiers.tier
            final_tiers = [float(cur[kind == k].mean()) for k in range(len(KINDS))]
        ids = np.flatnonzero(sched.held_back())
        of_kind = kind[ids // n_tiers] if split else kind[ids]  # split: family = (fam, tier)
        held_back = np.bincount(of_kind, minlength=len(KINDS)).tolist()
    return RunResult(
        policy=runner,
        seed=seed,
        steps_to_target=reached,
        final=curve[-1],
        waste=wasted / episodes,
        seconds=time.perf_counter() - start,
        curve_steps=curve_steps,
        curve=curve,
        kind_share=(by_kind / episodes).tolist(),
        final_accuracy=[acc[suite.kind == k].mean(0).tolist() for k in range(len(KINDS))],
        final_tiers=final_tiers,
        held_back=held_back,
    )


def share_check(seed: int, setup: Setup, marks: Sequence[float]) -> dict[str, Any]:
    """The premise: does doubling a family's share halve the steps it needs?

    The fixed mix, except that every other learnable family (group A) is drawn twice as
    often as the rest (B), so within one run A gets exactly twice B's episodes. Returns, per
    learnable family, the first step at which its score reaches each mark (inf: never).
    """
    learner = Learner(setup, seed)
    n_fam, n_tiers = learner.n_fam, learner.n_tiers
    kind = learner.suite.kind.numpy()
    learnable = np.flatnonzero(np.isin(kind, LEARNABLE))
    doubled = np.zeros(n_fam, dtype=bool)
    doubled[learnable[::2]] = True
    weight = np.repeat(np.where(doubled, 2.0, 1.0), n_tiers)
    weight /= weight.sum()
    rng = np.random.default_rng(seed)
    first = np.full((len(marks), n_fam), np.inf)
    for step in range(1, setup.max_steps + 1):
        arm = rng.choice(n_fam * n_tiers, setup.batch_size, p=weight)
        learner.train(torch.from_numpy(arm // n_tiers), torch.from_numpy(arm % n_tiers))
        if step % setup.eval_every == 0:
            fam_score = learner.family_score(learner.accuracy()).numpy()
            for i, m in enumerate(marks):
                first[i, np.isinf(first[i]) & (fam_score >= m - 1e-12)] = step
            if np.isfinite(first[:, learnable]).all():
                break
    return {"kind": kind[learnable], "doubled": doubled[learnable], "first": first[:, learnable]}


def share_table(checks: Sequence[dict[str, Any]], marks: Sequence[float], max_steps: int) -> str:
    """Median steps (over families and seeds) to each mark at 2x and at 1x share."""

    def median(values: npt.NDArray[np.float64]) -> str:
        med = float(np.median(values))
        return f"> {max_steps:,}" if not np.isfinite(med) else f"{med:,.0f}"

    rows = []
    for k in LEARNABLE:
        for i, m in enumerate(marks):
            got = {}
            for two in (True, False):
                got[two] = np.concatenate(
                    [c["first"][i][(c["kind"] == k) & (c["doubled"] == two)] for c in checks]
                )
            at_two, at_one = float(np.median(got[True])), float(np.median(got[False]))
            finite = np.isfinite(at_two) and np.isfinite(at_one)
            ratio = at_two / at_one if finite else np.nan
            rows.append(
                [
                    KINDS[k],
                    f"{m:g}",
                    median(got[True]),
                    median(got[False]),
                    f"{ratio:.2f}" if np.isfinite(ratio) and ratio > 0 else "—",
                    f"{np.isfinite(got[True]).sum()}/{got[True].size}",
                    f"{np.isfinite(got[False]).sum()}/{got[False].size}",
                ]
            )
    header = ["kind", "family score", "steps at 2× share", "steps at 1× share", "ratio"]
    header += ["reached 2×", "reached 1×"]
    return markdown_table(header, rows)


def code_state() -> str:
    """The commit, and a hash of uncommitted changes to the scheduler's code, read at import.

    The policies may change between two runs of the benchmark; this tells which code ran.
    """
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        ).stdout.strip()
        diff = subprocess.run(
            ["git", "diff", "HEAD", "--", "scheduler", "policies", "domains"],
            cwd=root,
            capture_output=True,
            check=False,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"
    if not diff:
        return f"commit {commit or '?'}"
    digest = hashlib.sha1(diff).hexdigest()[:12]
    return f"commit {commit or '?'} + uncommitted scheduler/policies changes {digest}"


CODE_STATE = code_state()  # before the runs: the modules are imported by now


def switch_off(sched: Scheduler, mechanism: str) -> None:
    from quality import SWITCHES  # one list of the ablation's switches in both benchmarks

    SWITCHES[mechanism](sched)


def _scheduler_config(values: dict[str, Any]) -> SchedulerConfig:
    from quality import scheduler_config  # one parser for --scheduler in both benchmarks

    return scheduler_config(values)


def table(results: Sequence[RunResult], max_steps: int, target: float) -> str:
    """Steps to the target and to two lower marks (× the fixed mix's), read off the curves."""
    marks = sorted({round(target - 0.2, 2), round(target - 0.1, 2), target})
    order = list(dict.fromkeys(r.policy for r in results))
    base_name = BASELINE if BASELINE in order else order[0]
    reach = {
        (name, m): Stat.of_values(
            [steps_to(r.curve_steps, r.curve, m) for r in results if r.policy == name]
        )
        for name in order
        for m in marks
    }

    def ratio(name: str, other: str, m: float) -> str:
        got, base = reach[(name, m)], reach[(other, m)]
        if name == other or got.n != got.of or base.n != base.of:
            return ""
        return f" (×{got.mean / base.mean:.2f})"

    rows = []
    for name in order:
        mine = [r for r in results if r.policy == name]
        row = [name]
        for m in marks:
            got = reach[(name, m)]
            text = got.fmt(integer=True) if got.n else f"> {max_steps:,}"
            row.append(text + ratio(name, base_name, m))
        vs_uniform = ratio(name, "uniform", target) if "uniform" in order else ""
        row.append(vs_uniform.strip(" ()") or "—")
        shares = np.mean([r.kind_share for r in mine], axis=0) if mine[0].kind_share else []
        row += [
            Stat.of_values([r.final for r in mine]).fmt(),
            Stat.of_values([100 * r.waste for r in mine]).fmt(1),
            " / ".join(f"{100 * s:.0f}" for s in shares) or "—",
            " / ".join(str(int(q)) for q in np.sum([r.held_back for r in mine], axis=0))
            if mine[0].held_back
            else "—",
            Stat.of_values([r.seconds for r in mine]).fmt(1),
        ]
        rows.append(row)
    header = ["runner", *[f"steps to {m:g}" for m in marks], f"vs uniform at {target:g}"]
    header += ["score at stop", "waste %", "episodes % par/maj/noise/copy"]
    header += ["held back at the stop par/maj/noise/copy (all seeds)", "seconds/run"]
    return markdown_table(header, rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds")
    parser.add_argument(
        "--first-seed", type=int, default=0, help="the first of them (fresh seeds: 100)"
    )
    parser.add_argument("--batch-size", type=int, default=128, help="episodes per step")
    parser.add_argument("--max-steps", type=int, default=8000)
    parser.add_argument("--probe-every", type=int, default=10)
    parser.add_argument("--eval-every", type=int, default=20)
    parser.add_argument("--probe-items", type=int, default=64)
    parser.add_argument("--eval-items", type=int, default=128)
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--hidden", type=int, default=64, help="hidden units per family")
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--momentum", type=float, default=0.9, help="SGD only")
    parser.add_argument(
        "--policies",
        nargs="*",
        default=[],
        help=f"registered policies to run besides {BASELINE}, uniform and {DEFAULT}; "
        "'all' for every one",
    )
    parser.add_argument(
        "--baselines",
        default="ladder,ladder_probe",
        help="the simple baselines beside the fixed mix (comma-separated; '' for none): "
        f"{', '.join([*LADDERS, *SYLLABUS_RUNNERS])}",
    )
    parser.add_argument(
        "--syllabus",
        action="store_true",
        help="add Syllabus's three curricula to --baselines (needs syllabus-rl: the bench venv)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel, one thread each")
    parser.add_argument(
        "--probe", choices=PROBES, default="asked", help="what the evaluator probes (PROBES)"
    )
    parser.add_argument("--suite", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument(
        "--set-constant",
        action="append",
        default=[],
        metavar="MODULE:NAME=VALUE",
        help="set a module constant of the code under test: policies._skill:_SLOPE_INFO_MIN=0.3",
    )
    parser.add_argument("--scheduler", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        metavar="MECHANISM",
        help="switch off a mechanism of the default, as quality.py's ablation: probe_rise",
    )
    parser.add_argument("--option", action="append", default=[], metavar="POLICY.FIELD=VALUE")
    parser.add_argument(
        "--check-share",
        action="store_true",
        help="instead of the comparison: check that doubling a family's share speeds it up",
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--render", nargs="+", type=Path, metavar="JSON", help="print the table of saved runs"
    )
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    return run_main(_main, parser.parse_args(argv), log)


def _setup(args: argparse.Namespace, options: dict[str, dict[str, Any]]) -> Setup:
    checks = [
        (args.seeds >= 1, "--seeds", "at least 1"),
        (args.first_seed >= 0, "--first-seed", "at least 0"),
        (args.batch_size >= 1, "--batch-size", "at least 1"),
        (args.max_steps >= 1, "--max-steps", "at least 1"),
        (args.probe_every >= 1, "--probe-every", "at least 1"),
        (args.eval_every >= 1, "--eval-every", "at least 1"),
        (args.probe_items >= 1, "--probe-items", "at least 1"),
        (args.eval_items >= 1, "--eval-items", "at least 1"),
        (0.0 < args.target <= 1.0, "--target", "in (0, 1]"),
        (args.hidden >= 1, "--hidden", "at least 1"),
        (args.lr > 0.0, "--lr", "positive"),
        (0.0 <= args.momentum < 1.0, "--momentum", "in [0, 1)"),
    ]
    for ok, flag, rule in checks:
        if not ok:
            raise BenchError(
                f"{flag}: must be {rule}, got {getattr(args, flag[2:].replace('-', '_'))}"
            )
    suite_fields = {f.name for f in dataclasses.fields(SuiteConfig)}
    suite_values = parse_assignments("--suite", args.suite)
    for key in sorted(set(suite_values) - suite_fields):
        raise BenchError(f"--suite {key}: unknown field; known: {sorted(suite_fields)}")
    setup = Setup(
        suite=SuiteConfig(**suite_values),
        batch_size=args.batch_size,
        max_steps=args.max_steps,
        probe_every=args.probe_every,
        eval_every=args.eval_every,
        probe_items=args.probe_items,
        eval_items=args.eval_items,
        target=args.target,
        hidden=args.hidden,
        optimizer=args.optimizer,
        lr=args.lr,
        momentum=args.momentum,
        scheduler=parse_assignments("--scheduler", args.scheduler),
        options=options,
        probe=args.probe,
        without=tuple(args.without),
    )
    from quality import SWITCHES

    unknown = sorted(set(setup.without) - set(SWITCHES))
    if unknown:
        raise BenchError(f"--without: unknown mechanism {unknown[0]!r}; one of {sorted(SWITCHES)}")
    try:
        _scheduler_config(setup.scheduler)
    except (TypeError, ValueError) as exc:  # a value of the wrong kind for its field
        raise BenchError(f"--scheduler: {exc}") from None
    return setup


def _run_logged(task: tuple[str, int, Setup]) -> RunResult:
    runner, seed, setup = task
    r = run_one(runner, seed, setup)
    log.info(
        "%-20s seed %d: steps %s, final %.3f, waste %.2f (%.1f s)",
        runner,
        seed,
        r.steps_to_target,
        r.final,
        r.waste,
        r.seconds,
    )
    return r


def _current(saved: dict[str, Any]) -> dict[str, Any]:
    """A saved run's fields as ``RunResult`` takes them now: runs saved before
    ``held_back`` counted ``quarantined`` events, a kind the scheduler no longer emits."""
    return {k: v for k, v in saved.items() if k != "quarantined"}


def _main(args: argparse.Namespace) -> int:
    try:
        set_constants(args.set_constant)
    except ValueError as exc:
        raise BenchError(f"--set-constant {exc}") from None
    if args.render:
        try:
            saved = [r for f in args.render for r in json.loads(f.read_text())["runs"]]
            runs = [RunResult(**_current(r)) for r in saved]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BenchError(f"--render: not a saved run of this benchmark ({exc})") from None
        if not runs:
            raise BenchError("--render: no runs saved there (a --check-share output?)")
        print(table(runs, args.max_steps, args.target))
        return 0
    known = available_policies()
    asked = known if args.policies == ["all"] else list(args.policies)
    unknown = sorted(set(asked) - set(known) - {BASELINE, DEFAULT})
    if unknown:
        raise BenchError(f"--policies: unknown {unknown}; registered: {known}")
    baselines = [b for b in args.baselines.split(",") if b]
    if args.syllabus:
        baselines += SYLLABUS_RUNNERS
    wrong = sorted(set(baselines) - {*LADDERS, *SYLLABUS_RUNNERS})
    if wrong:
        raise BenchError(f"--baselines: unknown {wrong}; known: {[*LADDERS, *SYLLABUS_RUNNERS]}")
    if args.jobs < 1:
        raise BenchError(f"--jobs: must be at least 1, got {args.jobs}")
    runners = list(dict.fromkeys([BASELINE, *baselines, "uniform", DEFAULT, *asked]))
    options = policy_options(args.option, known)
    for name in [r for r in runners if r in known]:
        try:
            make_policy(name, **options.get(name, {}))
        except CurriculumError as exc:
            log.warning("skipped %s: %s", name, exc)
            runners.remove(name)
    setup = _setup(args, options)
    start = time.perf_counter()
    if args.check_share:
        t = setup.target
        marks = sorted({round(t - 0.4, 2), round(t - 0.2, 2), t} - {0.0})
        checks = []
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            checks.append(share_check(seed, setup, marks))
            log.info("share check seed %d done (%.0f s)", seed, time.perf_counter() - start)
        elapsed = time.perf_counter() - start
        text = share_table(checks, marks, args.max_steps)
        saved = [
            {"seed": s, **{k: np.asarray(v).tolist() for k, v in c.items()}}
            for s, c in enumerate(checks)
        ]
        if args.markdown:
            print(f"<!-- code: {CODE_STATE} -->")
        emit(
            text,
            code=CODE_STATE,
            out=args.out,
            markdown=args.markdown,
            setup=setup,
            results=[],
            elapsed=elapsed,
            share_check=saved,
        )
        return 0
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    tasks = [(runner, seed, setup) for runner in runners for seed in seeds]
    results = run_all(_run_logged, tasks, args.jobs, args.set_constant)
    elapsed = time.perf_counter() - start
    if args.markdown:
        print(f"<!-- code: {CODE_STATE} -->")
    emit(
        table(results, args.max_steps, args.target),
        code=CODE_STATE,
        out=args.out,
        markdown=args.markdown,
        setup=setup,
        results=results,
        elapsed=elapsed,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
