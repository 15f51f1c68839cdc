"""bench/throughput.py --quick runs end to end and prints a positive rate for every policy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from policies import available_policies

ROOT = Path(__file__).resolve().parents[2]


def _table_after(lines: list[str], header_start: str) -> list[list[str]]:
    """The body rows (cells stripped) of the first markdown table whose header starts so."""
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _rate(cell: str) -> float:
    return float(cell.replace(",", ""))


def test_the_quick_throughput_run_has_a_positive_rate_for_every_policy_and_peer() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "throughput.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    policy_rows = _table_after(lines, "| policy |")
    names = {row[0].split("`")[1] for row in policy_rows}
    assert names == set(available_policies())
    assert all(_rate(cell) > 0 for row in policy_rows for cell in row[1:])
    sizes = _table_after(lines, "| arms | families |")
    assert len(sizes) == 2
    for row in sizes:
        ours, numpy_choice, torch_sampler, syllabus = row[3:7]
        assert _rate(ours) > 0 and _rate(numpy_choice) > 0 and _rate(torch_sampler) > 0
        assert syllabus == "not installed" or _rate(syllabus) > 0
        floors = row[7:10]  # draw + count, + weights, sum tree
        assert all(_rate(cell) > 0 for cell in floors)
    calls = _table_after(lines, "| arms | numpy calls")
    assert all(int(row[1].replace(",", "")) > 0 for row in calls)


def test_the_scheduler_state_stays_under_300_bytes_an_arm_at_1000_arms() -> None:
    """Issue 17's memory target, as bench/throughput.py measures it (tracemalloc, after
    20 steps with a probe round, the steps' events drained). It slipped to 307 once
    unnoticed; the two largest fixes were a constant policy's weights kept as a broadcast
    view and the quota memo keyed by a digest instead of copies."""
    sys.path.insert(0, str(ROOT / "bench"))
    import throughput

    s = throughput.settings(throughput.parse_args(["--policies", "uniform", "--no-peers"]))
    catalog = throughput.synthetic_catalog(1_000)
    memory = throughput.memory(1_000, throughput.Workload.draw(catalog, s.seed), s)
    per_arm = memory.state_bytes / catalog.n_arms
    assert per_arm < 300, f"{per_arm:.1f} bytes of state an arm"
