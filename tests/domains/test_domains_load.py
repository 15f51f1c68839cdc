"""Valid manifests: every accepted form loads into the Catalog it describes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from domains import (
    Catalog,
    DomainSpec,
    ManifestError,
    canonical_hash,
    load_catalog,
    load_manifests,
    manifest_json_schema,
)

SEED = """
domains:
  - name: coding
    families:
      - task_family: terminal_coding
        environment: containerized_sandbox
        tools: [shell, file_editor, test_runner]
        verification: run_tests_and_check_exit_code
        variants:
          - repo_state: buggy_branch_a
            goal: make_tests_pass
          - repo_state: refactor_target_b
            goal: preserve_behavior_and_lint
"""


def test_seed_example_loads_unchanged(write) -> None:
    path = write("seed.yaml", SEED)
    cat = load_catalog(path)
    assert isinstance(cat, Catalog)
    assert cat.domain_names == ("coding",)
    assert cat.family_names == ("terminal_coding",)
    assert cat.tier_names == (("t0",),)
    assert cat.n_arms == 1
    assert cat.pools[0].size == 2
    assert cat.variant(0, 1) == {
        "repo_state": "refactor_target_b",
        "goal": "preserve_behavior_and_lint",
    }
    assert cat.probe_size.tolist() == [0]
    spec = cat.specs[0]
    assert isinstance(spec, DomainSpec)
    assert spec.families[0].tools == ["shell", "file_editor", "test_runner"]
    assert cat.sources == (str(path),)
    assert cat.source_hashes[str(path)] == hashlib.sha256(path.read_bytes()).hexdigest()


def _family(name: str, body: str) -> str:
    return f"""
      - name: {name}
        environment: env
        verification: check
{body}"""


def test_tiers_as_int_and_as_names(write) -> None:
    path = write(
        "tiers.yaml",
        "domains:\n  - name: d\n    families:"
        + _family("by_int", "        tiers: 3\n        variants: {count: 5}")
        + _family(
            "by_name",
            "        tiers: [easy, hard]\n        variants: {count: [7, 2]}",
        ),
    )
    cat = load_catalog(path)
    assert cat.tier_names == (("t0", "t1", "t2"), ("easy", "hard"))
    assert cat.arm_start.tolist() == [0, 3, 5]
    assert cat.pool_size.tolist() == [5, 5, 5, 7, 2]
    assert all(p.items is None for p in cat.pools)


def test_inline_variants_split_by_tier_index_or_name(write) -> None:
    path = write(
        "inline.yaml",
        """
        domains:
          - name: d
            families:
              - name: f
                environment: env
                verification: check
                tiers: [easy, medium, hard]
                variants:
                  - {q: a, tier: easy}
                  - {q: b, tier: 1}
                  - {q: c}
                  - {q: d, tier: hard}
        """,
    )
    cat = load_catalog(path)
    assert [[v["q"] for v in p.items or ()] for p in cat.pools] == [
        ["a", "c"],
        ["b", "c"],
        ["c", "d"],
    ]
    assert cat.pool_size.tolist() == [2, 2, 2]


def test_jsonl_variants_filtered_by_tier_field_and_probe_file(write) -> None:
    write(
        "data/train.jsonl",
        '{"id": 1, "level": "easy"}\n{"id": 2, "level": 1}\n\n'
        '{"id": 3}\n{"id": 4, "level": "easy"}\n',
    )
    write("data/probe.jsonl", '{"id": 100}\n{"id": 101}\n{"id": 102}\n')
    path = write(
        "jsonl.yaml",
        """
        domains:
          - name: d
            families:
              - name: f
                environment: env
                verification: check
                tiers: [easy, hard]
                variants: {source: data/train.jsonl, tier_field: level}
                probe: {source: data/probe.jsonl}
        """,
    )
    cat = load_catalog(path)
    assert [[v["id"] for v in p.items or ()] for p in cat.pools] == [[1, 3, 4], [2, 3]]
    assert cat.probe_size.tolist() == [3]
    assert cat.probe_pools[0].items == ({"id": 100}, {"id": 101}, {"id": 102})
    data_file = str(path.parent / "data" / "train.jsonl")
    expected = hashlib.sha256(Path(data_file).read_bytes()).hexdigest()
    assert cat.source_hashes[data_file] == expected


def test_probe_forms(write) -> None:
    path = write(
        "probe.yaml",
        "domains:\n  - name: d\n    families:"
        + _family("inline", "        variants: [{q: 1}]\n        probe: {items: [{q: 2}, {q: 3}]}")
        + _family(
            "sized", "        variants: [{q: 1}]\n        probe: {size: 40, source: holdout v2}"
        )
        + _family("none", "        variants: [{q: 1}]"),
    )
    cat = load_catalog(path)
    assert cat.probe_size.tolist() == [2, 40, 0]
    assert cat.probe_pools[0].items == ({"q": 2}, {"q": 3})
    assert cat.probe_pools[1].items is None


def test_family_fields_become_arrays(write) -> None:
    path = write(
        "fields.yaml",
        """
        domains:
          - name: alpha
            quota: {min_share: 0.2, max_share: 0.7, basis: compute}
            priority: 2.5
            families:
              - name: mcq
                environment: env
                verification: check
                variants: {count: 3}
                cost_s: 4.5
                reward_range: [-1, 2]
                chance_success: 0.25
                max_share: 0.5
                weight: 0
                priority: 3
          - name: beta
            families:
              - name: other
                environment: env
                verification: check
                variants: {count: 3}
        """,
    )
    cat = load_catalog(path)
    assert cat.domain_min_share.tolist() == [0.2, 0.0]
    assert cat.domain_max_share.tolist() == [0.7, 1.0]
    assert cat.domain_priority.tolist() == [2.5, 1.0]
    assert cat.cost_s.tolist() == [4.5, 1.0]
    assert cat.reward_low.tolist() == [-1.0, 0.0]
    assert cat.reward_high.tolist() == [2.0, 1.0]
    assert cat.chance_success.tolist() == [0.25, 0.0]
    assert cat.family_max_share.tolist() == [0.5, 1.0]
    assert cat.family_weight.tolist() == [0.0, 1.0]
    assert cat.family_priority.tolist() == [3.0, 1.0]
    assert cat.domain_of_family.tolist() == [0, 1]
    assert cat.specs[0].quota.basis == "compute"


def test_directory_glob_and_order(write, tmp_path: Path) -> None:
    write(
        "a/2.yaml",
        "domains:\n  - name: second\n    families:" + _family("f2", "        variants: {count: 1}"),
    )
    write(
        "a/sub/3.yml",
        "domains:\n  - name: third\n    families:" + _family("f3", "        variants: {count: 1}"),
    )
    write(
        "a/1.yaml",
        "domains:\n  - name: first\n    families:" + _family("f1", "        variants: {count: 1}"),
    )
    write("a/notes.txt", "not a manifest")
    by_dir = load_catalog(tmp_path / "a")
    assert by_dir.family_names == ("f1", "f2", "f3")
    by_glob = load_catalog(str(tmp_path / "a" / "*.yaml"))
    assert by_glob.family_names == ("f1", "f2")
    mixed = load_catalog(tmp_path / "a" / "sub" / "3.yml", tmp_path / "a" / "1.yaml")
    assert mixed.family_names == ("f3", "f1")
    assert mixed.domain_names == ("third", "first")


def test_yaml_anchors_and_merge_keys(write) -> None:
    path = write(
        "merge.yaml",
        """
        domains:
          - name: d
            families:
              - &base
                name: one
                environment: env
                verification: check
                tiers: 2
                variants: {count: 4}
              - <<: *base
                name: two
                cost_s: 3.0
        """,
    )
    cat = load_catalog(path)
    assert cat.family_names == ("one", "two")
    assert cat.cost_s.tolist() == [1.0, 3.0]
    assert cat.n_tiers.tolist() == [2, 2]


def test_yaml_timestamps_stay_text_and_code_tags_are_refused(write) -> None:
    ok = write(
        "ts.yaml",
        "domains:\n  - name: d\n    families:"
        + _family("f", "        variants: [{when: 2024-01-02, q: 1}]"),
    )
    item = load_catalog(ok).variant(0, 0)
    assert item == {"when": "2024-01-02", "q": 1}
    json.dumps(item)
    evil = write(
        "evil.yaml",
        "domains:\n  - name: d\n    families:"
        + _family("f", "        variants: [!!python/object/apply:os.system [echo hi]]"),
    )
    with pytest.raises(ManifestError) as info:
        load_catalog(evil)
    assert "unsupported YAML" in str(info.value)


def test_load_manifests_keeps_specs_and_positions(write) -> None:
    path = write("seed.yaml", SEED)
    (manifest,) = load_manifests(path)
    assert manifest.spec.domains[0].families[0].name == "terminal_coding"
    assert manifest.positions[("domains", 0, "families", 0, "task_family")] == (4, 9)
    assert manifest.families[0].where.line == 4


def test_canonical_hash_ignores_key_order_and_tier() -> None:
    assert canonical_hash({"a": 1, "b": [1, 2], "tier": 0}) == canonical_hash({"b": [1, 2], "a": 1})
    assert canonical_hash({"a": 1}) != canonical_hash({"a": 2})
    body = json.dumps({"a": 1}, sort_keys=True, separators=(",", ":"))
    assert canonical_hash({"a": 1, "tier": "x"}) == hashlib.sha256(body.encode()).hexdigest()


def test_json_schema_validates_the_seed_example() -> None:
    schema = manifest_json_schema()
    assert schema["additionalProperties"] is False
    family = schema["$defs"]["FamilySpec"]
    assert {"name", "task_family"} <= set(family["properties"])
    assert "name" not in family.get("required", [])
    quota = schema["$defs"]["QuotaSpec"]["properties"]["min_share"]
    assert (quota["minimum"], quota["maximum"]) == (0.0, 1.0)
    json.dumps(schema)
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed")
    jsonschema.validate(yaml.safe_load(SEED), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"domains": [{"name": "x", "families": [], "oops": 1}]}, schema)


def test_arrays_are_read_only(write) -> None:
    cat = load_catalog(write("seed.yaml", SEED))
    with pytest.raises(ValueError):
        cat.cost_s[0] = 2.0
    assert np.all(cat.family_of_arm == 0)
