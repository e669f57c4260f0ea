"""The generated report in a real browser: headless Chromium driven over the DevTools protocol.

GIVEN the README example report saved to disk WHEN Chromium opens it from a file:// URL
THEN it makes no network request, logs no console error, renders every section and chart,
its screenshot is not blank, and it prints to a PDF of a sane number of pages with charts
and tables kept whole (``break-inside: avoid`` under print media).

Chromium is required (CI installs the Debian ``chromium`` package): the tests fail, never
skip, when it is missing.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import io
import json
import os
import queue
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

CHROMIUM = os.environ.get("ROOFLINE_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-default-apps", "--disable-extensions", "--mute-audio",
    "--hide-scrollbars", "--remote-debugging-pipe",
]  # fmt: skip
SECTIONS = ["summary", "inputs", "comparison", "charts", "sensitivity", "evidence", "reproduce"]


class DevTools:
    """Minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (fds 3 and 4)."""

    def __init__(self, profile_dir: Path) -> None:
        exe = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium") or shutil.which("chromium-browser")
        if not exe:
            pytest.fail(
                f"Chromium not found at {CHROMIUM} or on PATH. Install it (Debian: apt-get install -y chromium) "
                "or point ROOFLINE_CHROMIUM at the binary; the report's browser tests need it."
            )
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire_fds() -> None:  # child side: chromium reads commands on fd 3, writes replies on fd 4
            # park both ends above 10 first: a pipe end may itself be fd 3 or 4, and dup2(fd, fd) keeps CLOEXEC
            high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={profile_dir}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=wire_fds,
            close_fds=False,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self.events: list[dict[str, Any]] = []
        self._arrived = threading.Condition()  # notified on every event the reader appends
        self._replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._next = 0
        threading.Thread(target=self._read, daemon=True).start()
        self.stderr: list[str] = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self) -> None:
        buf = b""
        while chunk := os.read(self._from_child, 1 << 20):
            buf += chunk
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                data = json.loads(msg)
                if "id" in data:
                    self._replies.put(data)
                else:
                    with self._arrived:
                        self.events.append(data)
                        self._arrived.notify_all()

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.decode(errors="replace"))

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        """Send one command and wait (30 s at most) for its reply."""
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._replies.get(timeout=30)
            if reply["id"] == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def wait_event(self, method: str, timeout_s: float = 30.0) -> dict[str, Any]:
        """The first event named ``method``, waiting on the reader's notifications (``timeout_s``: a hang bound, not
        a speed check; no clock is read by the test)."""
        with self._arrived:
            found = self._arrived.wait_for(
                lambda: next((e for e in self.events if e.get("method") == method), None), timeout=timeout_s
            )
        if found is None:
            raise TimeoutError(f"no {method} within {timeout_s:g} s")
        return found

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, queue.Empty, OSError):
            self.send("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory, readme_report_file: Path) -> Iterator[dict[str, Any]]:
    """The README example report (built and saved once per session, tests/conftest.py) opened in Chromium,
    with screenshot and PDF taken."""
    tmp = tmp_path_factory.mktemp("browser")
    path = readme_report_file
    cdp = DevTools(tmp / "chromium-profile")
    try:
        target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            cdp.send(f"{domain}.enable", session=s)
        cdp.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 2000, "deviceScaleFactor": 1, "mobile": False},
            session=s,
        )
        cdp.events.clear()
        cdp.send("Page.navigate", {"url": path.resolve().as_uri()}, session=s)
        cdp.wait_event("Page.loadEventFired")

        def js(expr: str) -> Any:
            return cdp.send("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session=s)["result"][
                "value"
            ]

        dom = js(
            "({ids: [...document.querySelectorAll('section[id]')].map(e => e.id),"
            " charts: [...document.querySelectorAll('svg.chart')].map(e => e.getBoundingClientRect().width),"
            " rows: document.querySelectorAll('#comparison-table tbody tr').length,"
            " scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,"
            " title: document.title, scripts: document.scripts.length})"
        )
        # every <text> box of every chart, in page pixels: (chart index, text, left, top, right, bottom)
        text_boxes = js(
            "[...document.querySelectorAll('svg.chart')].flatMap((svg, i) => [...svg.querySelectorAll('text')]"
            ".filter(t => t.textContent.trim()).map(t => { const r = t.getBoundingClientRect();"
            " return [i, t.textContent.trim(), r.left, r.top, r.right, r.bottom]; }))"
        )
        png = base64.b64decode(cdp.send("Page.captureScreenshot", {"format": "png"}, session=s)["data"])
        cdp.send("Emulation.setEmulatedMedia", {"media": "print"}, session=s)
        breaks = js(
            "[...document.querySelectorAll('figure, table, pre, .card')].map(e => getComputedStyle(e).breakInside)"
        )
        svg_css = js("[...document.querySelectorAll('svg.chart')].map(e => getComputedStyle(e).maxWidth)")
        cdp.send("Emulation.setEmulatedMedia", {"media": ""}, session=s)
        pdf = base64.b64decode(
            cdp.send(
                "Page.printToPDF",
                {"printBackground": True, "displayHeaderFooter": False, "preferCSSPageSize": True},
                session=s,
            )["data"]
        )
        (tmp / "screenshot.png").write_bytes(png)
        (tmp / "report.pdf").write_bytes(pdf)
        yield {
            "dom": dom,
            "text_boxes": text_boxes,
            "png": png,
            "pdf": pdf,
            "breaks": breaks,
            "svg_css": svg_css,
            "events": list(cdp.events),
        }
    finally:
        cdp.close()


def test_no_network_request_is_attempted(loaded: dict[str, Any]) -> None:
    urls = [e["params"]["request"]["url"] for e in loaded["events"] if e.get("method") == "Network.requestWillBeSent"]
    assert urls, "the document load itself should be observed"
    remote = [u for u in urls if not u.startswith(("file:", "data:", "about:"))]
    assert remote == []


def test_no_console_error_or_exception(loaded: dict[str, Any]) -> None:
    bad = [
        e
        for e in loaded["events"]
        if e.get("method") == "Runtime.exceptionThrown"
        or (e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") in ("error", "assert"))
        or (e.get("method") == "Log.entryAdded" and e["params"]["entry"].get("level") == "error")
    ]
    assert bad == []


def test_every_section_and_chart_renders(loaded: dict[str, Any]) -> None:
    dom = loaded["dom"]
    assert dom["ids"] == SECTIONS
    # 2 latency-vs-load (the A100 meets no SLO at the bound: no chart), Pareto, memory, roofline; at page width
    assert len(dom["charts"]) == 5 and min(dom["charts"]) > 500
    assert dom["rows"] == 3
    assert dom["scripts"] == 0
    assert dom["scrollWidth"] <= dom["innerWidth"]  # nothing overflows horizontally at 1280 px
    assert "Llama-3.1-70B" in dom["title"]


def test_screenshot_is_not_blank(loaded: dict[str, Any]) -> None:
    import matplotlib.image as mpimg

    img = mpimg.imread(io.BytesIO(loaded["png"]), format="png")
    assert img.shape[0] == 2000 and img.shape[1] == 1280
    gray = img[..., :3].mean(axis=2)
    assert float(np.std(gray)) > 0.05
    assert float((gray < 0.9).mean()) > 0.02  # some ink: text, tables and charts


def test_prints_to_a_sane_pdf_with_whole_charts_and_tables(loaded: dict[str, Any]) -> None:
    pdf = loaded["pdf"]
    assert pdf.startswith(b"%PDF")
    pages = len(re.findall(rb"/Type\s*/Page(?!s)", pdf))
    assert 2 <= pages <= 20, pages
    assert set(loaded["breaks"]) == {"avoid"}
    assert set(loaded["svg_css"]) == {"100%"}


def test_no_two_chart_labels_overlap(loaded: dict[str, Any]) -> None:
    """Label bounding boxes as the browser lays them out: no two texts of a chart intersect (1 px tolerance)."""
    boxes = loaded["text_boxes"]
    assert len(boxes) > 50
    clashes = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            if a[0] != b[0]:
                continue
            w = min(a[4], b[4]) - max(a[2], b[2])
            h = min(a[5], b[5]) - max(a[3], b[3])
            if w > 1 and h > 1:
                clashes.append((a[1], b[1]))
    assert clashes == []
