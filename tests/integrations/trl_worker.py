"""One torchrun rank of the example's GRPO run; writes what it pulled and its state checksum.

Run by tests/integrations/test_trl.py as
``python -m torch.distributed.run --nproc_per_node 2 trl_worker.py --out DIR``."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trl_setup import Spied

from scheduler import dumps_state


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--gather", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spied = Spied(str(out / "run"), args.steps, gather=bool(args.gather))
    spied.trainer.train()
    state = dumps_state(spied.scheduler.state_dict())
    (out / f"rank{rank}.json").write_text(
        json.dumps(
            {
                "pulled": spied.pulled,
                "reward_rows": spied.reward_rows,
                "reported": spied.curriculum.stream.reported,
                "checksum": hashlib.sha256(state).hexdigest(),
            }
        )
    )
    # Tear the process group down before the interpreter does: left to exit, a rank's gloo
    # threads were once destroyed while joinable ("terminate called without an active
    # exception", SIGABRT, CI of 2026-12-07) after its work was written.
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
