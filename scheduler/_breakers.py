"""Circuit breakers: one per family, so a broken environment stops costing the run.

A breaker is CLOSED (normal), OPEN (the family is neither probed nor sampled) or HALF_OPEN
(a trickle of traffic tests whether it works again). Evidence that trips a CLOSED breaker:

* ``probe_failures`` probe calls in a row that raised, timed out or returned garbage;
* ``fault_threshold`` faults among the family's last ``fault_window`` outcomes, where a fault
  is an outcome whose status is in ``fault_statuses`` (default ``timeout`` and ``env_error``:
  the environment's fault, not the model's; a model ``failed`` is not a fault);
* optionally (``failed_streak > 0``) that many ``failed`` outcomes in a row with no ``ok``
  in between, for a family whose verifier rejects everything (off by default: a hard tier
  legitimately fails a lot).

After ``cooldown_steps`` an OPEN breaker goes HALF_OPEN. There, any failure (probe or fault)
reopens it with a cool-down ``cooldown_growth`` times longer (capped), and
``half_open_successes`` good results (an ok probe or a non-fault outcome) close it. All
results passed in one call count together, whatever their order. Results for an OPEN family
(e.g. from a batch drawn before it opened) are ignored.

Everything is an array of shape ``[n_families]``; every transition returns an :class:`Event`
carrying the evidence.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from domains import Catalog

from ._batch import Status
from ._errors import ConfigError
from ._events import Event
from ._statecheck import compare, non_negative, rule
from ._variants import occurrence_rank

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

CLOSED, OPEN, HALF_OPEN = 0, 1, 2
STATE_NAMES = ("closed", "open", "half_open")
_ARRAYS = (
    "state",
    "probe_streak",
    "failed_streak",
    "ring",
    "ring_cursor",
    "ring_filled",
    "opened_at",
    "cooldown",
    "half_open_ok",
    "trips",
)


@dataclass(frozen=True)
class BreakerConfig:
    """When a family's breaker opens, how long it stays open and how it recovers."""

    probe_failures: int = 3  # K consecutive failed probes open the breaker
    fault_window: int = 32  # W: the last W outcomes of a family are watched
    fault_threshold: int = 8  # faults among those W that open the breaker
    fault_statuses: tuple[str, ...] = ("timeout", "env_error")  # Status names that are faults
    failed_streak: int = 0  # >0: this many FAILED outcomes in a row open it; 0 = off
    cooldown_steps: int = 50  # steps an open breaker waits before going half-open
    cooldown_growth: float = 2.0  # cool-down multiplier each time half-open fails
    max_cooldown_steps: int = 1000
    half_open_successes: int = 3  # good results in half-open that close the breaker
    half_open_factor: float = 0.25  # sampling factor of a half-open family (1 closed, 0 open)

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, rule: str) -> None:
            if not ok:
                raise ConfigError(f"breakers.{name}: {rule}, got {getattr(self, name)!r}")

        need(self.probe_failures >= 1, "probe_failures", "must be >= 1")
        need(self.fault_window >= 1, "fault_window", "must be >= 1")
        need(
            1 <= self.fault_threshold <= self.fault_window,
            "fault_threshold",
            f"must be in [1, fault_window={self.fault_window}]",
        )
        need(self.failed_streak >= 0, "failed_streak", "must be >= 0 (0 turns it off)")
        need(self.cooldown_steps >= 1, "cooldown_steps", "must be >= 1")
        need(self.cooldown_growth >= 1.0, "cooldown_growth", "must be >= 1")
        need(
            self.max_cooldown_steps >= self.cooldown_steps,
            "max_cooldown_steps",
            f"must be >= cooldown_steps={self.cooldown_steps}",
        )
        need(self.half_open_successes >= 1, "half_open_successes", "must be >= 1")
        need(0.0 < self.half_open_factor <= 1.0, "half_open_factor", "must be in (0, 1]")
        names = ", ".join(s.name.lower() for s in Status)
        for s in self.fault_statuses:
            try:
                Status.parse(s)
            except (KeyError, ValueError, TypeError):
                raise ConfigError(
                    f"breakers.fault_statuses: {s!r} is not a status; use some of {names}"
                ) from None
        need(
            Status.OK not in {Status.parse(s) for s in self.fault_statuses},
            "fault_statuses",
            "must not contain ok",
        )

    @property
    def fault_codes(self) -> IntArray:
        """The fault statuses as int64 Status codes."""
        return np.array(sorted({int(Status.parse(s)) for s in self.fault_statuses}), np.int64)


