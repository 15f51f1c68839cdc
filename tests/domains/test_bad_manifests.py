"""The corpus of broken manifests: each is rejected at the file, line and field its table
row names, in-process and through `curriculum validate` (exit 2, no traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from domains import ManifestError, load_manifests
from scheduler.app.cli import main

CORPUS = Path(__file__).parents[1] / "data" / "bad_manifests"


def _rows() -> list[tuple[str, str, str, str, str]]:
    rows = []
    for line in (CORPUS / "expected.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) != 5 or not cells[0].startswith("`"):
            continue
        manifest, category, where, field, message = (c.strip("`") for c in cells)
        rows.append((manifest, category, where, "" if field == "-" else field, message))
    return rows


ROWS = _rows()


def test_the_corpus_has_forty_cases_or_more_in_every_category() -> None:
    assert len(ROWS) >= 40
    assert {r[1] for r in ROWS} == {
        "YAML syntax", "types", "bounds", "semantics", "quotas", "leaks", "paths", "encodings"
    }  # fmt: skip
    listed = {r[0] for r in ROWS}
    assert listed == {p.name for p in CORPUS.glob("*.yaml")}  # every file has its row


@pytest.mark.parametrize(("manifest", "category", "where", "field", "message"), ROWS)
def test_each_broken_manifest_is_rejected_where_its_row_says(
    manifest: str,
    category: str,
    where: str,
    field: str,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(CORPUS)
    with pytest.raises(ManifestError) as info:
        load_manifests(manifest)
    found = [
        p
        for p in info.value.problems
        if f"{p.file}:{p.line}" == where and p.field == field and message in p.message
    ]
    assert found, [str(p) for p in info.value.problems]

    assert main(["validate", manifest]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "unexpected" not in captured.err
    prefix = f"{where}:" if not where.endswith(":0") else f"{where[:-2]}:"
    lines = [ln for ln in captured.err.splitlines() if ln.startswith(prefix)]
    assert any(message in ln and (not field or f" {field}: " in ln) for ln in lines), captured.err
