"""Property: a mutated good manifest loads or raises ManifestError, nothing else, quickly."""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domains import ManifestError, load_catalog

EXAMPLES = Path(__file__).parents[2] / "configs" / "domains"
GOOD = ["coding.yaml", "finance.yaml", "tool_calling.yaml"]
NASTY = [
    "9223372036854775808", "-9223372036854775809", "1e400", "-.inf", ".nan", "true", "null",
    "~", "''", "[]", "{}", "[[[[[[[[[[]]]]]]]]]]", "!!python/name:os.system", "*undefined",
    "&a [*a]", "'\\x00'", "\"\\u0000\"", "0x7fffffffffffffff", "0o777", "1_000_000",
    "{count: 5000000}", "{source: /etc/passwd}", "{source: ../../../etc/passwd}",
    "{source: /dev/zero}", "{source: data}", "5000000", "-1", "0", "2.5", "'x' * 3",
    "\"" + "x" * 20000 + "\"", "[" * 600 + "]" * 600, "9" * 5000, "4611686018427387904",
]  # fmt: skip
NUMERIC = re.compile(
    r"\b(count|size|tiers|version|cost_s|priority|weight|min_share|max_share)"
    r": *[^,}\]]+"
)
NUMBERS = [
    "9223372036854775808", "4611686018427387904", "-9223372036854775809", "5000000", "1e400",
    ".nan", "true", "-1", "0", "9" * 5000, "[" * 600 + "]" * 600,
]  # fmt: skip
TIME_BOUND_S = 5.0


@st.composite
def mutations(draw: st.DrawFn) -> tuple[str, str]:
    name = draw(st.sampled_from(GOOD))
    lines = (EXAMPLES / name).read_text(encoding="utf-8").splitlines()
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        kind = draw(st.sampled_from(["number", "value", "delete", "duplicate", "indent", "bytes"]))
        if kind == "number":  # aim at a numeric field, where overflows and bounds live
            numeric = [j for j, ln in enumerate(lines) if NUMERIC.search(ln)]
            i = draw(st.sampled_from(numeric)) if numeric else i
        line = lines[i]
        if kind == "number" and NUMERIC.search(line):
            nasty = draw(st.sampled_from(NUMBERS))
            lines[i] = NUMERIC.sub(lambda m, v=nasty: f"{m[1]}: {v}", line, count=1)
        elif kind == "value" and ":" in line:
            key = line.split(":", 1)[0]
            lines[i] = f"{key}: {draw(st.sampled_from(NASTY))}"
        elif kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, line)
        elif kind == "indent":
            lines[i] = " " * draw(st.integers(0, 12)) + line.lstrip()
        else:
            junk = draw(st.text(min_size=1, max_size=8))
            at = draw(st.integers(0, len(line)))
            lines[i] = line[:at] + junk + line[at:]
        if not lines:
            lines = [""]
    return name, "\n".join(lines) + "\n"


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutations())
def test_a_mutated_manifest_loads_or_raises_manifest_error_within_the_bound(
    case: tuple[str, str],
) -> None:
    name, text = case
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shutil.copytree(EXAMPLES / "data", root / "data")
        (root / name).write_text(text, encoding="utf-8", errors="surrogatepass")
        began = time.monotonic()
        try:
            load_catalog(root)
        except ManifestError as exc:
            assert exc.problems and all(str(p) for p in exc.problems)
        assert time.monotonic() - began < TIME_BOUND_S
