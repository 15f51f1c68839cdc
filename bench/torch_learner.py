"""A real learner: a small torch MLP trained on many synthetic task families with tiers.

Families (binary labels on ``n_bits`` random bits; each family has its own random support,
an ordered subset of the bits, and tier ``t`` reads the first bits of it):

* ``parity``: label = XOR of the first ``t + 1`` support bits (tier 3 is a 4-sparse parity,
  which SGD finds far more easily after the lower orders: the support is shared);
* ``majority``: label = majority of the first ``2 t + 1`` support bits;
* ``noise``: a random label on every example (nothing to learn; a coin flip to a pass-rate
  scorer);
* ``copy``: label = the first support bit at every tier (mastered within a few steps).

One MLP reads the bits plus learned family and tier embeddings. Each step the scheduler
draws ``batch_size`` (family, tier) pairs, one fresh example each; the model's prediction
*before* the update is the episode's outcome (on-policy: success = correct, process = the
probability it gave the right label), then one Adam step trains on the batch. Every
``probe_every`` steps the scheduler gets a held-out accuracy of every family at its current
tier. Success is normalised by the chance level (0.5): the catalog declares it and the
scheduler rescales by it.

The score is ground truth the scheduler never sees: the chance-normalised held-out accuracy
``clip((acc - 0.5) / 0.5, 0, 1)`` of every learnable (parity, majority) family, averaged over
all its tiers and then over families. The benchmark reports the steps each policy needs to
reach ``--target`` (0.6 by default) on the same seeds.

    .venv/bin/python bench/torch_learner.py --markdown
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _common import BenchError, Stat, emit, markdown_table, parse_assignments, steps_to
from torch import nn

from domains import Catalog, CurriculumError
from policies import available_policies, make_policy
from scheduler import Scheduler, SchedulerConfig

log = logging.getLogger("bench.torch_learner")

KINDS = ("parity", "majority", "noise", "copy")
LEARNABLE = (0, 1)


@dataclass(frozen=True)
class SuiteConfig:
    """The task families. Shares are counts per kind; every family has ``n_tiers`` tiers."""

    n_bits: int = 12
    parity: int = 16
    majority: int = 16
    noise: int = 16
    copy: int = 16
    n_tiers: int = 4


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
        hits = (x * self.mask[family, tier]).sum(1)
        kind = self.kind[family]
        parity = hits.remainder(2)
        majority = (hits > self.reads[family, tier] / 2).float()
        noise = torch.randint(0, 2, (n,), generator=gen).float()
        y = torch.where(kind == 0, parity, torch.where(kind == 1, majority, hits))
        y = torch.where(kind == 2, noise, y)
        return x, y.long()


class Model(nn.Module):
    """An MLP over the bits and learned family and tier embeddings."""

    def __init__(self, n_bits: int, n_families: int, n_tiers: int, hidden: int = 256) -> None:
        super().__init__()
        self.family = nn.Embedding(n_families, 32)
        self.tier = nn.Embedding(n_tiers, 8)
        self.net = nn.Sequential(
            nn.Linear(n_bits + 40, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 2),
        )

    def forward(self, x: torch.Tensor, family: torch.Tensor, tier: torch.Tensor) -> torch.Tensor:
        h = torch.cat([2.0 * x - 1.0, self.family(family), self.tier(tier)], dim=1)
        out: torch.Tensor = self.net(h)
        return out


def make_catalog(suite: TaskSuite) -> Catalog:
    """One domain per kind, ``n_tiers`` tiers per family, chance level 0.5."""
    cfg = suite.config
    base = Catalog.synthetic(
        n_domains=1,
        families_per_domain=suite.n_families,
        n_tiers=cfg.n_tiers,
        pool_size=1_000_000,
        chance_success=0.5,
    )
    return dataclasses.replace(
        base,
        domain_names=KINDS,
        family_names=suite.names,
        domain_of_family=suite.kind.numpy().astype(np.int64),
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
    lr: float
    scheduler: dict[str, Any]
    options: dict[str, dict[str, Any]]


@dataclass
class RunResult:
    policy: str
    seed: int
    steps_to_target: int | None
    final: float  # score when the run stopped (at the target or at max_steps)
    waste: float  # share of examples on noise families or arms already >= 95 % accurate
    seconds: float
    curve_steps: list[int]
    curve: list[float]


def _fixed_sets(
    suite: TaskSuite, items: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Held-out examples for every arm: family, tier, bits, label (arm-major order)."""
    n_fam, n_tiers = suite.n_families, suite.config.n_tiers
    fam = torch.arange(n_fam).repeat_interleave(n_tiers * items)
    tier = torch.arange(n_tiers).repeat_interleave(items).repeat(n_fam)
    x, y = suite.sample(fam, tier, torch.Generator().manual_seed(seed))
    return fam, tier, x, y


