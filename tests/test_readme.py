"""The README's Python blocks (and docs/deploy.md's), executed in order as a user pastes
them, from the repository root: the examples stay true to the code.

A block fenced ```` ```python fragment ```` (code that needs a model, a tokenizer or
torchrun) is only compiled; every other ```` ```python ```` block runs."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def python_blocks(path: Path, kind: str = "") -> list[str]:
    """The blocks fenced ```python (kind "") or ```python fragment (kind "fragment")."""
    found = re.findall(r"^```python([^\n]*)\n(.*?)^```", path.read_text(), flags=re.S | re.M)
    return [code for info, code in found if info.strip() == kind]


@pytest.mark.parametrize("doc", ["README.md", "docs/deploy.md"])
def test_the_fragments_compile(doc: str) -> None:
    for i, block in enumerate(python_blocks(ROOT / doc, "fragment")):
        compile(block, f"{doc} fragment {i + 1}", "exec")


@pytest.mark.parametrize("doc", ["README.md", "docs/deploy.md"])
def test_the_python_blocks_run_as_written(
    doc: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import torch

    torch.set_num_threads(1)
    blocks = python_blocks(ROOT / doc)
    assert blocks, f"{doc} has no python block"
    monkeypatch.chdir(ROOT)
    for key in [k for k in os.environ if k.upper().startswith("CURRICULUM_")]:
        monkeypatch.delenv(key)
    for name in ("/tmp/my-trainer.db", "/tmp/scheduler-state.pt", "/tmp/my-trainer-mlflow.db"):
        for suffix in ("", "-wal", "-shm"):
            Path(name + suffix).unlink(missing_ok=True)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    for i, block in enumerate(blocks):
        code = compile(block, f"{doc} block {i + 1}", "exec")
        exec(code, namespace)
    # The trainer example left a run that `curriculum report` reads.
    from rich.console import Console

    from scheduler.app._report import print_report

    console = Console(record=True, width=200)
    assert print_report("sqlite:////tmp/my-trainer.db", "my-trainer", console) == 0
    text = console.export_text()
    last = namespace["sched"].step - 1  # type: ignore[attr-defined]
    assert "run 'my-trainer'" in text and f"latest checkpoint: step {last}\n" in text, text
