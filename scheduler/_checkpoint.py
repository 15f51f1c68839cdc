"""Scheduler checkpoints: the versioned format, its named migrations, the whole-state check.

``Scheduler.load_state_dict`` calls :func:`checked_state` first. It migrates an older
format step by step, then checks every field of the state (each component checks its own
part with ``check_state``; the structure comes from what the live components return, so a
field added to one is checked too), and raises one ConfigError naming every bad field
(``checkpoint: tiers.tier: must be in [0, 3), got 99 at [2]``). Only a state that passes
is applied, so a rejected checkpoint changes nothing.

Format history (bump ``STATE_FORMAT`` and append a ``Migration`` for every change):

1. the first release. Fields added while it was current (``stats.prev_probe_*``,
   ``stats.lookahead_*``, ``tiers.taught``, ``tiers.innate``, ``detectors.coin``,
   ``cached_weights.tier``) may be missing.
2. ``pending`` holds the rows of every batch awaiting a report with the drawing
   scheduler's token (format 1 held only each batch's length), and every field is required
   (``skill`` and ``skill_flags`` when the scheduler runs a skill model, as in format 1).
3. the skill model is the only tier model: ``skill`` and ``skill_flags`` are required,
   ``tiers`` holds only ``tier`` and ``last_change``, and the legacy parts (``detectors``,
   ``stats.prev_probe_*`` and ``stats.lookahead_*``, the tier controller's counts) are gone.
   A format-2 state of the legacy controller starts its skill model afresh (logged).
   ``cached_weights`` may carry ``episodes_since`` (the refresh rule's count).
4. the skill model's ``episodes_at_probe``, ``trained_low`` and ``built`` are required
   (added while format 3 was current, they were refused as missing by the structural
   check); a format-3 state without them gets what the model read before each existed:
   ``episodes`` for the first and the last (every episode counted), tier 0 for
   ``trained_low`` (every probed tier counts as trained).
5. the skill model's ``trained_low`` is gone (hack evidence from every probed tier: the
   rule it kept moved nothing on the quality grid's ablation); a format-4 state drops it.
6. the skill model's hacking test compares a probe with the training at the same arm since
   the family's last probe round: ``since_n`` and ``since_k`` (int32 [n_arms]) and
   ``window_closed`` (the step of the round that closed each family's window, -1 open)
   are new, and ``episodes_at_probe`` is gone. A format-5 state starts every window empty
   and open (no training since the last probe: the next round gives no hack evidence).
7. the skill model's ``top_tier`` (float64 [4, n_families]: the top tier's training
   episodes passed and run, and its probe items passed and probed, fading) is new. A
   format-6 state starts it at zero: the belief alone decides mastery until the top tier
   has been trained and probed again.
8. the skill model's ``top_tier_start`` (float64 [2, n_families]: each family's first 64
   top-tier probe items, passed and probed) is new. A format-7 state starts it at zero:
   the first items after the resume are each family's start.
9. the skill model's ``top_tier_below`` (float64 [2, n_families]: the training episodes
   under each family's top tier, passed and run, fading) is new. A format-8 state starts
   it at zero: no family's top-tier probes read under its training until it has trained
   under the top again.
10. the skill model's ``top_tier_first`` (uint8 [2, n_families]: each family's first 16
   training episodes at any tier, passed and run) is new. A format-9 state gets 16
   episodes run and none passed for every family: no family reads coin-like, so its
   flatness test waits for the information it waited for before.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from policies import policy_params

from ._errors import ConfigError
from ._events import Event, EventLog
from ._pending import PendingBatches
from ._state import ArmStats
from ._statecheck import as_array, compare, finite_like, non_negative, rule

if TYPE_CHECKING:
    from ._scheduler import Scheduler

log = logging.getLogger(__name__)

STATE_FORMAT = 10
_SHOWN = 10  # problems spelled out in the message; the rest are counted


@dataclass(frozen=True)
class Migration:
    """One named step that takes a state of format ``version`` a step toward the next
    format (the last step of a version sets ``format`` to ``version + 1``)."""

    version: int
    name: str
    apply: Callable[[dict[str, Any], Scheduler], dict[str, Any]]


def _fill_fields_added_in_v1(state: dict[str, Any], sched: Scheduler) -> dict[str, Any]:
    """Fields added while format 1 was current get the value a fresh run starts with
    (``tiers.taught``: the episodes the state's statistics counted per family, so no family
    is called innate on faith)."""
    stats = state.get("stats")
    if isinstance(stats, Mapping):
        fresh = ArmStats(sched.catalog.n_arms, sched.config.ema_fast, sched.config.ema_slow)
        state["stats"] = {**fresh.state_dict(), **stats}
    tiers, stats = state.get("tiers"), state.get("stats")
    if isinstance(tiers, Mapping) and "taught" not in tiers and isinstance(stats, Mapping):
        count = as_array(stats.get("count"))
        if (
            count is not None
            and count.shape == (sched.catalog.n_arms,)
            and count.dtype.kind in "iu"
        ):
            cat = sched.catalog
            taught = np.bincount(cat.family_of_arm, weights=count, minlength=cat.n_families)
            state["tiers"] = {**tiers, "taught": taught.astype(np.float64)}
    cached = state.get("cached_weights")
    if isinstance(cached, Mapping) and "tier" not in cached:
        cat = sched.catalog
        state["cached_weights"] = {**cached, "tier": 1.0 / cat.n_tiers[cat.family_of_arm]}
    return state


def _pending_rows(state: dict[str, Any], sched: Scheduler) -> dict[str, Any]:
    """Format 1 kept only the length of each batch awaiting a report, too little to check
    a report against: those batches are dropped (a report of one is refused as not
    awaited). A checkpoint is normally taken after the step's report, so none are."""
    old = state.get("pending")
    if isinstance(old, Mapping) and old:
        log.warning(
            "checkpoint of format 1: %d batch(es) awaiting a report dropped (steps %s)",
            len(old),
            ", ".join(map(str, old)),
        )
    cat = sched.catalog
    state["pending"] = PendingBatches(0, cat.family_of_arm, cat.tier_of_arm).state_dict()
    return state


