"""Advice on manifests that load but will not work well: warnings, never errors.

A manifest can be valid and still starve a part of the scheduler of evidence. Each check
here returns notes (``Problem`` values: file, line, field, message) that ``curriculum
validate`` prints under the summary; loading never fails on them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._errors import Problem
from ._loader import LoadedManifest, where_in

# Probe items per reading below which the held-out checks that rest on probes see almost
# nothing. The hacking test compares each probe reading with the training at the same tier
# since the family's last probe round (a two-proportion z, 3 standard errors): with 32
# training episodes between rounds, a strong hack (training passes 0.9, held-out 0.5) is
# flagged in 4 % / 9 % of rounds at 1 / 2 items, 12 % at 3, 34 % at 8 and 86 % at 32
# (docs/manifests.md, "Probe sets").
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
                            f"probe set of {size} item{'s' if size > 1 else ''}: each reading "
                            f"weighs as {size} outcome{'s' if size > 1 else ''}, so the checks "
                            "that rest on held-out probes (reward hacking, the top tier's "
                            "mastery, a flat family's rise) see it rarely or late "
                            "(docs/manifests.md, 'Probe sets')"
                        )
                    )
    return notes
