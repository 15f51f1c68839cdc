"""Params for a run: flattened settings with every secret redacted, and package versions."""

from __future__ import annotations

import dataclasses
import enum
import importlib.metadata
import json
import os
import platform
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .._redact import REDACTED, mask_secrets
from ._names import sanitize_name

MAX_PARAM_VALUE_LENGTH = 6000  # mlflow.utils.validation.MAX_PARAM_VAL_LENGTH
DEFAULT_SECRET_KEYS = ("password", "secret", "token", "key")

_TOKEN_SPLIT = re.compile(r"[^a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

_PACKAGES = (
    "curriculum-scheduler",
    "numpy",
    "scipy",
    "torch",
    "mlflow",
    "sqlmodel",
    "sqlalchemy",
    "pydantic",
    "pydantic-settings",
    "apscheduler",
    "pyyaml",
    "psycopg",
    "trl",
    "transformers",
    "verl",
)


def is_secret_key(key: str, secret_keys: Sequence[str] = DEFAULT_SECRET_KEYS) -> bool:
    """True when a word of the key is, or ends with, a secret word.

    "db_password", "apiKey", "hf_token" and "apikey" match; "max_tokens" and "tokenizer" do
    not, so ordinary hyperparameters stay visible.
    """
    words = _TOKEN_SPLIT.split(_CAMEL.sub("_", key).lower())
    return any(w and any(w == s or w.endswith(s) for s in secret_keys) for w in words)


def _scalar(value: Any) -> str:
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        return str(os.fspath(value))
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and getattr(value, "ndim", None) == 0:
        value = item()
    return str(value)


def _as_mapping(value: Any) -> Mapping[str, Any] | None:
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)  # pydantic models
    if callable(dump) and not isinstance(value, type):
        dumped = dump()
        return dumped if isinstance(dumped, Mapping) else None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return None


def flatten_params(
    config: Mapping[str, Any],
    *,
    prefix: str = "",
    secret_keys: Sequence[str] = DEFAULT_SECRET_KEYS,
) -> dict[str, str]:
    """Flatten nested settings into MLflow params: ``{"a": {"b": 1}} -> {"a.b": "1"}``.

    Values under a secret key are replaced by "***" (whole subtrees too); passwords inside
    URLs anywhere are masked; pydantic ``SecretStr`` values are never revealed. Lists of
    scalars become JSON; lists holding mappings are flattened by index (``a.0.b``) so a
    secret inside them is still found. Keys are made valid for MLflow and values are cut to
    MLflow's 6,000-character limit.
    """
    out: dict[str, str] = {}

    def put(path: str, text: str) -> None:
        key = sanitize_name(path or "_")
        if len(text) > MAX_PARAM_VALUE_LENGTH:
            text = text[: MAX_PARAM_VALUE_LENGTH - 3] + "..."
        out[key] = text

    def walk(value: Any, path: str, secret: bool) -> None:
        mapping = _as_mapping(value)
        if mapping is not None:
            if not mapping and path:
                put(path, "{}")
            for k, v in mapping.items():
                child = f"{path}.{k}" if path else str(k)
                walk(v, child, secret or is_secret_key(str(k), secret_keys))
            return
        if isinstance(value, list | tuple) and any(_as_mapping(v) is not None for v in value):
            for i, v in enumerate(value):
                walk(v, f"{path}.{i}", secret)
            return
        if secret or type(value).__name__ in ("SecretStr", "SecretBytes"):
            put(path, REDACTED)
            return
        if isinstance(value, list | tuple | set | frozenset):
            items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
            text = json.dumps([_scalar(v) if not _is_json(v) else v for v in items])
        else:
            text = _scalar(value)
        put(path, mask_secrets(text))

    walk(config, prefix.rstrip("."), False)
    return out


def _is_json(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def package_versions() -> dict[str, str]:
    """Versions of Python and of the installed packages a run's results depend on."""
    versions = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions
