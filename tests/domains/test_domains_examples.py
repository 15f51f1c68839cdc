"""The example manifests in configs/domains: size, indexing, quotas, and reproducibility."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from domains import Catalog, load_catalog, load_manifests, manifest_json_schema

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
EXAMPLES = CONFIGS / "domains"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(EXAMPLES)


def test_counts(catalog: Catalog) -> None:
    assert catalog.n_domains == 30
    assert catalog.n_families == 304
    assert 1000 <= catalog.n_arms <= 1500
    assert len(set(catalog.family_names)) == catalog.n_families
    assert set(np.unique(catalog.n_tiers).tolist()) >= {1, 2, 3, 4, 5}
    assert len(catalog.sources) == 29  # 3 hand-written + 26 generated
    assert all(Path(s).suffix == ".yaml" for s in catalog.sources)


def test_arm_indexing_is_consistent(catalog: Catalog) -> None:
    n = catalog.n_arms
    assert catalog.arm_start[0] == 0 and catalog.arm_start[-1] == n
    assert np.array_equal(np.diff(catalog.arm_start), catalog.n_tiers)
    assert np.array_equal(np.bincount(catalog.family_of_arm), catalog.n_tiers)
    arms = np.arange(n)
    assert np.array_equal(catalog.arm_start[catalog.family_of_arm] + catalog.tier_of_arm, arms)
    assert np.all(catalog.tier_of_arm < catalog.n_tiers[catalog.family_of_arm])
    assert len(catalog.pools) == n and np.all(catalog.pool_size > 0)
    for name in ("terminal_coding", "code_repair", "sudoku_solving"):
        f = catalog.family_id(name)
        last = int(catalog.n_tiers[f]) - 1
        assert catalog.family_of_arm[catalog.arm_id(name, last)] == f
        assert catalog.tier_of_arm[catalog.arm_id(name, last)] == last


def test_quota_arrays_match_the_files(catalog: Catalog) -> None:
    expected = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for domain in yaml.safe_load(path.read_text())["domains"]:
            quota = domain.get("quota") or {}
            expected[domain["name"]] = (quota.get("min_share", 0.0), quota.get("max_share", 1.0))
    assert set(expected) == set(catalog.domain_names)
    for d, name in enumerate(catalog.domain_names):
        assert (catalog.domain_min_share[d], catalog.domain_max_share[d]) == expected[name]
    assert 0 < catalog.domain_min_share.sum() < 1
    assert np.count_nonzero(catalog.domain_min_share) >= 4
    assert np.count_nonzero(catalog.domain_max_share < 1) >= 4


def test_hand_written_files_show_every_form(catalog: Catalog) -> None:
    seed = catalog.family_id("terminal_coding")
    assert catalog.variant(int(catalog.arm_start[seed]), 0) == {
        "repo_state": "buggy_branch_a",
        "goal": "make_tests_pass",
    }
    repair = catalog.family_id("code_repair")
    assert catalog.tier_names[repair] == ("easy", "medium", "hard")
    arms = range(int(catalog.arm_start[repair]), int(catalog.arm_start[repair + 1]))
    tiers = [{item["difficulty"] for item in catalog.pools[a].items or ()} for a in arms]
    assert tiers == [{"easy"}, {"medium"}, {"hard"}]
    assert catalog.probe_size[repair] == 12
    assert catalog.chance_success[catalog.family_id("earnings_call_mcq")] == 0.25
    with_items = sum(p.items is not None for p in catalog.pools)
    assert 0 < with_items < catalog.n_arms


def test_fingerprint_is_stable_across_loads(catalog: Catalog) -> None:
    again = load_catalog(EXAMPLES)
    assert again.fingerprint == catalog.fingerprint
    assert again.source_hashes == catalog.source_hashes
    shuffled = load_catalog(*reversed(sorted(str(p) for p in EXAMPLES.glob("*.yaml"))))
    assert shuffled.fingerprint != catalog.fingerprint  # family order is part of the identity


def test_generator_reproduces_the_committed_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = importlib.util.spec_from_file_location(
        "generate_domains", CONFIGS / "generate_domains.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "generate_domains", module)  # dataclasses look it up
    spec.loader.exec_module(module)
    written = module.main(tmp_path)
    committed = sorted(EXAMPLES.glob("generated_*.yaml"))
    assert [p.name for p in sorted(written)] == [p.name for p in committed]
    for path in committed:
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), path.name
    assert len(load_manifests(tmp_path)) == len(committed)


def test_every_example_validates_against_the_json_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema not installed")
    validator = jsonschema.Draft202012Validator(manifest_json_schema())
    for path in sorted(EXAMPLES.glob("*.yaml")):
        errors = list(validator.iter_errors(yaml.safe_load(path.read_text())))
        assert errors == [], (path.name, errors[:1])


def test_the_complete_example_in_the_docs_loads(tmp_path: Path) -> None:
    doc = (CONFIGS.parent / "docs" / "manifests.md").read_text()
    first_yaml = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "doc.yaml").write_text(first_yaml)
    catalog = load_catalog(tmp_path / "doc.yaml")
    assert catalog.family_names == ("terminal_coding", "gsm_word_problems")
    assert catalog.tier_names[0] == ("easy", "medium", "hard", "expert")