class CircuitBreakers:
    """Breakers of every family of a catalog, as arrays of shape ``[n_families]``.

    >>> br = CircuitBreakers(catalog)
    >>> events = br.record_outcomes(batch.family, status, step)
    >>> events += br.tick(step)
    >>> factor = br.sampling_factor * detectors.weight_cap  # the weight multiplier
    """

    def __init__(self, catalog: Catalog, config: BreakerConfig | None = None) -> None:
        self.catalog = catalog
        self.config = config or BreakerConfig()
        n, w = catalog.n_families, self.config.fault_window
        self.state = np.zeros(n, dtype=np.int8)  # int8 [n_families], CLOSED/OPEN/HALF_OPEN
        self.probe_streak = np.zeros(n, dtype=np.int64)  # int64 [n_f], failed probes in a row
        self.failed_streak = np.zeros(n, dtype=np.int64)  # int64 [n_f], FAILED outcomes in a row
        self.ring = np.zeros((n, w), dtype=bool)  # bool [n_f, W], fault flag of recent outcomes
        self.ring_cursor = np.zeros(n, dtype=np.int64)  # int64 [n_f], outcomes ever written
        self.ring_filled = np.zeros(n, dtype=np.int64)  # int64 [n_f], valid slots (<= W)
        self.opened_at = np.full(n, -1, dtype=np.int64)  # int64 [n_f], step of the last opening
        self.cooldown = np.full(n, self.config.cooldown_steps, dtype=np.int64)  # int64 [n_f]
        self.half_open_ok = np.zeros(n, dtype=np.int64)  # int64 [n_f], good results half-open
        self.trips = np.zeros(n, dtype=np.int64)  # int64 [n_f], times opened
        self._fault_codes = self.config.fault_codes
        # bumped on every change of ``state``: readers of the factor and the mask recompute
        # them only then, and ``tick`` has nothing to do while no breaker is open
        self.version = 0
        self._any_open = False

    # ------------------------------------------------------------------ views
    @property
    def open_mask(self) -> BoolArray:
        """bool [n_families]: True where the breaker is OPEN."""
        return np.asarray(self.state == OPEN)

    @property
    def probe_allowed(self) -> BoolArray:
        """bool [n_families]: False only where the breaker is OPEN (half-open is probed)."""
        return np.asarray(self.state != OPEN)

    @property
    def sampling_factor(self) -> FloatArray:
        """float64 [n_families]: 1 closed, 0 open, ``half_open_factor`` half-open."""
        table = np.array([1.0, 0.0, self.config.half_open_factor])
        return np.asarray(table[self.state], dtype=np.float64)

    @property
    def window_faults(self) -> IntArray:
        """int64 [n_families]: faults among each family's last ``fault_window`` outcomes."""
        return np.asarray(self.ring.sum(axis=1), dtype=np.int64)

    # ------------------------------------------------------------------ evidence
    def record_probe_results(
        self, families: npt.ArrayLike, ok: npt.ArrayLike, now_step: int
    ) -> list[Event]:
        """Apply probe results (aligned arrays, in the order they happened)."""
        fam, good = self._families(families), np.asarray(ok, dtype=bool).reshape(-1)
        if fam.shape != good.shape:
            raise ValueError("families and ok must have one length")
        live = self.state[fam] != OPEN
        fam, good = fam[live], good[live]
        if fam.size == 0:
            return []
        touched, local = np.unique(fam, return_inverse=True)
        m = touched.shape[0]
        streak = _streak(local, reset=good, counted=~good, old=self.probe_streak[touched], n=m)
        self.probe_streak[touched] = streak
        bad = np.bincount(local, weights=~good, minlength=m) > 0
        oks = np.bincount(local, weights=good, minlength=m).astype(np.int64)
        trip = (self.state[touched] == CLOSED) & (streak >= self.config.probe_failures)
        return self._transition(now_step, touched, trip, bad, oks, "probe_failures")

    def record_outcomes(
        self, families: npt.ArrayLike, status: npt.ArrayLike, now_step: int
    ) -> list[Event]:
        """Apply trainer-reported outcome statuses (aligned with ``families``, Status
        codes). Only the families in the report are touched."""
        fam = self._families(families)
        st = np.asarray(status, dtype=np.int64).reshape(-1)
        if fam.shape != st.shape:
            raise ValueError("families and status must have one length")
        if self._any_open:
            live = self.state[fam] != OPEN
            fam, st = fam[live], st[live]
        if fam.size == 0:
            return []
        touched, local = np.unique(fam, return_inverse=True)
        if not st.any():  # every outcome ok (Status.OK is 0), the common case
            return self._record_all_ok(now_step, touched, local)
        return self._record_mixed(now_step, touched, local, st)

    def _record_mixed(
        self, now_step: int, touched: IntArray, local: IntArray, st: IntArray
    ) -> list[Event]:
        """``record_outcomes`` of statuses ``st`` of the families ``touched[local]``."""
        cfg = self.config
        m = touched.shape[0]
        fault = np.isin(st, self._fault_codes)
        self._push_ring(touched, local, fault)
        model = (st == Status.OK) | (st == Status.FAILED)  # outcomes that judge the model
        streak = _streak(
            local[model],
            reset=st[model] == Status.OK,
            counted=st[model] == Status.FAILED,
            old=self.failed_streak[touched],
            n=m,
        )
        self.failed_streak[touched] = streak
        bad = np.bincount(local, weights=fault, minlength=m) > 0
        oks = np.bincount(local, weights=~fault, minlength=m).astype(np.int64)
        closed = self.state[touched] == CLOSED
        faults = self.ring[touched].sum(axis=1)
        by_faults = closed & (faults >= cfg.fault_threshold)
        by_failed = (
            closed & (streak >= cfg.failed_streak)
            if cfg.failed_streak > 0
            else np.zeros(m, dtype=bool)
        )
        if not (by_faults | by_failed).any() and not (self._any_half_open(touched)):
            return []
        reason = np.where(by_failed & ~by_faults, "failed_streak", "outcome_faults")
        return self._transition(now_step, touched, by_faults | by_failed, bad, oks, reason)

    def _record_all_ok(self, now_step: int, touched: IntArray, local: IntArray) -> list[Event]:
        """``_record_mixed`` where every status is ok, in fewer passes, to the same end:
        each family's next ring slots are cleared (no fault), every FAILED streak ends, and
        only a half-open family can move."""
        w = self.config.fault_window
        count = np.bincount(local, minlength=touched.shape[0])
        written = np.minimum(count, w)  # the last W of a family's outcomes are kept
        row = np.repeat(touched, written)
        col = (np.repeat(self.ring_cursor[touched], written) + _ranks(written)) % w
        self.ring[row, col] = False
        self.ring_cursor[touched] += count
        self.ring_filled[touched] = np.minimum(self.ring_filled[touched] + count, w)
        self.failed_streak[touched] = 0
        closed = self.state[touched] == CLOSED
        # faults already in the ring (a closed family past the threshold trips when the
        # fault is written, so only a loaded state can hold one; checked all the same)
        trip = closed & (self.ring[touched].sum(axis=1) >= self.config.fault_threshold)
        if not trip.any() and not self._any_half_open(touched):
            return []
        no_fault = np.zeros(touched.shape[0], dtype=bool)
        return self._transition(now_step, touched, trip, no_fault, count, "outcome_faults")

    def tick(self, now_step: int) -> list[Event]:
        """Move OPEN breakers whose cool-down has passed to HALF_OPEN."""
        if not self._any_open:
            return []
        due = (self.state == OPEN) & (now_step - self.opened_at >= self.cooldown)
        if not due.any():
            return []
        self.state[due] = HALF_OPEN
        self.half_open_ok[due] = 0
        self._changed()
        return [
            self._event(
                now_step,
                "breaker_half_open",
                int(f),
                {"opened_at": int(self.opened_at[f]), "cooldown_steps": int(self.cooldown[f])},
            )
            for f in np.flatnonzero(due)
        ]

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"config": asdict(self.config)}
        out.update({name: getattr(self, name).copy() for name in _ARRAYS})
        return out

    def check_state(self, state: Any, where: str = "breakers") -> list[str]:
        """Problems with ``state`` as these breakers' state (pure: nothing is applied): the
        same config, every array of ``state_dict()`` with its shape, values in range."""
        if not isinstance(state, Mapping) or not isinstance(state.get("config"), Mapping):
            return [f"{where}.config: missing"]
        theirs = dict(state["config"])
        if isinstance(theirs.get("fault_statuses"), list):
            theirs["fault_statuses"] = tuple(theirs["fault_statuses"])
        mine = asdict(self.config)
        if theirs != mine:
            return [f"{where} were saved with config {theirs!r}, this run uses {mine!r}"]
        problems = compare(self.state_dict(), state, where)
        if problems:
            return problems
        st = np.asarray(state["state"])
        rule(problems, f"{where}.state", st, (st < CLOSED) | (st > HALF_OPEN), "must be 0, 1 or 2")
        counts = ("probe_streak", "failed_streak", "ring_cursor", "ring_filled", "half_open_ok")
        non_negative(problems, state, (*counts, "trips"), where)
        filled = np.asarray(state["ring_filled"])
        window = self.config.fault_window
        rule(problems, f"{where}.ring_filled", filled, filled > window, f"must be <= {window}")
        cooldown = np.asarray(state["cooldown"])
        rule(problems, f"{where}.cooldown", cooldown, cooldown < 1, "must be >= 1")
        opened = np.asarray(state["opened_at"])
        rule(problems, f"{where}.opened_at", opened, opened < -1, "must be a step >= -1")
        return problems

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore exactly; raises ConfigError on a state of another shape or config."""
        problems = self.check_state(state)
        if problems:
            raise ConfigError("checkpoint: " + "; ".join(problems))
        loaded: dict[str, np.ndarray] = {}
        for name in _ARRAYS:
            mine_arr: np.ndarray = getattr(self, name)
            try:
                arr = np.asarray(state[name], dtype=mine_arr.dtype)
            except (KeyError, ValueError, TypeError) as exc:
                raise ConfigError(f"checkpoint: breakers.{name}: {exc}") from None
            if arr.shape != mine_arr.shape:
                raise ConfigError(
                    f"checkpoint: breakers.{name}: shape {arr.shape}, expected {mine_arr.shape}"
                )
            loaded[name] = arr.copy()
        for name, arr in loaded.items():
            setattr(self, name, arr)
        self._changed()

    # ------------------------------------------------------------------ internals
    def _changed(self) -> None:
        self.version += 1
        self._any_open = bool((self.state == OPEN).any())

    def _any_half_open(self, touched: IntArray) -> bool:
        return bool((self.state[touched] == HALF_OPEN).any())

    def _families(self, families: npt.ArrayLike) -> IntArray:
        fam = np.asarray(families, dtype=np.int64).reshape(-1)
        if fam.size and (fam.min() < 0 or fam.max() >= self.catalog.n_families):
            raise ValueError(f"family ids must be in [0, {self.catalog.n_families})")
        return fam

    def _push_ring(self, touched: IntArray, local: IntArray, fault: BoolArray) -> None:
        """Write each outcome's fault flag into its family's ring, keeping the last W
        (``local`` indexes ``touched``, the report's families)."""
        w = self.config.fault_window
        count = np.bincount(local, minlength=touched.shape[0])
        rank = occurrence_rank(local)
        keep = rank >= count[local] - w  # only the last W of a family matter (no slot twice)
        f, r = touched[local[keep]], rank[keep]
        self.ring[f, (self.ring_cursor[f] + r) % w] = fault[keep]
        self.ring_cursor[touched] += count
        self.ring_filled[touched] = np.minimum(self.ring_filled[touched] + count, w)

    def _transition(
        self,
        step: int,
        touched: IntArray,
        trip: BoolArray,
        bad: BoolArray,
        oks: IntArray,
        reason: str | npt.NDArray[np.str_],
    ) -> list[Event]:
        """Open the ``trip`` families (CLOSED) among ``touched``; judge HALF_OPEN ones by
        ``bad`` / ``oks`` (arrays aligned with ``touched``)."""
        cfg = self.config
        half = self.state[touched] == HALF_OPEN
        good = half & ~bad
        self.half_open_ok[touched[good]] += oks[good]
        reopen = half & bad
        close = good & (self.half_open_ok[touched] >= cfg.half_open_successes)
        opened = trip | reopen
        if not (opened | close).any():
            return []
        why = np.broadcast_to(np.asarray(reason), trip.shape)
        evidence = {
            i: self._evidence(int(touched[i])) for i in np.flatnonzero(opened | close).tolist()
        }
        cooldown = self.cooldown[touched]
        grown = np.minimum(np.ceil(cooldown * cfg.cooldown_growth), cfg.max_cooldown_steps)
        cooldown = np.where(reopen, grown.astype(np.int64), cooldown)
        cooldown = np.where(trip | close, cfg.cooldown_steps, cooldown)
        self.cooldown[touched] = cooldown
        f_open = touched[opened]
        self.state[f_open] = OPEN
        self.opened_at[f_open] = step
        self.trips[f_open] += 1
        events = [
            self._event(
                step,
                "breaker_opened",
                int(touched[i]),
                {
                    **evidence[i],
                    "reason": str(why[i]) if trip[i] else f"half_open_{why[i]}",
                    "cooldown_steps": int(cooldown[i]),
                    "until_step": int(step + cooldown[i]),
                },
            )
            for i in np.flatnonzero(opened).tolist()
        ]
        events += [
            self._event(
                step,
                "breaker_closed",
                int(touched[i]),
                {**evidence[i], "trips": int(self.trips[touched[i]])},
            )
            for i in np.flatnonzero(close).tolist()
        ]
        self.state[touched[close]] = CLOSED
        reset = touched[opened | close]  # the next episode is judged on fresh evidence
        self.probe_streak[reset] = 0
        self.failed_streak[reset] = 0
        self.ring[reset] = False
        self.ring_filled[reset] = 0
        self.half_open_ok[reset] = 0
        self._changed()
        for e in events:
            log.info("%s: %s %s", e.kind, e.family, e.payload)
        return events

    def _evidence(self, f: int) -> dict[str, Any]:
        return {
            "consecutive_probe_failures": int(self.probe_streak[f]),
            "window_faults": int(self.ring[f].sum()),
            "window_outcomes": int(self.ring_filled[f]),
            "failed_streak": int(self.failed_streak[f]),
            "fault_statuses": list(self.config.fault_statuses),
            "half_open_successes": int(self.half_open_ok[f]),
            "previous_state": STATE_NAMES[int(self.state[f])],
        }

    def _event(self, step: int, kind: str, f: int, payload: dict[str, Any]) -> Event:
        cat = self.catalog
        return Event(
            step=int(step),
            kind=kind,
            family=cat.family_names[f],
            domain=cat.domain_names[int(cat.domain_of_family[f])],
            payload=payload,
        )


def _ranks(sizes: IntArray) -> IntArray:
    """0, 1, ..., size - 1 for each of ``sizes``, concatenated."""
    ends = np.cumsum(sizes)
    result: IntArray = np.arange(int(ends[-1])) - np.repeat(ends - sizes, sizes)
    return result


def _streak(
    fam: IntArray, *, reset: BoolArray, counted: BoolArray, old: IntArray, n: int
) -> IntArray:
    """Run lengths after a batch of results, per family, without a loop.

    For each family: the number of ``counted`` results after its last ``reset`` result in
    this batch, or ``old`` plus all its ``counted`` results when none reset it.
    """
    idx = np.arange(fam.shape[0])
    last_reset = np.full(n, -1, dtype=np.int64)
    np.maximum.at(last_reset, fam[reset], idx[reset])
    after = counted & (idx > last_reset[fam])
    runs = np.bincount(fam[after], minlength=n).astype(np.int64)
    return np.where(last_reset >= 0, runs, old + runs)
