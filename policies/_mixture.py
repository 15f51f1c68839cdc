"""A weighted combination of policies, configured from YAML like any other policy."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from domains import Catalog, CurriculumError

from ._registry import Policy, PolicyState, make_policy, policy_params, register
from ._view import ArmView

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Parts = tuple[tuple[Policy, float], ...]


def _parse(components: Any) -> tuple[Parts, list[dict[str, Any]]]:
    """Build the component policies; return them with their normalised mixing weights, and
    the canonical JSON-ready form of the config (what ``policy_params`` logs and a checkpoint
    is checked against)."""
    if isinstance(components, str | Mapping) or not isinstance(components, Sequence):
        raise ValueError(
            "components: must be a list of {policy: ..., weight: ...} entries, "
            f"got {type(components).__name__}"
        )
    if not components:
        raise ValueError("components: need at least one {policy: ..., weight: ...} entry")
    built: list[Policy] = []
    raw: list[float] = []
    for i, item in enumerate(components):
        where = f"components[{i}]"
        if isinstance(item, Mapping):
            extra = sorted(set(item) - {"policy", "weight"})
            if extra or "policy" not in item:
                raise ValueError(
                    f"{where}: needs keys 'policy' and 'weight' (optional, default 1)"
                    + (f"; unknown key(s) {extra}" if extra else "")
                )
            spec, weight = item["policy"], item.get("weight", 1.0)
        elif isinstance(item, Sequence) and not isinstance(item, str) and len(item) == 2:
            spec, weight = item
        else:
            raise ValueError(f"{where}: must be {{policy: ..., weight: ...}} or a pair")
        try:
            built.append(make_policy(spec))
        except CurriculumError as exc:
            raise ValueError(f"{where}.policy: {exc}") from None
        try:
            w = float(weight)
        except (TypeError, ValueError):
            raise ValueError(f"{where}.weight: must be a number, got {weight!r}") from None
        if not (np.isfinite(w) and w >= 0):
            raise ValueError(f"{where}.weight: must be finite and >= 0, got {weight!r}")
        raw.append(w)
    total = sum(raw)
    if total <= 0:
        raise ValueError("components: at least one weight must be positive")
    parts = tuple((p, w / total) for p, w in zip(built, raw, strict=True))
    canonical = [{"policy": policy_params(p), "weight": w} for p, w in zip(built, raw, strict=True)]
    return parts, canonical


@register("mixture")
@dataclass(frozen=True)
class Mixture:
    """``sum_c m_c * w_c / mass_c``: each component's weights, normalised, mixed by ``m_c``.

    YAML: ``{name: mixture, components: [{policy: {name: learning_progress}, weight: 0.7},
    {policy: regression_guard, weight: 0.3}]}``; in Python the entries may also be
    ``(policy, weight)`` pairs with a Policy object. Mixing weights are normalised to sum 1.

    A component is normalised by its mass on the families' current arms (``mass_c``), the only
    arms the scheduler reads, so a policy that also scores other tiers does not lose share.
    A component with no mass there counts as uniform. Its state lives under the key "0", "1",
    ... of the mixture's state, and ``observe`` forwards to every component.

    After construction ``components`` holds the canonical config (each policy as its
    ``policy_params``), so logging and checkpoints see plain JSON; ``parts`` holds the built
    policies with their normalised mixing weights.
    """

    components: Sequence[Any] = ()

    def __post_init__(self) -> None:
        parts, canonical = _parse(self.components)
        object.__setattr__(self, "components", canonical)
        self.__dict__["parts"] = parts  # seeds the cached_property below

    @cached_property
    def parts(self) -> Parts:
        """The component policies and their normalised mixing weights."""
        return _parse(self.components)[0]

    def __hash__(self) -> int:
        return hash(json.dumps(self.components, sort_keys=True, default=str))

    def init_state(self, catalog: Catalog) -> PolicyState:
        return {str(i): p.init_state(catalog) for i, (p, _) in enumerate(self.parts)}

    def observe(self, view: ArmView, state: PolicyState, touched: IntArray) -> None:
        for i, (p, _) in enumerate(self.parts):  # a loop over components, not arms
            p.observe(view, state[str(i)], touched)

    def weights(self, view: ArmView, state: PolicyState) -> FloatArray:
        cur = view.current_arm
        n = view.catalog.n_arms
        total = np.zeros(n)
        for i, (p, m) in enumerate(self.parts):
            w = np.asarray(p.weights(view, state[str(i)]), dtype=np.float64)
            if w.shape != (n,) or not np.all(np.isfinite(w)) or (w < 0).any():
                name = policy_params(p)["name"]
                raise ValueError(
                    f"mixture component {i} ({name!r}) returned invalid weights: "
                    "need finite non-negative values of shape [n_arms]"
                )
            mass = w[cur].sum()
            total += m * (w / mass if mass > 0 else np.full(n, 1.0 / cur.shape[0]))
        return total
