"""Find manifest files, parse and validate them, resolve their JSONL pools, check them together.

Every problem in every file is gathered before anything fails; then one ``ManifestError``
carries them all, each with its file, line, column and field path.
"""

from __future__ import annotations

import contextlib
import gc
import glob
import hashlib
import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ._catalog import PoolTable, VariantPool
from ._checks import (
    DomainQuota,
    FieldAt,
    NamedAt,
    Place,
    Where,
    duplicate_names,
    overlap_problems,
    quota_problems,
)
from ._errors import ManifestError, Problem
from ._files import FileRefused, SourcePolicy, inside, line_col, read_bounded, stat_problem
from ._messages import validation_problems
from ._plain_yaml import UNSURE, load_plain
from ._schema import (
    DEFAULT_TIER_FIELD,
    FamilySpec,
    ManifestSpec,
    VariantsCount,
    VariantsFile,
    expected_tiers,
    show,
    split_by_tier,
)
from ._yaml import FieldPath, LazyPositions, format_path, parse_yaml, position_of

logger = logging.getLogger(__name__)

_SUFFIXES = (".yaml", ".yml")
Located = list[tuple[dict[str, Any], Place]]


@dataclass(frozen=True)
class ResolvedFamily:
    """A family with its pools read: one pool per tier (a PoolTable), and its probe pool."""

    domain: str
    spec: FamilySpec
    pools: PoolTable
    probe: VariantPool
    where: Place  # of the family's name in its manifest


@dataclass(frozen=True)
class LoadedManifest:
    """One validated manifest file, its JSONL pools resolved."""

    path: str
    sha256: str
    spec: ManifestSpec
    families: tuple[ResolvedFamily, ...]  # in (domain, family) order
    positions: Mapping[FieldPath, tuple[int, int]] = field(repr=False)
    data_files: Mapping[str, str] = field(default_factory=dict)  # JSONL file -> sha256


def _directory_files(path: Path, problems: list[Problem]) -> list[str]:
    """Manifests under a directory; links that cannot be followed are reported, not skipped."""
    found = []
    for p in sorted(path.rglob("*")):
        if p.is_symlink():
            why = stat_problem(p)
            if why is not None and (p.suffix in _SUFFIXES or "loop" in why):
                problems.append(Problem(str(p), 0, 0, "", why))
                continue
        if p.suffix in _SUFFIXES and p.is_file():
            found.append(str(p))
    return found


def manifest_files(
    paths: Sequence[str | os.PathLike[str]],
) -> tuple[list[str], list[Problem], dict[str, Path]]:
    """Expand files, directories (recursive, sorted) and globs into manifest files.

    Also gives each file its root: the directory it was found under, or its own directory
    when named directly. JSONL sources are confined to the root (see ``SourcePolicy``).
    """
    files: list[str] = []
    roots: dict[str, Path] = {}
    problems: list[Problem] = []
    for raw in paths:
        text = os.fspath(raw)
        path = Path(text)
        root: Path | None = None
        if path.is_dir():
            n_before = len(problems)
            found = _directory_files(path, problems)
            root = path
            if not found and len(problems) == n_before:
                problems.append(Problem(text, 0, 0, "", "directory holds no *.yaml or *.yml files"))
        elif path.exists():
            found = [text]  # not a regular file: _load_file says what it is
        elif glob.has_magic(text):
            found = sorted(p for p in glob.glob(text, recursive=True) if Path(p).is_file())
            if not found:
                problems.append(Problem(text, 0, 0, "", "pattern matches no files"))
        else:
            found = []
            problems.append(Problem(text, 0, 0, "", stat_problem(text) or "cannot read"))
        for f in found:
            if f not in roots:
                files.append(f)
                roots[f] = root if root is not None else Path(f).parent
    return files, problems, roots


