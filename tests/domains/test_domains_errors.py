"""Broken manifests: each problem is reported as `file:line:col: field: message`, exactly."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from domains import ManifestError, Problem, load_catalog

Problems = Callable[..., list[str]]

FAMILY_KEYS = (
    "name, task_family, description, environment, tools, verification, tiers, tier_mode, variants, "
    "probe, cost_s, reward_range, chance_success, max_share, weight, priority, tags"
)


def test_unknown_key(write, problems: Problems) -> None:
    p = write(
        "m.yaml",
        """
        domains:
          - name: d
            families:
              - name: f
                environment: env
                verification: check
                variants: {count: 1}
                enviroment: typo
        """,
    )
    assert problems(p) == [
        f"{p}:8:9: domains[0].families[0].enviroment: unknown key 'enviroment'; "
        f"did you mean 'environment'? expected one of: {FAMILY_KEYS}"
    ]


def test_wrong_types(write, problems: Problems) -> None:
    p = write(
        "m.yaml",
        """
        domains:
          - name: d
            families:
              - name: f
                environment: env
                verification: check
                variants: {count: 1}
                cost_s: fast
                tiers: three
                tools: shell
        """,
    )
    assert problems(p) == [
        f"{p}:8:9: domains[0].families[0].cost_s: must be a number, got 'fast'",
        f"{p}:9:9: domains[0].families[0].tiers: "
        "must be a positive integer or a non-empty list of tier names",
        f"{p}:10:9: domains[0].families[0].tools: must be a list, got 'shell'",
    ]


def test_min_share_out_of_range(write, problems: Problems) -> None:
    p = write(
        "coding.yaml",
        """
        domains:
          - name: d
            quota:
              min_share: 1.4
            families:
              - name: f
                environment: env
                verification: check
                variants: {count: 1}
        """,
    )
    assert problems(p) == [f"{p}:4:7: domains[0].quota.min_share: must be between 0 and 1, got 1.4"]


def test_max_share_below_min_share(write, problems: Problems) -> None:
    p = write(
        "m.yaml",
        """
        domains:
          - name: d
            quota: {min_share: 0.5, max_share: 0.3}
            families:
              - name: f
                environment: env
                verification: check
                variants: {count: 1}
        """,
    )
    assert problems(p) == [
        f"{p}:3:29: domains[0].quota.max_share: must be at least min_share (0.5), got 0.3"
    ]


def test_duplicate_key(write, problems: Problems) -> None:
    p = write(
        "m.yaml",
        """
        domains:
          - name: d
            families:
              - name: f
                environment: env
                verification: check
                environment: other
                variants: {count: 1}
        """,
    )
    assert problems(p) == [
        f"{p}:7:9: domains[0].families[0].environment: duplicate key 'environment' "
        "(first at line 5); YAML would silently keep only the last one"
    ]


def _one_family(domain: str, family: str, extra: str = "") -> str:
    return f"""
        domains:
          - name: {domain}
            families:
              - name: {family}
                environment: env
                verification: check
                variants: {{count: 1}}{extra}
        """


def test_duplicate_family_across_two_files(write, problems: Problems) -> None:
    a = write("a.yaml", _one_family("d1", "shared"))
    b = write("b.yaml", _one_family("d2", "shared"))
    assert problems(a, b) == [
        f"{b}:4:9: domains[0].families[0].name: duplicate family name 'shared'; family names "
        f"must be unique across all manifests (first defined at {a}:4)"
    ]


def test_duplicate_domain_across_two_files(write, problems: Problems) -> None:
    a = write("a.yaml", _one_family("same", "f1"))
    b = write("b.yaml", _one_family("same", "f2"))
    assert problems(a, b) == [
        f"{b}:2:5: domains[0].name: duplicate domain name 'same'; domain names must be unique "
        f"across all manifests (first defined at {a}:2)"
    ]


def test_infeasible_quotas(write, problems: Problems) -> None:
    p = write(
        "m.yaml",
        """
        domains:
          - name: big
            quota: {min_share: 0.6}
            families:
              - {name: f1, environment: e, verification: v, variants: {count: 1}}
          - name: bigger
            quota: {min_share: 0.7}
            families:
              - {name: f2, environment: e, verification: v, variants: {count: 1}}
          - name: capped
            quota:
              min_share: 0.3
            families:
              - {name: f3, environment: e, verification: v, variants: {count: 1}, max_share: 0.1}
        """,
    )
    assert problems(p) == [
        f"{p}:12:7: domains[2].quota.min_share: min_share 0.3 cannot be met: the domain's "
        "families can take at most 0.1 (sum of their max_share caps 0.1, quota max_share 1); "
        "lower min_share or raise the family caps",
        f"{p}:12:7: domains[2].quota.min_share: the domains' min_share values sum to 1.6 "
        "(big 0.6, bigger 0.7, capped 0.3); the sum must be at most 1",
    ]


def test_max_shares_that_cannot_cover_every_sample(write, problems: Problems) -> None:
    a = write(
        "a.yaml",
        """
        domains:
          - name: a
            families:
              - {name: fa, environment: e, verification: v, variants: {count: 1}, max_share: 0.3}
        """,
    )
    b = write(
        "b.yaml",
        """
        domains:
          - name: b
            quota: {max_share: 0.4}
            families:
              - {name: fb, environment: e, verification: v, variants: {count: 1}}
        """,
    )
    assert problems(a, b) == [
        f"{a}:2:5: domains[0].quota.min_share: the domains' largest possible shares sum to 0.7 "
        "(a 0.3, b 0.4); the sum must be at least 1 so every sample has a domain to go to; "
        "raise a max_share"
    ]


def test_probe_overlaps_training(write, problems: Problems) -> None:
    p = write(
        "m.yaml",
        """
        domains:
          - name: d
            families:
              - name: f
                environment: env
                verification: check
                tiers: [easy, hard]
                variants:
                  - {q: 1, tier: easy}
                  - {q: 2, tier: hard}
                probe:
                  items:
                    - {q: 3}
                    - {tier: hard, q: 2}
        """,
    )
    assert problems(p) == [
        f"{p}:14:15: domains[0].families[0].probe.items[1]: probe item 1 of family 'f' is also "
        f"a training variant (domains[0].families[0].variants[1] at {p}:10); "
        "probe items must be held out"
    ]


def test_probe_file_overlaps_jsonl_training(write, problems: Problems) -> None:
    write("data/train.jsonl", '{"q": 1, "level": 0}\n{"q": 2}\n')
    probe = write("data/probe.jsonl", '{"q": 9}\n{"q": 1}\n')
    p = write(
        "m.yaml",
        _one_family("d", "f").replace("{count: 1}", "{source: data/train.jsonl, tier_field: level}")
        + "        probe: {source: data/probe.jsonl}\n",
    )
    train = probe.parent / "train.jsonl"
    assert problems(p) == [
        f"{probe}:2:1: domains[0].families[0].probe: probe item 1 of family 'f' is also a "
        f"training variant (domains[0].families[0].variants at {train}:1); "
        "probe items must be held out"
    ]


def test_missing_jsonl(write, problems: Problems, tmp_path: Path) -> None:
    p = write("m.yaml", _one_family("d", "f").replace("{count: 1}", "{source: data/missing.jsonl}"))
    assert problems(p) == [
        f"{p}:7:20: domains[0].families[0].variants.source: file not found: data/missing.jsonl "
        f"(resolved against the manifest's directory: {tmp_path}/data/missing.jsonl)"
    ]


def test_bad_jsonl_lines(write, problems: Problems) -> None:
    data = write("data/v.jsonl", '{"q": 1}\n{"q": 2,, }\n[1, 2]\n')
    p = write("m.yaml", _one_family("d", "f").replace("{count: 1}", "{source: data/v.jsonl}"))
    assert problems(p) == [
        f"{data}:2:9: domains[0].families[0].variants: invalid JSON: "
        "Expecting property name enclosed in double quotes",
        f"{data}:3:1: domains[0].families[0].variants: each line must be a JSON object, got a list",
    ]


def test_unknown_tier_and_empty_tier_in_jsonl(write, problems: Problems) -> None:
    data = write("data/v.jsonl", '{"q": 1, "tier": "easy"}\n{"q": 3, "tier": "expert"}\n')
    p = write(
        "m.yaml",
        _one_family("d", "f").replace("{count: 1}", "{source: data/v.jsonl}")
        + "        tiers: [easy, hard]\n",
    )
    assert problems(p) == [
        f"{data}:2:10: domains[0].families[0].variants: unknown tier 'expert' in 'tier'; "
        "expected one of 'easy', 'hard' or an index 0..1"
    ]
    data.write_text('{"q": 1, "tier": "easy"}\n')
    assert problems(p) == [
        f"{p}:7:9: domains[0].families[0].variants: tier 'hard' has no variants in "
        'data/v.jsonl; add lines with "tier": "hard" or lines without "tier"'
    ]


def test_yaml_syntax_error(write, problems: Problems) -> None:
    p = write("m.yaml", "domains:\n  - name: d: e\n")
    assert problems(p) == [f"{p}:2:12: YAML syntax error: mapping values are not allowed here"]


def test_missing_required_field(write, problems: Problems) -> None:
    p = write(
        "m.yaml",
        """
        domains:
          - name: d
            families:
              - task_family: f
                verification: check
                variants: {count: 1}
        """,
    )
    assert problems(p) == [f"{p}:4:9: domains[0].families[0].environment: is required"]


def test_tier_without_variants_and_unknown_inline_tier(write, problems: Problems) -> None:
    p = write(
        "m.yaml",
        """
        domains:
          - name: d
            families:
              - name: f
                environment: env
                verification: check
                tiers: [easy, medium, hard]
                variants:
                  - {q: 1, tier: easy}
                  - {q: 2, tier: 2}
              - name: g
                environment: env
                verification: check
                tiers: 2
                variants:
                  - {q: 1, tier: t5}
        """,
    )
    assert problems(p) == [
        f"{p}:8:9: domains[0].families[0].variants: tier 'medium' has no variants; "
        "add an item with tier: medium or one without a tier",
        f"{p}:16:20: domains[0].families[1].variants[0].tier: unknown tier 't5'; "
        "expected one of 't0', 't1' or an index 0..1",
    ]


def test_count_list_must_match_tiers_and_names_once(write, problems: Problems) -> None:
    p = write(
        "m.yaml",
        """
        domains:
          - name: d
            families:
              - name: f
                task_family: f
                environment: env
                verification: check
                variants: {count: 1}
              - name: g
                environment: env
                verification: check
                tiers: 3
                variants: {count: [5, 4]}
                reward_range: [1, 0]
        """,
    )
    assert problems(p) == [
        f"{p}:5:9: domains[0].families[0].task_family: give the family name once: name or "
        "task_family",
        f"{p}:13:9: domains[0].families[1].variants: must have one size per tier (3), got 2",
        f"{p}:14:9: domains[0].families[1].reward_range: must be [low, high] with low < high, "
        "got [1.0, 0.0]",
    ]


def test_bad_names_and_shapes(write, problems: Problems) -> None:
    p = write(
        "m.yaml",
        """
        version: 2
        domains:
          - name: Coding Tasks
            families: []
          - name: ok
            families:
              - {name: f, environment: e, verification: v, variants: 7, probe: {}}
        """,
    )
    assert problems(p) == [
        f"{p}:1:1: version: must be 1, got 2",
        f"{p}:3:5: domains[0].name: must be lowercase letters, digits, '_', '.' or '-', "
        "starting with a letter or digit (pattern ^[a-z0-9][a-z0-9_.-]*$), got 'Coding Tasks'",
        f"{p}:4:5: domains[0].families: must not be empty",
        f"{p}:7:52: domains[1].families[0].variants: must be a list of variant mappings, "
        "{source: file.jsonl} or {count: N}",
        f"{p}:7:65: domains[1].families[0].probe: give items, size or source (a JSONL file)",
    ]


def test_not_a_manifest(write, problems: Problems, tmp_path: Path) -> None:
    empty = write("empty.yaml", "")
    listy = write("list.yaml", "- 1\n- 2\n")
    boolkey = write("bool.yaml", "domains:\n  - name: d\n    on: 1\n")
    assert problems(empty, listy, boolkey, tmp_path / "nope.yaml", str(tmp_path / "*.yml")) == [
        f"{tmp_path}/nope.yaml: no such file or directory",
        f"{tmp_path}/*.yml: pattern matches no files",
        f"{empty}: empty manifest; expected a mapping with a `domains:` list",
        f"{listy}:1:1: a manifest must be a mapping with a `domains:` list, got a list",
        f"{boolkey}:3:5: domains[0]: mapping keys must be strings, got true (quote it: 'on')",
        f"{boolkey}:2:5: domains[0].families: is required",
    ]


def test_every_problem_in_every_file_at_once(write, problems: Problems) -> None:
    a = write(
        "a.yaml",
        """
        domains:
          - name: a
            quota: {min_share: 1.4}
            families:
              - name: fa
                verification: check
                variants: {count: 1}
        """,
    )
    b = write("b.yaml", "domains:\n  - name: b\n    families: [\n")
    c = write("c.yaml", _one_family("c", "dup"))
    d = write("d.yaml", _one_family("d", "dup", "\n                colour: blue"))
    e = write("e.yaml", _one_family("e", "dup"))
    found = problems(a, b, c, d, e)
    assert found == [
        f"{a}:3:13: domains[0].quota.min_share: must be between 0 and 1, got 1.4",
        f"{a}:5:9: domains[0].families[0].environment: is required",
        f"{b}:4:1: YAML syntax error: while parsing a flow node expected the node content, "
        "but found '<stream end>'",
        f"{d}:8:9: domains[0].families[0].colour: unknown key 'colour'; "
        f"expected one of: {FAMILY_KEYS}",
        f"{e}:4:9: domains[0].families[0].name: duplicate family name 'dup'; family names "
        f"must be unique across all manifests (first defined at {c}:4)",
    ]


def test_error_is_a_curriculum_error_with_problems(write) -> None:
    p = write("m.yaml", "domains: 3\n")
    with pytest.raises(ManifestError) as info:
        load_catalog(p)
    (problem,) = info.value.problems
    assert problem == Problem(str(p), 1, 1, "domains", "must be a list, got 3")
    assert str(info.value) == f"{p}:1:1: domains: must be a list, got 3"
