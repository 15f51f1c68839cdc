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
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from scheduler.tracking import start_ui_server

ROOT = Path(__file__).resolve().parents[2]
RUN_NAME = "readme-demo"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]


class DevTools:
    """Chromium over --remote-debugging-pipe: NUL-separated JSON on fds 3 (in) and 4 (out)."""

    def __init__(self, chromium: str, profile: Path, width: int, height: int) -> None:
        to_chrome_r, self._to_chrome_w = os.pipe()
        self._from_chrome_r, from_chrome_w = os.pipe()

        def wire_fds() -> None:
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        cmd = [chromium, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"]
        self.process = subprocess.Popen(
            [*cmd, "--remote-debugging-pipe"],
            pass_fds=(3, 4),
            preexec_fn=wire_fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self._session: str | None = None
        self.size = (width, height)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if self._session is not None and not method.startswith(("Target.", "Browser.")):
            msg["sessionId"] = self._session
        os.write(self._to_chrome_w, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self._buf:
                chunk = os.read(self._from_chrome_r, 1 << 16)
                if not chunk:
                    raise EOFError(f"chromium closed the DevTools pipe during {method}")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result

    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session = attached["sessionId"]
        width, height = self.size
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        self.call("Page.navigate", {"url": url})

    def js(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        return result.get("result", {}).get("value")

    def click(self, component_id: str) -> bool:
        return bool(
            self.js(
                "(() => { const b = document.querySelector("
                f"'[data-component-id=\"{component_id}\"]');"
                " if (b) { b.click(); return true } return false })()"
            )
        )

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (EOFError, OSError, RuntimeError):
            self.process.kill()
        self.process.wait(15)
        os.close(self._to_chrome_w)
        os.close(self._from_chrome_r)


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
