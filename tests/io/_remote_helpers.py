"""Servers on 127.0.0.1 for the remote-path tests (and the remote-read benchmark).

- ``FileServer``: an HTTP server on a free port of 127.0.0.1 serving a directory, with
  byte ranges, HEAD and directory listings (what fsspec's HTTP filesystem reads); it can
  fail chosen requests with a status (503 by default) and sleep before answering each
  (injected latency). Stopped by ``stop()`` (or the ``with`` block) within seconds.
- ``moto_s3``: moto's S3 in server mode on a free port of 127.0.0.1, read through s3fs,
  with dummy credentials and the endpoint set in the environment for the block.
- ``loopback_only``: while active, a socket connection to any address that is not on the
  loopback raises, so a test proves that no request leaves the machine.
"""

from __future__ import annotations

import contextlib
import email.utils
import ipaddress
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class _Handler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers and aiohttp use
    timeout = 10  # an idle keep-alive connection is closed after this (s)
    disable_nagle_algorithm = True  # headers and body go out at once (no 40 ms ACK stall)

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    def _serve(self, head: bool) -> None:
        srv: FileServer = self.server.owner  # type: ignore[attr-defined]
        n = srv._count()
        if srv.latency_s:
            time.sleep(srv.latency_s)
        if srv.fails(n):
            srv.failures += 1
            self.send_error(srv.fail_status)
            return
        path = self.translate_path(self.path)
        if os.path.isdir(path):
            return super().do_HEAD() if head else super().do_GET()
        if not os.path.isfile(path):
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        with open(path, "rb") as f:
            data = f.read()
        self._send(data, head)

    def _send(self, data: bytes, head: bool) -> None:
        size, status = len(data), HTTPStatus.OK
        m = _RANGE.match(self.headers.get("Range", "") or "")
        if m is not None:
            start = int(m.group(1))
            end = min(int(m.group(2)) + 1 if m.group(2) else size, size)
            if start >= size:
                self.send_error(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
                return
            data, status = data[start:end], HTTPStatus.PARTIAL_CONTENT
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Last-Modified", email.utils.formatdate(0, usegmt=True))
        if status == HTTPStatus.PARTIAL_CONTENT:
            self.send_header("Content-Range", f"bytes {start}-{start + len(data) - 1}/{size}")
        self.end_headers()
        if not head:
            self.wfile.write(data)


class FileServer:
    """An HTTP server for ``root`` on 127.0.0.1 (module docstring).

    Args:
        fail: request numbers (1-based, in arrival order) answered with ``fail_status``,
            or an int N: the first N requests.
        latency_s: seconds every request sleeps before it is answered.
    """

    def __init__(
        self,
        root: str,
        fail: int | set[int] = 0,
        latency_s: float = 0.0,
        fail_status: int = 503,
    ):
        self.root, self.latency_s, self.fail_status = root, latency_s, fail_status
        self._fail = set(range(1, fail + 1)) if isinstance(fail, int) else set(fail)
        self.requests = self.failures = 0
        self._lock = threading.Lock()
        handler = lambda *a, **kw: _Handler(*a, directory=root, **kw)  # noqa: E731
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="test-http"
        )

    def _count(self) -> int:
        with self._lock:
            self.requests += 1
            return self.requests

    def fails(self, n: int) -> bool:
        return n in self._fail

    def url(self, rel: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{rel}"

    def start(self) -> FileServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
        assert not self.thread.is_alive(), "the test HTTP server did not stop"

    def __enter__(self) -> FileServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _loopback(address) -> bool:
    host = address[0] if isinstance(address, tuple) else address
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def loopback_only() -> Iterator[list]:
    """Within the block, connecting a socket anywhere but the loopback raises
    ``AssertionError``; yields the list of addresses connected to (for assertions)."""
    seen: list = []
    original, original_ex = socket.socket.connect, socket.socket.connect_ex

    def check(address) -> None:
        seen.append(address)
        if isinstance(address, tuple) and not _loopback(address):
            raise AssertionError(f"a test tried to connect to {address!r}, off the loopback")

    def connect(self, address):
        check(address)
        return original(self, address)

    def connect_ex(self, address):
        check(address)
        return original_ex(self, address)

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
    try:
        yield seen
    finally:
        socket.socket.connect, socket.socket.connect_ex = original, original_ex


_S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",  # never ask 169.254.169.254 for credentials
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


@contextlib.contextmanager
def moto_s3() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 (a free port) for the block; yields its endpoint URL.

    s3fs reaches it through ``AWS_ENDPOINT_URL_S3`` with dummy credentials; the
    environment and s3fs's cached filesystems are restored afterwards."""
    import logging

    import s3fs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto logs every request

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {**_S3_ENV, "AWS_ENDPOINT_URL_S3": endpoint, "AWS_ENDPOINT_URL": endpoint}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        yield endpoint
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


@contextlib.contextmanager
def s3_bucket(name: str) -> Iterator:
    """An s3fs filesystem on moto (``moto_s3``) with the bucket ``name`` made, every
    connection on the loopback (``loopback_only``); the bucket is removed afterwards. For a
    module-scoped fixture: ``with s3_bucket("b") as fs: yield fs``."""
    import pytest

    pytest.importorskip("s3fs")
    pytest.importorskip("moto")
    with loopback_only() as seen, moto_s3():
        import s3fs

        fs = s3fs.S3FileSystem()
        fs.mkdir(name)
        yield fs
        fs.rm(name, recursive=True)
    assert seen and all(addr[0] == "127.0.0.1" for addr in seen)