def run_one(policy: str, seed: int, setup: Setup) -> RunResult:
    """Train one model under one policy until the score reaches the target (or max_steps)."""
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    suite = TaskSuite(setup.suite, seed)
    catalog = make_catalog(suite)
    n_fam, n_tiers = suite.n_families, setup.suite.n_tiers
    model = Model(setup.suite.n_bits, n_fam, n_tiers)
    opt = torch.optim.Adam(model.parameters(), lr=setup.lr)
    sched = Scheduler(
        catalog,
        policy,
        seed=seed,
        config=_scheduler_config(setup.scheduler),
        **setup.options.get(policy, {}),
    )
    gen = torch.Generator().manual_seed(seed)
    probe = _fixed_sets(suite, setup.probe_items, 20_000 + seed)
    test = _fixed_sets(suite, setup.eval_items, 30_000 + seed)
    learnable = torch.isin(suite.kind, torch.tensor(LEARNABLE))
    families = np.arange(n_fam)
    probe_offsets = np.arange(setup.probe_items)

    def arm_accuracy(sets: tuple[torch.Tensor, ...], items: int) -> torch.Tensor:
        fam, tier, x, y = sets
        with torch.no_grad():
            correct = (model(x, fam, tier).argmax(1) == y).float()
        result: torch.Tensor = correct.view(n_fam, n_tiers, items).mean(2)  # [F, T]
        return result

    def score(acc: torch.Tensor) -> float:
        norm = ((acc - 0.5) / 0.5).clamp(0.0, 1.0)
        return float(norm[learnable].mean())

    acc = arm_accuracy(test, setup.eval_items)
    curve_steps, curve = [0], [score(acc)]
    reached: int | None = None
    wasted = episodes = 0
    start = time.perf_counter()
    step = 0
    while step < setup.max_steps and reached is None:
        step += 1
        batch = sched.next_batch(setup.batch_size)
        fam = torch.from_numpy(batch.family)
        tier = torch.from_numpy(batch.tier)
        x, y = suite.sample(fam, tier, gen)
        logits = model(x, fam, tier)
        with torch.no_grad():
            prob = logits.softmax(1)
            success = (prob.argmax(1) == y).double().numpy()
            process = prob.gather(1, y[:, None])[:, 0].double().numpy()
            useless = (suite.kind[fam] == 2) | (acc[fam, tier] >= 0.95)
            wasted += int(useless.sum())
            episodes += int(fam.shape[0])
        loss = nn.functional.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        sched.report(batch, rewards=success, success=success, process=process)
        if step % setup.probe_every == 0:  # one tier per family: the current one
            tiers = sched.tiers.tier.copy()
            rows = torch.from_numpy(
                ((families * n_tiers + tiers)[:, None] * setup.probe_items + probe_offsets).reshape(
                    -1
                )
            )
            p_fam, p_tier, p_x, p_y = (t[rows] for t in probe)
            with torch.no_grad():
                hit = (model(p_x, p_fam, p_tier).argmax(1) == p_y).double()
            sched.record_probes(
                families,
                hit.view(n_fam, setup.probe_items).mean(1).numpy(),
                tiers=tiers,
                n=np.full(n_fam, setup.probe_items),
            )
        if step % setup.eval_every == 0:
            acc = arm_accuracy(test, setup.eval_items)
            curve_steps.append(step)
            curve.append(score(acc))
            if curve[-1] >= setup.target:
                reached = step
    return RunResult(
        policy=policy,
        seed=seed,
        steps_to_target=reached,
        final=curve[-1],
        waste=wasted / max(episodes, 1),
        seconds=time.perf_counter() - start,
        curve_steps=curve_steps,
        curve=curve,
    )


