"""`import scheduler` is light, every public name still imports, and `curriculum validate`
loads only what validating needs (measured in a fresh interpreter each time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import scheduler

HEAVY = ("sqlalchemy", "sqlmodel", "mlflow", "pydantic_settings", "torch", "scipy")
SMALL = """\
version: 1
domains:
  - name: toy
    quota: {min_share: 0.0, max_share: 1.0}
    families:
      - name: add_numbers
        environment: python
        tools: [calculator]
        verification: exact_match
        tiers: [easy, hard]
        variants:
          - {a: 1, b: 2, tier: easy}
          - {a: 123, b: 456, tier: hard}
        probe: {size: 64}
"""


def _loaded_after(code: str) -> list[str]:
    """The HEAVY (and scheduler core) modules present after running ``code``."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"names = {list(HEAVY)!r} + ['scheduler._scheduler', 'rich', 'policies']\n"
        "print(json.dumps([n for n in names if n in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


def test_import_scheduler_loads_no_store_tracker_settings_or_torch() -> None:
    assert _loaded_after("import scheduler") == []


def test_every_public_name_still_imports_from_the_package() -> None:
    missing = [name for name in scheduler.__all__ if getattr(scheduler, name, None) is None]
    assert missing == []
    namespace: dict[str, object] = {}
    exec("from scheduler import *", namespace)
    assert set(scheduler.__all__) <= set(namespace)


def test_reading_a_heavy_name_imports_its_module_then() -> None:
    loaded = _loaded_after("import scheduler\nscheduler.RunRecorder")
    assert "sqlalchemy" in loaded and "mlflow" not in loaded


def test_validate_imports_neither_the_scheduler_nor_the_store(tmp_path: Path) -> None:
    manifest = tmp_path / "small.yaml"
    manifest.write_text(SMALL)
    code = (
        "import contextlib, io\nfrom scheduler.app.cli import main\n"
        "quiet = io.StringIO()\n"
        "with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):\n"
        f"    assert main(['validate', {str(manifest)!r}]) == 0"
    )
    loaded = _loaded_after(code)
    assert set(loaded) <= {"pydantic_settings"}, loaded
