"""End to end: `curriculum simulate` logs to a real `mlflow server`, the REST API holds the
metric scheme at the expected cadences, and headless Chromium renders the run page.

Chromium is driven two ways: the plain CLI (``--dump-dom`` under a virtual-time budget)
for the run's overview, and the DevTools protocol over ``--remote-debugging-pipe`` (no
websocket library needed) for the chart tab, whose charts load only in real time.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import urllib.parse
import urllib.request
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from devtools import CHROME_FLAGS, DevTools

from domains import load_catalog
from scheduler.tracking import free_port, start_ui_server
from scheduler.tracking._ui import UIServer

pytestmark = [pytest.mark.slow, pytest.mark.mlflow_server]

ROOT = Path(__file__).resolve().parents[1]
CURRICULUM = Path(sys.executable).with_name("curriculum")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NEEDS_CHROMIUM = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium not installed (Debian: apt-get install -y chromium)",
)

# What the simulate run is configured with, and the cadences that follow from it.
STEPS = 60
DETAIL_EVERY = 10
DOMAIN_EVERY = 1  # the default `domain_every` setting
RUN_NAME = "ui-e2e"
SIM_ENV = {
    "CURRICULUM_BATCH_SIZE": "32",
    "CURRICULUM_DETAIL_EVERY": str(DETAIL_EVERY),
    "CURRICULUM_PROBE_EVERY": "10",
}


@dataclass(frozen=True)
class ServedRun:
    server: UIServer
    experiment_id: str
    run_id: str
    baseline_id: str
    stdout: str


def _get(url: str, path: str, **query: str) -> Any:
    full = f"{url}{path}?{urllib.parse.urlencode(query)}" if query else f"{url}{path}"
    with urllib.request.urlopen(full, timeout=30) as resp:
        return json.loads(resp.read())


def _post(url: str, path: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(
        f"{url}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def _history(url: str, run_id: str, key: str) -> list[dict[str, Any]]:
    metrics: list[dict[str, Any]] = _get(
        url, "/api/2.0/mlflow/metrics/get-history", run_id=run_id, metric_key=key
    ).get("metrics", [])
    return sorted(metrics, key=lambda m: int(m["step"]))


def _run(url: str, run_id: str) -> dict[str, Any]:
    run: dict[str, Any] = _get(url, "/api/2.0/mlflow/runs/get", run_id=run_id)["run"]
    return run


@pytest.fixture(scope="module")
def served_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedRun]:
    """A real server on a free port over a fresh sqlite store, and one simulate run in it."""
    tmp = tmp_path_factory.mktemp("ui_e2e")
    db = tmp / "mlflow.db"
    db.touch()  # an empty file is an empty sqlite database; the server creates the schema
    server = start_ui_server(f"sqlite:///{db}", port=free_port(), wait_s=120)
    try:
        env = {**os.environ, **SIM_ENV, "COLUMNS": "200"}
        env.pop("CURRICULUM_DB", None)
        env.pop("CURRICULUM_TRACKING_URI", None)
        cmd = [str(CURRICULUM), "simulate", "--steps", str(STEPS), "--no-progress"]
        cmd += ["--tracking-uri", server.url, "--db", f"sqlite:///{tmp}/runs.db"]
        cmd += ["--run-name", RUN_NAME]
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, f"simulate failed:\n{done.stdout}\n{done.stderr}"
        exp = _get(
            server.url, "/api/2.0/mlflow/experiments/get-by-name", experiment_name="curriculum"
        )
        exp_id = exp["experiment"]["experiment_id"]
        ids = {}
        for name in (RUN_NAME, f"{RUN_NAME}.baseline"):
            found = _post(
                server.url,
                "/api/2.0/mlflow/runs/search",
                {"experiment_ids": [exp_id], "filter": f"attributes.run_name = '{name}'"},
            ).get("runs", [])
            assert len(found) == 1, (
                f"expected one run named {name!r}, found {len(found)}; simulate said:\n"
                f"{done.stderr}\nthe server's log ends:\n{server.log_tail()}"
            )
            ids[name] = found[0]["info"]["run_id"]
        yield ServedRun(server, exp_id, ids[RUN_NAME], ids[f"{RUN_NAME}.baseline"], done.stdout)
    finally:
        server.stop()


# ---------------------------------------------------------------- REST API


def test_run_is_logged_with_params_and_status(served_run: ServedRun) -> None:
    run = _run(served_run.server.url, served_run.run_id)
    assert run["info"]["run_name"] == RUN_NAME
    assert run["info"]["status"] == "FINISHED"
    params = {p["key"]: p["value"] for p in run["data"]["params"]}
    assert params["policy.name"] == "uniform"  # the default policy (with the skill model)
    assert params["seed"] == "0"
    assert params["role"] == "main"
    assert params["steps"] == str(STEPS)
    assert params["batch_size"] == SIM_ENV["CURRICULUM_BATCH_SIZE"]
    assert served_run.run_id in served_run.stdout  # the CLI names the MLflow run it made
    base = {p["key"]: p["value"] for p in _run(served_run.server.url, served_run.baseline_id)[
        "data"
    ]["params"]}  # fmt: skip
    assert base["policy.name"] == "learning_progress"  # the baseline column
    assert base["role"] == "baseline"


def test_metric_keys_follow_the_naming_scheme(served_run: ServedRun) -> None:
    catalog = load_catalog(ROOT / "configs" / "domains")
    domains = catalog.domain_names
    family_paths = [
        f"{domains[int(d)]}/{f}"
        for d, f in zip(catalog.domain_of_family, catalog.family_names, strict=True)
    ]
    latest = {
        m["key"]: float(m["value"])
        for m in _run(served_run.server.url, served_run.run_id)["data"]["metrics"]
    }
    keys = set(latest)
    per_step = {"run/score_mean", "run/score_p10", "run/weight_entropy", "run/pass_rate"}
    per_step |= {"run/fault_rate", "sim/true_score", "sim/waste"}
    assert per_step <= keys
    assert "run/mastered" in keys  # at the detail cadence
    for kind in ("weight", "share", "quota_use"):
        missing = {f"{kind}/{d}" for d in domains} - keys
        assert not missing, f"{kind}/<domain> missing for {sorted(missing)[:5]}"
    for kind in ("weight", "tier", "probe"):
        missing = {f"{kind}/{p}" for p in family_paths} - keys
        assert not missing, f"{kind}/<domain>/<family> missing for {sorted(missing)[:5]}"
    # Domain weights are a distribution at every logged step, so also at the last one.
    assert sum(latest[f"weight/{d}"] for d in domains) == pytest.approx(1.0, abs=1e-6)
    # Realised shares of the last batch: samples for most domains, compute for a few.
    assert all(0.0 <= latest[f"share/{d}"] <= 1.0 for d in domains)
    # The baseline is logged with aggregates only.
    base_keys = {
        m["key"] for m in _run(served_run.server.url, served_run.baseline_id)["data"]["metrics"]
    }
    assert per_step <= base_keys
    assert not any(k.startswith(("weight/", "probe/", "tier/")) for k in base_keys)


def test_metric_histories_have_the_configured_cadence(served_run: ServedRun) -> None:
    url, run_id = served_run.server.url, served_run.run_id
    catalog = load_catalog(ROOT / "configs" / "domains")
    domains = catalog.domain_names
    every_step = list(range(STEPS))
    every_domain = list(range(0, STEPS, DOMAIN_EVERY))
    every_detail = list(range(0, STEPS, DETAIL_EVERY))
    for key in ("run/score_mean", "run/weight_entropy", "sim/true_score", "run/pass_rate"):
        assert [int(m["step"]) for m in _history(url, run_id, key)] == every_step, key
    for d in domains:
        assert [int(m["step"]) for m in _history(url, run_id, f"weight/{d}")] == every_domain, d
    picked = range(0, catalog.n_families, max(1, catalog.n_families // 8))
    for f in picked:
        path = f"{domains[int(catalog.domain_of_family[f])]}/{catalog.family_names[f]}"
        for kind in ("probe", "tier"):
            steps = [int(m["step"]) for m in _history(url, run_id, f"{kind}/{path}")]
            assert steps == every_detail, f"{kind}/{path}"
    # Entropy of the family weights: positive, and at most that of the uniform distribution.
    entropy = [float(m["value"]) for m in _history(url, run_id, "run/weight_entropy")]
    assert min(entropy) > 0 and max(entropy) <= math.log(catalog.n_families) + 1e-9


def test_events_artifact_matches_event_counters(served_run: ServedRun) -> None:
    url, run_id = served_run.server.url, served_run.run_id
    listed = _get(url, "/api/2.0/mlflow/artifacts/list", run_id=run_id).get("files", [])
    paths = {f["path"] for f in listed}
    assert {"events.jsonl", "summary.json", "final_weights.json", "manifests"} <= paths
    query = urllib.parse.urlencode({"path": "events.jsonl", "run_uuid": run_id})
    with urllib.request.urlopen(f"{url}/get-artifact?{query}", timeout=30) as resp:
        lines = resp.read().decode().splitlines()
    events = [json.loads(line) for line in lines]
    assert events, "the run raised no events; events.jsonl is empty"
    assert all({"step", "kind", "family", "domain", "payload"} <= e.keys() for e in events)
    # Event steps count batches drawn, so a report of the last batch raises at step STEPS.
    assert all(0 <= e["step"] <= STEPS for e in events)
    counts = Counter(e["kind"] for e in events)
    latest = {
        m["key"]: float(m["value"]) for m in _run(url, run_id)["data"]["metrics"]
    }  # events/<kind> is the running count of each kind
    logged = {k.split("/", 1)[1]: int(v) for k, v in latest.items() if k.startswith("events/")}
    assert logged == dict(counts)


# ---------------------------------------------------------------- Chromium


class _TextOf(HTMLParser):
    """The visible text of a DOM dump (script and style bodies left out)."""

    def __init__(self) -> None:
        super().__init__()
        self._skip = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in ("script", "style")

    def handle_data(self, data: str) -> None:
        if not self._skip and data.strip():
            self.parts.append(data.strip())


def _dump_dom(url: str, profile: Path) -> str:
    assert CHROMIUM is not None
    cmd = [CHROMIUM, *CHROME_FLAGS, f"--user-data-dir={profile}", "--window-size=1600,1000"]
    cmd += ["--virtual-time-budget=60000", "--dump-dom", url]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    parser = _TextOf()
    parser.feed(done.stdout)
    return " | ".join(parser.parts)


def _png_pixels(path: Path) -> tuple[int, int, bytes]:
    """Width, height and the inflated scanlines of a PNG (filter bytes included)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, size = 8, b"", (0, 0)
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return size[0], size[1], zlib.decompress(idat)