def where_in(file: str, positions: Mapping[FieldPath, tuple[int, int]], path: FieldPath) -> Where:
    """The place of a field path in a manifest (its closest recorded ancestor if need be)."""
    line, col = position_of(positions, path)
    return Where(file, line, col, format_path(path))


def field_at(file: str, positions: Mapping[FieldPath, tuple[int, int]], path: FieldPath) -> Place:
    """Like ``where_in``, but the line is looked up only if a problem names the place."""
    return FieldAt(file, positions, path)


class _FileLoader:
    """Resolves one validated manifest: JSONL pools, probe pools, positions of everything."""

    def __init__(
        self,
        path: str,
        positions: Mapping[FieldPath, tuple[int, int]],
        root: Path,
        policy: SourcePolicy,
    ) -> None:
        self.path = path
        self.positions = positions
        self.root = root
        self.policy = policy
        self.problems: list[Problem] = []
        self.data_files: dict[str, str] = {}
        self.data_paths: dict[str, str] = {}  # field path of a source -> the file read

    def where(self, path: FieldPath) -> Place:
        return field_at(self.path, self.positions, path)

    def read_jsonl(
        self, source: str, at: FieldPath, tier_field: str | None = None
    ) -> Located | None:
        """The items of a JSONL file next to the manifest, each with its file:line, or None."""
        file = Path(self.path).parent / source
        shown = os.path.normpath(file)
        where = self.where((*at, "source"))
        if not self.policy.allow_outside_root and not inside(file, self.root):
            self.problems.append(
                where.problem(
                    f"{source} is outside the manifest root {os.path.normpath(self.root)}; "
                    "keep data files under it (or allow it in the settings: "
                    "manifest_sources_anywhere)"
                )
            )
            return None
        try:
            data = read_bounded(file, self.policy.max_bytes)
        except FileRefused as exc:
            reason = "file not found" if str(exc) == "no such file or directory" else str(exc)
            self.problems.append(
                where.problem(
                    f"{reason}: {source} (resolved against the manifest's directory: {shown})"
                )
            )
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad_line, bad_col = line_col(data, exc.start)
            msg = f"not UTF-8 text: {exc.reason} at byte {exc.start}"
            self.problems.append(Problem(shown, bad_line, bad_col, format_path(at), msg))
            return None
        self.data_files[shown] = hashlib.sha256(data).hexdigest()
        self.data_paths[format_path(at)] = shown
        items: Located = []
        field_text = format_path(at)
        key = json.dumps(tier_field) if tier_field else None
        n_problems = len(self.problems)
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except RecursionError:
                msg = "invalid JSON: nested too deeply"
                self.problems.append(Problem(shown, lineno, 1, field_text, msg))
                continue
            except json.JSONDecodeError as exc:
                self.problems.append(
                    Problem(shown, lineno, exc.colno, field_text, f"invalid JSON: {exc.msg}")
                )
                continue
            if not isinstance(item, dict):
                msg = f"each line must be a JSON object, got {show(item)}"
                self.problems.append(Problem(shown, lineno, 1, field_text, msg))
                continue
            column = line.find(key) + 1 if key and key in line else 1
            items.append((item, Where(shown, lineno, column, field_text)))
        if len(self.problems) > n_problems:
            return None
        if not items:
            self.problems.append(
                self.where((*at, "source")).problem(f"{source} holds no JSON objects")
            )
            return None
        return items

    def family(
        self, domain: str, fam: FamilySpec, at: FieldPath, named: bool
    ) -> tuple[ResolvedFamily, Located, Located, str]:
        """``named``: the family gave ``name`` (else ``task_family``), for its place."""
        tier_names = fam.tier_names
        pools: PoolTable
        training: Located = []
        tier_field = DEFAULT_TIER_FIELD
        variants = fam.variants
        if isinstance(variants, VariantsCount):
            counts = variants.count
            sizes = counts if isinstance(counts, list) else [counts] * len(tier_names)
            pools = PoolTable(sizes)
        else:
            source = None
            if isinstance(variants, VariantsFile):
                tier_field, source = variants.tier_field, variants.source
                read = self.read_jsonl(source, (*at, "variants"), tier_field)
                if read is None:  # already reported; the file will be rejected
                    source = None
                training = read or []
            else:
                training = [
                    (item, self.where((*at, "variants", i))) for i, item in enumerate(variants)
                ]
            pools = self._split(training, tier_field, tier_names, at, source)
        probe_items: Located = []
        probe = VariantPool(size=0)
        if fam.probe is not None:
            if fam.probe.items is not None:
                probe_items = [
                    (item, self.where((*at, "probe", "items", i)))
                    for i, item in enumerate(fam.probe.items)
                ]
            elif fam.probe.size is not None:
                probe = VariantPool(size=fam.probe.size)
            elif fam.probe.source is not None:
                probe_items = self.read_jsonl(fam.probe.source, (*at, "probe")) or []
                self._same_file(at)
            if probe_items:
                probe = VariantPool(len(probe_items), tuple(item for item, _ in probe_items))
        name_key = "name" if named else "task_family"
        resolved = ResolvedFamily(domain, fam, pools, probe, self.where((*at, name_key)))
        return resolved, training, probe_items, tier_field

    def _same_file(self, at: FieldPath) -> None:
        """The probe file must not be the training file (under any name or link)."""
        train = self.data_paths.get(format_path((*at, "variants")))
        probe = self.data_paths.get(format_path((*at, "probe")))
        if train is None or probe is None:
            return
        try:
            same = os.path.samefile(train, probe)
        except OSError:
            same = False
        if same:
            self.problems.append(
                self.where((*at, "probe", "source")).problem(
                    f"the probe file {probe} is the training file {train}; probe items must "
                    "be held out: give the probe its own file"
                )
            )

    def _split(
        self,
        training: Located,
        tier_field: str,
        tier_names: tuple[str, ...],
        at: FieldPath,
        source: str | None,
    ) -> PoolTable:
        """One pool per tier; for a JSONL file, report unknown tiers and empty tiers."""
        items = [item for item, _ in training]
        per_tier, bad = split_by_tier(items, tier_field, tier_names)
        if source is not None:  # inline tiers are checked by the schema
            for i, value in bad:
                msg = (
                    f"unknown tier {show(value)} in {tier_field!r}; "
                    f"expected {expected_tiers(tier_names)}"
                )
                self.problems.append(training[i][1].problem(msg))
            empty = [tier_names[t] for t, members in enumerate(per_tier) if not members]
            if not bad and empty:
                msg = (
                    f"tier {empty[0]!r} has no variants in {source}; add lines with "
                    f'"{tier_field}": "{empty[0]}" or lines without "{tier_field}"'
                )
                self.problems.append(self.where((*at, "variants")).problem(msg))
        return PoolTable(
            [len(members) for members in per_tier],
            {t: tuple(items[i] for i in members) for t, members in enumerate(per_tier)},
        )


