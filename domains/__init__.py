"""Domain manifests: schema, loading with file:line errors, and the Catalog array view."""

from ._catalog import Catalog, VariantPool
from ._errors import CurriculumError, ManifestError, Problem

__all__ = ["Catalog", "CurriculumError", "ManifestError", "Problem", "VariantPool"]
