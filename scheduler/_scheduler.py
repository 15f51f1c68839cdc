"""The Scheduler: draws batches from the weights, learns from reported outcomes and probes.

It is a deterministic state machine. One numpy Generator, owned here, makes every random
choice, and ``state_dict`` captures everything, so a resumed run draws exactly the batches the
uninterrupted run would have drawn. The work is done by parts with one job each:

* ``SkillModel`` (policies): a skill belief per family, from outcomes and probes; the tier
  each task is drawn at;
* ``CurrentTiers`` (_follow.py): each family's current tier, following the skill model;
* ``FlagBoard`` (_flags.py): mastered, idle, suspected hacking, one ``Detector`` each;
* ``WeightPipeline`` (_pipeline.py) with ``Gates`` (_gates.py): policy weights to the CDF
  draws come from, recomputed on a refresh, not on every step;
* ``ProbeEvidence`` (_evidence.py), ``CostModel`` (_cost.py), ``CircuitBreakers``,
  ``RetryQueue``, ``PendingBatches`` and ``VariantCursor``.

On the hot path a step touches only the batch's arms and families.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from domains import Catalog
from policies import (
    ArmView,
    Policy,
    SkillModel,
    Stateless,
    make_policy,
    policy_params,
)

from ._batch import Batch, Outcome, Status
from ._breakers import CircuitBreakers
from ._checkpoint import apply_state, checked_state, scheduler_state
from ._config import SchedulerConfig
from ._cost import CostModel
from ._demand import Demand, expected_demand
from ._errors import ConfigError, ReportError
from ._events import Event, EventLog
from ._evidence import ProbeEvidence
from ._flags import FlagBoard
from ._follow import CurrentTiers
from ._gates import Gates
from ._listeners import Listener, Listeners
from ._pending import PendingBatches
from ._pipeline import WeightPipeline
from ._report_checks import Columns, family_id, parse_columns, parse_outcomes, parse_probes
from ._retries import RetryQueue
from ._snapshot import SchedulerSnapshot
from ._state import ArmStats
from ._variants import VariantCursor, occurrence_rank
from ._views import ArmViews
from ._weights import Weights
from .backends._protocol import BatchOutcomes
from .probing._curves import ProbeCurves
from .probing._handover import ProbeMany, ProbeResults, ProbeRound, ProbeSnapshot, call_probe_many

if TYPE_CHECKING:
    from .app._settings import Settings

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_OK, _FAILED = int(Status.OK), int(Status.FAILED)
_TIMEOUT, _ENV_ERROR = int(Status.TIMEOUT), int(Status.ENV_ERROR)


class Scheduler:
    """Curriculum scheduler over a Catalog of families and tiers.

    >>> sched = Scheduler(catalog, seed=0)
    >>> batch = sched.next_batch(256)
    >>> sched.report(batch, rewards=r, success=s)
    """

    def __init__(
        self,
        catalog: Catalog,
        policy: str | Mapping[str, Any] | Policy = "uniform",
        seed: int = 0,
        *,
        config: SchedulerConfig | None = None,
        **policy_options: Any,
    ) -> None:
        self.catalog = catalog
        cfg = self.config = config or SchedulerConfig()
        self.policy: Policy = make_policy(policy, **policy_options)
        self._observes = not isinstance(self.policy, Stateless)
        self.seed = int(seed)
        self.rng = np.random.Generator(np.random.PCG64(self.seed))
        self.step = 0  # number of batches drawn so far
        self.stats = ArmStats(catalog.n_arms, cfg.ema_fast, cfg.ema_slow)
        self.skill = SkillModel(catalog, cfg.skill)
        self.tiers = CurrentTiers(catalog)
        self.flags = FlagBoard(catalog)
        self.evidence = ProbeEvidence(catalog, self.stats, cfg.tiers)
        self.policy_state: dict[str, Any] = self.policy.init_state(catalog)
        # a ``constant`` policy's weights, asked for once (they depend on the catalog alone)
        self._constant_raw: FloatArray | None = None
        self.variants = VariantCursor(catalog.pool_size, self.seed)
        self.costs = CostModel(catalog, rate=cfg.cost_rate, overrun=cfg.cost_overrun)
        self.breakers = CircuitBreakers(catalog, cfg.breakers)
        self.gates = Gates(
            catalog, self.breakers, max_repeats=cfg.max_repeats, epoch_episodes=cfg.epoch_episodes
        )
        self.pipeline = WeightPipeline(catalog, cfg, self.gates)
        self.curves = ProbeCurves.from_catalog(catalog, window=cfg.probe_window)
        self.retries = RetryQueue(
            catalog.family_of_arm, max_retries=cfg.max_retries, max_share=cfg.retry_share
        )
        # batches drawn and not yet reported, with this scheduler's token (Batch.token): a
        # report must match one of them (see scheduler/_pending.py)
        self._token = secrets.randbits(63) | 1
        self._pending = PendingBatches(
            cfg.report_window, catalog.family_of_arm, catalog.tier_of_arm
        )
        self._last_batch_size: int | None = None  # demand()'s default batch size
        self._events = EventLog()
        self.listeners = Listeners(catalog)  # the recorder, ...: see add_listener
        self._reward_span = catalog.reward_high - catalog.reward_low
        self._any_separate = bool(catalog.tier_separate.any())
        self._views = ArmViews()

    @classmethod
    def from_settings(cls, settings: Settings, catalog: Catalog | None = None) -> Scheduler:
        """The scheduler ``settings`` describe (policy, seed, every SchedulerConfig field),
        over ``catalog`` or else the manifests of ``settings.domains``:
        ``Scheduler.from_settings(Settings.load())``. See ``Settings.build_scheduler``."""
        return settings.build_scheduler(catalog)

    # ------------------------------------------------------------------ read-only views
    @property
    def cost(self) -> FloatArray:
        """float64 [n_families]: learned seconds per episode (``CostModel``)."""
        return self.costs.cost

    def view(self) -> ArmView:
        """A read-only view of the state, as policies see it (``ArmViews``: made once per
        step, and again only when a state array is replaced)."""
        return self._views.of(self)

    def weights(self) -> Weights:
        """The distribution the next batch is drawn from (recomputed only when stale)."""
        if self.gates.factor_changed():
            self.pipeline.invalidate()
        if self.pipeline.stale:
            self._refresh()
        weights = self.pipeline.weights
        assert weights is not None
        if weights.catalog is None:  # names for by_domain() / by_family()
            weights = replace(weights, catalog=self.catalog)
            self.pipeline.weights = weights
        return weights

    def _refresh(self) -> None:
        """Read the flags and recompute the weights (the pipeline's whole, global pass)."""
        cat = self.catalog
        raw = self._constant_raw
        if raw is None:
            raw = np.asarray(self.policy.weights(self.view(), self.policy_state), dtype=np.float64)
            if raw.shape != (cat.n_arms,) or not np.all(np.isfinite(raw)) or (raw < 0).any():
                raise ValueError(
                    f"policy {policy_params(self.policy)['name']!r} returned invalid weights: "
                    "need finite non-negative values of shape [n_arms]"
                )
            if getattr(self.policy, "constant", False):  # the catalog alone decides them
                # reused by every refresh, read-only; one value for every arm (``uniform``)
                # is kept as a broadcast view of it, no array of its own
                same = raw.size > 0 and bool((raw == raw[0]).all())
                raw = np.broadcast_to(raw[0], raw.shape) if same else raw.copy()
                raw.setflags(write=False)
                self._constant_raw = raw
        self._events += self.flags.refresh(self.skill, self.step)
        self._events += self.pipeline.compute(
            raw,
            self.tiers.tier,
            self.flags,
            self.evidence,
            self.costs.cost,
            self.step,
            built=self.skill.built,
        )

    def snapshot(self) -> SchedulerSnapshot:
        """A frozen view for what follows the run (metrics, the recorder): read-only
        copies taken now, so a consumer never reads a live part mid-update."""
        return SchedulerSnapshot.of(self)

    @property
    def mastered(self) -> BoolArray:
        """bool [n_families]: a ladder's top tier mastered (the skill model), or for
        separate-skill tiers every arm mastered (``ProbeEvidence``)."""
        result: BoolArray = np.where(
            self.catalog.tier_separate, self.evidence.separate_mastered(), self.skill.mastered()
        )
        return result

    def held_back(self) -> BoolArray:
        """bool [n_families]: families held to a small share because they cannot teach the
        model anything now: the skill model's idle and suspected-hacking flags."""
        sk = self.skill
        result: BoolArray = (sk.idle() | sk.hacked()) & ~self.catalog.tier_separate
        return result

    @property
    def probe_tier(self) -> IntArray:
        """int64 [n_families]: the tier a probe round asks for (``ProbeEvidence``)."""
        return self.evidence.probe_tier(self.tiers.tier)

    # ------------------------------------------------------------------ drawing
    def next_batch(self, n: int) -> Batch:
        """Draw ``n`` tasks: families from the weights, tiers from the skill model,
        variants by cycling each arm's pool without replacement."""
        if n <= 0:
            raise ValueError(f"batch size must be positive, got {n}")
        self.listeners.before_batch(self.step)
        self._events += self.breakers.tick(self.step)
        self.weights()
        cdf = self.pipeline.cdf
        assert cdf is not None
        cat = self.catalog
        # Tasks whose environment failed come back first (same variant), within a share.
        if len(self.retries):
            retry_arm, retry_variant, retry_attempt = self.retries.pop(
                n, blocked=self.breakers.open_mask
            )
        else:
            retry_arm = retry_variant = retry_attempt = np.zeros(0, dtype=np.int64)
        fresh = n - retry_arm.shape[0]
        family = np.searchsorted(cdf, self.rng.random(fresh), side="right")
        np.minimum(family, cat.n_families - 1, out=family)
        tier = self.skill.draw_tiers(family, self.rng)
        if self._any_separate:
            tier = self._separate_draws(family, tier)
        arm = cat.arm_start[family] + tier
        variant = self.variants.take(arm)
        if retry_arm.shape[0]:
            arm = np.concatenate([retry_arm, arm])
            family = np.concatenate([cat.family_of_arm[retry_arm], family])
            tier = np.concatenate([cat.tier_of_arm[retry_arm], tier])
            variant = np.concatenate([retry_variant, variant])
            attempt = np.concatenate([retry_attempt, np.zeros(fresh, dtype=np.int64)])
        else:
            attempt = np.zeros(n, dtype=np.int64)
        batch = Batch(
            step=self.step,
            arm=arm,
            family=family,
            tier=tier,
            variant=variant,
            catalog=cat,
            attempt=attempt,
            token=self._token,
        )
        self._pending.add(self.step, self._token, arm, variant, attempt)
        self._last_batch_size = n
        self.step += 1
        return batch

    def _separate_draws(self, family: IntArray, tier: IntArray) -> IntArray:
        """Separate-skill families draw their tier from the family's tier distribution."""
        cat = self.catalog
        separate = cat.tier_separate[family]
        if not separate.any():
            return tier
        tier_cdf = self.pipeline.tier_cdf
        assert tier_cdf is not None
        f = family[separate]
        at = np.searchsorted(tier_cdf, f + self.rng.random(f.shape[0]), side="right")
        tier = tier.copy()
        tier[separate] = np.clip(at, cat.arm_start[f], cat.arm_start[f + 1] - 1) - cat.arm_start[f]
        return tier

    def demand(self, steps: int, batch_size: int | None = None) -> Demand:
        """Expected tasks per arm, family and environment over the next ``steps`` batches
        (of ``batch_size``, by default the last batch's), at the current weights, quotas and
        tiers; draws nothing and leaves the RNG as it is (scheduler/_demand.py)."""
        size = batch_size if batch_size is not None else self._last_batch_size
        if size is None:
            raise ConfigError("demand: no batch drawn yet; pass batch_size")
        return expected_demand(self, steps, size)

    # ------------------------------------------------------------------ feedback
    def report(
        self,
        batch: Batch | Sequence[Outcome],
        rewards: npt.ArrayLike | BatchOutcomes | None = None,
        success: npt.ArrayLike | None = None,
        process: npt.ArrayLike | None = None,
        cost: npt.ArrayLike | None = None,
        status: npt.ArrayLike | Sequence[str] | None = None,
    ) -> None:
        """Apply the outcomes of a batch (arrays aligned with it) or a list of Outcome.

        Everything is validated first; on any problem a ReportError lists them all and
        nothing is applied. A backend's ``BatchOutcomes`` may stand in for the arrays:
        ``report(batch, backend.run(batch))``. Only tasks this scheduler drew and that
        await a report are accepted, each once, within ``report_window`` batches (see
        scheduler/_pending.py); a list of Outcome may report a batch in pieces.
        """
        if isinstance(rewards, BatchOutcomes):
            out = rewards
            rewards, success, process, cost, status = (
                out.reward,
                out.success,
                out.process,
                out.cost,
                out.status,
            )
        if isinstance(batch, Batch):
            if batch.catalog is not self.catalog:
                raise ReportError(["batch: drawn from another catalog"])
            problems = self._pending.check_batch(batch, self.step)
            if problems:
                raise ReportError(problems)
            # checked equal to what was drawn, so these are plain int64 arrays of this catalog
            arm, variant, step = (
                np.asarray(batch.arm, dtype=np.int64),
                np.asarray(batch.variant, dtype=np.int64),
                int(batch.step),
            )
            family = self.catalog.family_of_arm[arm]
            columns = parse_columns(self.catalog, family, rewards, success, process, cost, status)
            attempt = np.asarray(
                batch.attempt if batch.attempt is not None else np.zeros_like(arm), dtype=np.int64
            )
            self._pending.take_batch(step)
        else:
            if any(x is not None for x in (rewards, success, process, cost, status)):
                raise ReportError(["pass either a Batch with arrays or a list of Outcome"])
            arm, variant, columns = parse_outcomes(self.catalog, batch)
            matched, problems = self._pending.match(arm, variant, self.step)
            if problems:
                raise ReportError(problems)
            step = int(matched.step.max()) if matched.step.size else max(self.step - 1, 0)
            attempt = matched.attempt
            self._pending.take_rows(matched)
        self._feed(step, arm, variant, attempt, columns)
        self.listeners.report(step, arm, variant, columns)

    def record_outcomes(self, outcomes: Sequence[Outcome], step: int | None = None) -> None:
        """Apply outcomes of tasks this scheduler did not draw (a warm start from another
        run's logs, a test that steers a policy): checked like ``report``, bound to no
        batch, so nothing refuses a repeat. ``step`` defaults to the latest batch's."""
        arm, variant, columns = parse_outcomes(self.catalog, list(outcomes))
        if step is not None and (not isinstance(step, int) or isinstance(step, bool) or step < 0):
            raise ReportError([f"step: must be an integer >= 0, got {step!r}"])
        at = max(self.step - 1, 0) if step is None else step
        self._feed(at, arm, variant, np.zeros_like(arm), columns)

    def _feed(
        self, step: int, arm: IntArray, variant: IntArray, attempt: IntArray, columns: Columns
    ) -> None:
        """Apply checked outcomes: statistics, skill, tiers, costs, retries and breakers.
        Every part touches only the families and arms of these outcomes."""
        cat = self.catalog
        reward, success, process, cost, status = columns
        family = cat.family_of_arm[arm]
        counted = (status == _OK) | (status == _FAILED)
        a, fam, succ, rew, proc = arm, family, success, reward, process
        if not counted.all():  # (all counted is the common case: no copies then)
            a, fam, succ, rew, proc = (x[counted] for x in (arm, family, success, reward, process))
        reward01 = (rew - cat.reward_low[fam]) / self._reward_span[fam]
        touched = self.stats.update(step, a, succ, reward01, proc)
        trained = self.skill.observe_training(a, succ)
        self._events += self.tiers.follow(self.skill, trained, step)
        if self._observes:
            self.policy.observe(self.view(), self.policy_state, touched)
        self._events += self.costs.learn(step, family, cost)[1]
        # Environment faults say nothing about the model: retry the task, watch the breaker.
        fault = (status == _TIMEOUT) | (status == _ENV_ERROR)
        if fault.any():
            self.retries.push(arm[fault], variant[fault], attempt[fault], step)
        self._events += self.breakers.record_outcomes(family, status, step)
        self.pipeline.reported(int(arm.shape[0]))

    # ------------------------------------------------------------------ probes
    def record_probe(
        self,
        family: str | int,
        score: float,
        *,
        tier: int | None = None,
        n: int = 1,
        step: int | None = None,
    ) -> None:
        """Record a held-out score of one family at one tier (default: its current tier)."""
        f = family_id(self.catalog, family)
        self.record_probes([f], [score], tiers=None if tier is None else [tier], n=[n], step=step)

    def record_probes(
        self,
        families: npt.ArrayLike,
        scores: npt.ArrayLike,
        *,
        tiers: npt.ArrayLike | None = None,
        n: npt.ArrayLike | None = None,
        step: int | None = None,
    ) -> None:
        """Record many probe points at once (aligned arrays; tiers default to the current
        ones). Validated as a whole (``parse_probes``: nothing is applied unless every
        point passes; one arm at most once per call)."""
        cat = self.catalog
        # By default a probe belongs to the latest batch's step (it ran after that report).
        probes = parse_probes(
            cat, self.tiers.tier, families, scores, tiers, n, step, max(self.step - 1, 0)
        )
        fam, sc, tr, nn, at = probes.family, probes.score, probes.tier, probes.n, probes.step
        self.listeners.probes(at, fam, tr, sc, nn)
        arm = cat.arm_start[fam] + tr
        st = self.stats
        st.probe_score[arm] = sc
        st.probe_n[arm] = nn
        st.probe_step[arm] = at
        self.evidence.probed(arm, sc, nn)
        ladder = ~cat.tier_separate[fam]
        c_fam, c_score, c_n, c_tier = fam, sc, nn, tr
        if not ladder.all():
            # A separate-skill family's curve point is its mean over every tier probed.
            sep = np.unique(fam[~ladder])
            mean, items = self.evidence.curve_points(sep)
            c_fam = np.concatenate([fam[ladder], sep])
            c_score = np.concatenate([sc[ladder], mean])
            c_n = np.concatenate([nn[ladder], items])
            c_tier = np.concatenate([tr[ladder], self.tiers.tier[sep]])
        steps = np.full(c_fam.shape[0], at, dtype=np.int64)
        self.curves.record(c_fam, c_score, c_n, steps, tiers=c_tier)
        probed = self.skill.observe_probes(fam[ladder], tr[ladder], sc[ladder], nn[ladder], at)
        self._events += self.tiers.follow(self.skill, probed, at)
        self._events += self.flags.refresh(self.skill, at)
        self.pipeline.invalidate()

    def probe_targets(self) -> tuple[IntArray, IntArray]:
        """(families, tiers) whose probes make a round's curve points: every family at
        ``probe_tier``, and every other tier of families whose tiers are separate skills
        (their curve point is the mean over all their tiers, so all are probed)."""
        cat = self.catalog
        tier = self.probe_tier
        others = cat.tier_separate[cat.family_of_arm] & (cat.tier_of_arm != tier[cat.family_of_arm])
        families = np.concatenate([np.arange(cat.n_families), cat.family_of_arm[others]])
        return families, np.concatenate([tier, cat.tier_of_arm[others]])

    def probe_round(self, probe: ProbeMany) -> ProbeRound:
        """Run one synchronous probe round of the ``probe_targets`` through
        ``probe(families, tiers) -> (scores, n)``; the skill model places every family
        from whatever tier its probe was at.

        The ProbeRunner is the asynchronous, budgeted way; this is for a trainer (or a
        benchmark) that can evaluate many families at once between steps."""
        families, tiers = self.probe_targets()
        scores, n = call_probe_many(probe, families, tiers)
        self.record_probes(families, scores, tiers=tiers, n=n)
        return ProbeRound(families=families, tiers=tiers, scores=scores, n=n)

    def probe_snapshot(self) -> ProbeSnapshot:
        """What a ProbeRunner needs to choose the next families to probe (copied now)."""
        cat = self.catalog
        tiers = self.probe_tier
        current = cat.arm_start[:-1] + tiers
        slope, _, _ = self.curves.slope()
        drift = np.abs(self.stats.success_fast[current] - self.stats.success_slow[current])
        return ProbeSnapshot(
            step=self.step,
            tiers=tiers,
            weights=self.weights().family.copy(),
            last_probe_step=self.stats.probe_step[current].copy(),
            change=np.where(np.isfinite(slope), np.abs(slope) * self.config.probe_window, drift),
            allowed=self.breakers.probe_allowed.copy(),
        )

    def apply_probe_results(self, results: ProbeResults) -> None:
        """Record what a ProbeRunner drained: scores of the probes that succeeded, and every
        success or failure for the breakers. Call it from the training thread, between
        steps (``runner.drain()`` is the thread-safe hand-over)."""
        if len(results) == 0:
            return
        width = int(self.catalog.n_tiers.max()) + 1
        keep = np.flatnonzero(results.ok)
        # A drain may hold several rounds, and record_probes takes an arm once a call:
        # repeats go in later calls, in arrival order.
        rank = occurrence_rank(results.families[keep] * width + results.tiers[keep])
        for r in range(int(rank.max(initial=-1)) + 1):
            sel = keep[rank == r]
            self.record_probes(
                results.families[sel],
                results.scores[sel],
                tiers=results.tiers[sel],
                n=results.n[sel],
            )
        self._events += self.breakers.record_probe_results(results.families, results.ok, self.step)

    # ------------------------------------------------------------------ tokens, listeners
    @property
    def batch_token(self) -> int:
        """The token this scheduler's batches carry (``Batch.token``)."""
        return int(self._token)

    def awaiting_report(self) -> bool:
        """Whether any batch drawn is still awaiting its report."""
        return len(self._pending) > 0

    def adopt_token(self, token: int) -> None:
        """Take another scheduler's batch token: replicas of one run (every rank of a
        ReplicatedScheduler) draw the same batches and accept each other's reports."""
        if self.awaiting_report():
            raise ConfigError("adopt_token: batches are awaiting a report; adopt before drawing")
        self._token = int(token)

    def add_listener(self, listener: Listener) -> None:
        """Have ``listener`` hear of every report, probe and step boundary (scheduler/
        _listeners.py): ``sched.add_listener(recorder)`` records a run with no second call."""
        self.listeners.add(listener)

    def remove_listener(self, listener: Listener) -> None:
        self.listeners.remove(listener)

    def drain_events(self) -> list[Event]:
        """Events since the last call, oldest first."""
        return self._events.drain()

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: stats, skill, policy state, cursors, RNG
        (the layout and its format: scheduler/_checkpoint.py)."""
        return scheduler_state(self)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state from ``state_dict``; the next batch is the one the saved run would
        have drawn. The whole state is migrated and checked first (scheduler/_checkpoint.py):
        a ConfigError names every bad field, and nothing of a rejected state is applied."""
        apply_state(self, checked_state(self, state))