def _load_file(
    path: str, root: Path, policy: SourcePolicy, problems: list[Problem]
) -> LoadedManifest | None:
    """One file's problems go to ``problems``; a failure this code did not foresee becomes
    a problem of the file too, never an exception out of the loader."""
    try:
        return _load_checked(path, root, policy, problems)
    except (RecursionError, OverflowError, MemoryError, ValueError) as exc:
        what = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        problems.append(Problem(path, 0, 0, "", f"cannot be checked: {what}"))
        return None


def _load_checked(
    path: str, root: Path, policy: SourcePolicy, problems: list[Problem]
) -> LoadedManifest | None:
    try:
        raw = read_bounded(path, policy.max_bytes)
    except FileRefused as exc:
        problems.append(Problem(path, 0, 0, "", str(exc)))
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = line_col(raw, exc.start)
        msg = f"not UTF-8 text: {exc.reason} at byte {exc.start}"
        problems.append(Problem(path, line, col, "", msg))
        return None
    # libyaml without positions first; the exact position-aware parse when it is unsure
    # (and, through LazyPositions, whenever a problem below must be placed).
    data = load_plain(text)
    positions: Mapping[FieldPath, tuple[int, int]]
    yaml_problems: list[Problem] = []
    if data is UNSURE:
        parsed = parse_yaml(text, path)
        data, positions, yaml_problems = parsed.data, parsed.positions, parsed.problems
        problems.extend(yaml_problems)
        if data is None and yaml_problems:
            return None
    else:
        positions = LazyPositions(text, path)
    if not isinstance(data, dict):
        line, col = position_of(positions, ())
        msg = f"a manifest must be a mapping with a `domains:` list, got {show(data)}"
        problems.append(Problem(path, line, col, "", msg))
        return None
    try:
        spec = ManifestSpec.model_validate(data)
    except ValidationError as exc:
        problems.extend(validation_problems(exc, path, positions))
        return None
    if yaml_problems:
        return None
    loader = _FileLoader(path, positions, root, policy)
    families = []
    for d, domain in enumerate(spec.domains):
        raw_families = data["domains"][d]["families"]
        for f, fam in enumerate(domain.families):
            at: FieldPath = ("domains", d, "families", f)
            named = "name" in raw_families[f]
            resolved, training, probe, tier_field = loader.family(domain.name, fam, at, named)
            loader.problems.extend(overlap_problems(fam.name, training, probe, tier_field))
            families.append(resolved)
    problems.extend(loader.problems)
    if loader.problems:
        return None
    return LoadedManifest(
        path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
        spec=spec,
        families=tuple(families),
        positions=positions,
        data_files=loader.data_files,
    )


