"""Pydantic models of a domain manifest file.

The schema checks one file's structure and the invariants that live inside one model (a
quota's min <= max, a variant's tier exists). It reads no files: JSONL pools and checks that
span files belong to the loader. Numbers are strict (YAML already types them), so ``"1.5"``
or ``true`` is never silently taken for a number.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from annotated_types import MinLen
from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Strict,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]*$"
DEFAULT_TIER_FIELD = "tier"
# Upper bounds on every number and list: a typo (an extra 000) is an error, not a 15 s,
# 1 GB load, and no count can overflow the int64 arrays of the Catalog.
MAX_TIERS = 64
MAX_POOL = 2**40  # variants per tier, probe items per family
MAX_COST_S = 1e7  # seconds per episode (about four months)
MAX_FACTOR = 1e6  # priorities and static weights
MAX_REWARD = 1e12  # |low|, |high| of a reward range
MAX_TEXT = 10_000  # characters of a description or other free text
MAX_LIST = 10_000  # tools, tags, domains in a file, families in a domain


def custom_error(message: str) -> PydanticCustomError:
    """A validation error whose text is ``message`` verbatim (braces included)."""
    return PydanticCustomError("manifest", "{message}", {"message": message})


def _raise_all(title: str, errors: Sequence[tuple[tuple[str | int, ...], str, Any]]) -> None:
    """Raise every (loc, message, input) at once, so no problem hides behind the first."""
    if errors:
        details = [
            InitErrorDetails(type=custom_error(msg), loc=loc, input=value)
            for loc, msg, value in errors
        ]
        raise ValidationError.from_exception_data(title, details)


def show(value: Any) -> str:
    """A value as the user wrote it in YAML, short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:37] + "...")
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _num(x: float) -> str:
    return f"{x:g}"


def _interval(
    lo: float | None, hi: float | None, lo_open: bool, hi_open: bool
) -> tuple[Callable[[float], float], dict[str, Any]]:
    """A checker with a message that says what would be right, and its JSON Schema keywords."""
    parts = []
    schema: dict[str, Any] = {}
    if lo is not None:
        parts.append(f"greater than {_num(lo)}" if lo_open else f"at least {_num(lo)}")
        schema["exclusiveMinimum" if lo_open else "minimum"] = lo
    if hi is not None:
        parts.append(f"less than {_num(hi)}" if hi_open else f"at most {_num(hi)}")
        schema["exclusiveMaximum" if hi_open else "maximum"] = hi
    if lo is not None and hi is not None and not lo_open and not hi_open:
        text = f"between {_num(lo)} and {_num(hi)}"
    else:
        text = " and ".join(parts)

    def check(v: float) -> float:
        ok = not math.isnan(v)
        if lo is not None:
            ok = ok and (v > lo if lo_open else v >= lo)
        if hi is not None:
            ok = ok and (v < hi if hi_open else v <= hi)
        if not ok:
            raise custom_error(f"must be {text}, got {_num(v)}")
        return v

    return check, schema


def _bounded(
    lo: float | None, hi: float | None, *, lo_open: bool = False, hi_open: bool = False
) -> tuple[AfterValidator, Any]:
    check, schema = _interval(lo, hi, lo_open, hi_open)
    return AfterValidator(check), Field(json_schema_extra=schema)


_SHARE = _bounded(0.0, 1.0)
_POSITIVE = _bounded(0.0, MAX_FACTOR, lo_open=True)
_NON_NEGATIVE = _bounded(0.0, MAX_FACTOR)
_COST = _bounded(0.0, MAX_COST_S, lo_open=True)
_REWARD = _bounded(-MAX_REWARD, MAX_REWARD)
_CHANCE = _bounded(0.0, 1.0, hi_open=True)
_CAP = _bounded(0.0, 1.0, lo_open=True)
Share = Annotated[float, Strict(), _SHARE[0], _SHARE[1]]
Positive = Annotated[float, Strict(), _POSITIVE[0], _POSITIVE[1]]
Cost = Annotated[float, Strict(), _COST[0], _COST[1]]
Reward = Annotated[float, Strict(), _REWARD[0], _REWARD[1]]
NonNegative = Annotated[float, Strict(), _NON_NEGATIVE[0], _NON_NEGATIVE[1]]
Chance = Annotated[float, Strict(), _CHANCE[0], _CHANCE[1]]
Cap = Annotated[float, Strict(), _CAP[0], _CAP[1]]
Name = Annotated[str, Strict(), Field(pattern=NAME_PATTERN, max_length=200)]
StrictInt = Annotated[int, Strict()]
StrictFloat = Annotated[float, Strict()]
Text = Annotated[str, Strict(), Field(max_length=MAX_TEXT)]
Word = Annotated[str, Strict(), MinLen(1), Field(max_length=1000)]
Words = Annotated[
    list[Annotated[str, Strict(), Field(max_length=1000)]], Field(max_length=MAX_LIST)
]
PoolSize = Annotated[StrictInt, Field(ge=1, le=MAX_POOL)]
Item = dict[str, Any]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class QuotaSpec(_Strict):
    """A domain's share of the samples (or of the compute) every step."""

    min_share: Share = Field(0.0, description="Lower bound on the domain's share, 0..1.")
    max_share: Share = Field(1.0, description="Upper bound on the domain's share, 0..1.")
    basis: Literal["samples", "compute"] = Field(
        "samples", description="Share of samples drawn, or of estimated compute (cost_s)."
    )

    @model_validator(mode="after")
    def _ordered(self) -> QuotaSpec:
        if self.min_share > self.max_share:
            _raise_all(
                "QuotaSpec",
                [
                    (
                        ("max_share",),
                        f"must be at least min_share ({_num(self.min_share)}), "
                        f"got {_num(self.max_share)}",
                        self.max_share,
                    )
                ],
            )
        return self


class VariantsFile(_Strict):
    """Variants read from a JSONL file next to the manifest, one JSON object per line."""

    source: Word = Field(description="Path of a .jsonl file, relative to the manifest file.")
    tier_field: Word = Field(
        DEFAULT_TIER_FIELD, description="Key that places an item in one tier (index or name)."
    )


def _count_kind(v: Any) -> str | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return "int"
    return "list" if isinstance(v, list) else None


class VariantsCount(_Strict):
    """A pool declared by size only: the environment materialises variant i from its id."""

    count: Annotated[
        Annotated[PoolSize, Tag("int")]
        | Annotated[list[PoolSize], Field(max_length=MAX_TIERS), Tag("list")],
        Discriminator(
            _count_kind,
            custom_error_type="manifest",
            custom_error_message="must be a positive integer or a list of them, one per tier",
        ),
    ] = Field(description="Pool size of every tier, or a list with one size per tier.")


def _variants_kind(v: Any) -> str | None:
    if isinstance(v, list):
        return "inline"
    if isinstance(v, Mapping):
        if "source" in v:
            return "source"
        if "count" in v:
            return "count"
    return None


Variants = Annotated[
    Annotated[list[Item], MinLen(1), Tag("inline")]
    | Annotated[VariantsFile, Tag("source")]
    | Annotated[VariantsCount, Tag("count")],
    Discriminator(
        _variants_kind,
        custom_error_type="manifest",
        custom_error_message=(
            "must be a list of variant mappings, {source: file.jsonl} or {count: N}"
        ),
    ),
]


def _tiers_kind(v: Any) -> str | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return "count"
    return "names" if isinstance(v, list) else None


def _unique(names: list[str]) -> list[str]:
    if len(set(names)) == len(names):  # the usual case, without a Counter per family
        return names
    dupes = [n for n, k in Counter(names).items() if k > 1]
    if dupes:
        raise custom_error(f"tier names must be unique; {dupes[0]!r} appears more than once")
    return names


Tiers = Annotated[
    Annotated[StrictInt, Field(ge=1, le=MAX_TIERS), Tag("count")]
    | Annotated[
        list[Annotated[str, Strict(), MinLen(1), Field(max_length=200)]],
        MinLen(1),
        Field(max_length=MAX_TIERS),
        AfterValidator(_unique),
        Tag("names"),
    ],
    Discriminator(
        _tiers_kind,
        custom_error_type="manifest",
        custom_error_message="must be a positive integer or a non-empty list of tier names",
    ),
]


class ProbeSpec(_Strict):
    """The held-out probe set of a family: inline items, a size, or a JSONL file."""

    items: Annotated[list[Item], MinLen(1)] | None = Field(
        None, description="Held-out items, inline."
    )
    size: Annotated[StrictInt, Field(ge=0, le=MAX_POOL)] | None = Field(
        None, description="Number of held-out items the probe function draws from."
    )
    source: Word | None = Field(
        None,
        description="With size: a free-form description. Alone: a JSONL file of held-out items.",
    )

    @model_validator(mode="after")
    def _one_form(self) -> ProbeSpec:
        if self.items is not None and (self.size is not None or self.source is not None):
            extra = "size" if self.size is not None else "source"
            _raise_all(
                "ProbeSpec",
                [((extra,), "give either items, or size (with an optional source)", None)],
            )
        if self.items is None and self.size is None and self.source is None:
            _raise_all("ProbeSpec", [((), "give items, size or source (a JSONL file)", None)])
        return self


@functools.cache
def _counted_tiers(n: int) -> tuple[str, ...]:
    """``t0..t{n-1}``: one tuple per count, shared (at most MAX_TIERS of them)."""
    return tuple(f"t{t}" for t in range(n))


def tier_index(value: Any, tier_names: Sequence[str]) -> int | None:
    """The tier an item's tier value names (an index or a tier name), or None if none."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value < len(tier_names) else None
    if isinstance(value, str) and value in tier_names:
        return tier_names.index(value)
    return None


def expected_tiers(tier_names: Sequence[str]) -> str:
    names = ", ".join(repr(n) for n in tier_names)
    return f"one of {names} or an index 0..{len(tier_names) - 1}"


def split_by_tier(
    items: Sequence[Mapping[str, Any]], tier_field: str, tier_names: Sequence[str]
) -> tuple[list[list[int]], list[tuple[int, Any]]]:
    """Item indices per tier (items without the field go to every tier) and the bad ones."""
    per_tier: list[list[int]] = [[] for _ in tier_names]
    bad: list[tuple[int, Any]] = []
    everywhere = list(range(len(tier_names)))
    for i, item in enumerate(items):
        if tier_field not in item:
            targets = everywhere
        else:
            t = tier_index(item[tier_field], tier_names)
            if t is None:
                bad.append((i, item[tier_field]))
                continue
            targets = [t]
        for t in targets:
            per_tier[t].append(i)
    return per_tier, bad


def _family_schema(schema: dict[str, Any]) -> None:
    """Advertise ``task_family`` as an alias of ``name`` to editors (exactly one is given)."""
    props = schema.setdefault("properties", {})
    if "name" in props:
        props["task_family"] = {**props["name"], "title": "Task Family"}
    schema["required"] = [r for r in schema.get("required", []) if r != "name"]
    schema["oneOf"] = [{"required": ["name"]}, {"required": ["task_family"]}]


class FamilySpec(_Strict):
    """A task family: shared environment, tools and verifier; tiers of variants; a probe set."""

    model_config = ConfigDict(json_schema_extra=_family_schema)

    name: Name = Field(
        validation_alias=AliasChoices("name", "task_family"),
        description="Globally unique family name (also accepted as task_family).",
    )
    description: Text = ""
    environment: Word = Field(description="Environment the episodes run in.")
    tools: Words = Field(default_factory=list)
    verification: Word = Field(description="How an episode is verified (the reward's source).")
    tiers: Tiers = Field(1, description="Number of tiers (named t0..tN-1) or a list of names.")
    tier_mode: Literal["ladder", "separate"] = Field(
        "ladder",
        description=(
            "ladder: one task at rising difficulty; the family trains at one current tier and "
            "climbs. separate: each tier is a skill of its own; all are trained at once, each "
            "by its own weight, and the family's probe covers every tier."
        ),
    )
    variants: Variants = Field(description="Inline items, {source: f.jsonl} or {count: N}.")
    probe: ProbeSpec | None = Field(None, description="Held-out probe set; none by default.")
    cost_s: Cost = Field(1.0, description="Estimated seconds per episode.")
    reward_range: tuple[Reward, Reward] = Field(
        (0.0, 1.0), description="[low, high] of the rewards the verifier returns."
    )
    chance_success: Chance = Field(0.0, description="Success rate of a random policy.")
    max_share: Cap = Field(1.0, description="Cap on the family's share of samples.")
    weight: NonNegative = Field(1.0, description="Static sampling weight.")
    priority: Positive = 1.0
    tags: Words = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _one_name(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "name" in data and "task_family" in data:
            _raise_all(
                "FamilySpec",
                [(("task_family",), "give the family name once: name or task_family", None)],
            )
        return data

    @property
    def tier_names(self) -> tuple[str, ...]:
        if isinstance(self.tiers, int):
            return _counted_tiers(self.tiers)
        return tuple(self.tiers)

    @property
    def n_tiers(self) -> int:
        return len(self.tier_names)

    @model_validator(mode="after")
    def _consistent(self) -> FamilySpec:
        errors: list[tuple[tuple[str | int, ...], str, Any]] = []
        low, high = self.reward_range
        if not low < high:
            errors.append(
                (("reward_range",), f"must be [low, high] with low < high, got [{low}, {high}]", [])
            )
        names = self.tier_names
        if isinstance(self.variants, list):
            per_tier, bad = split_by_tier(self.variants, DEFAULT_TIER_FIELD, names)
            for i, value in bad:
                msg = f"unknown tier {show(value)}; expected {expected_tiers(names)}"
                errors.append((("variants", i, DEFAULT_TIER_FIELD), msg, value))
            if not bad:
                for t, members in enumerate(per_tier):
                    if not members:
                        msg = (
                            f"tier {names[t]!r} has no variants; add an item with "
                            f"tier: {names[t]} or one without a tier"
                        )
                        errors.append((("variants",), msg, None))
        elif (
            isinstance(self.variants, VariantsCount)
            and isinstance(self.variants.count, list)
            and len(self.variants.count) != len(names)
        ):
            msg = f"must have one size per tier ({len(names)}), got {len(self.variants.count)}"
            errors.append((("variants", "count"), msg, None))
        _raise_all("FamilySpec", errors)
        return self


class DomainSpec(_Strict):
    """A group of families with a shared quota."""

    name: Name = Field(description="Domain name, unique across all manifests.")
    description: Text = ""
    quota: QuotaSpec | None = Field(None, description="Min/max share of the samples or compute.")
    priority: Positive = 1.0
    tags: Words = Field(default_factory=list)
    families: Annotated[list[FamilySpec], MinLen(1), Field(max_length=MAX_LIST)]

    @property
    def min_share(self) -> float:
        return 0.0 if self.quota is None else self.quota.min_share

    @property
    def max_share(self) -> float:
        return 1.0 if self.quota is None else self.quota.max_share


def _version(value: Any) -> Any:
    """``true`` equals 1 in Python; a version must be the integer itself."""
    if type(value) is not int:
        raise custom_error(f"must be 1 (the manifest format version), got {show(value)}")
    return value


class ManifestSpec(_Strict):
    """One manifest file: a list of domains."""

    model_config = ConfigDict(title="Curriculum domain manifest")

    version: Annotated[Literal[1], BeforeValidator(_version)] = 1
    domains: Annotated[list[DomainSpec], MinLen(1), Field(max_length=MAX_LIST)]


# Which keys each model accepts, for "unknown key" messages.
ALLOWED_KEYS: dict[str, tuple[str, ...]] = {
    "manifest": tuple(ManifestSpec.model_fields),
    "domain": tuple(DomainSpec.model_fields),
    "quota": tuple(QuotaSpec.model_fields),
    "family": ("name", "task_family", *[k for k in FamilySpec.model_fields if k != "name"]),
    "source": tuple(VariantsFile.model_fields),
    "count": tuple(VariantsCount.model_fields),
    "probe": tuple(ProbeSpec.model_fields),
}


def manifest_json_schema() -> dict[str, Any]:
    """The JSON Schema of a manifest file, for editors (yaml-language-server) and docs."""
    schema = ManifestSpec.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
