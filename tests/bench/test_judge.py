"""End to end on the grid's machinery: graded by a verifier wrong a tenth of the time, the
default reads the grader's floor and teaches far more than it does with the floor off
(which idles learners as coin flips), and with a right grader the floor stays off."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from quality import P, Regime, build_cell, run_cell  # noqa: E402


def _regime(noise: float) -> Regime:
    return Regime(
        "judge", "dev", "ladder", (10, 10, 4), 64, 200, P("top", 10, 8), {"verifier_noise": noise}
    )


def test_a_noisy_grader_is_read_and_the_default_teaches_through_it() -> None:
    regime = _regime(0.1)
    read = run_cell((regime, "ours", 0, {}))
    unread = run_cell((regime, "ours", 0, {"without": "verifier_floor"}))
    assert read.final > unread.final + 0.1
    _, _, runner, _ = build_cell(regime, "ours", 0, {})
    assert runner.sched.skill.verifier.rate == 0.0  # nothing read before the first probe


def test_a_right_grader_leaves_the_floor_off() -> None:
    regime = _regime(0.0)
    _, student, runner, evaluator = build_cell(regime, "ours", 0, {})
    evaluator.tick(0, runner)
    for step in range(1, 61):
        batch = runner.propose(regime.batch)
        runner.observe(batch, student.run(batch))
        evaluator.tick(step, runner)
    assert runner.sched.skill.verifier.counts[4] == 3  # three calls read
    assert runner.sched.skill.verifier.rate == 0.0