_LEGACY_STATS = (
    "prev_probe_score",
    "prev_probe_step",
    "lookahead_passed",
    "lookahead_n",
    "lookahead_from",
)


def _drop_legacy_parts(state: dict[str, Any], sched: Scheduler) -> dict[str, Any]:
    """The legacy tier controller and detectors are gone: their fields are dropped, and a
    state saved without a skill model gets a fresh one (its statistics, probes and
    curves carry over; the skill is learned again from what comes next)."""
    state.pop("detectors", None)
    stats = state.get("stats")
    if isinstance(stats, Mapping):
        state["stats"] = {k: v for k, v in stats.items() if k not in _LEGACY_STATS}
    tiers = state.get("tiers")
    if isinstance(tiers, Mapping):
        state["tiers"] = {k: v for k, v in tiers.items() if k in ("tier", "last_change")}
    if state.get("skill") is None:
        log.warning("checkpoint of format 2 without a skill model: the skill model starts afresh")
        state["skill"] = type(sched.skill)(sched.catalog, sched.skill.config).state_dict()
        state["skill_flags"] = np.zeros_like(sched.flags.flags)
    return state


def _fill_skill_fields_added_in_v3(state: dict[str, Any], sched: Scheduler) -> dict[str, Any]:
    """The skill fields added while format 3 was current, at the values the model read
    before each of them existed."""
    skill = state.get("skill")
    if isinstance(skill, Mapping):
        skill = dict(skill)
        episodes = skill.get("episodes")
        skill.setdefault("episodes_at_probe", episodes)
        skill.setdefault("built", episodes)
        state["skill"] = skill
    return state


def _drop_trained_low(state: dict[str, Any], sched: Scheduler) -> dict[str, Any]:
    """The skill model keeps no lowest tier trained since a probe any more."""
    skill = state.get("skill")
    if isinstance(skill, Mapping):
        state["skill"] = {k: v for k, v in skill.items() if k != "trained_low"}
    return state


def _same_arm_windows(state: dict[str, Any], sched: Scheduler) -> dict[str, Any]:
    """The hacking test's windows of training per arm since the last probe, empty; the
    episode count at the last probe they replace is dropped."""
    skill = state.get("skill")
    if isinstance(skill, Mapping):
        skill = {k: v for k, v in skill.items() if k != "episodes_at_probe"}
        for name in ("since_n", "since_k"):
            skill.setdefault(name, np.zeros(sched.catalog.n_arms, dtype=np.int32))
        skill.setdefault("window_closed", np.full(sched.catalog.n_families, -1.0))
        state["skill"] = skill
    return state


