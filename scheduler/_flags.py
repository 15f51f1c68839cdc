"""Flags: what the skill model says a family is (mastered, idle, suspected of hacking).

Each flag is one ``Detector``, a small object that reads the skill model and returns a
boolean per family, as a policy returns weights. ``FlagBoard`` holds the flags the weights
were last computed from, and turns every change into an event. Flags are read when the
weights are recomputed (``WeightPipeline``), so their cost is paid once per refresh, not
per step.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from domains import Catalog
from policies import SkillModel

from ._events import Event

BoolArray = npt.NDArray[np.bool_]
Int8Array = npt.NDArray[np.int8]

_IDLE_REASONS = ("", "out_of_reach", "flat", "stalled", "out_of_reach", "stalled")
_STALLED = 3
_UNTRIED = 4  # out of reach and ``SkillModel.on_trial``: it takes a spare share
_STALLED_EARLY = 5  # ``SkillModel.stalled_early``: a larger cap than a stall on patience


class Detector(Protocol):
    """One flag over the families, read from the skill model."""

    name: str  # the event kind when the flag turns on (``<name>_cleared`` when off)

    def flags(self, skill: SkillModel) -> BoolArray: ...

    def reason(self, skill: SkillModel, families: npt.NDArray[np.int64]) -> list[str] | None:
        """Why each of these families is flagged (an event payload), or None."""
        ...


class Mastered:
    """The top tier passes at ``mastered_at`` with confidence."""

    name = "mastered"

    def flags(self, skill: SkillModel) -> BoolArray:
        return skill.mastered()

    def reason(self, skill: SkillModel, families: npt.NDArray[np.int64]) -> list[str] | None:
        return None


class Idle:
    """Nothing to teach now: out of reach, a flat (coin-flip) slope, or stalled."""

    name = "idle"

    def __init__(self) -> None:
        self._codes: Int8Array | None = None  # the reasons behind the latest flags()

    @property
    def codes(self) -> Int8Array | None:
        """int8 [n_families]: the latest flags' reasons (0 none, 1 out of reach, 2 flat,
        3 stalled, 4 out of reach before it was tried, 5 stalled early), or None before the
        first read."""
        return self._codes

    def flags(self, skill: SkillModel) -> BoolArray:
        # the first reason that holds (np.select's rule, without its per-call set-up)
        out_of_reach, flat, stalled = skill.out_of_reach(), skill.flat(), skill.stalled()
        reach = np.where(skill.on_trial(), _UNTRIED, 1)
        stall = np.where(skill.stalled_early(), _STALLED_EARLY, _STALLED)
        self._codes = np.where(
            out_of_reach, reach, np.where(flat, 2, np.where(stalled, stall, 0))
        ).astype(np.int8)
        result: BoolArray = self._codes > 0
        return result

    def reason(self, skill: SkillModel, families: npt.NDArray[np.int64]) -> list[str] | None:
        """The reasons read by the latest ``flags()`` (``FlagBoard.refresh`` asks right
        after it, so the three tests are not run twice)."""
        if self._codes is None:
            self.flags(skill)
        assert self._codes is not None
        return [_IDLE_REASONS[int(c)] for c in self._codes[families].tolist()]


class Hacked:
    """Held-out probes fall short of the training evidence beyond the other families."""

    name = "suspected_reward_hacking"

    def flags(self, skill: SkillModel) -> BoolArray:
        return skill.hacked()

    def reason(self, skill: SkillModel, families: npt.NDArray[np.int64]) -> list[str] | None:
        return None


def default_detectors() -> tuple[Detector, ...]:
    """A fresh set of the three flags (each board owns its own: Idle keeps state)."""
    return (Mastered(), Idle(), Hacked())


class FlagBoard:
    """The flags of every ladder family, as of the latest refresh, with change events."""

    def __init__(self, catalog: Catalog, detectors: tuple[Detector, ...] | None = None) -> None:
        self._catalog = catalog
        self.detectors = detectors if detectors is not None else default_detectors()
        # bool [n_detectors, n_families]: the flags as last read (separate-skill families
        # are never flagged here: their tiers are judged arm by arm, ProbeEvidence)
        self.flags: BoolArray = np.zeros((len(self.detectors), catalog.n_families), dtype=bool)
        # (model, version) the flags were read at; demand() saves and restores it
        self.read_at: tuple[int, int] | None = None

    def spare_first(self) -> BoolArray:
        """bool [n_families]: the flagged families that take a spare share first when every
        family is flagged: the mastered (their practice keeps what was learned), the
        merely stalled (they may still learn) and the out-of-reach not yet tried (a slow
        starter passes nothing at first); not the tried out-of-reach, flat or hacked."""
        codes = self._idle_codes()
        first: BoolArray = self.row("mastered") | self.stalled() | (codes == _UNTRIED)
        return first

    def stalled(self) -> BoolArray:
        """bool [n_families]: idle because their tier stopped rising (they may still learn)."""
        codes = self._idle_codes()
        result: BoolArray = (codes == _STALLED) | (codes == _STALLED_EARLY)
        return result

    def stalled_early(self) -> BoolArray:
        """bool [n_families]: stalled before ``patience``'s test spoke (a guessable family,
        or one of one tier, that has not risen): a slow starter looks the same, so it keeps
        a larger cap."""
        result: BoolArray = self._idle_codes() == _STALLED_EARLY
        return result

    def _idle_codes(self) -> Int8Array:
        """int8 [n_families]: why each family is idle as last read (0: it is not)."""
        for detector in self.detectors:
            if isinstance(detector, Idle) and detector.codes is not None:
                return detector.codes
        return np.zeros(self._catalog.n_families, dtype=np.int8)

    def row(self, name: str) -> BoolArray:
        """bool [n_families]: the flag ``name`` as last read."""
        names = [d.name for d in self.detectors]
        result: BoolArray = self.flags[names.index(name)]
        return result

    def refresh(self, skill: SkillModel, step: int) -> list[Event]:
        """Read every flag; an event for each family whose flag turned on or off. Nothing to
        read while the skill model has not changed since the last time (a probe round
        refreshes the flags, and the weights it invalidates would read them again)."""
        if (id(skill), skill.version) == self.read_at:
            return []
        self.read_at = (id(skill), skill.version)
        ladder = ~self._catalog.tier_separate
        new = np.stack([d.flags(skill) for d in self.detectors]) & ladder
        changed = new != self.flags
        events: list[Event] = []
        if changed.any():
            events = self._events(skill, step, new, changed)
        self.flags = new
        return events

    def _events(
        self, skill: SkillModel, step: int, new: BoolArray, changed: BoolArray
    ) -> list[Event]:
        cat = self._catalog
        events: list[Event] = []
        for row, detector in enumerate(self.detectors):
            families = np.flatnonzero(changed[row])
            if not families.size:
                continue
            on = new[row, families]
            reasons = detector.reason(skill, families[on]) or []
            why = dict(zip(families[on].tolist(), reasons, strict=False))
            for f, is_on in zip(families.tolist(), on.tolist(), strict=True):
                payload: dict[str, Any] = {"on": bool(is_on)}
                if is_on and f in why:
                    payload["reason"] = why[f]
                events.append(
                    Event(
                        step=step,
                        kind=detector.name if is_on else f"{detector.name}_cleared",
                        family=cat.family_names[f],
                        domain=cat.domain_names[int(cat.domain_of_family[f])],
                        payload=payload,
                    )
                )
        return events

    def state_dict(self) -> npt.NDArray[np.bool_]:
        return self.flags.copy()

    def load_state_dict(self, flags: Any) -> None:
        self.flags = np.asarray(flags, dtype=bool).copy()
        self.read_at = None
