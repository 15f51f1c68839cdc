"""Hostile inputs around manifests: data files outside the root, special files, sizes,
symlink loops, leaks the overlap check must see through, and the CLI's unwrapped lines."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from domains import ManifestError, SourcePolicy, load_catalog

Writer = Callable[[str, str], Path]

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "configs" / "domains"
FAMILY = """
version: 1
domains:
  - name: d
    families:
      - name: f
        environment: env
        verification: check
        variants: {source: %s}
"""


def _messages(*paths: Path, sources: SourcePolicy | None = None) -> list[str]:
    with pytest.raises(ManifestError) as info:
        load_catalog(*paths, sources=sources)
    return [str(p) for p in info.value.problems]


def test_an_absolute_source_is_refused_unless_the_settings_allow_it(
    write: Writer, tmp_path: Path
) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.jsonl"
    outside.write_text('{"q": 1}\n')
    path = write("m/a.yaml", FAMILY % outside)
    (msg,) = _messages(path)
    assert "a.yaml:8:20: domains[0].families[0].variants.source:" in msg
    assert "outside the manifest root" in msg
    catalog = load_catalog(path, sources=SourcePolicy(allow_outside_root=True))
    assert catalog.n_families == 1


def test_a_dotdot_source_and_a_symlink_out_of_the_root_are_refused(
    write: Writer, tmp_path: Path
) -> None:
    (tmp_path / "secret.jsonl").write_text('{"q": 1}\n')
    dotdot = write("m/a.yaml", FAMILY % "../secret.jsonl")
    (tmp_path / "m" / "link.jsonl").symlink_to(tmp_path / "secret.jsonl")
    link = write("m/b.yaml", (FAMILY % "link.jsonl").replace("name: d", "name: e").replace(
        "name: f", "name: g"))  # fmt: skip
    for msg in _messages(dotdot) + _messages(link):
        assert "outside the manifest root" in msg


def test_a_directory_root_lets_a_manifest_in_a_subdirectory_read_a_sibling_folder(
    write: Writer, tmp_path: Path
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "v.jsonl").write_text('{"q": 1}\n')
    write("sub/a.yaml", FAMILY % "../data/v.jsonl")
    assert load_catalog(tmp_path).n_families == 1  # root: the directory given
    assert "outside the manifest root" in _messages(tmp_path / "sub" / "a.yaml")[0]


@pytest.mark.timeout(20)
def test_dev_zero_and_a_fifo_are_refused_at_once_as_not_regular_files(
    write: Writer, tmp_path: Path
) -> None:
    fifo = tmp_path / "m" / "pipe.jsonl"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    allow = SourcePolicy(allow_outside_root=True)
    began = time.monotonic()
    (zero,) = _messages(write("m/a.yaml", FAMILY % "/dev/zero"), sources=allow)
    (pipe,) = _messages(write("m/a.yaml", FAMILY % "pipe.jsonl"), sources=allow)
    assert time.monotonic() - began < 5
    assert "not a regular file (a character device)" in zero
    assert "not a regular file (a FIFO)" in pipe


def test_a_data_file_over_the_size_cap_is_refused(write: Writer, tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "big.jsonl").write_text('{"q": "%s"}\n' % ("x" * 500))
    path = write("m/a.yaml", FAMILY % "big.jsonl")
    (msg,) = _messages(path, sources=SourcePolicy(max_bytes=100))
    assert "more than the limit of 100" in msg
    assert load_catalog(path).n_families == 1  # under the default cap


def test_the_settings_allow_sources_outside_the_root(write: Writer, tmp_path: Path) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"q": 1}\n')
    path = write("m/a.yaml", FAMILY % outside)
    cmd = [sys.executable, "-m", "scheduler.app.cli", "validate", str(path)]
    env = {**os.environ, "CURRICULUM_MANIFEST_SOURCES_ANYWHERE": "true"}
    refused = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    allowed = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert refused.returncode == 2 and "outside the manifest root" in refused.stderr
    assert allowed.returncode == 0, allowed.stderr


def test_a_symlink_loop_given_directly_is_called_a_loop(tmp_path: Path) -> None:
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    (msg,) = _messages(loop)
    assert msg == f"{loop}: symbolic link loop (the link points back to itself); fix or remove it"


def test_symlink_loops_and_dangling_links_in_a_directory_are_reported(
    write: Writer, tmp_path: Path
) -> None:
    write("good.yaml", (FAMILY % "v.jsonl").replace("{source: v.jsonl}", "{count: 3}"))
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    (tmp_path / "gone.yml").symlink_to(tmp_path / "nowhere.yml")
    msgs = _messages(tmp_path)
    assert any(m.startswith(f"{tmp_path / 'a.yaml'}: symbolic link loop") for m in msgs)
    assert any(m.startswith(f"{tmp_path / 'b.yaml'}: symbolic link loop") for m in msgs)
    assert any(m.startswith(f"{tmp_path / 'gone.yml'}: dangling symbolic link") for m in msgs)


def test_a_nul_byte_and_bad_utf8_in_a_jsonl_file_give_the_line(
    write: Writer, tmp_path: Path
) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "v.jsonl").write_bytes(b'{"q": 1}\n{"q": 2}\n{"q": "\xff"}\n')
    (msg,) = _messages(write("m/a.yaml", FAMILY % "v.jsonl"))
    assert msg.startswith(f"{tmp_path / 'm' / 'v.jsonl'}:3:8: domains[0].families[0].variants:")
    write("m/a.yaml", "version: 1\ndomains:\n  - name: d\x00\n")
    (msg,) = _messages(tmp_path / "m" / "a.yaml")
    assert msg.startswith(f"{tmp_path / 'm' / 'a.yaml'}:3:12: ")


def _example_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "domains"
    shutil.copytree(EXAMPLES, dest)
    return dest


def test_a_training_line_appended_to_the_shipped_probe_file_is_a_leak(tmp_path: Path) -> None:
    dest = _example_copy(tmp_path)
    train = (dest / "data" / "code_repair.jsonl").read_text().splitlines()
    with (dest / "data" / "code_repair_probe.jsonl").open("a") as fh:
        fh.write(train[3] + "\n")
    msgs = _messages(dest)
    assert len(msgs) == 1 and "is also a training variant" in msgs[0]
    assert msgs[0].startswith(f"{dest / 'data' / 'code_repair_probe.jsonl'}:")


def test_the_training_file_used_as_the_probe_file_is_a_leak(tmp_path: Path) -> None:
    dest = _example_copy(tmp_path)
    coding = dest / "coding.yaml"
    text = coding.read_text().replace("data/code_repair_probe.jsonl", "data/code_repair.jsonl")
    coding.write_text(text)
    msgs = _messages(dest)
    assert any("is the training file" in m for m in msgs)


def test_an_item_equal_but_for_number_format_and_key_order_is_a_leak(write: Writer) -> None:
    path = write(
        "a.yaml",
        """
        version: 1
        domains:
          - name: d
            families:
              - name: f
                environment: env
                verification: check
                variants: [{a: 2, b: x}]
                probe: {items: [{b: x, a: 2.0}]}
        """,
    )
    assert "is also a training variant" in _messages(path)[0]


def test_problem_lines_are_never_wrapped_when_stderr_is_a_pipe(tmp_path: Path) -> None:
    deep = tmp_path / ("a-rather-long-directory-name-" * 4) / "nested"
    deep.mkdir(parents=True)
    bad = deep / "manifest-with-a-long-name.yaml"
    lines = ["version: 1", "domains:", "  - name: d", "    families:"]
    lines += [f"      # filler {i}" for i in range(5000)]
    lines += ["      - {name: f, environment: e, verification: v, variants: {count: 0}}"]
    bad.write_text("\n".join(lines) + "\n")
    env = {**os.environ, "COLUMNS": "80"}
    env.pop("FORCE_COLOR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "scheduler.app.cli", "validate", str(bad)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 2
    err = proc.stderr.splitlines()
    assert len(err) == 2, proc.stderr  # one problem line, one summary line
    assert re.fullmatch(
        rf"{re.escape(str(bad))}:5005:\d+: domains\[0\]\.families\[0\]\.variants\.count: .+",
        err[0],
    ), err[0]
