"""Open an HTML file in headless Chromium: the page's console errors, the resources it loaded, and a screenshot.

Chromium's ``--enable-logging`` output names console messages (``INFO:CONSOLE:2] "boom"``) without their level
and never mentions an image that failed to load, so the harness speaks the DevTools protocol instead, over
``--remote-debugging-pipe``: Chromium reads commands from fd 3 and writes replies and events to fd 4, each a
JSON object ended by a NUL byte. No websocket, no third-party package.

An error is anything the DevTools console would show in red: ``console.error`` / ``console.assert``, an
uncaught exception (also in a promise), and a log entry of level error (a resource that failed to load, a
Content-Security-Policy violation), and an ``<img>`` that loaded but does not decode. Host names resolve to
nothing, so a page that reaches for the network gets ``net::ERR_NAME_NOT_RESOLVED`` and that error, whatever
the machine's connectivity.

Used by the report tests and by ``bench/screenshot.py``.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

# Late errors (a setTimeout(0) after load, an image decoded after the load event) still get in within this.
SETTLE_S = 0.3
QUIT_GRACE_S = 5

CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",  # containers run as root, where the sandbox refuses to start
    "--disable-gpu",
    "--disable-dev-shm-usage",  # a container's 64 MiB /dev/shm crashes the renderer on a big page
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
    "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--remote-debugging-pipe",
)


_RENUMBER_FDS = """
import os, sys
read, write = int(sys.argv[1]), int(sys.argv[2])
os.dup2(read, 3); os.dup2(write, 4); os.close(read); os.close(write)
os.execv(sys.argv[3], sys.argv[3:])
"""


# Loaded images (lazy ones below the fold are not loaded yet) that have no pixels: they failed.
_BROKEN_IMAGES = """
Array.from(document.images)
    .filter(img => img.getAttribute("src") && img.complete && img.naturalWidth === 0)
    .map(img => img.src)
"""


@dataclass(frozen=True)
class BrowserResult:
    """What one page load showed: errors as the console would print them, one string each."""

    console_errors: list[str]
    screenshot: Path
    stderr: str
    # URLs the page asked for besides itself and data:/blob: URIs; a self-contained report asks for none.
    requests: list[str] = field(default_factory=list)


class BrowserError(RuntimeError):
    """Chromium could not open the page (did not start, crashed, or ran past the time-out)."""


def find_chromium() -> str | None:
    """Path of the first Chromium or Chrome on PATH, or None."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def open_headless(html: Path, screenshot: Path, width: int = 1280, height: int = 900, timeout: float = 60,
                  *, mobile: bool = False, chromium: str | None = None) -> BrowserResult:
    """Load ``html`` in a fresh headless Chromium with a ``width`` x ``height`` viewport, wait for the load event
    and a short settle, save a PNG of the viewport (exactly that many pixels) to ``screenshot``.

    ``mobile`` emulates a phone (the page's ``<meta name="viewport">`` applies). Raises :class:`BrowserError`
    when Chromium is missing, dies, or the page has not loaded and been captured within ``timeout`` seconds;
    Chromium then gets :data:`QUIT_GRACE_S` to quit before its process group is killed.
    """
    chromium = chromium or find_chromium()
    if chromium is None:
        raise BrowserError(f"no Chromium on PATH (looked for {', '.join(CHROMIUM_NAMES)})")
    if not Path(html).is_file():
        raise BrowserError(f"no such file: {html}")
    url = Path(html).resolve().as_uri()
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryDirectory(prefix="ftlscope-chromium-") as profile:
        stderr_path = Path(profile) / "stderr.txt"
        with open(stderr_path, "wb") as stderr_file:
            browser = _Chromium.start(chromium, Path(profile), width, height, stderr_file)
            try:
                page = _Page(browser, url, deadline)
                page.load(width, height, mobile)
                png = page.screenshot()
            except BrowserError as exc:
                browser.close()
                raise BrowserError(f"{exc} ({url}); Chromium's stderr ends:\n{_tail(stderr_path)}") from None
            finally:
                browser.close()
        stderr = stderr_path.read_text(errors="replace")
    screenshot = Path(screenshot)
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    screenshot.write_bytes(png)
    return BrowserResult(console_errors=page.errors, screenshot=screenshot, stderr=stderr, requests=page.requests)


