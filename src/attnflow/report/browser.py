"""A headless Chromium driven through the DevTools protocol over a pipe (standard library only).

Chromium started with ``--remote-debugging-pipe`` reads protocol messages (JSON, each ending in a NUL
byte) on file descriptor 3 and writes its answers and events on descriptor 4, so no WebSocket client
and no open port are needed. Used by the browser tests of the reports and by
``attnflow report DIR --check`` (load time, console errors).

    with Browser() as b:
        b.open(Path("report.html"))
        b.evaluate("document.title")
        png = b.screenshot()
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from ..experiments.files import write_output

__all__ = ["CHROMIUM_FLAGS", "Browser", "BrowserError", "find_chromium"]

#: headless, no sandbox (containers), no GPU, and no traffic of its own (updates, sync, QUIC, first-run)
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
    # the 3-D token cloud is WebGL; without a GPU Chromium renders it in software only when asked to
    # (the pages loaded are local files attnflow wrote)
    "--enable-unsafe-swiftshader",
)
_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class BrowserError(RuntimeError):
    """The browser could not be started, closed its pipe, timed out or answered with an error."""


def find_chromium() -> str | None:
    """The Chromium (or Chrome) executable: ``$ATTNFLOW_CHROMIUM``, else the first of chromium,
    chromium-browser, google-chrome on ``PATH``; None when there is none."""
    env = os.environ.get("ATTNFLOW_CHROMIUM")
    if env:
        return env if Path(env).is_file() and os.access(env, os.X_OK) else None
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless Chromium with one page, a fresh profile, and the page's console errors collected.

    Parameters
    ----------
    executable : str or None
        Default :func:`find_chromium`.
    width, height : int
        Size of the page's viewport in CSS pixels (device scale factor 1: screenshots have this size).
    timeout : float
        Seconds to wait for any answer or event.

    Raises
    ------
    BrowserError
        If no browser is found or it does not answer.
    """

    def __init__(
        self, executable: str | None = None, *, width: int = 1280, height: int = 900, timeout: float = 60.0
    ):
        exe = executable or find_chromium()
        if exe is None:
            raise BrowserError(
                "no Chromium found (looked for $ATTNFLOW_CHROMIUM, "
                + ", ".join(_CANDIDATES)
                + "); install one, "
                "e.g. apt-get install chromium"
            )
        self.timeout = float(timeout)
        self.width, self.height = int(width), int(height)
        self.console_errors: list[str] = []
        self.events: list[dict] = []
        self._buf = b""
        self._id = 0
        self._profile = tempfile.mkdtemp(prefix="attnflow-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # move the child's ends above 9, so that placing them on 3 and 4 never closes one of them
        for name in ("to_child_r", "from_child_w"):
            fd = locals()[name]
            high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
            os.close(fd)
            if name == "to_child_r":
                to_child_r = high
            else:
                from_child_w = high
        # bash (dash takes only one-digit descriptors) places the two pipe ends on descriptors 3 (read by
        # Chromium) and 4 (written by it)
        script = f'exec 3<&{to_child_r} 4>&{from_child_w} {to_child_r}<&- {from_child_w}>&-; exec "$0" "$@"'
        args = [*CHROMIUM_FLAGS, "--remote-debugging-pipe", f"--user-data-dir={self._profile}", "about:blank"]
        try:
            self._proc = subprocess.Popen(
                [shutil.which("bash") or "bash", "-c", script, exe, *args],
                pass_fds=(to_child_r, from_child_w),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        try:
            target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self._session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})[
                "sessionId"
            ]
            for domain in ("Page", "Runtime", "Log"):
                self.send(f"{domain}.enable")
            self.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
            )
        except BaseException:
            self.close()
            raise

    # -- protocol ----------------------------------------------------------------------------------
    def _write(self, msg: dict) -> None:
        data = json.dumps(msg).encode() + b"\0"
        while data:
            try:
                n = os.write(self._to_child, data)
            except BrokenPipeError:
                raise BrowserError("the browser closed its protocol pipe (it exited)") from None
            data = data[n:]

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"the browser did not answer within {self.timeout:g} s")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise BrowserError("the browser closed its protocol pipe (it exited)")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        msg = json.loads(raw)
        if "method" in msg:
            self._on_event(msg)
        return msg

    def _on_event(self, msg: dict) -> None:
        self.events.append(msg)
        method, p = msg["method"], msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.console_errors.append(
                "console."
                + p["type"]
                + ": "
                + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            )
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.console_errors.append(
                "exception: " + str(d.get("exception", {}).get("description") or d.get("text"))
            )
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            e = p["entry"]
            self.console_errors.append(f"log ({e.get('source')}): {e.get('text')} {e.get('url', '')}".strip())

    def _call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._write(msg)
        deadline = time.monotonic() + self.timeout
        while True:
            ans = self._read(deadline)
            if ans.get("id") == self._id:
                if "error" in ans:
                    raise BrowserError(f"{method} failed: {ans['error'].get('message')} ({ans['error']})")
                return ans.get("result", {})

    def send(self, method: str, params: dict | None = None) -> dict:
        """Call a protocol method on the page and return its result."""
        return self._call(method, params, self._session)

    def wait_event(self, method: str, timeout: float | None = None) -> dict:
        """Wait for the next page event named ``method`` and return its parameters."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            msg = self._read(deadline)
            if msg.get("method") == method and msg.get("sessionId") == self._session:
                return msg.get("params", {})

    # -- page --------------------------------------------------------------------------------------
    def open(self, path_or_url: str | Path) -> float:
        """Load a file (or URL) and wait for its load event; return the load time in seconds (the
        navigation timing's ``loadEventEnd``: parsing, scripts and inlined data included)."""
        url = (
            Path(path_or_url).resolve().as_uri()
            if not str(path_or_url).startswith(("file:", "http", "about:"))
            else str(path_or_url)
        )
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")
        t = self.evaluate(
            "(() => { const e = performance.getEntriesByType('navigation')[0];"
            " return e ? (e.loadEventEnd || performance.now()) : performance.now(); })()"
        )
        return float(t) / 1000.0

    def evaluate(self, expression: str) -> Any:
        """Evaluate a JavaScript expression in the page (promises awaited) and return its JSON value.

        Raises
        ------
        BrowserError
            If the expression throws.
        """
        res = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        if "exceptionDetails" in res:
            d = res["exceptionDetails"]
            raise BrowserError(
                f"the page raised {d.get('exception', {}).get('description') or d.get('text')}"
            )
        return res.get("result", {}).get("value")

    def screenshot(self, path: str | Path | None = None) -> bytes:
        """A PNG of the viewport (``width`` x ``height`` pixels); also written to ``path`` when given."""
        data = base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"])
        if path is not None:
            write_output(path, lambda fh: fh.write(data), what="screenshot")
        return data

    def close(self) -> None:
        """Close the browser (politely, then by signal) and delete its profile."""
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            try:
                self._id += 1
                self._write({"id": self._id, "method": "Browser.close", "params": {}})
                proc.wait(timeout=10)
            except (BrowserError, OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait(timeout=10)
        for fd in ("_to_child", "_from_child"):
            f = getattr(self, fd, None)
            if f is not None:
                try:
                    os.close(f)
                except OSError:
                    pass
                setattr(self, fd, None)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
