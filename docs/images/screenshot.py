"""Make the MLflow screenshots in docs/: a real `curriculum simulate` run, served by
`mlflow server`, rendered by headless Chromium driven over --remote-debugging-pipe.

MLflow's charts load only in real time, so the plain ``chromium --screenshot`` (virtual
time) catches spinners. This script waits for the charts instead, closes the MLflow
Assistant panel, collapses the sidebar and types a chart search before the shot.

    python docs/images/screenshot.py --out docs/images/mlflow_run.png --height 1120 \\
        --page experiment-charts --search score
    python docs/images/screenshot.py --out docs/images/mlflow_run_metrics.png \\
        --page run-metrics --search run/ --reuse
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from scheduler.tracking import start_ui_server

ROOT_FOR_IMPORTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT_FOR_IMPORTS / "tests"))
from devtools import DevTools  # noqa: E402  (the shared Chromium driver)

ROOT = Path(__file__).resolve().parents[2]
RUN_NAME = "readme-demo"


def _api(url: str, path: str, body: dict[str, Any] | None = None, **query: str) -> Any:
    full = f"{url}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(full, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="PNG to write")
    parser.add_argument("--page", choices=("experiment-charts", "run-metrics"), required=True)
    parser.add_argument("--search", default="", help="text for 'Search metric charts'")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/curriculum-screenshot"))
    parser.add_argument("--reuse", action="store_true", help="keep the store of the last call")
    parser.add_argument("--steps", type=int, help="simulate steps (default: the settings')")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium not found (Debian: apt-get install -y chromium)")
    db = args.workdir / "mlflow.db"
    if not args.reuse:
        shutil.rmtree(args.workdir, ignore_errors=True)
        args.workdir.mkdir(parents=True)
        db.touch()  # an empty sqlite file: the server creates the schema
    server = start_ui_server(f"sqlite:///{db}", port=0, wait_s=120)
    try:
        if not args.reuse:
            cmd = [str(Path(sys.executable).with_name("curriculum")), "simulate", "--no-progress"]
            cmd += ["--tracking-uri", server.url, "--db", f"sqlite:///{args.workdir}/runs.db"]
            cmd += ["--run-name", RUN_NAME]
            cmd += ["--steps", str(args.steps)] if args.steps else []
            print("$", " ".join(cmd), flush=True)
            subprocess.run(cmd, cwd=ROOT, check=True)
        exp = _api(
            server.url, "/api/2.0/mlflow/experiments/get-by-name", experiment_name="curriculum"
        )
        exp_id = exp["experiment"]["experiment_id"]
        runs = _api(
            server.url,
            "/api/2.0/mlflow/runs/search",
            {"experiment_ids": [exp_id], "filter": f"attributes.run_name = '{RUN_NAME}'"},
        )["runs"]
        run_id = runs[0]["info"]["run_id"]
        if args.page == "experiment-charts":
            page = f"#/experiments/{exp_id}/runs?compareRunsMode=CHART"
        else:
            page = f"#/experiments/{exp_id}/runs/{run_id}/model-metrics"
        url = f"{server.url}/{page}{'&' if '?' in page else '?'}workflowType=machine_learning"
        browser = DevTools(chromium, args.workdir / "profile", args.width, args.height)
        try:
            browser.open(url)
            deadline = time.monotonic() + 120
            while not browser.js("document.querySelectorAll('svg.main-svg').length"):
                if time.monotonic() > deadline:
                    sys.exit(f"no chart drew within 120 s on {url}")
                time.sleep(1)
            browser.click("mlflow.assistant.chat_panel.close")
            browser.click("mlflow_header.toggle_sidebar_button")
            if args.search:
                browser.js(
                    "document.querySelector('input[placeholder=\"Search metric charts\"]').focus()"
                )
                browser.call("Input.insertText", {"text": args.search})
            time.sleep(8)  # the filtered charts fetch and draw their histories
            data = browser.call("Page.captureScreenshot", {"format": "png"})["data"]
            args.out.write_bytes(base64.b64decode(data))
        finally:
            browser.close()
        print(f"{args.out}: {args.out.stat().st_size // 1024} kB from {url}")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