def _cross_file_problems(manifests: Sequence[LoadedManifest], complete: bool) -> list[Problem]:
    domains: list[NamedAt] = []
    families: list[NamedAt] = []
    quotas: list[DomainQuota] = []
    for m in manifests:
        for d, domain in enumerate(m.spec.domains):
            domains.append(
                NamedAt(domain.name, field_at(m.path, m.positions, ("domains", d, "name")))
            )
            quotas.append(
                DomainQuota(
                    name=domain.name,
                    min_share=domain.min_share,
                    max_share=domain.max_share,
                    family_caps=sum(fam.max_share for fam in domain.families),
                    where=field_at(m.path, m.positions, ("domains", d, "quota", "min_share")),
                )
            )
        families.extend(NamedAt(f.spec.name, f.where) for f in m.families)
    problems = duplicate_names(domains, "domain") + duplicate_names(families, "family")
    if complete:  # quota sums over a partial set would blame the wrong domains
        problems += quota_problems(quotas)
    return problems


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """A load allocates millions of small acyclic dicts and lists; the cyclic collector
    would walk all of them again and again as they pile up (a quarter of the time of a
    50,000-family load). Reference counting still frees everything as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_manifests(
    *paths: str | os.PathLike[str], sources: SourcePolicy | None = None
) -> list[LoadedManifest]:
    """Load, validate and cross-check manifests; raise ManifestError with every problem.

    ``sources`` says which files a manifest may read (default: under its root, capped)."""
    with cyclic_gc_paused():
        return _load_manifests(paths, sources)


def _load_manifests(
    paths: Sequence[str | os.PathLike[str]], sources: SourcePolicy | None
) -> list[LoadedManifest]:
    policy = sources or SourcePolicy()
    files, problems, roots = manifest_files(paths)
    if not paths:
        problems.append(Problem("", 0, 0, "", "no manifest paths given"))
    manifests = []
    for path in files:
        loaded = _load_file(path, roots[path], policy, problems)
        if loaded is not None:
            manifests.append(loaded)
    problems.extend(_cross_file_problems(manifests, complete=not problems))
    if problems:
        raise ManifestError(problems)
    logger.debug("loaded %d manifest files", len(manifests))
    return manifests
