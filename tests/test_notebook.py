"""The analysis notebook, executed end to end against a small run made here.

Kernel: a kernelspec written into a temporary directory whose argv starts with this
interpreter (``sys.executable``), handed to nbclient through a KernelManager. The kernel is
therefore the venv's Python whatever ``python3`` kernelspec (if any) the machine has on its
Jupyter path; the kernel inherits this process's environment.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat", reason="the notebooks extra is not installed")
nbclient = pytest.importorskip("nbclient", reason="the notebooks extra is not installed")
pytest.importorskip("ipykernel", reason="the notebooks extra is not installed")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "probe_curves.ipynb"
CURRICULUM = Path(sys.executable).with_name("curriculum")
KERNEL = "curriculum-test-venv"


def _simulate(
    tmp: Path, *extra: str, tracking: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CURRICULUM_PROBE_EVERY": "5", "CURRICULUM_BATCH_SIZE": "64"}
    if tracking is not None:
        env["CURRICULUM_TRACKING_URI"] = tracking
    args = [str(CURRICULUM), "simulate", "--domains", str(ROOT / "configs" / "domains"),
            "--steps", "60", "--no-baseline", "--no-progress", "--db",
            f"sqlite:///{tmp}/runs.db", "--run-name", "nb", *extra]  # fmt: skip
    done = subprocess.run(args, env=env, cwd=tmp, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _kernel_manager(tmp: Path) -> Any:
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec = tmp / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "curriculum venv", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    specs = KernelSpecManager(kernel_dirs=[str(tmp / "kernels")], ensure_native_kernel=False)
    return KernelManager(kernel_name=KERNEL, kernel_spec_manager=specs)


def _execute(tmp: Path, **params: str | None) -> Any:
    """Run the notebook with ``params`` replacing its parameters cell; the executed nb."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    cell.source = "\n".join(f"{k} = {v!r}" for k, v in params.items())
    km = _kernel_manager(tmp)
    try:  # start it here, so a kernel that cannot start is a skip and not a failure
        km.start_kernel(cwd=str(tmp))
        probe = km.client()
        probe.start_channels()
        probe.wait_for_ready(timeout=120)
        probe.stop_channels()
    except (RuntimeError, OSError) as exc:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
        pytest.skip(f"ipykernel could not start a kernel ({sys.executable}): {exc}")
    try:
        nbclient.NotebookClient(nb, km=km, timeout=300).execute()
    finally:
        km.shutdown_kernel(now=True)
    return nb


def _text(cell: Any) -> str:
    parts = []
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        parts.append(str(data.get("text/markdown", "")) + str(data.get("text/plain", "")))
        parts.append(str(out.get("text", "")))
    return "\n".join(parts)


def _check(nb: Any, families: list[str]) -> None:
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    pngs = sum("image/png" in o.get("data", {}) for o in outputs)
    assert pngs >= 3, f"expected at least 3 figures, got {pngs}"
    (attention,) = [c for c in nb.cells if "attention" in c.metadata.get("tags", [])]
    text = _text(attention)
    named = [f for f in families if re.search(rf"\| {re.escape(f)} \|", text)]
    assert named or "No family needs attention." in text, text[:500]
    assert nb.cells[-1] is attention  # the notebook ends with the attention table


def test_notebook_runs_on_a_store_run(tmp_path: Path) -> None:
    _simulate(tmp_path, "--no-tracking")
    from scheduler.store import open_store

    store = open_store(f"sqlite:///{tmp_path}/runs.db")
    info = store.get_run("nb")
    store.close()
    assert info is not None
    nb = _execute(tmp_path, STORE_URL=f"sqlite:///{tmp_path}/runs.db", RUN="nb",
                  TRACKING_URI=None, MLFLOW_RUN_ID=None)  # fmt: skip
    _check(nb, list(info.families))
    summary = _text(nb.cells[2])
    assert "run 'nb' from store" in summary and "304 families" in summary


@pytest.mark.slow
def test_notebook_runs_on_an_mlflow_run(tmp_path: Path) -> None:
    tracking = f"sqlite:///{tmp_path}/mlflow.db"
    done = _simulate(tmp_path, "--tracking-uri", tracking, tracking=tracking)
    found = re.search(r"MLflow run ([0-9a-f]{32})", done.stdout)
    assert found, done.stdout
    nb = _execute(tmp_path, STORE_URL=None, RUN=None, TRACKING_URI=tracking,
                  MLFLOW_RUN_ID=found.group(1))  # fmt: skip
    from mlflow.tracking import MlflowClient

    keys = MlflowClient(tracking).get_run(found.group(1)).data.metrics
    families = sorted(
        {k.split("/")[2] for k in keys if k.startswith("probe/") and k.count("/") == 2}
    )
    assert len(families) == 304
    _check(nb, families)
    assert f"run {found.group(1)}" in _text(nb.cells[2])


def test_jupyter_execute_from_the_root_reads_the_demo_run_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    """As a user after `make demo`: `jupyter execute notebooks/probe_curves.ipynb` from the
    repository root, with the default parameters. The kernel runs in notebooks/, and the
    notebook still finds the demo's curriculum.db at the root and writes nothing beside
    itself. A copy of the checkout's layout stands in for the root, so the real
    curriculum.db is never touched."""
    import shutil

    proj = tmp_path / "proj"
    (proj / "configs").mkdir(parents=True)
    (proj / "configs" / "scheduler.yaml").write_text("{}\n")
    shutil.copytree(ROOT / "configs" / "domains", proj / "configs" / "domains")
    (proj / "notebooks").mkdir()
    shutil.copy(NOTEBOOK, proj / "notebooks")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("CURRICULUM_")}
    sim = {**env, "CURRICULUM_PROBE_EVERY": "5", "CURRICULUM_BATCH_SIZE": "64"}
    args = [str(CURRICULUM), "simulate", "--steps", "40", "--no-baseline", "--no-progress",
            "--no-tracking", "--run-name", "demo"]  # fmt: skip
    done = subprocess.run(args, env=sim, cwd=proj, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert (proj / "curriculum.db").is_file()
    # The venv's interpreter as the notebook's `python3` kernel, whatever else is installed.
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "venv",
                                                 "language": "python"}))  # fmt: skip
    env["JUPYTER_PATH"] = str(tmp_path / "jupyter")
    before = sorted(p.name for p in (proj / "notebooks").iterdir())
    out = tmp_path / "executed.ipynb"
    jupyter = Path(sys.executable).with_name("jupyter")
    run = subprocess.run(
        [str(jupyter), "execute", "notebooks/probe_curves.ipynb", f"--output={out}"],
        env=env, cwd=proj, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if run.returncode != 0 and "Kernel died" in run.stderr:
        pytest.skip(f"no kernel could start here: {run.stderr[-300:]}")
    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(p.name for p in (proj / "notebooks").iterdir()) == before
    nb = nbformat.read(out, as_version=4)
    from scheduler.store import open_store

    store = open_store(f"sqlite:///{proj}/curriculum.db")
    info = store.get_run("demo")
    store.close()
    assert info is not None
    _check(nb, list(info.families))
    assert "run 'demo' from store" in _text(nb.cells[2])


def test_the_notebook_refuses_a_store_that_is_not_there(tmp_path: Path) -> None:
    missing = tmp_path / "nothing.db"
    with pytest.raises(Exception, match="no SQLite file at"):
        _execute(tmp_path, STORE_URL=f"sqlite:///{missing}", RUN=None, TRACKING_URI=None,
                 MLFLOW_RUN_ID=None)  # fmt: skip
    assert not missing.exists()
