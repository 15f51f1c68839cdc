"""bench/torch_learner.py: the simple baselines run on the torch learner beside the
scheduler, read the same held-out accuracy the scheduler's probes read, and a bad flag is
one line and exit code 2."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

torch = pytest.importorskip("torch")

from torch_learner import (  # noqa: E402
    Learner,
    Setup,
    SuiteConfig,
    _HeldOut,
    _make_scheduler,
    _probe_scheduler,
    _top_readings,
    main,
    make_catalog,
    run_one,
)


def _setup(**suite: object) -> Setup:
    return Setup(
        suite=SuiteConfig(parity=2, majority=2, noise=2, copy=2, **suite),  # type: ignore[arg-type]
        batch_size=32,
        max_steps=30,
        probe_every=10,
        eval_every=10,
        probe_items=16,
        eval_items=16,
        target=0.99,
        hidden=8,
        optimizer="sgd",
        lr=0.5,
        momentum=0.9,
        scheduler={},
        options={},
    )


@pytest.mark.parametrize("split", [False, True])
def test_the_syllabus_evaluator_reads_each_arm_where_the_scheduler_probes_read_it(
    split: bool,
) -> None:
    setup = _setup(nested=True, arms_as_families=split)
    learner = Learner(setup, seed=0)
    catalog = make_catalog(learner.suite)
    table = learner.probe_all().reshape(-1, 1 if split else learner.n_tiers)
    got = _HeldOut(learner, catalog).probe(catalog.family_of_arm, catalog.tier_of_arm, 16)
    np.testing.assert_array_equal(got, table[catalog.family_of_arm, catalog.tier_of_arm])
    top = _top_readings(table, catalog, setup, step=10)
    assert top.tiers.tolist() == (catalog.n_tiers - 1).tolist()
    np.testing.assert_array_equal(top.scores, table[:, -1])


def test_the_ladders_train_and_report_where_their_episodes_went() -> None:
    setup = _setup(nested=True)
    plain = run_one("ladder", 0, setup)
    probed = run_one("ladder_probe", 0, setup)
    for r in (plain, probed):
        assert r.curve_steps == [0, 10, 20, 30]
        assert sum(r.kind_share) == pytest.approx(1.0)
        assert r.held_back == []  # no scheduler: nothing is held back
    # the plain ladder draws every family equally often: a quarter of the episodes per kind
    np.testing.assert_allclose(plain.kind_share, 0.25, atol=0.06)


@pytest.mark.parametrize(
    ("protocol", "probed_tiers"), [("top", {3}), ("all", {0, 1, 2, 3}), ("none", set())]
)
def test_the_probe_protocol_decides_which_arms_the_scheduler_hears_of(
    protocol: str, probed_tiers: set[int]
) -> None:
    from scheduler import Scheduler

    setup = dataclasses.replace(_setup(nested=True), probe=protocol)
    learner = Learner(setup, seed=0)
    catalog = make_catalog(learner.suite)
    sched = Scheduler(catalog, seed=0)
    table = learner.probe_all().reshape(-1, learner.n_tiers)
    _probe_scheduler(sched, table, setup)
    heard = sched.stats.probe_n > 0
    assert set(catalog.tier_of_arm[heard].tolist()) == probed_tiers
    if probed_tiers:  # every family, at each of those tiers, with the table's reading
        assert heard.sum() == catalog.n_families * len(probed_tiers)
        np.testing.assert_array_equal(
            sched.stats.probe_score[heard],
            table[catalog.family_of_arm[heard], catalog.tier_of_arm[heard]],
        )


def test_an_unknown_baseline_is_one_line_and_exit_code_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--baselines", "ladder,nope", "--seeds", "1", "--max-steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "--baselines: unknown ['nope']" in err
    assert "Traceback" not in err


def test_an_unknown_mechanism_to_switch_off_is_one_line_and_exit_code_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--without", "nope", "--seeds", "1", "--max-steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "--without: unknown mechanism 'nope'" in err
    assert "Traceback" not in err


def test_without_switches_off_the_default_s_mechanism_as_the_quality_ablation_does() -> None:
    setup = dataclasses.replace(_setup(), without=("probe_rise", "stalled_spare"))
    catalog = make_catalog(Learner(setup, seed=0).suite)
    sched = _make_scheduler("default", catalog, 0, setup)
    assert sched.skill._probe_rise is False
    assert sched.pipeline.stalled_spare == 1.0
    plain = _make_scheduler("default", catalog, 0, _setup())
    assert plain.skill._probe_rise is True
    assert plain.pipeline.stalled_spare < 1.0