def _scheduler_config(values: dict[str, Any]) -> SchedulerConfig:
    from quality import scheduler_config  # one parser for --scheduler in both benchmarks

    return scheduler_config(values)


def table(results: Sequence[RunResult], max_steps: int, target: float) -> str:
    """Steps to the target, and to two lower marks read off the same curves."""
    marks = sorted({round(target - 0.2, 2), round(target - 0.1, 2), target})
    order = list(dict.fromkeys(r.policy for r in results))
    reach = {
        (name, m): Stat.of_values(
            [steps_to(r.curve_steps, r.curve, m) for r in results if r.policy == name]
        )
        for name in order
        for m in marks
    }
    rows = []
    for name in order:
        mine = [r for r in results if r.policy == name]
        row = [name]
        for m in marks:
            got, base = reach[(name, m)], reach[("uniform", m)]
            text = got.fmt(integer=True) if got.n else f"> {max_steps:,}"
            if got.n == got.of and base.n == base.of and name != "uniform":
                text += f" (×{got.mean / base.mean:.2f})"
            row.append(text)
        row += [
            Stat.of_values([r.final for r in mine]).fmt(),
            Stat.of_values([100 * r.waste for r in mine]).fmt(1),
            Stat.of_values([r.seconds for r in mine]).fmt(1),
        ]
        rows.append(row)
    header = ["policy", *[f"steps to {m:g}" for m in marks]]
    header += ["score at stop", "waste %", "seconds/run"]
    return markdown_table(header, rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--max-steps", type=int, default=8000)
    parser.add_argument("--probe-every", type=int, default=10)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--probe-items", type=int, default=64)
    parser.add_argument("--eval-items", type=int, default=128)
    parser.add_argument("--target", type=float, default=0.6)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument(
        "--policies", nargs="*", default=["uniform", "learning_progress"], help="'all' for every"
    )
    parser.add_argument("--suite", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--scheduler", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--option", action="append", default=[], metavar="POLICY.FIELD=VALUE")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--render", nargs="+", type=Path, metavar="JSON", help="print the table of saved runs"
    )
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    log.setLevel(logging.INFO if args.verbose else logging.WARNING)
    try:
        return _main(args)
    except CurriculumError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    if args.render:
        runs = [RunResult(**r) for f in args.render for r in json.loads(f.read_text())["runs"]]
        print(table(runs, args.max_steps, args.target))
        return 0
    known = available_policies()
    policies = known if args.policies == ["all"] else list(args.policies)
    unknown = sorted(set(policies) - set(known))
    if unknown:
        raise BenchError(f"--policies: unknown {unknown}; registered: {known}")
    if "uniform" not in policies:
        policies.insert(0, "uniform")
    options: dict[str, dict[str, Any]] = {}
    for key, value in parse_assignments("--option", args.option).items():
        policy, _, field = key.partition(".")
        if not field or policy not in known:
            raise BenchError(f"--option {key}: expected POLICY.FIELD with POLICY in {known}")
        options.setdefault(policy, {})[field] = value
    for name in list(policies):
        try:
            make_policy(name, **options.get(name, {}))
        except CurriculumError as exc:
            log.warning("skipped %s: %s", name, exc)
            policies.remove(name)
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
        lr=args.lr,
        scheduler=parse_assignments("--scheduler", args.scheduler),
        options=options,
    )
    _scheduler_config(setup.scheduler)
    start = time.perf_counter()
    results = []
    for policy in policies:
        for seed in range(args.seeds):
            r = run_one(policy, seed, setup)
            log.info(
                "%-20s seed %d: steps %s, final %.3f, waste %.2f (%.1f s)",
                policy,
                seed,
                r.steps_to_target,
                r.final,
                r.waste,
                r.seconds,
            )
            results.append(r)
    elapsed = time.perf_counter() - start
    emit(
        table(results, args.max_steps, args.target),
        out=args.out,
        markdown=args.markdown,
        setup=setup,
        results=results,
        elapsed=elapsed,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
