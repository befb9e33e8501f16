#!/usr/bin/env python3
"""Open an HTML file in headless Chromium and report what rendered, what the console said, and every
request the page made; optionally save a screenshot.

    python3 scripts/chromium_check.py PAGE.html [--screenshot OUT.png] [--width 1280] [--height 900]

Talks the DevTools protocol over a pipe (--remote-debugging-pipe: no port, no extra package) with a
fresh profile, networking features off. Prints one JSON object: {"console": [...errors and warnings],
"requests": [...URLs other than the page itself and data: URIs], "tables": [{id, width, height, rows}],
"images": [{alt, width, height, natural_width, natural_height, complete}], "page_width" and "viewport_width"
(the page scrolls sideways when the first is larger), "scrolling": [the elements that scroll sideways,
named by the id of the table inside]}.
"""

import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
    "--disable-dev-shm-usage",
    "--remote-debugging-pipe",
]
MEASURE = """JSON.stringify({
  tables: Array.from(document.querySelectorAll('table')).map(t => {
    const r = t.getBoundingClientRect();
    return {id: t.id, width: r.width, height: r.height, rows: t.rows.length};
  }),
  images: Array.from(document.images).map(i => {
    const r = i.getBoundingClientRect();
    return {alt: i.alt, width: r.width, height: r.height, natural_width: i.naturalWidth,
            natural_height: i.naturalHeight, complete: i.complete};
  }),
  page_height: document.documentElement.scrollHeight,
  page_width: document.documentElement.scrollWidth,
  viewport_width: document.documentElement.clientWidth,
  scrolling: Array.from(document.querySelectorAll('*')).filter(e => e.scrollWidth > e.clientWidth + 1
    && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX)).map(e => e.querySelector('table')?.id || e.tagName)
})"""


def chromium():
    """The Chromium binary: $EMBEVAL_CHROMIUM, else chromium or chromium-browser on PATH (None: none)."""
    for candidate in (os.environ.get("EMBEVAL_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def _as_fds_3_and_4(commands, replies):
    """In the child: the pipe ends where Chromium looks for them, inherited by it (every other pipe end is
    close-on-exec); copied high first so that neither clobbers the other."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (commands, replies)]
    os.dup2(high[0], 3)
    os.dup2(high[1], 4)


class Browser:
    """A headless Chromium driven over --remote-debugging-pipe (fd 3: commands in, fd 4: replies out)."""

    def __init__(self, binary, timeout=60.0):
        self.profile = tempfile.mkdtemp(prefix="embeval-chromium-")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        self.process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,
            preexec_fn=lambda: _as_fds_3_and_4(to_browser_r, from_browser_w),
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.timeout, self.buffer, self.next_id, self.events = timeout, b"", 0, []

    def send(self, method, params=None, session=None):
        """Send a command and wait for its reply (events that arrive meanwhile are kept in self.events)."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method):
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read())

    def _read(self):
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def close(self):
        try:
            self.send("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self.to_browser, self.from_browser):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)


def check(page, screenshot=None, width=1280, height=900, binary=None):
    """Load the page and return what rendered (see the module's docstring)."""
    page = Path(page).resolve()
    browser = Browser(binary or chromium())
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.send(f"{domain}.enable", session=session)
        browser.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        browser.send("Page.navigate", {"url": page.as_uri()}, session=session)
        browser.wait_for("Page.loadEventFired")
        measured = json.loads(
            browser.send("Runtime.evaluate", {"expression": MEASURE, "returnByValue": True}, session=session)["result"][
                "value"
            ]
        )
        if screenshot:
            shot = browser.send(
                "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False}, session=session
            )
            Path(screenshot).write_bytes(base64.b64decode(shot["data"]))
        events = list(browser.events)
    finally:
        browser.close()
    console = []
    for e in events:
        params = e.get("params", {})
        if e.get("method") == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
            console.append(
                f"console.{params['type']}: "
                + " ".join(str(a.get("value", a.get("description"))) for a in params.get("args", []))
            )
        elif e.get("method") == "Runtime.exceptionThrown":
            console.append("exception: " + json.dumps(params.get("exceptionDetails", {}))[:500])
        elif e.get("method") == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            console.append(f"log.{params['entry']['level']}: {params['entry']['text']}")
    requests = sorted(
        {
            e["params"]["request"]["url"]
            for e in events
            if e.get("method") == "Network.requestWillBeSent"
            and not e["params"]["request"]["url"].startswith("data:")
            and e["params"]["request"]["url"] != page.as_uri()
        }
    )
    return dict(measured, console=console, requests=requests)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page")
    parser.add_argument("--screenshot", default=None)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=900, help="The viewport (and screenshot) height.")
    args = parser.parse_args()
    if chromium() is None:
        sys.exit("chromium not found (apt-get install chromium, or set EMBEVAL_CHROMIUM)")
    print(json.dumps(check(args.page, args.screenshot, args.width, args.height), indent=1))


if __name__ == "__main__":
    main()