def _new_skill_array(
    name: str, make: Callable[[Scheduler], npt.NDArray[Any]]
) -> Callable[[dict[str, Any], Scheduler], dict[str, Any]]:
    """A migration that gives the skill model's state a new array ``name``, as ``make``
    builds it for the scheduler's catalog."""

    def migrate(state: dict[str, Any], sched: Scheduler) -> dict[str, Any]:
        skill = state.get("skill")
        if isinstance(skill, Mapping):
            skill = dict(skill)
            skill.setdefault(name, make(sched))
            state["skill"] = skill
        return state

    return migrate


def _zero_skill_rows(name: str, rows: int) -> Callable[[dict[str, Any], Scheduler], dict[str, Any]]:
    """A migration that gives the skill model's state a new float64 [rows, n_families]
    array ``name`` of zeros (none counted yet)."""
    return _new_skill_array(name, lambda sched: np.zeros((rows, sched.catalog.n_families)))


def _first_episodes_unknown(sched: Scheduler) -> npt.NDArray[np.uint8]:
    """Format 9 to 10: every family's first training episodes as run and none passed."""
    first = np.zeros((2, sched.catalog.n_families), dtype=np.uint8)
    first[1] = sched.skill.top_tier.FIRST
    return first


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "fill fields added in format 1", _fill_fields_added_in_v1),
    Migration(1, "pending batches as rows", _pending_rows),
    Migration(2, "drop the legacy tier controller and detectors", _drop_legacy_parts),
    Migration(3, "fill the skill fields added in format 3", _fill_skill_fields_added_in_v3),
    Migration(4, "drop the skill model's lowest tier trained", _drop_trained_low),
    Migration(5, "the hacking test's windows of training per arm", _same_arm_windows),
    Migration(6, "the skill model's counts of its top tier", _zero_skill_rows("top_tier", 4)),
    Migration(
        7, "the skill model's first top-tier probe items", _zero_skill_rows("top_tier_start", 2)
    ),
    Migration(
        8, "the skill model's training under the top tier", _zero_skill_rows("top_tier_below", 2)
    ),
    Migration(
        9,
        "the skill model's first training episodes",
        _new_skill_array("top_tier_first", _first_episodes_unknown),
    ),
)


def migrate(state: Mapping[str, Any], sched: Scheduler) -> dict[str, Any]:
    """``state`` brought to ``STATE_FORMAT`` by the migrations, in order (a shallow copy;
    the caller's state is never changed)."""
    out = dict(state)
    version = out.get("format")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ConfigError(f"checkpoint: unknown format {version!r}")
    if version > STATE_FORMAT:
        raise ConfigError(
            f"checkpoint: format {version} was written by a newer version of "
            f"curriculum-scheduler (this one reads up to {STATE_FORMAT}); upgrade to resume it"
        )
    while version < STATE_FORMAT:
        for step in MIGRATIONS:
            if step.version == version:
                out = step.apply(out, sched)
        version += 1
        out["format"] = version
    return out


def checked_state(sched: Scheduler, state: Any) -> dict[str, Any]:
    """``state`` migrated and checked whole against ``sched``; ConfigError lists every
    problem. Pure: ``sched`` is read, never changed."""
    if not isinstance(state, Mapping):
        raise ConfigError(f"checkpoint: must be a mapping, got {type(state).__name__}")
    if state.get("catalog") != sched.catalog.fingerprint:
        raise ConfigError(
            "checkpoint: made with a different catalog (the manifests changed); "
            "resume with the same manifests or start a new run"
        )
    mine = policy_params(sched.policy)
    if state.get("policy") != mine:
        raise ConfigError(
            f"checkpoint: made with policy {state.get('policy')!r}, this scheduler runs {mine!r}"
        )
    migrated = migrate(state, sched)
    problems = _problems(sched, migrated)
    if problems:
        shown = [f"checkpoint: {p}" for p in problems[:_SHOWN]]
        more = len(problems) - _SHOWN
        raise ConfigError("; ".join(shown) + (f"; and {more} more" if more > 0 else ""))
    return migrated


