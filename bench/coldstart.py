"""Cold start: from manifests on disk to a ready ``Scheduler``, and ``curriculum validate``.

    .venv/bin/python bench/coldstart.py                    # every case
    .venv/bin/python bench/coldstart.py --cases small large --repeat 3
    .venv/bin/python bench/coldstart.py --profile large    # cProfile of one case, top 30

Writes synthetic manifests (deterministic, seeded) into a temporary directory, in the
format of ``configs/domains`` (``count:`` pools with named or counted tiers, a few inline
variant lists with tiers and probe items, one JSONL pool per file, quotas):

* ``small``: 300 families in 30 files, 4 tiers (1,200 arms);
* ``large``: 25,000 families in 25 files, 4 tiers (100,000 arms);
* ``validate``: one file of 50,000 families, checked by ``curriculum validate``;
* ``cli-small``: ``curriculum validate`` of one small file (10 families), for its CPU time.

Each case runs in a fresh subprocess, so imports and caches are cold; its peak RSS is that
child's own ``ru_maxrss`` (from ``os.wait4``, the per-child form of ``RUSAGE_CHILDREN``).
The child reports wall-clock stages: imports, load + validate (``load_manifests``), the
catalog build (``build_catalog``) and ``Scheduler(catalog, seed=0)``; the CLI cases report
the wall and CPU (user + system) time of the whole command.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TIERS = ("easy", "medium", "hard", "expert")
CASES = ("small", "large", "validate", "cli-small")


def _family(rng: random.Random, d: int, f: int, data_file: str | None, compact: bool) -> str:
    """One family in the generated manifests' style; a few carry inline items or JSONL.

    ``compact`` leaves out the description and two of the tools: a document may hold at
    most 1,000,000 values (``domains._yaml.MAX_VALUES``), and 50,000 families of the full
    form hold 1.07 million, so that file is refused whatever its speed."""
    name = f"d{d:05d}.fam_{f:05d}"
    lines = [f"  - name: {name}"]
    if not compact:
        lines.append(f"    description: Synthetic family {f} of domain {d}.")
    lines += [
        f"    environment: env_{d % 7}",
        "    tools: [shell]" if compact else "    tools: [shell, file_editor, test_runner]",
        f"    verification: check_{f % 5}",
    ]
    kind = f % 50
    if kind == 0:  # inline variants with tiers, and inline probe items
        lines.append(f"    tiers: [{', '.join(TIERS)}]")
        lines.append("    variants:")
        lines += [
            f"      - {{id: v{t}_{j}, tier: {tier}}}"
            for t, tier in enumerate(TIERS)
            for j in (0, 1)
        ]
        lines.append("    probe:")
        lines.append("      items:")
        lines += [f"        - {{id: p{j}, tier: {TIERS[j % 4]}}}" for j in range(4)]
    elif kind == 1 and data_file is not None:  # a JSONL pool, split by its tier field
        lines.append(f"    tiers: [{', '.join(TIERS)}]")
        lines.append(f"    variants: {{source: {data_file}, tier_field: difficulty}}")
        lines.append("    probe: {size: 16, source: jsonl-holdout}")
    else:
        if rng.random() < 0.5:
            lines.append(f"    tiers: [{', '.join(TIERS)}]")
        else:
            lines.append("    tiers: 4")
        if rng.random() < 0.5:
            lines.append(f"    variants: {{count: {rng.randrange(50, 5000)}}}")
        else:
            sizes = sorted((rng.randrange(20, 3000) for _ in TIERS), reverse=True)
            lines.append(f"    variants: {{count: [{', '.join(map(str, sizes))}]}}")
        lines.append(f"    probe: {{size: {rng.choice((16, 32, 48))}, source: {name}-holdout}}")
    lines.append(f"    cost_s: {rng.uniform(0.5, 150.0):.1f}")
    if rng.random() < 0.2:
        lines.append("    reward_range: [-1.0, 1.0]")
    if rng.random() < 0.1:
        lines.append(f"    weight: {rng.choice((0.5, 1.5, 2.0))}")
    return "\n".join(lines)


def _jsonl(n: int = 40) -> str:
    return "".join(
        json.dumps({"id": i, "prompt": f"task {i}", "difficulty": TIERS[i % 4]}) + "\n"
        for i in range(n)
    )


def write_manifests(
    out: Path,
    n_files: int,
    domains_per_file: int,
    families_per_domain: int,
    seed: int = 0,
    *,
    compact: bool = False,
) -> list[Path]:
    """``n_files`` manifests with their JSONL pools under ``out``; returns the YAML paths."""
    rng = random.Random(seed)
    (out / "data").mkdir(parents=True, exist_ok=True)
    (out / "data" / "pool.jsonl").write_text(_jsonl(), encoding="utf-8")
    n_domains = n_files * domains_per_file
    paths = []
    d = 0
    for i in range(n_files):
        parts = ["# synthetic, bench/coldstart.py", "version: 1", "domains:"]
        for _ in range(domains_per_file):
            parts.append(f"- name: domain_{d:05d}")
            parts.append(f"  description: Synthetic domain {d}.")
            if d % 5 == 0:  # a quota on every fifth domain, feasible in sum
                cap = 0.5 if n_domains > 1 else 1.0
                parts.append(f"  quota: {{min_share: {0.5 / n_domains:.6f}, max_share: {cap}}}")
            parts.append("  families:")
            parts += [
                _family(rng, d, f, "data/pool.jsonl", compact) for f in range(families_per_domain)
            ]
            d += 1
        path = out / f"manifest_{i:04d}.yaml"
        path.write_text("\n".join(parts) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


# The child side: one case, in a fresh interpreter --------------------------------------
def _child_load(root: str) -> dict[str, float]:
    """Wall and CPU seconds of each stage; a busy machine inflates wall far more than CPU."""
    marks = [(time.perf_counter(), time.process_time())]

    def mark() -> None:
        marks.append((time.perf_counter(), time.process_time()))

    import domains

    mark()
    manifests = domains.load_manifests(root)
    mark()
    catalog = domains.build_catalog(manifests)
    mark()
    import scheduler

    mark()
    sched = scheduler.Scheduler(catalog, seed=0)
    mark()
    sched.next_batch(256)
    mark()
    out: dict[str, float] = {"families": catalog.n_families, "arms": catalog.n_arms}
    stages = ("import_domains", "load_validate", "build_catalog", "import_scheduler")
    for i, stage in enumerate((*stages, "scheduler", "first_batch")):
        out[f"{stage}_s"] = marks[i + 1][0] - marks[i][0]
        out[f"{stage}_cpu_s"] = marks[i + 1][1] - marks[i][1]
    out["manifests_to_scheduler_s"] = marks[5][0] - marks[0][0]
    out["manifests_to_scheduler_cpu_s"] = marks[5][1] - marks[0][1]
    return out


def _child_profile(root: str, top: int) -> None:
    import cProfile
    import pstats

    import domains

    profile = cProfile.Profile()
    profile.enable()
    domains.build_catalog(domains.load_manifests(root))
    profile.disable()
    pstats.Stats(profile, stream=sys.stdout).sort_stats("cumulative").print_stats(top)


def _run_child(args: Sequence[str]) -> tuple[dict[str, Any], float, float, float]:
    """Run this script as a child; (its JSON output, wall s, CPU s, peak RSS MB)."""
    began = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.stdout is not None and proc.stderr is not None
    stdout, stderr = proc.stdout.read(), proc.stderr.read()
    cpu = usage.ru_utime + usage.ru_stime
    rss_mb = usage.ru_maxrss / 1024  # kilobytes on Linux
    result: dict[str, Any] = {"exit": proc.returncode}
    if proc.returncode != 0:
        raise SystemExit(f"child {args} failed ({proc.returncode}):\n{stderr[-3000:]}")
    lines = stdout.strip().splitlines()
    if lines and lines[-1].startswith("{"):
        result.update(json.loads(lines[-1]))
    else:
        result["stdout"] = stdout.strip()[-300:]
    return result, wall, cpu, rss_mb


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("curriculum")
    return [str(script)] if script.exists() else [sys.executable, "-m", "scheduler.cli"]


def _case_dirs(tmp: Path, cases: Sequence[str]) -> dict[str, Path]:
    layout = {
        "small": (30, 1, 10),
        "large": (25, 10, 100),
        "validate": (1, 50, 1000),
        "cli-small": (1, 1, 10),
    }
    dirs = {}
    for case in cases:
        n_files, per_file, per_domain = layout[case]
        root = tmp / case
        began = time.perf_counter()
        write_manifests(root, n_files, per_file, per_domain, compact=case == "validate")
        size = sum(p.stat().st_size for p in root.glob("*.yaml"))
        print(
            f"# wrote {case}: {n_files * per_file * per_domain:,} families in {n_files} "
            f"file(s), {size / 1e6:.1f} MB, {time.perf_counter() - began:.1f} s",
            file=sys.stderr,
        )
        dirs[case] = root
    return dirs


def _measure(case: str, root: Path) -> dict[str, Any]:
    me = [sys.executable, __file__]
    if case in ("small", "large"):
        result, wall, cpu, rss = _run_child([*me, "--child", str(root)])
    else:
        target = root / "manifest_0000.yaml"
        result, wall, cpu, rss = _run_child([*_cli(), "validate", str(target)])
    result.update(case=case, wall_s=wall, cpu_s=cpu, peak_rss_mb=rss)
    return result


def calibration_s() -> float:
    """CPU seconds of a fixed pure-Python loop: how fast this machine is at the moment."""
    began = time.process_time()
    total = 0
    for i in range(10_000_000):
        total += i
    return time.process_time() - began


def _row(r: dict[str, Any]) -> str:
    def s(stage: str) -> str:
        if f"{stage}_s" not in r:
            return "—"
        return f"{r[f'{stage}_cpu_s']:.3f} ({r[f'{stage}_s']:.3f})"

    imports = (
        f"{r['import_domains_cpu_s'] + r['import_scheduler_cpu_s']:.3f}"
        if "import_domains_cpu_s" in r
        else "—"
    )
    return (
        f"| {r['case']} | {imports} | {s('load_validate')} | {s('build_catalog')} | "
        f"{s('scheduler')} | {s('manifests_to_scheduler')} | "
        f"{r['cpu_s']:.3f} ({r['wall_s']:.3f}) | {r['peak_rss_mb']:.0f} | {r['exit']} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--repeat", type=int, default=1, help="runs per case (best is shown)")
    parser.add_argument("--profile", choices=("small", "large", "validate"), default=None)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child_load(args.child)))
        return 0
    with tempfile.TemporaryDirectory(prefix="coldstart-") as tmp:
        if args.profile:
            root = _case_dirs(Path(tmp), [args.profile])[args.profile]
            _child_profile(str(root), args.top)
            return 0
        dirs = _case_dirs(Path(tmp), args.cases)
        print(
            "| case | imports CPU s | load+validate CPU s (wall) | build_catalog | "
            "Scheduler() | manifests→Scheduler | whole process CPU s (wall) | "
            "peak RSS MB | exit |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        results = []
        for case in args.cases:
            runs = [_measure(case, dirs[case]) for _ in range(args.repeat)]
            best = min(runs, key=lambda r: r["wall_s"])
            results.append(best)
            print(_row(best), flush=True)
        calib = calibration_s()
        print(f"\ncalibration: a 10^7-step Python loop took {calib:.2f} s CPU", flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
