"""The adapters are imported lazily: ``import scheduler`` loads no trainer framework."""

from __future__ import annotations

import subprocess
import sys


def test_import_scheduler_loads_neither_torch_nor_trl() -> None:
    code = (
        "import sys, scheduler, scheduler.integrations, scheduler.distributed\n"
        "from scheduler import RowIndex, DatasetColumns\n"
        "heavy = [m for m in ('torch', 'trl', 'transformers', 'datasets', 'accelerate') "
        "if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "from scheduler import CurriculumBatchSampler\n"
        "assert 'torch' in sys.modules and 'trl' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
