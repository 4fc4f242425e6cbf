"""A headless Chromium driven through the DevTools protocol over a pipe (``--remote-debugging-pipe``), for UI tests:
open a page, wait until a JavaScript condition holds, click, read the page, take a screenshot. Python's standard
library only: the protocol's messages are JSON, NUL-terminated, on the browser's file descriptors 3 (commands in)
and 4 (replies and events out).

Every wait is bounded: a reply that does not come within :data:`REPLY_TIMEOUT_S`, or a condition that does not hold
within its timeout, raises; :meth:`Browser.close` ends the browser's whole process group.
"""

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

#: How long one protocol call may take (s).
REPLY_TIMEOUT_S = 60.0
#: How often a condition is checked while waiting for it (s).
POLL_INTERVAL_S = 0.25


def chromium_path() -> str:
    """Debian's chromium; a missing browser skips the calling test, unless GPUBENCH_REQUIRE_BROWSER=1 (CI) fails it."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        message = "headless Chromium not found (Debian: apt-get install -y chromium)"
        if os.environ.get("GPUBENCH_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


class BrowserError(RuntimeError):
    """The browser answered with an error, closed, or did not answer in time."""


class PageScriptError(BrowserError):
    """A script evaluated in the page raised."""


class Browser:
    """One headless Chromium (a fresh profile in ``profile``) with one page."""

    def __init__(self, executable: str, profile: Path) -> None:
        to_browser_read, to_browser_write = os.pipe()
        from_browser_read, from_browser_write = os.pipe()

        def browser_fds() -> None:
            # Copied out of the way first: a pipe end may already be fd 3 or 4, and dup2 onto itself would keep its
            # close-on-exec flag.
            commands, replies = os.dup(to_browser_read), os.dup(from_browser_write)
            os.dup2(commands, 3)
            os.dup2(replies, 4)

        self._process = subprocess.Popen(
            [
                executable,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            close_fds=False,
            preexec_fn=browser_fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._commands = os.fdopen(to_browser_write, "wb", buffering=0)
        self._replies = from_browser_read
        self._buffer = b""
        self._last_id = 0
        target = self._call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self._call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._replies], [], [], remaining)[0]:
                raise BrowserError(f"no answer from the browser within {REPLY_TIMEOUT_S:g} s")
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                raise BrowserError("the browser closed its end of the pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def _call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._last_id += 1
        message: dict[str, Any] = {"id": self._last_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        self._commands.write(json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") != self._last_id:
                continue  # an event, or the page's own traffic
            if "error" in reply:
                raise BrowserError(f"{method}: {reply['error']}")
            return reply["result"]

    def page(self, method: str, **params: Any) -> dict[str, Any]:
        """Call ``method`` of the DevTools protocol on the page."""
        return self._call(method, session=self._session, **params)

    def evaluate(self, expression: str) -> Any:
        """The value of the JavaScript ``expression`` in the page (promises awaited)."""
        result = self.page("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise PageScriptError(f"{expression!r} raised: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, size: tuple[int, int]) -> None:
        """Load ``url`` in a viewport of ``size`` (width, height) CSS pixels."""
        width, height = size
        self.page("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        self.page("Page.navigate", url=url)

    def _holds(self, condition: str) -> bool:
        try:
            return bool(self.evaluate(condition))
        except PageScriptError:
            return False  # a page being replaced (no body yet) is not an answer

    def wait_for(self, condition: str, timeout_s: float) -> None:
        """Wait until the JavaScript ``condition`` is true; raise BrowserError with the page's text after
        ``timeout_s`` seconds."""
        deadline = time.monotonic() + timeout_s
        while not self._holds(condition):
            if time.monotonic() > deadline:
                text = self.evaluate("document.body ? document.body.innerText : ''") or ""
                raise BrowserError(f"{condition!r} still false after {timeout_s:g} s; page text: {text[:2000]!r}")
            time.sleep(POLL_INTERVAL_S)

    def text(self) -> str:
        """The page's rendered text (``innerText`` of its body)."""
        return self.evaluate("document.body.innerText")

    def screenshot(self, path: Path) -> Path:
        """Save the viewport as a PNG at ``path``."""
        path.write_bytes(base64.b64decode(self.page("Page.captureScreenshot", format="png")["data"]))
        return path

    def close(self) -> None:
        """End the browser: politely, then its whole process group by force."""
        with contextlib.suppress(BrowserError, OSError):
            self._call("Browser.close")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait(timeout=15)
        self._commands.close()
        os.close(self._replies)
