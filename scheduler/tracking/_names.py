"""Metric and param names that MLflow accepts on every backend, with "/" kept for grouping."""

from __future__ import annotations

import hashlib
import re

MAX_NAME_LENGTH = 250  # mlflow.utils.validation.MAX_ENTITY_KEY_LENGTH
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_\-. /]")  # no ":" (refused on Windows stores)


def sanitize_name(raw: str) -> str:
    """Map any string to a valid MLflow metric/param key.

    Disallowed characters become "_", and the path is normalised ("a//b", "./a", "a/", "..")
    because MLflow refuses a name that a file store would resolve to another name. An
    over-long name is cut and given a hash suffix, so two long names stay distinct.
    """
    text = _NOT_ALLOWED.sub("_", raw)
    parts = [("__" if p == ".." else p) for p in text.split("/") if p not in ("", ".")]
    name = "/".join(parts) or "_"
    if len(name) > MAX_NAME_LENGTH:
        digest = hashlib.sha1(raw.encode()).hexdigest()[:10]
        name = f"{name[: MAX_NAME_LENGTH - 11]}_{digest}"
    return name
