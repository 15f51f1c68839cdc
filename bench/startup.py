"""CPU (user + sys) of a cold start: `import scheduler`, `import domains` (the floor that
validating any manifest pays) and `curriculum validate` of one small manifest. Each is a
fresh interpreter; the minimum of ``--repeat`` runs is printed, since a busy machine only
adds. Target (issue 17): validate under 0.5 s of CPU.

    .venv/bin/python bench/startup.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

SMALL = """\\
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
          - {a: 10, b: 20, tier: easy}
          - {a: 123, b: 456, tier: hard}
          - {a: 999, b: 1, tier: hard}
        probe: {size: 64}
"""


def cpu_seconds(cmd: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, capture_output=True, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best = min(best, used)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        manifest = Path(tmp) / "small.yaml"
        manifest.write_text(SMALL)
        validate = [py, "-m", "scheduler.app.cli", "validate", str(manifest)]
        runs = {
            "python -c pass": [py, "-c", "pass"],
            "import scheduler": [py, "-c", "import scheduler"],
            "import domains": [py, "-c", "import domains"],
            "curriculum validate small.yaml": validate,
        }
        result = {name: round(cpu_seconds(cmd, args.repeat), 3) for name, cmd in runs.items()}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
