"""bench/diagnose.py: the episode shares it reports add up, the oracle trains only at the
frontier it defines, the families furthest below another curriculum are the learnable ones
it leaves lowest, and a bad flag is one line and exit code 2."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from diagnose import COLUMNS, frontier, furthest_below, main, render_gaps, run  # noqa: E402

from domains import Catalog  # noqa: E402


def test_the_frontier_is_the_lowest_tier_not_yet_learned() -> None:
    cat = Catalog.synthetic(n_domains=1, families_per_domain=3, n_tiers=3)
    true_arm = np.array([1.0, 0.5, 0.2, 1.0, 1.0, 0.99, 0.1, 0.96, 0.0])
    assert frontier(cat, true_arm).tolist() == [1, 2, 0]  # all learned: the top tier


@pytest.mark.slow
def test_shares_add_up_and_the_oracle_trains_at_the_frontier_only() -> None:
    ours = run("ladder_all", 0, "ours", {}, every=10)
    oracle = run("ladder_all", 0, "oracle", {}, every=10)
    for cell in (ours, oracle):
        shares = np.array(cell["shares"])
        assert shares.shape == (4, len(COLUMNS))
        np.testing.assert_allclose(shares.sum(axis=1), 1.0)
    # while a family is left to learn, the oracle trains only those, at their frontier
    # (once every one is learned it draws from all: the last quarters of this regime)
    first_half = np.array(oracle["shares"])[:2]
    assert first_half[:, COLUMNS.index("at")].min() == 1.0
    assert np.array(ours["shares"])[:, COLUMNS.index("at")].max() < 1.0
    assert oracle["flags"] == {}  # flags are read from the default scheduler only
    assert ours["flags"]["noise"]["held"] > 0.5  # coin flips are caught by the end


def test_a_bad_regime_is_one_line_and_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--regime", "nope"]) == 2
    err = capsys.readouterr().err
    assert "--regime nope: unknown" in err
    assert "Traceback" not in err


def _families(top: list[float], learnable: list[bool]) -> dict[str, object]:
    n = len(top)
    return {
        "top": top,
        "start": [0.0] * n,
        "learnable": learnable,
        "gate": [-1, 2, -1, -1][:n],
        "episodes": [[f, 0, 0, 1] for f in range(n)],
    }


def test_the_families_furthest_below_are_learnable_and_by_gap() -> None:
    """Largest gap first; a family the other curriculum does no better on is not listed,
    nor one that cannot be learned, however far below it ends."""
    mine = {"seed": 3, "families": _families([0.1, 0.5, 0.0, 0.9], [True, True, False, True])}
    theirs = {"seed": 3, "families": _families([0.9, 0.6, 1.0, 0.8], [True, True, False, True])}
    rows = furthest_below(mine, theirs, 10)
    assert [r["family"] for r in rows] == [0, 1]
    assert rows[0]["gap"] == pytest.approx(0.8)
    assert rows[1]["gate"] == 2
    assert [r["family"] for r in furthest_below(mine, theirs, 1)] == [0]
    text = render_gaps("ours", "oracle", mine, rows)
    assert "seed 3: the 2 families furthest below oracle" in text
    assert "(0.3000 of the final score" in text  # (0.8 + 0.1) over 3 learnable families


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--families", "0"], "--families: must be at least 1"),
        (["--runner", "oracle", "--against", "oracle"], "--against oracle: the same"),
    ],
)
def test_a_bad_comparison_flag_is_one_line_and_exit_code_2(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--regime", "ladder_all", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
