"""Headless Chromium driven over its DevTools pipe, with the standard library only.

Shared by the MLflow UI test (tests/test_ui_e2e.py) and the README screenshot script
(docs/images/screenshot.py). The flags keep Chromium off the network, as these machines
require.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

CHROME_FLAGS = [
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
    """Chromium driven over --remote-debugging-pipe: NUL-separated JSON on fds 3 and 4."""

    def __init__(self, chromium: str, profile: Path, width: int, height: int) -> None:
        to_chrome_r, self._to_chrome_w = os.pipe()
        self._from_chrome_r, from_chrome_w = os.pipe()

        def wire_fds() -> None:  # in the child, before exec: chromium reads 3 and writes 4
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        cmd = [chromium, *CHROME_FLAGS, f"--user-data-dir={profile}"]
        cmd += [f"--window-size={width},{height}", "--remote-debugging-pipe"]
        self.process = subprocess.Popen(
            cmd,
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

    def wait_for(self, expression: str, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.5)
        return value

    def click(self, component_id: str) -> bool:
        """Click the element with this data-component-id, if the page has one."""
        return bool(
            self.js(
                "(() => { const b = document.querySelector("
                f"'[data-component-id=\"{component_id}\"]');"
                " if (b) { b.click(); return true } return false })()"
            )
        )

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        with contextlib.suppress(EOFError, OSError, RuntimeError):
            self.call("Browser.close")
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(15)
        os.close(self._to_chrome_w)
        os.close(self._from_chrome_r)