def _problems(sched: Scheduler, state: dict[str, Any]) -> list[str]:
    cat = sched.catalog
    live = sched.state_dict()
    plain = ["seed", "step", "cursor", "cost", "cost_seen", "cost_alarm", "compute_ratio"]
    plain += ["quota_short", "family_factor"]
    problems = compare({k: live[k] for k in plain}, state, "")
    for key in ("stats", "tiers", "breakers", "retries", "curves", "rng"):
        if key not in state:
            problems.append(f"{key}: missing")
    for key in ("policy_state", "pending", "events"):
        if key not in state:
            problems.append(f"{key}: missing")
    if problems:
        return problems
    step = int(state["step"])
    if step < 0:
        problems.append(f"step: must be >= 0, got {step}")
    if int(state["seed"]) < 0:
        problems.append(f"seed: must be >= 0, got {state['seed']}")
    non_negative(problems, state, ("cursor", "cost_seen", "family_factor"), "")
    for key in ("cost", "compute_ratio", "family_factor"):
        arr = np.asarray(state[key], dtype=np.float64)
        rule(problems, key, arr, ~np.isfinite(arr), "must be finite")
    for key in ("cost", "compute_ratio"):
        arr = np.asarray(state[key], dtype=np.float64)
        rule(problems, key, arr, arr <= 0, "must be > 0")
    problems += _rng_problems(state["rng"])
    template = sched.policy.init_state(cat)
    policy = compare(template, state["policy_state"], "policy_state")
    if not policy:
        finite_like(policy, template, state["policy_state"], "policy_state")
    problems += policy
    problems += sched.stats.check_state(state["stats"])
    problems += sched.tiers.check_state(state["tiers"])
    problems += sched.breakers.check_state(state["breakers"])
    problems += sched.retries.check_state(state["retries"])
    problems += sched.curves.check_state(state["curves"])
    problems += _skill_problems(sched, state)
    problems += sched._pending.check_state(state["pending"], max(step, 0), cat.n_arms)
    problems += _events_problems(state["events"], max(step, 0))
    problems += _cached_problems(sched, state.get("cached_weights"), max(step, 0))
    return problems


def _skill_problems(sched: Scheduler, state: Mapping[str, Any]) -> list[str]:
    """The skill model's part: the structure of its ``state_dict()`` and the flags, then
    its own load rules tried on a scratch model (so this stays in step with the model
    without a copy of its rules here)."""
    problems: list[str] = []
    for key in ("skill", "skill_flags"):
        if key not in state:
            problems.append(f"{key}: missing")
    if problems:
        return problems
    template = sched.skill.state_dict()
    problems = compare(template, state["skill"], "skill")
    problems += compare(sched.flags.flags, state["skill_flags"], "skill_flags")
    if problems:
        return problems
    finite_like(
        problems,
        type(sched.skill)(sched.catalog, sched.skill.config).state_dict(),
        state["skill"],
        "skill",
    )
    if not problems:
        scratch = type(sched.skill)(sched.catalog, sched.skill.config)
        try:
            scratch.load_state_dict(dict(state["skill"]))
        except (KeyError, ValueError, TypeError) as exc:
            text = str(exc)
            problems.append(text if text.startswith("skill") else f"skill: {text}")
    return problems


def _rng_problems(rng: Any) -> list[str]:
    if not isinstance(rng, Mapping) or rng.get("bit_generator") != "PCG64":
        got = rng.get("bit_generator") if isinstance(rng, Mapping) else type(rng).__name__
        return [f"rng: must be the state of a PCG64 generator, got {got!r}"]
    scratch = np.random.PCG64()
    try:
        scratch.state = dict(rng)  # type: ignore[assignment]
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        return [f"rng: not a valid PCG64 state ({exc})"]
    return []


def _events_problems(events: Any, step: int) -> list[str]:
    if not isinstance(events, list | tuple):
        return [f"events: must be a list, got {type(events).__name__}"]
    problems: list[str] = []
    for i, e in enumerate(events):
        where = f"events[{i}]"
        if not isinstance(e, Mapping):
            problems.append(f"{where}: must be a mapping, got {type(e).__name__}")
            continue
        try:
            event = Event(**e)
        except TypeError as exc:
            problems.append(f"{where}: {exc}")
            continue
        if (
            not isinstance(event.step, int)
            or isinstance(event.step, bool)
            or not (0 <= event.step <= step)
        ):
            problems.append(f"{where}.step: must be an integer in [0, {step}], got {event.step!r}")
        if not isinstance(event.kind, str) or not event.kind:
            problems.append(f"{where}.kind: must be a non-empty string, got {event.kind!r}")
        for name in ("family", "domain"):
            value = getattr(event, name)
            if value is not None and not isinstance(value, str):
                problems.append(f"{where}.{name}: must be a string or null, got {value!r}")
        if not isinstance(event.payload, Mapping):
            problems.append(f"{where}.payload: must be a mapping, got {event.payload!r}")
        if len(problems) >= _SHOWN:
            break
    return problems


