"""Advice on manifests that load but will not work well: warnings, never errors.

A manifest can be valid and still starve a part of the scheduler of evidence. Each check
here returns notes (``Problem`` values: file, line, field, message) that ``curriculum
validate`` prints under the summary; loading never fails on them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._errors import Problem
from ._loader import LoadedManifest, where_in

# Probe items per probe below which the unlearnable detector, at its defaults, can never
# read a family "at chance": it bounds the level from half of a 16-probe window (8
# probes), and 8 failed probes of 1 or 2 items leave the Jeffreys upper bound at 0.26 or
# 0.14 (the verdict needs 0.1; 3 items give 0.098).
MIN_PROBE_ITEMS = 3


def thin_probe_notes(manifests: Sequence[LoadedManifest]) -> list[Problem]:
    """One note per family whose probe set has fewer than ``MIN_PROBE_ITEMS`` items."""
    notes = []
    for m in manifests:
        fams = iter(m.families)
        for d, domain in enumerate(m.spec.domains):
            for f in range(len(domain.families)):
                size = next(fams).probe.size
                if 0 < size < MIN_PROBE_ITEMS:
                    where = where_in(m.path, m.positions, ("domains", d, "families", f, "probe"))
                    notes.append(
                        where.problem(
                            f"probe set of {size} item{'s' if size > 1 else ''}: with fewer "
                            f"than {MIN_PROBE_ITEMS} the default detectors can never judge "
                            "the family at chance (unlearnable), and promotion, mastery and "
                            "regression read it slowly (docs/manifests.md, 'Probe sets')"
                        )
                    )
    return notes
