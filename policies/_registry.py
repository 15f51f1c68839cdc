"""The Policy protocol and a registry by name, so YAML can name a policy and its options."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from domains import Catalog, CurriculumError

from ._view import ArmView

PolicyState = dict[str, Any]


class PolicyConfigError(CurriculumError):
    """A policy name or option that does not exist or has a bad value."""


@runtime_checkable
class Policy(Protocol):
    """Maps a read-only view of the state to non-negative weights of shape [n_arms].

    A policy holds no authoritative state. If it needs memory (a bandit's weights), it keeps it
    in the dict returned by ``init_state``: the scheduler owns that dict, saves it and restores it.
    A policy whose weights depend on the catalog alone may say so with a class attribute
    ``constant = True`` (``uniform``, ``static``): the scheduler then asks for them once.
    """

    def init_state(self, catalog: Catalog) -> PolicyState: ...

    def observe(self, view: ArmView, state: PolicyState, touched: npt.NDArray[np.int64]) -> None:
        """Called after a report; ``touched`` are the arms that received outcomes."""
        ...

    def weights(self, view: ArmView, state: PolicyState) -> npt.NDArray[np.float64]: ...


class Stateless:
    """Mixin for policies with no memory of their own."""

    def init_state(self, catalog: Catalog) -> PolicyState:
        return {}

    def observe(self, view: ArmView, state: PolicyState, touched: npt.NDArray[np.int64]) -> None:
        return None


_REGISTRY: dict[str, Callable[..., Policy]] = {}
P = TypeVar("P")


def register(name: str) -> Callable[[type[P]], type[P]]:
    """Class decorator: make a policy constructible by name from a config mapping."""

    def decorate(cls: type[P]) -> type[P]:
        if name in _REGISTRY:
            raise ValueError(f"policy {name!r} is registered twice")
        _REGISTRY[name] = cls  # type: ignore[assignment]
        cls.policy_name = name  # type: ignore[attr-defined]
        return cls

    return decorate


def available_policies() -> list[str]:
    return sorted(_REGISTRY)


def make_policy(spec: str | Mapping[str, Any] | Policy, **options: Any) -> Policy:
    """Build a policy from a name, a mapping ``{name: ..., **options}``, or return it as is."""
    if not isinstance(spec, str | Mapping):
        return spec
    if isinstance(spec, Mapping):
        options = {**{k: v for k, v in spec.items() if k != "name"}, **options}
        if "name" not in spec:
            raise PolicyConfigError(
                f"policy: a mapping needs a 'name' (one of {available_policies()})"
            )
        spec = str(spec["name"])
    try:
        factory = _REGISTRY[spec]
    except KeyError:
        raise PolicyConfigError(
            f"policy: unknown policy {spec!r}; known: {', '.join(available_policies())}"
        ) from None
    if dataclasses.is_dataclass(factory):
        known = {f.name for f in dataclasses.fields(factory)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise PolicyConfigError(
                f"policy {spec!r}: unknown option(s) {unknown}; known: {sorted(known)}"
            )
    try:
        return factory(**options)
    except (TypeError, ValueError) as exc:
        raise PolicyConfigError(f"policy {spec!r}: {exc}") from None


def policy_params(policy: Policy) -> dict[str, Any]:
    """The name and hyperparameters of a policy, for logging."""
    params: dict[str, Any] = {"name": getattr(policy, "policy_name", type(policy).__name__)}
    if dataclasses.is_dataclass(policy) and not isinstance(policy, type):
        for f in dataclasses.fields(policy):
            if f.init:  # an option; a field the policy makes itself is not
                params[f.name] = _plain(getattr(policy, f.name))
    return params


def _plain(value: Any) -> Any:
    """Options as plain data, so they compare equal after a JSON round trip (tuples become
    lists, nested policies their params)."""
    if isinstance(value, Policy):
        return policy_params(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
