"""The belief's update by its moments on a grid (policies/_grid_posterior.py)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate
from scipy.special import expit

from policies import _grid_posterior
from policies._grid_posterior import match_moments


def _exact(
    prior_mu: float, prior_var: float, chance: float, tier: float, k: float, n: float
) -> tuple[float, float]:
    """Mean and variance of the same posterior by quadrature, on the same bounds."""

    def density(x: float) -> float:
        p = chance + (1.0 - chance) * expit(3.0 * (x - tier))
        return float(p**k * (1.0 - p) ** (n - k) * np.exp(-0.5 * (x - prior_mu) ** 2 / prior_var))

    z = integrate.quad(density, -3.0, 6.0, limit=200)[0]
    mean = integrate.quad(lambda x: x * density(x), -3.0, 6.0, limit=200)[0] / z
    second = integrate.quad(lambda x: x * x * density(x), -3.0, 6.0, limit=200)[0] / z
    return mean, second - mean * mean


@pytest.mark.parametrize(
    ("chance", "tier", "k", "n"),
    [(0.0, 1.0, 3.0, 8.0), (0.25, 3.0, 8.0, 8.0), (0.5, 2.0, 5.0, 8.0)],
)
def test_the_moments_are_the_posterior_s(chance: float, tier: float, k: float, n: float) -> None:
    mean, var = match_moments(
        np.array([0.5]),
        np.array([2.0]),
        np.array([0]),
        np.array([chance]),
        np.array([tier]),
        np.array([k]),
        np.array([n]),
        slope=3.0,
        low=-3.0,
        high=np.array([6.0]),
    )
    want_mean, want_var = _exact(0.5, 2.0, chance, tier, k, n)
    # within a tenth of a grid step (a sum over the grid, not an integral)
    assert mean[0] == pytest.approx(want_mean, abs=0.0125)
    assert var[0] == pytest.approx(want_var, abs=0.0125)


def test_rows_of_one_family_add_up_and_families_stay_apart() -> None:
    """Two readings of a family at one tier say what their sum says; a family's rows
    change no other family's belief, however they are ordered."""
    common = {"slope": 3.0, "low": -3.0, "high": np.full(2, 6.0)}
    split = match_moments(
        np.zeros(2), np.full(2, 4.0), np.array([1, 0, 1]), np.full(3, 0.25),
        np.array([3.0, 0.0, 3.0]), np.array([3.0, 1.0, 5.0]), np.array([4.0, 8.0, 4.0]),
        **common,
    )  # fmt: skip
    whole = match_moments(
        np.zeros(2), np.full(2, 4.0), np.array([0, 1]), np.full(2, 0.25),
        np.array([0.0, 3.0]), np.array([1.0, 8.0]), np.array([8.0, 8.0]),
        **common,
    )  # fmt: skip
    np.testing.assert_allclose(split[0], whole[0], atol=1e-5)
    np.testing.assert_allclose(split[1], whole[1], atol=1e-5)


def test_families_past_a_chunk_get_the_same_moments(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    m = 50
    args = (
        rng.normal(0.0, 1.0, m), rng.uniform(0.2, 4.0, m), np.repeat(np.arange(m), 2),
        np.full(2 * m, 0.5), rng.integers(0, 4, 2 * m).astype(float),
        rng.integers(0, 9, 2 * m).astype(float), np.full(2 * m, 8.0),
    )  # fmt: skip
    kwargs = {"slope": 3.0, "low": -3.0, "high": np.full(m, 6.0)}
    whole = match_moments(*args, **kwargs)
    monkeypatch.setattr(_grid_posterior, "_CHUNK", 7)
    chunked = match_moments(*args, **kwargs)
    np.testing.assert_allclose(whole[0], chunked[0], atol=1e-6)
    np.testing.assert_allclose(whole[1], chunked[1], atol=1e-6)


@pytest.mark.parametrize("chunk", [2048, 7])
def test_counts_per_pair_and_rows_gathered_give_the_same_moments(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """Where the (tier, chance) pairs are too many to count per family, each row's
    log-likelihood is gathered instead: the same moments, with many chance levels too."""
    rng = np.random.default_rng(5)
    m, rows = 40, 130
    args = (
        rng.normal(0.0, 1.0, m), rng.uniform(0.2, 4.0, m),
        np.concatenate([np.arange(m), rng.integers(0, m, rows - m)]),  # each family read
        rng.choice([0.0, 0.25, 0.5, 0.1], rows), rng.integers(0, 4, rows).astype(float),
        rng.integers(0, 9, rows).astype(float), np.full(rows, 8.0),
    )  # fmt: skip
    kwargs = {"slope": 3.0, "low": -3.0, "high": np.full(m, 6.0), "floor": 0.05}
    monkeypatch.setattr(_grid_posterior, "_CHUNK", chunk)
    by_pairs = match_moments(*args, **kwargs)
    monkeypatch.setattr(_grid_posterior, "_PAIR_CELLS", 0)
    by_rows = match_moments(*args, **kwargs)
    np.testing.assert_allclose(by_pairs[0], by_rows[0], atol=1e-5)
    np.testing.assert_allclose(by_pairs[1], by_rows[1], atol=1e-5)
