"""A small client of headless Chromium over the DevTools protocol, for tests/test_report_site.py: open a page, wait
for it to load, gather every console error, uncaught exception and failed request, run script in it and take a
screenshot. (Playwright's own browser download does not work offline; Debian's chromium and websocket-client do.)"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

#: Flags for a browser that reaches for nothing: no GPU, no sandbox (containers), no background traffic.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0", "--window-size=1280,1600"]


def chromium() -> str | None:
    return next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)),
                None)


class Browser:
    def __init__(self, executable: str, profile: Path):
        import websocket

        self.process = subprocess.Popen([executable, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url, deadline = None, time.monotonic() + 60
        while url is None:
            line = self.process.stderr.readline()
            if not line and (self.process.poll() is not None or time.monotonic() > deadline):
                raise RuntimeError(f"{executable} did not start a DevTools endpoint")
            if "DevTools listening on " in line:
                url = line.split("DevTools listening on ", 1)[1].strip()
        self.socket = websocket.create_connection(url, timeout=60)
        self.ids = itertools.count(1)
        self.events: list = []  # what the browser reported while a command ran

    def send(self, method: str, session: str | None = None, **params) -> dict:
        """Send a command and return its result; the events that arrive meanwhile go to ``self.events``."""
        call = next(self.ids)
        message = {"id": call, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        while True:
            reply = json.loads(self.socket.recv())
            if reply.get("id") == call:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def open(self, url: str, screenshot: Path, phone_width: int | None = None) -> dict:
        """Load ``url`` in a fresh tab; return its problems (console errors, exceptions, failed requests), the
        number of requests it made, and write a screenshot of the page's first 1280 x 1600 pixels. With
        ``phone_width``: as a phone of that many CSS pixels across shows it (its viewport meta honoured)."""
        self.events = []
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session)
        if phone_width:
            self.send("Emulation.setDeviceMetricsOverride", session, width=phone_width, height=844,
                      deviceScaleFactor=1, mobile=True)
        self.send("Page.navigate", session, url=url)
        deadline = time.monotonic() + 60
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not load in 60 s")
            self.events.append(json.loads(self.socket.recv()))
        time.sleep(0.5)  # a script's error after load still counts
        self.send("Runtime.evaluate", session, expression="1")
        problems = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                problems.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                problems.append(f"exception: {params['exceptionDetails'].get('text')} "
                                f"{params['exceptionDetails'].get('exception', {}).get('description', '')}")
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                problems.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
            elif method == "Network.loadingFailed":
                problems.append(f"failed request: {params.get('errorText')} {params.get('type')}")
        requests = [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]
        shot = self.send("Page.captureScreenshot", session, format="png")
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        self.session = session
        return {"problems": problems, "requests": requests}

    def evaluate(self, expression: str):
        """The value of ``expression`` in the page opened last."""
        result = self.send("Runtime.evaluate", self.session, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self):
        try:
            self.send("Browser.close")
        except Exception:  # the browser may close the socket before it answers
            pass
        self.socket.close()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, 9)
            self.process.wait()