class _Chromium:
    """One Chromium process and the two pipes of its DevTools connection."""

    def __init__(self, proc: subprocess.Popen, to_browser: int, from_browser: int):
        self.proc = proc
        self.to_browser = to_browser
        self.from_browser = from_browser
        self.buffer = b""
        self.next_id = 0

    @classmethod
    def start(cls, chromium: str, profile: Path, width: int, height: int, stderr_file) -> _Chromium:
        """Start Chromium with everything it writes (profile, crash database) inside ``profile``."""
        commands_read, commands_write = os.pipe()
        events_read, events_write = os.pipe()
        # Chromium wants its pipe ends at fds 3 and 4 exactly. subprocess can keep fds open but not renumber them,
        # so a two-line Python renumbers them and execs Chromium (dash cannot name an fd above 9, so no shell).
        # Above 4 first, so that moving one end onto 3 cannot overwrite the other.
        child_read = fcntl.fcntl(commands_read, fcntl.F_DUPFD_CLOEXEC, 5)
        child_write = fcntl.fcntl(events_write, fcntl.F_DUPFD_CLOEXEC, 5)
        for fd in (commands_read, events_write):
            os.close(fd)
        argv = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile / 'user-data'}",
                f"--window-size={width},{height}", "about:blank"]
        try:
            proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _RENUMBER_FDS, str(child_read),
                                     str(child_write), *argv],
                                    stdin=subprocess.DEVNULL, stdout=stderr_file, stderr=stderr_file,
                                    pass_fds=(child_read, child_write),
                                    # its crash database goes to $XDG_CONFIG_HOME/chromium, whatever the profile
                                    env={**os.environ, "XDG_CONFIG_HOME": str(profile)},
                                    start_new_session=True)  # its own process group: one kill ends every child
        except OSError as exc:
            for fd in (commands_write, events_read):
                os.close(fd)
            raise BrowserError(f"cannot start {chromium}: {exc}") from None
        finally:
            os.close(child_read)
            os.close(child_write)
        return cls(proc, commands_write, events_read)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self.to_browser, data):]
        return self.next_id

    def receive(self, deadline: float) -> dict | None:
        """The next message, or None once ``deadline`` passes."""
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.from_browser], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise BrowserError(f"Chromium exited (status {self.proc.wait()})")
            self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(message)

    def close(self) -> None:
        """Ask Chromium to quit, so that it reaps its own children; kill its process group if it has not within
        :data:`QUIT_GRACE_S` (a page stuck in a loop does not stop the browser process from quitting)."""
        if self.proc.returncode is None:
            try:
                self.send("Browser.close")
                self.proc.wait(timeout=QUIT_GRACE_S)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.proc.returncode is None:
            # Not reaped yet, so its group id cannot have been reused: this kill reaches only its processes.
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        for fd in (self.to_browser, self.from_browser):
            try:
                os.close(fd)
            except OSError:
                pass  # closed by an earlier call


class _Page:
    """One tab: its commands, and the console errors and requests its events report."""

    def __init__(self, browser: _Chromium, url: str, deadline: float):
        self.browser = browser
        self.url = url
        self.deadline = deadline
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.loaded: set[str] = set()  # loader ids (one per navigation) whose load event has fired
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=None)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=None)["sessionId"]

    def call(self, method: str, params: dict | None = None, session: str | None | bool = True) -> dict:
        """Send a command and wait for its reply, handling the events that arrive meanwhile."""
        message_id = self.browser.send(method, params, self.session if session is True else session)
        while True:
            message = self._next(self.deadline)
            if message.get("id") == message_id:
                if "error" in message:
                    raise BrowserError(f"{method} failed: {message['error'].get('message')}")
                return message.get("result", {})

    def load(self, width: int, height: int, mobile: bool) -> None:
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.call(f"{domain}.enable")
        # Lifecycle events name their navigation, so the blank tab's own load cannot pass for the page's.
        self.call("Page.setLifecycleEventsEnabled", {"enabled": True})
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
        navigation = self.call("Page.navigate", {"url": self.url})
        if navigation.get("errorText"):
            raise BrowserError(f"cannot open the page: {navigation['errorText']}")
        while navigation["loaderId"] not in self.loaded:
            self._next(self.deadline)
        settle = min(time.monotonic() + SETTLE_S, self.deadline)
        while (message := self.browser.receive(settle)) is not None:
            self._handle(message)
        # An image that loaded but does not decode (a truncated data: URI) logs nothing; the DOM still knows.
        broken = self.call("Runtime.evaluate", {"expression": _BROKEN_IMAGES, "returnByValue": True})
        for src in broken["result"].get("value", []):
            if not any(src in error for error in self.errors):
                self.errors.append(f"Image does not decode: {src[:100]}")

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("Page.captureScreenshot", {"format": "png"})["data"])

    def _next(self, deadline: float) -> dict:
        message = self.browser.receive(deadline)
        if message is None:
            raise BrowserError("timed out")
        self._handle(message)
        return message

    def _handle(self, message: dict) -> None:
        method = message.get("method")
        params = message.get("params", {})
        if method == "Page.lifecycleEvent" and params["name"] == "load":
            self.loaded.add(params["loaderId"])
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            text = " ".join(_remote_text(arg) for arg in params.get("args", []))
            if params["type"] == "assert":
                text = f"Assertion failed: {text}" if text else "Assertion failed"
            frames = params.get("stackTrace", {}).get("callFrames", [])
            self.errors.append(text + (_where(frames[0].get("url"), frames[0].get("lineNumber")) if frames else ""))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            thrown = details.get("exception", {})
            description = thrown.get("description") or thrown.get("value")
            # text is "Uncaught" (or "Uncaught (in promise)"); the description's first line names the error
            text = details.get("text", "Uncaught")
            if description is not None:
                text = f"{text} {str(description).splitlines()[0]}"
            self.errors.append(text + _where(details.get("url"), details.get("lineNumber")))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry = params["entry"]
            self.errors.append(entry["text"] + (f" ({entry['url']})" if entry.get("url") else ""))
        elif method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if url.split("#")[0] != self.url and url.split(":")[0] not in ("data", "blob", "about"):
                self.requests.append(url)


def _remote_text(value: dict) -> str:
    if "value" in value:
        return value["value"] if isinstance(value["value"], str) else json.dumps(value["value"])
    return value.get("description") or value.get("unserializableValue") or value.get("type", "?")


def _where(url: str | None, line: int | None) -> str:
    """`` (file:///x.html:3)``; DevTools lines are 0-based, people count from 1."""
    if not url:
        return ""
    return f" ({url}:{line + 1})" if line is not None else f" ({url})"


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