def _cached_problems(sched: Scheduler, cached: Any, step: int) -> list[str]:
    """The cached weights, if any: finite, non-negative, the family level a distribution."""
    if cached is None:
        return []
    cat = sched.catalog
    shapes = {"arm": cat.n_arms, "family": cat.n_families, "domain": cat.n_domains}
    shapes["tier"] = cat.n_arms
    template: dict[str, Any] = {k: np.zeros(n) for k, n in shapes.items()}
    template["step"] = 0
    if isinstance(cached, Mapping) and "episodes_since" in cached:
        template["episodes_since"] = 0
    problems = compare(template, cached, "cached_weights")
    if problems:
        return problems
    if not 0 <= int(cached["step"]) <= step:
        problems.append(f"cached_weights.step: must be in [0, {step}], got {cached['step']}")
    if int(cached.get("episodes_since", 0)) < 0:
        problems.append(
            f"cached_weights.episodes_since: must be >= 0, got {cached['episodes_since']}"
        )
    for key in shapes:
        arr = np.asarray(cached[key], dtype=np.float64)
        where = f"cached_weights.{key}"
        rule(problems, where, arr, ~np.isfinite(arr) | (arr < 0), "must be finite and >= 0")
    family = np.asarray(cached["family"], dtype=np.float64)
    if np.isfinite(family).all() and abs(float(family.sum()) - 1.0) > 1e-6:
        problems.append(f"cached_weights.family: must sum to 1, got {float(family.sum())!r}")
    return problems


def scheduler_state(sched: Scheduler) -> dict[str, Any]:
    """The state of format ``STATE_FORMAT``: every part's ``state_dict`` under its key."""
    return {
        "format": STATE_FORMAT,
        "catalog": sched.catalog.fingerprint,
        "policy": policy_params(sched.policy),
        "config": asdict(sched.config),
        "seed": sched.seed,
        "step": sched.step,
        "rng": sched.rng.bit_generator.state,
        "stats": sched.stats.state_dict(),
        "tiers": sched.tiers.state_dict(),
        "skill": sched.skill.state_dict(),
        "skill_flags": sched.flags.state_dict(),
        "policy_state": copy.deepcopy(sched.policy_state),
        "cursor": sched.variants.cursor.copy(),
        **sched.costs.state_dict(),
        **sched.pipeline.state_dict(),
        "curves": sched.curves.state_dict(),
        "breakers": sched.breakers.state_dict(),
        "retries": sched.retries.state_dict(),
        "pending": sched._pending.state_dict(),
        "events": [asdict(e) for e in sched._events.peek()],
    }


def apply_state(sched: Scheduler, state: dict[str, Any]) -> None:
    """Put a state that ``checked_state`` passed into every part of ``sched``."""
    sched.stats.load_state_dict(state["stats"])
    sched.evidence.forget()
    sched.tiers.load_state_dict(state["tiers"])
    sched.skill.load_state_dict(state["skill"])
    sched.flags.load_state_dict(state["skill_flags"])
    sched.breakers.load_state_dict(state["breakers"])
    sched.retries.load_state_dict(state["retries"])
    sched.curves.load_state_dict(state["curves"])
    sched.variants.cursor = np.asarray(state["cursor"], dtype=np.int32).copy()
    sched.costs.load_state_dict(state)
    sched.pipeline.load_state_dict(state)
    sched.seed = sched.variants.seed = int(state["seed"])
    sched.step = int(state["step"])
    sched.rng.bit_generator.state = dict(state["rng"])
    sched.policy_state = copy.deepcopy(dict(state["policy_state"]))
    sched._pending.load_state_dict(state["pending"])
    # a resumed scheduler is the one that saved: it takes the token its awaited batches
    # carry, so the batches it draws next carry it too (and the state matches the saver's)
    tokens = np.asarray(state["pending"]["token"], dtype=np.int64)
    if tokens.size:
        sched._token = int(tokens[-1])
    sched._events = EventLog(Event(**e) for e in state["events"])
