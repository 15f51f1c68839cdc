"""What a newcomer reaches for first: labelled weights, a probe function that returns one n,
a state that torch.save / torch.load(weights_only=True) carries."""

from __future__ import annotations

import io

import numpy as np
import pytest

from domains import Catalog
from scheduler import ReportError, Scheduler, Weights, torch_safe_globals


def _sched() -> Scheduler:
    return Scheduler(Catalog.synthetic(3, 4, 2, pool_size=5), seed=1)


def test_weights_have_views_by_name() -> None:
    sched = _sched()
    w = sched.weights()
    cat = sched.catalog
    by_domain = w.by_domain()
    assert list(by_domain) == list(cat.domain_names)
    assert by_domain[cat.domain_names[1]] == pytest.approx(float(w.domain[1]))
    by_family = w.by_family()
    assert list(by_family) == list(cat.family_names)
    assert sum(by_family.values()) == pytest.approx(1.0)
    frame = w.to_frame()
    assert list(frame.columns) == ["domain", "family", "weight", "domain_weight"]
    assert frame.groupby("domain")["weight"].sum().to_dict() == pytest.approx(by_domain)


def test_weights_without_a_catalog_say_where_to_get_named_ones() -> None:
    bare = Weights(arm=np.ones(2) / 2, family=np.ones(2) / 2, domain=np.ones(1))
    with pytest.raises(ValueError, match=r"Scheduler\.weights"):
        bare.by_domain()


def test_a_probe_function_may_return_one_n_for_all() -> None:
    sched, twin = _sched(), _sched()
    sched.probe_round(lambda f, t: (np.full(f.shape, 0.5), 8))
    twin.probe_round(lambda f, t: (np.full(f.shape, 0.5), np.full(f.shape, 8)))
    np.testing.assert_array_equal(sched.stats.probe_n, twin.stats.probe_n)
    assert (sched.stats.probe_n.max()) == 8


@pytest.mark.parametrize(
    ("result", "needle"),
    [
        (lambda f: np.full(f.shape, 0.5), "must return (scores, n)"),
        (lambda f: (np.full(3, 0.5), 8), "one value per family"),
        (lambda f: (np.full(f.shape, 0.5), np.full(2, 8)), "one number or one per family"),
        (lambda f: (np.full(f.shape, 0.5), 2.5), "whole numbers"),
    ],
)
def test_a_probe_function_that_breaks_the_contract_is_refused_whole(
    result: object, needle: str
) -> None:
    sched = _sched()
    before = sched.stats.probe_n.copy()
    with pytest.raises(ReportError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        sched.probe_round(lambda f, t: result(f))  # type: ignore[operator]
    np.testing.assert_array_equal(sched.stats.probe_n, before)


def test_a_state_survives_torch_save_and_a_weights_only_load() -> None:
    torch = pytest.importorskip("torch")
    sched = _sched()
    for _ in range(5):
        batch = sched.next_batch(32)
        ok = np.ones(len(batch))
        sched.report(batch, rewards=ok, success=ok)
    sched.probe_round(lambda f, t: (np.full(f.shape, 0.7), 8))
    buf = io.BytesIO()
    torch.save(sched.state_dict(), buf)
    buf.seek(0)
    with pytest.raises(Exception, match="Weights only load failed"):
        torch.load(io.BytesIO(buf.getvalue()), weights_only=True)  # why the list exists
    with torch.serialization.safe_globals(torch_safe_globals()):
        state = torch.load(buf, weights_only=True)
    twin = _sched()
    twin.load_state_dict(state)
    np.testing.assert_array_equal(twin.next_batch(32).arm, sched.next_batch(32).arm)
