"""Figures of a run: probe curves per domain, a weights heatmap, a tier timeline, events.

Each function takes a :class:`RunHistory` and returns a ``matplotlib.figure.Figure`` built
without pyplot (no global figure registry, so figures made every M steps are freed like any
object) on the Agg canvas. matplotlib is imported inside the functions: the scheduler core
works without the ``plots`` extra. In a notebook, ``display(fig)`` shows one inline.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._errors import ConfigError
from ._history import IntArray, RunHistory

if TYPE_CHECKING:
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

_LEVELS = ("domain", "family")
_MAX_TICK_LABELS = 60  # beyond this many rows a heatmap's labels overlap: index only


def _figure(width: float, height: float) -> Figure:
    """A pyplot-free Figure on the Agg canvas, with constrained (tight) layout."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - depends on the installed extras
        raise ConfigError(
            "figures need matplotlib: pip install 'curriculum-scheduler[plots]'"
        ) from None
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _positive(name: str, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}: must be a positive integer, got {value!r}")


def _empty(fig: Figure, title: str, message: str) -> Figure:
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
    return fig


def probe_curves_figure(history: RunHistory, max_domains: int = 30) -> Figure:
    """Small multiples: one axis per domain, the mean probe score and its mean CI band."""
    _positive("max_domains", max_domains)
    curves = history.domain_curves()
    shown = min(history.n_domains, max_domains)
    cols = min(5, max(shown, 1))
    rows = max(1, math.ceil(shown / cols))
    fig = _figure(3.0 * cols, 2.1 * rows + 0.6)
    title = f"probe curves per domain: {history.run_name}"
    if curves.steps.size == 0 or shown == 0:
        return _empty(fig, title, "no probe points recorded")
    axes = fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False).ravel()
    for ax in axes[shown:]:
        fig.delaxes(ax)
    for d, ax in enumerate(axes[:shown]):
        ax.fill_between(curves.steps, curves.low[:, d], curves.high[:, d], alpha=0.25, lw=0)
        ax.plot(curves.steps, curves.mean[:, d], lw=1.5)
        ax.set_title(history.domain_names[d], fontsize=9)
        ax.set_ylim(0.0, 1.0)
        ax.grid(alpha=0.3)
    for ax in axes[:shown][-cols:]:
        ax.set_xlabel("step")
    for ax in axes[:shown:cols]:
        ax.set_ylabel("probe score")
    more = f" (first {shown} of {history.n_domains} domains)" if shown < history.n_domains else ""
    fig.suptitle(title + more + "; band: mean 90% CI of the families")
    return fig


def weights_heatmap_figure(history: RunHistory, level: str = "domain") -> Figure:
    """Sampling weights over time: one row per domain (``level="domain"``) or family."""
    if level not in _LEVELS:
        raise ConfigError(f"level: must be one of {', '.join(_LEVELS)}, got {level!r}")
    if level == "domain":
        steps, weights = history.domain_weights()
        names = history.domain_names
    else:
        order = np.argsort(history.domain_of_family, kind="stable")  # families by domain
        steps, weights = history.weight_steps, history.weights[:, order]
        names = tuple(history.family_names[i] for i in order.tolist())
    rows = len(names)
    fig = _figure(10.0, min(2.0 + 0.22 * min(rows, _MAX_TICK_LABELS), 16.0))
    title = f"{level} sampling weights over time: {history.run_name}"
    if steps.size == 0:
        return _empty(fig, title, "no weight snapshots recorded")
    ax = fig.add_subplot()
    image = ax.imshow(
        weights.T,
        aspect="auto",
        interpolation="nearest",
        cmap="viridis",
        extent=(float(steps[0]) - 0.5, float(steps[-1]) + 0.5, rows - 0.5, -0.5),
    )
    if rows <= _MAX_TICK_LABELS:
        ax.set_yticks(np.arange(rows), labels=names, fontsize=7)
        ax.set_ylabel(level)
    else:
        ax.set_ylabel(f"{level} (index, grouped by domain)")
    ax.set_xlabel("step")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label="weight" if level == "family" else "share of samples")
    return fig


def _changed_families(tiers: IntArray, limit: int) -> IntArray:
    """Up to ``limit`` family ids: most tier changes first, then highest final tier."""
    changes = (np.diff(tiers, axis=0) != 0).sum(axis=0)
    order = np.lexsort((np.arange(tiers.shape[1]), -tiers[-1], -changes))
    return np.sort(order[:limit]).astype(np.int64)


def tier_timeline_figure(history: RunHistory, max_families: int = 60) -> Figure:
    """The tier each family was probed at, over time, for the ``max_families`` families
    whose tier changed most (then the highest final tier), in catalog order."""
    _positive("max_families", max_families)
    timeline = history.tier_timeline()
    fig = _figure(10.0, min(2.2 + 0.2 * min(history.n_families, max_families), 16.0))
    title = f"tier timeline: {history.run_name}"
    if timeline.steps.size == 0:
        return _empty(fig, title, "no probe points recorded")
    from matplotlib import colormaps
    from matplotlib.colors import BoundaryNorm, ListedColormap

    picked = _changed_families(timeline.tiers, max_families)
    tiers = np.ma.masked_less(timeline.tiers[:, picked].T, 0)
    top = max(int(timeline.tiers.max()), 0)
    colors = colormaps["plasma"].resampled(top + 2)(np.arange(top + 1))
    cmap = ListedColormap(colors).with_extremes(bad="lightgrey")  # grey: not probed yet
    steps = timeline.steps
    ax = fig.add_subplot()
    # pcolormesh, not imshow: probe rounds need not be evenly spaced in steps.
    image = ax.pcolormesh(
        np.r_[steps, steps[-1] + 1].astype(np.float64),
        np.arange(picked.size + 1) - 0.5,
        tiers,
        cmap=cmap,
        norm=BoundaryNorm(np.arange(top + 2) - 0.5, top + 1),
    )
    ax.invert_yaxis()
    ax.set_yticks(np.arange(picked.size), labels=[history.family_names[f] for f in picked],
                  fontsize=7)  # fmt: skip
    ax.set_xlabel("step")
    shown = f"the {picked.size} of {history.n_families} families with most tier changes"
    ax.set_title(f"{title} ({shown}; grey: not probed yet)")
    fig.colorbar(image, ax=ax, ticks=np.arange(top + 1), label="tier")
    return fig


def events_figure(history: RunHistory) -> Figure:
    """Cumulative event counts by kind over time."""
    counts = history.event_counts()
    fig = _figure(8.0, 3.6)
    title = f"events over time: {history.run_name}"
    if not counts.kinds:
        return _empty(fig, title, "no events recorded")
    ax = fig.add_subplot()
    for j, kind in enumerate(counts.kinds):
        ax.step(counts.steps, counts.cumulative[:, j], where="post", label=kind)
    ax.set_xlabel("step")
    ax.set_ylabel("events so far")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def save_figures(history: RunHistory, directory: str | Path, *, dpi: int = 100) -> list[Path]:
    """Write the four figures as PNGs into ``directory`` (e.g. to log them as artifacts
    every M steps); returns their paths."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    makers: dict[str, Callable[[RunHistory], Figure]] = {
        "probe_curves.png": probe_curves_figure,
        "weights_heatmap.png": weights_heatmap_figure,
        "tier_timeline.png": tier_timeline_figure,
        "events.png": events_figure,
    }
    paths = []
    for name, make in makers.items():
        path = out / name
        make(history).savefig(path, dpi=dpi)
        paths.append(path)
    log.debug("wrote %d figures of %s to %s", len(paths), history.run_name, out)
    return paths
