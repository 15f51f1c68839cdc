"""Domain manifests: schema, loading with file:line errors, and the Catalog array view."""

from ._advice import MIN_PROBE_ITEMS, thin_probe_notes
from ._build import build_catalog, load_catalog
from ._catalog import Catalog, PoolTable, VariantPool
from ._checks import canonical_hash
from ._errors import CurriculumError, ManifestError, Problem
from ._files import MAX_FILE_BYTES, SourcePolicy
from ._loader import LoadedManifest, ResolvedFamily, load_manifests
from ._schema import (
    DomainSpec,
    FamilySpec,
    ManifestSpec,
    ProbeSpec,
    QuotaSpec,
    VariantsCount,
    VariantsFile,
    manifest_json_schema,
)

__all__ = [
    "MAX_FILE_BYTES",
    "MIN_PROBE_ITEMS",
    "Catalog",
    "CurriculumError",
    "DomainSpec",
    "FamilySpec",
    "LoadedManifest",
    "ManifestError",
    "ManifestSpec",
    "PoolTable",
    "ProbeSpec",
    "Problem",
    "QuotaSpec",
    "ResolvedFamily",
    "SourcePolicy",
    "VariantPool",
    "VariantsCount",
    "VariantsFile",
    "build_catalog",
    "canonical_hash",
    "load_catalog",
    "load_manifests",
    "manifest_json_schema",
    "thin_probe_notes",
]
