"""The libyaml fast path gives the position-aware parse's data, or declines (UNSURE)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from domains import _yaml, load_catalog, load_manifests
from domains._plain_yaml import UNSURE, load_plain
from domains._yaml import LazyPositions, parse_yaml

from .test_domains_mutations import mutations

ROOT = Path(__file__).parents[2]
EXAMPLES = sorted((ROOT / "configs" / "domains").glob("*.yaml"))
CORPUS = sorted((ROOT / "tests" / "data" / "bad_manifests").glob("*.yaml"))


def _text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def _same_as_positioned(text: str) -> None:
    """What load_plain accepts, the exact parse accepts with no problem and the same data."""
    fast = load_plain(text)
    if fast is UNSURE:
        return
    exact = parse_yaml(text, "m.yaml")
    assert exact.problems == []
    assert fast == exact.data
    assert _types(fast) == _types(exact.data)  # 1 stays an int, 1.0 a float, "1" a str


def _types(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value).__name__


@pytest.mark.parametrize("path", EXAMPLES + CORPUS, ids=lambda p: p.name)
def test_the_fast_path_agrees_with_the_positioned_parse(path: Path) -> None:
    _same_as_positioned(_text(path))


def test_the_examples_take_the_fast_path_and_their_positions_match() -> None:
    fast = [p for p in EXAMPLES if load_plain(_text(p)) is not UNSURE]
    assert len(fast) >= len(EXAMPLES) - 1  # tool_calling.yaml uses anchors and a merge
    for path in fast:
        text = _text(path)  # positions from libyaml's nodes are PyYAML's
        assert dict(LazyPositions(text, "m")) == parse_yaml(text, "m").positions


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\nb: *x\n",  # anchor, alias
        "a: !!str 1\n",  # a tag
        "base: &b {x: 1}\nc:\n  <<: *b\n",  # a merge key
        "a: 1\na: 2\n",  # a duplicate key
        "1: one\n",  # a key that is not a string
        "on: yes\n",  # YAML 1.1 reads the key as true
        "? [a, b]\n: c\n",  # a collection as a key
        "a: 1\n---\nb: 2\n",  # two documents
        "",  # no document
        "# only a comment\n",
        "a: '\x00'\n",  # a character PyYAML's reader refuses
        "a: [1, 2\n",  # a syntax error
        "a: " + "[" * 70 + "]" * 70 + "\n",  # deeper than MAX_DEPTH
        "a: 2024-13-45\n",  # a timestamp that is no date
        "a: =\n",  # the YAML 1.1 value key
        "a: " + "9" * 5000 + "\n",  # an integer Python refuses to parse
    ],
)
def test_the_fast_path_declines_what_only_the_positioned_parse_reports(text: str) -> None:
    assert load_plain(text) is UNSURE


def test_dates_stay_text_and_numbers_keep_their_types() -> None:
    text = "a: 2024-01-02\nb: 1\nc: 1.5\nd: '1'\ne: null\nf: true\ng: 0x1f\nh: 1_000\n"
    assert load_plain(text) == parse_yaml(text, "m").data
    assert load_plain(text) == {
        "a": "2024-01-02", "b": 1, "c": 1.5, "d": "1", "e": None, "f": True, "g": 31, "h": 1000
    }  # fmt: skip


def test_too_many_values_go_to_the_positioned_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    from domains import _plain_yaml

    monkeypatch.setattr(_plain_yaml, "MAX_VALUES", 5)
    assert load_plain("[1, 2, 3, 4]\n") == [1, 2, 3, 4]  # five values, the list counted
    assert load_plain("[1, 2, 3, 4, 5]\n") is UNSURE


def test_a_clean_load_parses_no_positions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[str] = []
    real = _yaml.parse_yaml

    def counting(text: str, file: str, *, libyaml: bool = False) -> _yaml.ParsedYaml:
        calls.append(file)
        return real(text, file, libyaml=libyaml)

    monkeypatch.setattr(_yaml, "parse_yaml", counting)  # what LazyPositions calls
    shutil.copytree(ROOT / "configs" / "domains", tmp_path, dirs_exist_ok=True)
    manifests = load_manifests(tmp_path)
    assert manifests[0].path.endswith("coding.yaml")
    assert calls == []
    assert manifests[0].positions[("domains", 0, "name")] == (5, 5)  # parsed when asked
    assert len(calls) == 1
    assert manifests[0].families[1].where.line == 22  # coding.yaml: terminal_coding_tiered
    assert len(calls) == 1  # once per file
    assert load_catalog(tmp_path).n_families == sum(len(m.families) for m in manifests)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutations())
def test_on_mutated_manifests_the_fast_path_is_exact_or_declines(case: tuple[str, str]) -> None:
    _, text = case
    _same_as_positioned(text)