@NEEDS_CHROMIUM
@pytest.mark.chromium
def test_run_overview_renders_run_params_and_metrics(served_run: ServedRun, tmp_path: Path) -> None:
    url = served_run.server.url
    page = f"{url}/#/experiments/{served_run.experiment_id}/runs/{served_run.run_id}"
    text = _dump_dom(page, tmp_path / "profile")
    assert RUN_NAME in text
    assert served_run.run_id in text
    for name in ("run/score_mean", "sim/true_score", "weight/coding", "policy.name"):
        assert f"| {name} |" in text, f"{name} not rendered on the run page"
    latest = {
        m["key"]: m["value"] for m in _run(url, served_run.run_id)["data"]["metrics"]
    }  # the page shows this run's values, not a placeholder
    assert f"| run/score_mean | {latest['run/score_mean']} |" in text


@NEEDS_CHROMIUM
@pytest.mark.chromium
def test_model_metrics_tab_draws_charts(served_run: ServedRun, tmp_path: Path) -> None:
    url = served_run.server.url
    page = (
        f"{url}/#/experiments/{served_run.experiment_id}/runs/{served_run.run_id}"
        "/model-metrics?workflowType=machine_learning"
    )
    shot = tmp_path / "model_metrics.png"
    browser = DevTools(CHROMIUM, tmp_path / "profile", 1400, 900)
    try:
        browser.open(page)
        charts = browser.wait_for("document.querySelectorAll('svg.main-svg').length", 90)
        text = browser.js("document.body.innerText")
        browser.screenshot(shot)
    finally:
        browser.close()
    assert charts, "no chart drew on the Model metrics tab within 90 s"
    assert RUN_NAME in text
    # Charts are grouped by the name up to its last "/", each header with its chart count.
    # 7 per-step aggregates, and the mastered count at the detail cadence
    assert "\nrun\n(8)\n" in text, "group run/* (8 aggregates) not shown"
    assert "\nsim\n(2)\n" in text, "group sim/* not shown"
    for group in ("weight", "probe", "probe/coding", "tier/coding"):
        assert f"\n{group}\n(" in text, f"metric group {group!r} not shown"
    width, height, raw = _png_pixels(shot)
    assert (width, height) == (1400, 900)
    assert shot.stat().st_size > 20_000
    assert len(set(raw[:: max(1, len(raw) // 20_000)])) > 32, "screenshot is a flat image"


# ---------------------------------------------------------------- curriculum ui


def test_curriculum_ui_serves_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    db.touch()
    port = free_port()
    env = {**os.environ, "COLUMNS": "200"}
    cmd = [str(CURRICULUM), "ui", "--tracking-uri", f"sqlite:///{db}", "--port", str(port)]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once /health answers
        assert url in line, (
            f"no URL in {line!r}; stderr: {proc.stderr.read() if proc.stderr else ''}"
        )
        with urllib.request.urlopen(f"{url}/health", timeout=10) as resp:
            assert resp.status == 200
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err + out
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0, "the server outlived `curriculum ui`"
