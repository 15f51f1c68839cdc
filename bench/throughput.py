"""Tasks per second of the scheduler's step beside its peers, 1,000 to 100,000 arms (issue #17).

    .venv-bench/bin/python bench/throughput.py               # everything, Syllabus included
    .venv/bin/python bench/throughput.py --no-peers --policies uniform learning_progress
    .venv/bin/python bench/throughput.py --quick             # a smoke run, seconds
    .venv/bin/python bench/throughput.py --sizes 1000 --policies uniform --no-peers \\
        --profile profiles/1k.txt                            # and a pyinstrument profile

One run on one machine, printed as markdown tables for docs/benchmarks.md (with the
command, the date and the seeds). Only the public API is used (``Scheduler``,
``next_batch``, ``report``, ``record_probes``, ``policies.available_policies()``), so the
same script measures the old core and the new one.

* Throughput: ``next_batch(256)`` + ``report(batch, rewards=..., success=...)`` with a
  probe of every family (``record_probes``, n=32) every 10 steps, its time counted. Warm-up
  steps are left out; then 10-step blocks (one probe round each) run until ``--budget``
  seconds have passed (at least 5 blocks) or ``--steps`` steps; tasks/s = 2,560 / the
  median block time. The default ``Scheduler(catalog, seed=seed)`` and one row for every
  shipped policy; ``mixture`` needs components and gets ``learning_progress`` 0.7 +
  ``regression_guard`` 0.3 (its docstring's example).
* Peers, same sizes, outcomes and blocks (``_peers.py``): numpy ``Generator.choice``,
  torch ``WeightedRandomSampler`` (one thread) and Syllabus ``LearningProgress`` (its
  evaluator probing every task every 10 steps); "not installed" where Syllabus is absent.
* numpy calls in one warm step of the default policy, counted by a ``sys.setprofile`` hook:
  C functions of numpy (``c_call``) and Python functions in numpy's modules, each entered
  from outside numpy (dispatcher stubs left out). Ufuncs called directly, array operators
  and ``Generator`` methods raise no profile event, so this is a lower bound; it is the
  same counter for every core.
* Probe update: median ms of ``record_probes`` of every family (one step between rounds).
* Memory: tracemalloc around building the catalog, then ``Scheduler`` and 20 warm steps
  (imports warmed first). The events of those steps, which a trainer's recorder drains at
  every step, are measured apart: the scheduler's state is what stays allocated beyond
  the catalog once they are drained.

Catalogs are ``Catalog.synthetic``: arms / 4 families of 4 tiers in 5 to 25 domains.
Outcomes are coin flips and probe scores uniform, both from ``--seed``, drawn before
timing and cycled.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import shlex
import statistics
import sys
import time
import traceback
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import numpy.typing as npt
from _common import machine, markdown_table
from _peers import PEERS, SYLLABUS, TORCH, make_peer, peer_missing

import policies
from domains import Catalog
from scheduler import Scheduler

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

BATCH = 256
TIERS = 4
PROBE_EVERY = 10  # steps per probe round, and per timed block
PROBE_N = 32
MIN_BLOCKS = 5
MAX_BLOCKS = 2_000
MEMORY_STEPS = 20
NOTES = {"mixture": " (learning_progress 0.7, regression_guard 0.3)"}
POLICY_OPTIONS: dict[str, dict[str, Any]] = {
    "mixture": {
        "components": [
            {"policy": "learning_progress", "weight": 0.7},
            {"policy": "regression_guard", "weight": 0.3},
        ]
    }
}


@dataclass(frozen=True)
class Settings:
    sizes: tuple[int, ...]
    policies: tuple[str, ...]
    peers: bool
    steps: int | None  # timed steps per row; None: blocks until ``budget`` seconds
    budget: float
    warmup: int
    probe_rounds: int
    seed: int


@dataclass(frozen=True)
class Workload:
    """What the caller hands in, drawn once before timing and cycled."""

    outcomes: FloatArray  # float64 [pool, BATCH], 0 or 1
    family_scores: FloatArray  # float64 [rounds, n_families]
    arm_scores: FloatArray  # float64 [rounds, n_arms] (Syllabus probes every task)
    probe_n: IntArray  # int64 [n_families], all PROBE_N

    @classmethod
    def draw(cls, catalog: Catalog, seed: int) -> Workload:
        rng = np.random.default_rng(seed)
        return cls(
            outcomes=(rng.random((64, BATCH)) < 0.5).astype(np.float64),
            family_scores=rng.random((8, catalog.n_families)),
            arm_scores=rng.random((8, catalog.n_arms)),
            probe_n=np.full(catalog.n_families, PROBE_N, dtype=np.int64),
        )

    def outcome(self, i: int) -> FloatArray:
        row: FloatArray = self.outcomes[i % self.outcomes.shape[0]]
        return row

    def scores(self, i: int) -> FloatArray:
        row: FloatArray = self.family_scores[i % self.family_scores.shape[0]]
        return row


@dataclass(frozen=True)
class Rate:
    tasks_per_s: float
    median_ms_per_step: float
    steps: int

    @classmethod
    def of_blocks(cls, blocks: Sequence[float]) -> Rate:
        block = statistics.median(blocks)
        steps = len(blocks) * PROBE_EVERY
        return cls(BATCH * PROBE_EVERY / block, 1e3 * block / PROBE_EVERY, steps)


# Catalogs and steps -----------------------------------------------------------------------
def synthetic_catalog(n_arms: int) -> Catalog:
    """``n_arms // 4`` families of 4 tiers, in 5 to 25 equal domains."""
    families = max(1, n_arms // TIERS)
    domains = min(25, max(5, families // 100), families)
    while families % domains:
        domains -= 1
    return Catalog.synthetic(domains, families // domains, TIERS)


def domains_of(catalog: Catalog) -> int:
    return int(np.unique(catalog.domain_of_family).size)


def scheduler_for(catalog: Catalog, policy: str | None, seed: int) -> Scheduler:
    """``Scheduler(catalog, seed=seed)`` for the default (None), else the named policy."""
    if policy is None:
        return Scheduler(catalog, seed=seed)
    return Scheduler(catalog, {"name": policy, **POLICY_OPTIONS.get(policy, {})}, seed=seed)


def default_policy_name() -> str:
    sched = Scheduler(Catalog.synthetic(1, 1, 1), seed=0)
    return str(policies.policy_params(sched.policy)["name"])


class SchedulerStep:
    """Step ``i`` of the protocol: a batch, its report, and every 10th step a probe round."""

    def __init__(self, sched: Scheduler, work: Workload) -> None:
        self.sched, self.work = sched, work
        self.families = np.arange(sched.catalog.n_families)

    def __call__(self, i: int) -> None:
        self.report(i)
        if i % PROBE_EVERY == PROBE_EVERY - 1:
            self.probe(i)

    def report(self, i: int) -> None:
        batch = self.sched.next_batch(BATCH)
        out = self.work.outcome(i)[: batch.arm.shape[0]]
        self.sched.report(batch, rewards=out, success=out)

    def probe(self, i: int) -> None:
        scores = self.work.scores(i // PROBE_EVERY)
        self.sched.record_probes(self.families, scores, n=self.work.probe_n)


def time_blocks(step: Callable[[int], None], s: Settings) -> Rate:
    """Warm up, then time 10-step blocks until the budget (or ``s.steps``) is spent."""
    for i in range(s.warmup):
        step(i)
    i, blocks, began = s.warmup, [], time.perf_counter()
    while True:
        start = time.perf_counter()
        for _ in range(PROBE_EVERY):
            step(i)
            i += 1
        blocks.append(time.perf_counter() - start)
        if s.steps is not None:
            if len(blocks) * PROBE_EVERY >= s.steps:
                break
        elif len(blocks) >= MAX_BLOCKS or (
            len(blocks) >= MIN_BLOCKS and time.perf_counter() - began >= s.budget
        ):
            break
    return Rate.of_blocks(blocks)


# Measurements -----------------------------------------------------------------------------
def policy_rate(catalog: Catalog, work: Workload, policy: str | None, s: Settings) -> Rate | str:
    """The policy's rate, or the error that stopped it (logged with its traceback), so one
    failing row does not lose the run."""
    try:
        return time_blocks(SchedulerStep(scheduler_for(catalog, policy, s.seed), work), s)
    except Exception as exc:
        log("".join(traceback.format_exception(exc)))
        return f"failed ({type(exc).__name__})"


def peer_rate(name: str, catalog: Catalog, work: Workload, s: Settings) -> Rate | str:
    """The peer's rate, or why it did not run."""
    missing = peer_missing(name)
    if missing is not None:
        return missing
    peer = make_peer(name, catalog.n_arms, BATCH, s.seed, work.arm_scores, PROBE_EVERY)
    return time_blocks(lambda i: peer.step(work.outcome(i)), s)


class NumpyCallCounter:
    """A ``sys.setprofile`` hook counting calls into numpy: ``entered`` from outside numpy,
    and ``nested`` with those numpy makes itself."""

    def __init__(self) -> None:
        self.root = os.path.dirname(np.__file__)
        self.entered = 0
        self.nested = 0

    def _inside(self, frame: FrameType | None) -> bool:
        return frame is not None and frame.f_code.co_filename.startswith(self.root)

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call" and _is_numpy_builtin(arg):
            self.nested += 1
            self.entered += not self._inside(frame)
        elif event == "call" and self._inside(frame):
            if frame.f_code.co_name.endswith("_dispatcher"):  # array_function stubs
                return
            self.nested += 1
            self.entered += not self._inside(frame.f_back)


def _is_numpy_builtin(fn: Any) -> bool:
    owner = getattr(fn, "__self__", None)
    module = owner.__name__ if isinstance(owner, type(np)) else type(owner).__module__
    return str(getattr(fn, "__module__", None) or module).startswith("numpy")


@dataclass(frozen=True)
class Calls:
    entered: int  # calls from outside numpy into numpy
    nested: int  # and those numpy makes inside itself


def count_numpy_calls(action: Callable[[], None]) -> Calls:
    counter = NumpyCallCounter()
    sys.setprofile(counter)
    try:
        action()
    finally:
        sys.setprofile(None)
    return Calls(counter.entered, counter.nested)


def numpy_calls(catalog: Catalog, work: Workload, s: Settings) -> tuple[Calls, Calls]:
    """numpy calls in one warm step (next_batch + report) and in one probe round."""
    step = SchedulerStep(scheduler_for(catalog, None, s.seed), work)
    for i in range(s.warmup):
        step(i)
    report = count_numpy_calls(lambda: step.report(s.warmup))
    probe = count_numpy_calls(lambda: step.probe(s.warmup))
    return report, probe


def probe_ms(catalog: Catalog, work: Workload, s: Settings) -> float:
    """Median ms of ``record_probes`` of every family, one untimed step between rounds."""
    step = SchedulerStep(scheduler_for(catalog, None, s.seed), work)
    for i in range(s.warmup):
        step(i)
    times = []
    for r in range(s.probe_rounds):
        step.report(s.warmup + r)
        began = time.perf_counter()
        step.probe(s.warmup + r * PROBE_EVERY)
        times.append(time.perf_counter() - began)
    return 1e3 * statistics.median(times)


@dataclass(frozen=True)
class Memory:
    catalog_bytes: int
    state_bytes: int  # allocated beyond the catalog after the build, warm steps and a drain
    peak_bytes: int  # the peak beyond the catalog
    events_bytes: int  # what the warm steps' events held until they were drained

    def per_arm(self, n_arms: int) -> tuple[float, float]:
        return self.state_bytes / n_arms, self.peak_bytes / n_arms


def memory(n_arms: int, work: Workload, s: Settings) -> Memory:
    """Bytes the scheduler holds beyond its catalog (tracemalloc; imports warmed first)."""
    small = synthetic_catalog(40)
    warm = SchedulerStep(scheduler_for(small, None, s.seed), Workload.draw(small, s.seed))
    warm(PROBE_EVERY - 1)  # a probe round too, so lazily imported modules are in
    del warm, small
    gc.collect()
    tracemalloc.start()
    try:
        catalog = synthetic_catalog(n_arms)
        gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        step = SchedulerStep(scheduler_for(catalog, None, s.seed), work)
        for i in range(MEMORY_STEPS):
            step(i)
        gc.collect()
        pending = tracemalloc.get_traced_memory()[0]
        step.sched.drain_events()
        gc.collect()
        now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return Memory(base, now - base, peak - base, pending - now)


def write_profile(out: Path, s: Settings) -> None:
    """A pyinstrument text profile of the default policy's steps at 1,000 arms."""
    from pyinstrument import Profiler

    catalog = synthetic_catalog(1_000)
    step = SchedulerStep(scheduler_for(catalog, None, s.seed), Workload.draw(catalog, s.seed))
    for i in range(s.warmup):
        step(i)
    steps = s.steps or 2_000
    profiler = Profiler(interval=0.0001)
    profiler.start()
    for i in range(s.warmup, s.warmup + steps):
        step(i)
    profiler.stop()
    out.parent.mkdir(parents=True, exist_ok=True)
    header = f"# {command()}\n# {machine()}; {steps} steps after {s.warmup} warm-up steps\n"
    out.write_text(header + profiler.output_text(unicode=False, color=False))


# Output -----------------------------------------------------------------------------------
def command() -> str:
    exe = os.path.relpath(sys.executable) if not sys.executable.startswith("/usr") else "python"
    return shlex.join([exe, *sys.argv])


def fmt_rate(value: Rate | str) -> str:
    return value if isinstance(value, str) else f"{value.tasks_per_s:,.0f}"


def times(ours: Rate | str, peer: Rate | str) -> float | None:
    """How many times the peer's rate ours is (None where either did not run)."""
    if isinstance(ours, str) or isinstance(peer, str):
        return None
    return ours.tasks_per_s / peer.tasks_per_s


def fmt_times(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


@dataclass
class Results:
    catalogs: dict[int, tuple[int, int]]  # arms -> (families, domains)
    rates: dict[str, dict[int, Rate | str]]  # policy row -> arms -> rate (or why none)
    peers: dict[str, dict[int, Rate | str]]
    calls: dict[int, tuple[Calls, Calls]]
    probe_ms: dict[int, float]
    memory: dict[int, Memory]


def throughput_table(res: Results, default: str) -> str:
    peers = list(res.peers)
    header = ["arms", "families", "domains", f"ours (`{default}`, default)"]
    header += peers + [f"ours / {p.split()[-1]}" for p in peers if p in (TORCH, SYLLABUS)]
    rows = []
    for arms, (fams, doms) in res.catalogs.items():
        ours = res.rates[default][arms]
        row = [f"{arms:,}", f"{fams:,}", str(doms), fmt_rate(ours)]
        row += [fmt_rate(res.peers[p][arms]) for p in peers]
        row += [fmt_times(times(ours, res.peers[p][arms])) for p in peers if p in (TORCH, SYLLABUS)]
        rows.append(row)
    return markdown_table(header, rows)


def policy_table(res: Results, default: str) -> str:
    sizes = list(res.catalogs)
    syllabus = res.peers.get(SYLLABUS, {})
    with_syllabus = bool(syllabus) and all(isinstance(v, Rate) for v in syllabus.values())
    header = ["policy", *(f"{a:,} arms" for a in sizes)]
    header += ["min × Syllabus LP"] if with_syllabus else []
    rows = []
    for name, by_size in res.rates.items():
        label = f"`{name}`" + NOTES.get(name, "") + (" (default)" if name == default else "")
        row = [label, *(fmt_rate(by_size[a]) for a in sizes)]
        if with_syllabus:
            ratios = [times(by_size[a], syllabus[a]) for a in sizes]
            row.append(
                fmt_times(None if None in ratios else min(r for r in ratios if r is not None))
            )
        rows.append(row)
    return markdown_table(header, rows)


def detail_tables(res: Results, s: Settings) -> list[str]:
    calls = markdown_table(
        [
            "arms",
            "numpy calls: next_batch + report",
            "nested included",
            "record_probes (every family)",
            "nested included",
        ],
        [
            [f"{a:,}", f"{r.entered:,}", f"{r.nested:,}", f"{p.entered:,}", f"{p.nested:,}"]
            for a, (r, p) in res.calls.items()
        ],
    )
    probes = markdown_table(
        ["arms", f"record_probes of every family, median ms of {s.probe_rounds}"],
        [[f"{a:,}", f"{ms:.2f}"] for a, ms in res.probe_ms.items()],
    )
    mem_rows = []
    for a, m in res.memory.items():
        state, peak = m.per_arm(a)
        mem_rows.append(
            [
                f"{a:,}",
                f"{m.catalog_bytes / 1e6:.2f}",
                f"{m.state_bytes / 1e6:.2f}",
                f"{state:,.0f}",
                f"{peak:,.0f}",
                f"{m.events_bytes / a:,.0f}",
            ]
        )
    mem = markdown_table(
        [
            "arms",
            "catalog MB",
            "scheduler state MB",
            "state bytes/arm",
            "peak bytes/arm",
            f"undrained events of {MEMORY_STEPS} steps, bytes/arm",
        ],
        mem_rows,
    )
    return [calls, probes, mem]


def render(res: Results, s: Settings, default: str, elapsed: float) -> str:
    timing = f"{s.steps} timed steps" if s.steps else f"10-step blocks for {s.budget:g} s (>= 5)"
    lines = [
        "### Throughput (bench/throughput.py)",
        "",
        f"`{command()}`",
        "",
        f"{machine()}; {elapsed:.0f} s in all. Seed {s.seed} (scheduler, peers, outcomes"
        f" and probe scores). Batch {BATCH}; a probe of every family (n={PROBE_N}) every"
        f" {PROBE_EVERY} steps, timed; {s.warmup} warm-up steps left out, then {timing};"
        f" tasks/s = {BATCH * PROBE_EVERY:,} / the median block time.",
        "",
        throughput_table(res, default),
        "",
        "Every shipped policy, tasks/s:",
        "",
        policy_table(res, default),
        "",
        f"Default policy (`{default}`): numpy calls in one warm step (a lower bound: ufuncs,"
        " operators and Generator methods are not seen), the probe update, and memory"
        f" (after building the scheduler and {MEMORY_STEPS} warm steps):",
    ]
    for table in detail_tables(res, s):
        lines += ["", table]
    return "\n".join(lines)


# Main -------------------------------------------------------------------------------------
def measure(s: Settings, default: str) -> Results:
    res = Results({}, {}, {}, {}, {}, {})
    rows = [default, *(p for p in s.policies if p != default)]
    for arms in s.sizes:
        catalog = synthetic_catalog(arms)
        work = Workload.draw(catalog, s.seed)
        n = catalog.n_arms
        res.catalogs[n] = (catalog.n_families, domains_of(catalog))
        for row in rows:
            policy = None if row == default else row
            res.rates.setdefault(row, {})[n] = policy_rate(catalog, work, policy, s)
            log(f"{n:,} arms, {row}: {fmt_rate(res.rates[row][n])} tasks/s")
        for peer in PEERS if s.peers else ():
            res.peers.setdefault(peer, {})[n] = peer_rate(peer, catalog, work, s)
            log(f"{n:,} arms, {peer}: {fmt_rate(res.peers[peer][n])}")
        res.calls[n] = numpy_calls(catalog, work, s)
        res.probe_ms[n] = probe_ms(catalog, work, s)
        res.memory[n] = memory(arms, work, s)
    return res


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def settings(args: argparse.Namespace) -> Settings:
    known = policies.available_policies()
    chosen = tuple(args.policies or known)
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise SystemExit(f"--policies: unknown {unknown}; shipped: {list(known)}")
    quick = args.quick
    return Settings(
        sizes=tuple(args.sizes or ((400, 2_000) if quick else (1_000, 10_000, 100_000))),
        policies=chosen,
        peers=not args.no_peers,
        steps=args.steps or (20 if quick else None),
        budget=args.budget,
        warmup=10 if quick else 20,
        probe_rounds=3 if quick else 7,
        seed=args.seed,
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", help="arms (default 1e3 1e4 1e5)")
    parser.add_argument("--policies", nargs="+", help="default: every shipped policy")
    parser.add_argument("--no-peers", action="store_true", help="skip numpy, torch, Syllabus")
    parser.add_argument("--steps", type=int, help="timed steps per row (default: --budget)")
    parser.add_argument("--budget", type=float, default=3.0, help="seconds per row")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="small sizes, 20 steps")
    parser.add_argument("--profile", type=Path, help="write a pyinstrument profile here")
    parser.add_argument("--out", type=Path, help="also write the results as JSON")
    parser.add_argument(
        "--keep-heap",
        action="store_true",
        help="glibc: keep a 256 MiB heap pad and never trim the heap (docs/scaling.md)",
    )
    return parser.parse_args(argv)


def keep_heap() -> None:
    """Ask glibc's malloc to keep freed heap for reuse: a pad of 256 MiB on each growth
    and no trimming, as ``MALLOC_TOP_PAD_`` and ``MALLOC_TRIM_THRESHOLD_`` do when set
    before the process starts. The large temporaries of a refresh are then not faulted in
    again on every use."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        raise SystemExit("--keep-heap needs glibc (mallopt)")
    m_trim_threshold, m_top_pad = -1, -2
    if not (mallopt(m_trim_threshold, 1 << 30) and mallopt(m_top_pad, 1 << 28)):
        raise SystemExit("--keep-heap: mallopt refused the settings")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.keep_heap:
        keep_heap()
    s = settings(args)
    if args.profile is not None and importlib.util.find_spec("pyinstrument") is None:
        raise SystemExit("--profile needs pyinstrument: pip install pyinstrument==5.1.3")
    if s.peers and peer_missing(TORCH) is None:
        import torch

        torch.set_num_threads(1)  # the scheduler's step is single-threaded numpy
    began = time.perf_counter()
    default = default_policy_name()
    res = measure(s, default)
    print(render(res, s, default, time.perf_counter() - began), flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        payload = {"command": command(), "machine": machine(), "settings": asdict(s)}
        args.out.write_text(json.dumps({**payload, **asdict(res)}, indent=1, default=str))
    if args.profile is not None:
        write_profile(args.profile, s)
        log(f"profile written to {args.profile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
