"""Turn pydantic validation errors into positioned problems that say what would be right."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from ._errors import Problem
from ._schema import ALLOWED_KEYS, show
from ._yaml import FieldPath, format_path, position_of

# Union tags pydantic puts into ``loc`` after these fields; they are not part of the YAML path.
_TAGS = {
    "variants": {"inline", "source", "count"},
    "tiers": {"count", "names"},
    "count": {"int", "list"},
}
_MODEL_OF_PARENT = {
    "": "manifest",
    "domains": "domain",
    "quota": "quota",
    "families": "family",
    "probe": "probe",
}
_TYPE_NAMES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "bool_type": "true or false",
    "finite_number": "a finite number",
}


def yaml_path(loc: tuple[str | int, ...]) -> tuple[FieldPath, str | None]:
    """The YAML field path of a pydantic ``loc`` (union tags removed), and the variants tag."""
    out: list[str | int] = []
    variants_tag = None
    skipped = False
    for part in loc:
        if not skipped and out and isinstance(out[-1], str) and part in _TAGS.get(out[-1], ()):
            if out[-1] == "variants":
                variants_tag = str(part)
            skipped = True
            continue
        skipped = False
        out.append(part)
    return tuple(out), variants_tag


def _unknown_key(path: FieldPath, variants_tag: str | None) -> str:
    key = str(path[-1])
    names = [p for p in path[:-1] if isinstance(p, str)]
    parent = names[-1] if names else ""
    kind = variants_tag if parent == "variants" else _MODEL_OF_PARENT.get(parent)
    allowed = ALLOWED_KEYS.get(kind or "", ())
    if not allowed:
        return f"unknown key {key!r}"
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown key {key!r}; {hint}expected one of: {', '.join(allowed)}"


def _message(err: Mapping[str, Any], path: FieldPath, variants_tag: str | None) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = err.get("input")
    if kind == "manifest":
        return str(err["msg"])
    if kind in ("missing", "too_short", "too_long") and "reward_range" in path:
        return f"must be [low, high], two numbers, got {show(value)}"
    if kind == "missing":
        return "is required" if path and isinstance(path[-1], str) else "a value is missing"
    if kind == "extra_forbidden":
        return _unknown_key(path, variants_tag)
    if kind in _TYPE_NAMES:
        return f"must be {_TYPE_NAMES[kind]}, got {show(value)}"
    if kind == "literal_error":
        return f"must be {ctx.get('expected', 'one of the allowed values')}, got {show(value)}"
    if kind == "string_pattern_mismatch":
        return (
            f"must be lowercase letters, digits, '_', '.' or '-', starting with a letter or "
            f"digit (pattern {ctx.get('pattern')}), got {show(value)}"
        )
    if kind == "too_short":
        if ctx.get("min_length") == 1:
            return "must not be empty"
        return f"must have at least {ctx.get('min_length')} items"
    if kind == "too_long":
        return f"must have at most {ctx.get('max_length')} items"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        words = {
            "greater_than_equal": "at least",
            "greater_than": "greater than",
            "less_than_equal": "at most",
            "less_than": "less than",
        }[kind]
        bound = next(iter(ctx.values()), "?")
        return f"must be {words} {bound}, got {show(value)}"
    msg = str(err.get("msg", "invalid value"))
    return msg[:1].lower() + msg[1:]


def validation_problems(
    exc: ValidationError, file: str, positions: Mapping[FieldPath, tuple[int, int]]
) -> list[Problem]:
    """One problem per pydantic error, placed at the closest position recorded in the YAML."""
    problems = []
    seen = set()
    for err in exc.errors():
        path, variants_tag = yaml_path(tuple(err["loc"]))
        if "reward_range" in path:  # a pair: point at the field, not at its elements
            path = path[: path.index("reward_range") + 1]
        line, col = position_of(positions, path)
        problem = Problem(file, line, col, format_path(path), _message(err, path, variants_tag))
        if problem not in seen:
            seen.add(problem)
            problems.append(problem)
    return sorted(problems, key=lambda p: (p.line, p.column))
