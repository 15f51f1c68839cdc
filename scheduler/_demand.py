"""Expected demand over the next steps: how many tasks each family, tier and environment
will get, at the current weights, quotas and tiers, without drawing anything.

A sandbox pool reads it to start and warm the right environments before the draws arrive,
so cold starts do not throttle the rollout. The expectation mirrors ``Scheduler.next_batch``
term by term: the retry queue's rows come first (exactly, oldest first, up to the retry
share of each batch), the fresh draws split by the family weights, and each family's draws
split over its tiers as the draw splits them (the skill model's Thompson draw in closed
form; or the tier controller's adjacent and review shares; a separate family's own tier
weights). It assumes no new faults and no weight change during
the window (the weights are those the next batch would use, before the breakers' tick).

Nothing here touches the RNG or leaves a trace on the scheduler: a stale weight cache is
computed and then put back as it was, so the next batch is the one it would have been.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from scipy.special import ndtr

from ._errors import ConfigError

if TYPE_CHECKING:
    from domains import Catalog
    from policies import SkillModel

    from ._scheduler import Scheduler
    from ._weights import Weights

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Demand:
    """Expected task counts over ``steps`` batches of ``batch_size``."""

    steps: int
    batch_size: int
    arm: FloatArray  # float64 [n_arms]
    family: FloatArray  # float64 [n_families]
    environments: tuple[str, ...]  # distinct environment names, sorted
    environment: FloatArray  # float64 [n_environments], aligned with ``environments``
    retries: int  # tasks of the retry queue among them (counted exactly, not expected)

    def top_environments(self, k: int) -> list[tuple[str, float]]:
        """The ``k`` environments with the highest expected demand, highest first."""
        order = np.lexsort((np.arange(len(self.environments)), -self.environment))[: max(k, 0)]
        return [(self.environments[i], float(self.environment[i])) for i in order.tolist()]

    def by_environment(self) -> dict[str, float]:
        return dict(zip(self.environments, self.environment.tolist(), strict=True))


def environment_of_family(catalog: Catalog) -> tuple[tuple[str, ...], IntArray]:
    """Distinct environment names and each family's index into them.

    Read from the manifests' specs; a catalog built without specs (``Catalog.synthetic``)
    gives each family an environment named after itself."""
    named: dict[str, str] = {}
    for domain in catalog.specs:
        for fam in getattr(domain, "families", ()):
            named[str(fam.name)] = str(fam.environment)
    env = [named.get(name, name) for name in catalog.family_names]
    names = tuple(sorted(set(env)))
    index = {n: i for i, n in enumerate(names)}
    return names, np.array([index[e] for e in env], dtype=np.int64)


def expected_demand(sched: Scheduler, steps: int, batch_size: int) -> Demand:
    """The expected tasks per arm, family and environment over the next ``steps`` batches."""
    if steps < 1 or batch_size < 1:
        raise ConfigError(
            f"demand: steps and batch_size must be >= 1, got steps={steps}, batch_size={batch_size}"
        )
    cat = sched.catalog
    weights = _current_weights(sched)
    retry_arm = _retries_ahead(sched, steps, batch_size)
    fresh = steps * batch_size - retry_arm.shape[0]
    family_draws = weights.family * fresh  # float64 [n_families]
    arm = family_draws[cat.family_of_arm] * _tier_split(sched, weights)
    arm += np.bincount(retry_arm, minlength=cat.n_arms)
    family = np.asarray(
        np.bincount(cat.family_of_arm, weights=arm, minlength=cat.n_families), dtype=np.float64
    )
    names, env_of_family = environment_of_family(cat)
    environment = np.asarray(
        np.bincount(env_of_family, weights=family, minlength=len(names)), dtype=np.float64
    )
    return Demand(
        steps=int(steps),
        batch_size=int(batch_size),
        arm=arm,
        family=family,
        environments=names,
        environment=environment,
        retries=int(retry_arm.shape[0]),
    )


def _current_weights(sched: Scheduler) -> Weights:
    """The weights the next batch would draw from, leaving the scheduler as it was (a
    refresh moves the compute quotas' warm start, the flags and the event queue)."""
    pipeline = sched.pipeline
    saved = (
        pipeline.weights,
        pipeline.cdf,
        pipeline.tier_cdf,
        pipeline.computed_at,
        pipeline.episodes_since,
        pipeline.compute_ratio.copy(),
        pipeline.quota_short.copy(),
        sched.gates.factor.copy(),
        sched.flags.flags.copy(),
        sched.flags.read_at,
        sched._events.copy(),
    )
    try:
        return sched.weights()
    finally:
        (
            pipeline.weights,
            pipeline.cdf,
            pipeline.tier_cdf,
            pipeline.computed_at,
            pipeline.episodes_since,
            pipeline.compute_ratio,
            pipeline.quota_short,
            sched.gates.factor,
            sched.flags.flags,
            sched.flags.read_at,
            sched._events,
        ) = saved


def _retries_ahead(sched: Scheduler, steps: int, batch_size: int) -> IntArray:
    """The arms of the queued retries the next ``steps`` batches take, oldest first (rows of
    families whose breaker is open are dropped at the draw, so they are left out)."""
    queue = sched.retries
    open_family = np.asarray(sched.breakers.open_mask, dtype=bool)
    arm = np.asarray(queue.arm, dtype=np.int64)
    arm = arm[~open_family[sched.catalog.family_of_arm[arm]]]
    per_batch = int(np.floor(queue.max_share * batch_size))
    taken: IntArray = arm[: min(arm.shape[0], per_batch * steps)]
    return taken


def _tier_split(sched: Scheduler, weights: Weights) -> FloatArray:
    """float64 [n_arms]: the share of each family's draws that goes to each of its tiers."""
    cat = sched.catalog
    split = _skill_split(cat, sched.skill)
    separate = cat.tier_separate[cat.family_of_arm]
    if separate.any():  # separate skills: the family's own tier weights
        split = np.where(separate, weights.tier, split)
    return split


def _skill_split(catalog: Catalog, skill: SkillModel) -> FloatArray:
    """``SkillModel.draw_tiers`` in closed form. It samples each family's skill from
    N(mu, (draw_spread * sd)^2) and takes the tier nearest the target pass rate,
    clip(rint(theta - offset), 0, top): tier t holds theta - offset in [t - 1/2, t + 1/2),
    and the end tiers hold the tails; then a ``contrast`` share of a family whose slope is
    undecided moves one tier down (up from tier 0), or to its top tier where
    ``contrast_to_top`` says so. tests/scheduler/test_demand.py checks this
    against real draws, so a change to the draw that is not mirrored here fails there."""
    mu, var = skill.belief()
    cfg = skill.config
    offset = np.log(cfg.target / (1.0 - cfg.target)) / cfg.slope
    fam, tier = catalog.family_of_arm, catalog.tier_of_arm
    top = catalog.n_tiers[fam] - 1
    sd = np.maximum(skill.draw_spread * np.sqrt(var[fam]), 1e-300)
    low = np.where(tier == 0, -np.inf, tier - 0.5)
    high = np.where(tier == top, np.inf, tier + 0.5)
    split: FloatArray = ndtr((high + offset - mu[fam]) / sd) - ndtr((low + offset - mu[fam]) / sd)
    contrast = float(getattr(cfg, "contrast", 0.0))
    if contrast > 0:  # an undecided family's contrast share goes beside the tier drawn
        undecided = skill.slope_undecided()
        beside = np.where(tier > 0, tier - 1, np.minimum(tier + 1, top))
        beside = np.where(skill.contrast_to_top()[fam], top, beside)
        moved = np.zeros_like(split)
        np.add.at(moved, catalog.arm_start[fam] + beside, split)
        share = np.where(undecided[fam], contrast, 0.0)
        split = (1.0 - share) * split + share * moved
    return split
