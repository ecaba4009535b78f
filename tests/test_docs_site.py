"""The documentation site renders in a real browser: headless Chromium opens the built pages.

For each page: the title, the navigation (every guide and the API reference), the page's
own content (an API entry on the reference page) and no console error, uncaught exception
or failed request. The pages are served over HTTP on 127.0.0.1 (Material's search runs in a
web worker, which file:// forbids). A screenshot of each page is kept as an artifact in
``$DATAPIPE_ARTIFACTS`` (default ``.ci/artifacts/``; ``.ci/run`` prints where).

The site is ``site/`` when it is newer than everything it is built from (``.ci/run``
builds it with ``mkdocs build --strict`` just before the tests), else it is built here.
Chromium is Debian's package (``apt-get install chromium``, which ``.ci/run`` does); where
it is missing the test is skipped with that reason, except under CI, where it fails.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import http.server
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from harness import built_site

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("DATAPIPE_ARTIFACTS", ROOT / ".ci" / "artifacts"))
GUIDES = [
    "Pipelines and performance",
    "AUTOTUNE and profiling",
    "Distributed training and resume",
    "Preprocessing layers and export",
    "Files and formats",
    "The service on Ray",
]
# (path, words the page's own content must contain, element id that must exist or None)
PAGES = [
    ("", "tf.data's input pipelines", None),
    ("guides/distributed/", "auto_shard_policy", None),
    ("reference/dataset/", "num_parallel_calls", "datapipe.Dataset.map"),
    ("reference/preprocessing/", "RandomFlip", "preprocessing.RandomFlip"),
]

pytest.importorskip("mkdocs", reason="mkdocs is in the dev extra")
aiohttp = pytest.importorskip("aiohttp", reason="aiohttp is in the dev extra")


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    reason = "no headless Chromium on PATH (Debian: apt-get install chromium; .ci/run does)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_site(tmp_path_factory)


@pytest.fixture(scope="module")
def server(site: Path) -> Any:
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, name="docs-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Any:
    profile = tmp_path_factory.mktemp("chromium")
    proc = subprocess.Popen(
        [_chromium(), "--headless=new", "--no-sandbox", "--disable-gpu",
         "--disable-dev-shm-usage", "--no-first-run", "--window-size=1280,900",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
         f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.is_file() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Chromium did not start (exit code {proc.poll()})")
            time.sleep(0.1)
        yield int(port_file.read_text().split()[0])
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


async def _visit(port: int, url: str, shot: Path) -> dict:
    """Open ``url`` in the browser's first tab over the DevTools protocol: title, nav
    labels, the main content's text, element ids, and every error the page reported."""
    async with aiohttp.ClientSession() as http_session:
        async with http_session.get(f"http://127.0.0.1:{port}/json/list") as resp:
            tab = next(t for t in await resp.json() if t["type"] == "page")
        async with http_session.ws_connect(tab["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            ids, errors, loaded = iter(range(1, 10**6)), [], asyncio.Event()
            waiting: dict[int, asyncio.Future] = {}

            async def reader() -> None:
                async for msg in ws:
                    m = json.loads(msg.data)
                    if "id" in m and m["id"] in waiting:
                        waiting.pop(m["id"]).set_result(m)
                    elif m.get("method") == "Page.loadEventFired":
                        loaded.set()
                    elif m.get("method") == "Runtime.exceptionThrown":
                        errors.append(m["params"]["exceptionDetails"].get("text", "exception"))
                    elif m.get("method") == "Runtime.consoleAPICalled":
                        if m["params"]["type"] in ("error", "assert"):
                            errors.append(f"console.error: {m['params']['args']}")
                    elif m.get("method") == "Log.entryAdded":
                        entry = m["params"]["entry"]
                        if entry["level"] == "error":
                            errors.append(f"{entry['source']}: {entry['text']} {entry.get('url')}")

            async def call(method: str, **params: Any) -> dict:
                i = next(ids)
                waiting[i] = asyncio.get_running_loop().create_future()
                await ws.send_str(json.dumps({"id": i, "method": method, "params": params}))
                reply = await asyncio.wait_for(waiting[i], 60)
                assert "error" not in reply, reply
                return reply["result"]

            task = asyncio.create_task(reader())
            try:
                for domain in ("Page", "Runtime", "Log"):
                    await call(f"{domain}.enable")
                await call("Page.navigate", url=url)
                await asyncio.wait_for(loaded.wait(), 60)
                await asyncio.sleep(1.0)  # late errors: scripts that run after load
                probe = """JSON.stringify({
                    title: document.title,
                    nav: [...document.querySelectorAll('nav.md-nav--primary .md-nav__link')]
                        .map(a => a.textContent.trim()),
                    content: document.querySelector('article.md-content__inner').innerText,
                    ids: [...document.querySelectorAll('[id]')].map(e => e.id),
                    width: document.querySelector('.md-grid').getBoundingClientRect().width,
                })"""
                got = await call("Runtime.evaluate", expression=probe, returnByValue=True)
                page = json.loads(got["result"]["value"])
                png = await call("Page.captureScreenshot", format="png")
                shot.write_bytes(base64.b64decode(png["data"]))
            finally:
                task.cancel()
            return {**page, "errors": errors}


@pytest.mark.parametrize(("path", "words", "element"), PAGES)
def test_page_renders_in_chromium(
    server: str, browser: int, path: str, words: str, element: str | None
) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"docs-{path.strip('/').replace('/', '-') or 'index'}.png"
    page = asyncio.run(asyncio.wait_for(_visit(browser, server + path, shot), 180))
    assert page["errors"] == [], page["errors"]
    assert page["title"].endswith("datapipe"), page["title"]
    nav = [n for n in page["nav"] if n]
    for label in ["Getting started", *GUIDES, "Dataset", "preprocessing"]:
        assert label in nav, (label, nav)
    assert words in page["content"], page["content"][:500]
    if element is not None:
        assert element in page["ids"], f"no API entry #{element}"
    assert page["width"] > 600  # the theme's CSS loaded (an unstyled page has no grid)
    assert shot.stat().st_size > 10_000  # a rendered page, not a blank image
