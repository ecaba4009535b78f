"""Remote paths: URLs read and written through fsspec (``pip install "datapipe-torch[remote]"``).

Which strings are remote: a ``str`` that starts with a URL scheme followed by ``://``
(``s3://bucket/key``, ``https://host/a.txt``, ``memory://x``, ``gs://...``), or an fsspec
chain (``simplecache::s3://...``). Everything else (plain paths, ``os.PathLike``) is local
and goes through ``datapipe.io._safe_files`` exactly as before: no fsspec import, no extra
cost. ``file://`` URLs are resolved by fsspec and then read as local files (with the local
protections).

Reading an object: one metadata request (``fs.info``: the object must be a file, and its
reported size is checked against the size limit *before* any byte is read, the remote
counterpart of ``open_regular``'s ``fstat``), then byte-range reads (``fs.cat_file(path,
start, end)``). Streaming readers (text, TFRecord, tar shards, Parquet/Arrow/CSV) get a
seekable ``io.BufferedReader`` over those range reads, ``BLOCK_SIZE`` bytes per request;
whole-file reads (``read_file``, image decoding, ``load_state``) fetch the object in one
request and check its length again.

Retries (``set_remote_retries``): every request is retried, with exponential backoff and
jitter, when it fails with a *transient* error (``is_transient``): a connection reset,
refused or dropped, a timeout, HTTP 408 / 425 / 429 / 500 / 502 / 503 / 504, S3's
``SlowDown``/``ServiceUnavailable``/``InternalError`` (s3fs maps them to ``OSError`` with
``EBUSY``/``EREMOTEIO``), a truncated response body. A missing object
(``FileNotFoundError``), a denied one (``PermissionError``), a bad request or URL is not
retried. A range read is retried alone, at its own offset, so a long stream survives a
reset connection without starting over. After the last attempt the error raised is an
``OSError`` (``EIO``) that names the URL, the attempts and the last error.

Errors name the URL: a missing object raises ``FileNotFoundError`` with ``filename`` set
to the URL; an unknown scheme raises ``ValueError`` naming the URL; a scheme whose
fsspec implementation is not installed raises ``ImportError`` naming the URL and the
package (fsspec's own message). Every URL in an error, in the exceptions chained to it and
in a log record is redacted (``datapipe.io.redact_url``: user info and secret query
values become ``***``).
"""

from __future__ import annotations

import errno
import io
import logging
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, cast

from datapipe._redact import redact_foreign_logs, redact_url, redacted_cause
from datapipe.errors import FileReadError

logger = logging.getLogger("datapipe.io")

BLOCK_SIZE = 1 << 20  # bytes per range request of a streaming reader

# scheme "://" or a chain "scheme::...://" (fsspec's URL chaining)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*(?:://|::.*://)")
_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_TRANSIENT_ERRNO = frozenset(
    getattr(errno, name)
    for name in (
        "EAGAIN",
        "EBUSY",
        "ECONNABORTED",
        "ECONNREFUSED",
        "ECONNRESET",
        "EPIPE",
        "ETIMEDOUT",
        "EREMOTEIO",
    )
    if hasattr(errno, name)
)
# Exception classes of aiohttp / botocore / urllib3 / fsspec that are transient by nature,
# matched by name so that none of those packages is imported here.
_TRANSIENT_NAMES = frozenset(
    {
        "ClientConnectionError",
        "ClientConnectorError",
        "ClientOSError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
        "ClientPayloadError",
        "FSTimeoutError",
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ResponseStreamingError",
        "IncompleteRead",
        "ProtocolError",
    }
)
_S3_TRANSIENT_CODES = frozenset(
    {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling"}
)


def is_url(path: Any) -> bool:
    """True for a ``str`` that names an fsspec URL (any scheme, ``file://`` included)."""
    return isinstance(path, str) and "://" in path and _URL.match(path) is not None


def is_remote(path: Any) -> bool:
    """True for a URL that is not a local ``file://`` one (see the module docstring)."""
    return is_url(path) and not path.startswith(("file://", "local://"))


def localize(path: str) -> str:
    """``path`` with a ``file://`` URL turned into the local path it names (so that local
    files keep the local code and its protections); any other string unchanged."""
    if path.startswith(("file://", "local://")):
        return filesystem(path)[1]
    return path


# ---- retry policy --------------------------------------------------------------------------
@dataclass(frozen=True)
class RetryPolicy:
    """How remote requests are retried on transient errors.

    Attributes:
        attempts: tries per request, the first included (1: no retry).
        initial_backoff_s: wait before the second try, in seconds; each later wait is
            ``multiplier`` times the previous one, at most ``max_backoff_s``, and drawn
            uniformly from [50%, 100%] of that (jitter, so parallel readers do not retry
            in lock-step).
    """

    attempts: int = 5
    initial_backoff_s: float = 0.05
    max_backoff_s: float = 2.0
    multiplier: float = 2.0

    def delays(self) -> list[float]:
        """The nominal waits between tries, before jitter (``attempts - 1`` of them)."""
        out, d = [], self.initial_backoff_s
        for _ in range(self.attempts - 1):
            out.append(min(d, self.max_backoff_s))
            d *= self.multiplier
        return out


_policy = RetryPolicy()
_jitter = random.Random()
_jitter_lock = threading.Lock()


def remote_retries() -> RetryPolicy:
    """The retry policy of remote reads (see ``set_remote_retries``)."""
    return _policy


def set_remote_retries(
    attempts: int = 5,
    initial_backoff_s: float = 0.05,
    max_backoff_s: float = 2.0,
    multiplier: float = 2.0,
) -> None:
    """Set how remote requests are retried on transient errors (module docstring).

    The defaults (5 tries, waits of ~0.05, 0.1, 0.2, 0.4 s) give up after ~0.75 s of
    waiting; an object store that throttles for longer needs more attempts.

    Raises:
        TypeError / ValueError: ``attempts`` is not an int >= 1, or a time is negative
            or ``multiplier`` < 1.
    """
    global _policy
    from datapipe._validate import check_int

    attempts = check_int("set_remote_retries", "attempts", attempts, minimum=1)
    times = {"initial_backoff_s": initial_backoff_s, "max_backoff_s": max_backoff_s}
    for name, v in {**times, "multiplier": multiplier}.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"set_remote_retries: {name} must be a number, got {v!r}")
    if min(times.values()) < 0 or multiplier < 1:
        raise ValueError(
            "set_remote_retries: backoff times must be >= 0 and multiplier >= 1, got "
            f"{initial_backoff_s}, {max_backoff_s}, {multiplier}"
        )
    _policy = RetryPolicy(attempts, float(initial_backoff_s), float(max_backoff_s), multiplier)


def _status(e: BaseException) -> int | None:
    status = getattr(e, "status", None)  # aiohttp.ClientResponseError
    if isinstance(status, int):
        return status
    response = getattr(e, "response", None)  # botocore.exceptions.ClientError
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        if code in _S3_TRANSIENT_CODES:
            return 503
        meta = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return meta if isinstance(meta, int) else None
    return None


def is_transient(e: BaseException) -> bool:
    """Whether a failed request is worth retrying (module docstring lists the cases).

    The ``__cause__`` chain is searched too: fsspec's HTTP ``info`` turns every failure of
    its HEAD and GET requests into ``FileNotFoundError`` and chains the real one.
    """
    seen, cur = 0, cast(BaseException | None, e)
    while cur is not None and seen < 8:
        if _transient_one(cur):
            return True
        cur, seen = cur.__cause__, seen + 1
    return False


def _transient_one(e: BaseException) -> bool:
    if isinstance(e, (FileNotFoundError, PermissionError, IsADirectoryError)):
        return False
    if isinstance(e, (ConnectionError, TimeoutError)):
        return True
    if any(c.__name__ in _TRANSIENT_NAMES for c in type(e).__mro__):
        return True
    status = _status(e)
    if status is not None:
        return status in _TRANSIENT_STATUS
    return isinstance(e, OSError) and e.errno in _TRANSIENT_ERRNO


def _sleep_before(attempt: int, policy: RetryPolicy) -> None:
    nominal = policy.delays()[attempt - 1]
    with _jitter_lock:
        f = _jitter.uniform(0.5, 1.0)
    time.sleep(nominal * f)


def with_retries(fn: Callable[[], Any], url: str, what: str) -> Any:
    """``fn()``, retried on transient errors under the current policy.

    Raises:
        OSError (EIO): still failing after the last attempt (names the URL, the attempts
            and the last error, which is chained).
        the error of ``fn``, named by URL (``named``), when it is not transient.
    """
    policy, start = _policy, time.monotonic()
    for attempt in range(1, policy.attempts + 1):
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - classified below
            if not is_transient(e):
                located = named(e, url)
                if located is e:
                    raise
                raise located from redacted_cause(e)
            if attempt == policy.attempts:
                spent = time.monotonic() - start
                raise OSError(
                    errno.EIO,
                    redact_url(
                        f"{what} failed {attempt} times in {spent:.2f} s with transient "
                        f"errors (last: {_describe(e)}); datapipe.io.set_remote_retries "
                        "allows more attempts"
                    ),
                    redact_url(url),
                ) from redacted_cause(e)
            logger.debug(
                "%s %s: transient %s (attempt %d); retrying",
                what,
                redact_url(url),
                redact_url(str(e)),
                attempt,
            )
            _sleep_before(attempt, policy)
    raise AssertionError("unreachable")


def _describe(e: BaseException) -> str:
    """The transient error behind ``e`` (fsspec's HTTP ``info`` hides it as a cause)."""
    link: BaseException | None = e
    while link is not None and not _transient_one(link):
        link = link.__cause__
    shown = link or e
    return f"{type(shown).__name__}: {shown}"


def named(e: BaseException, url: str) -> BaseException:
    """``e`` as an error whose message names ``url``, redacted (the same class for the
    OSError family, with ``filename`` set; ``FileReadError`` otherwise)."""
    shown = redact_url(url)
    if isinstance(e, FileReadError):
        return e  # redacts itself
    if isinstance(e, OSError) and e.filename == shown and not _chain_names_secrets(e):
        return e
    if isinstance(e, FileNotFoundError):
        return FileNotFoundError(errno.ENOENT, "no such object (or not readable)", shown)
    if isinstance(e, OSError):
        msg = redact_url(e.strerror or str(e) or type(e).__name__)
        cls = type(e) if type(e).__module__ == "builtins" else OSError  # known constructor
        return cls(e.errno or errno.EIO, msg, shown)
    return FileReadError(f"{type(e).__name__}: {e}", url)


def _chain_names_secrets(e: BaseException) -> bool:
    return redacted_cause(e) is not e


# ---- the filesystem of a URL ----------------------------------------------------------------
def filesystem(url: str, op: str = "datapipe") -> tuple[Any, str]:
    """``(fsspec filesystem, path within it)`` for ``url``.

    Raises:
        ImportError: fsspec (``pip install "datapipe-torch[remote]"``) or the scheme's
            implementation (e.g. s3fs, gcsfs) is not installed; names the URL.
        ValueError: the URL's scheme is unknown to fsspec; names the URL.
    """
    shown = redact_url(url)
    redact_foreign_logs()
    try:
        from fsspec.core import url_to_fs
    except ImportError as e:
        raise ImportError(
            f'{op}: reading {shown!r} needs fsspec: pip install "datapipe-torch[remote]"'
        ) from e
    try:
        return url_to_fs(url)
    except ImportError as e:
        raise ImportError(redact_url(f"{op}: {shown!r}: {e}")) from redacted_cause(e)
    except ValueError as e:
        scheme = url.split("://", 1)[0].split("::")[0]
        raise ValueError(
            redact_url(
                f"{op}: {shown!r} has the URL scheme {scheme!r}, which fsspec does not know "
                f"({e}); use a local path or a URL fsspec reads (s3://, gs://, http(s)://, "
                "memory://, ...)"
            )
        ) from redacted_cause(e)


def _local(fs: Any) -> bool:
    return "file" in _protocols(fs)


def _protocols(fs: Any) -> tuple:
    p = fs.protocol
    return (p,) if isinstance(p, str) else tuple(p)


def info(url: str, op: str = "datapipe") -> dict:
    """fsspec's ``info`` of ``url`` (retried): ``{"type": "file"|"directory", "size": ...}``.

    Raises:
        FileNotFoundError: no such object; ``filename`` is the URL.
    """
    fs, path = filesystem(url, op)
    return with_retries(lambda: fs.info(path), url, "info")


def _too_large(size: int, limit: int) -> str:
    from datapipe.io._safe_files import _too_large as message

    return message(size, limit)


def checked_info(url: str, max_bytes: int | None, op: str = "datapipe") -> tuple[Any, str, dict]:
    """``(fs, path, info)`` of an object that may be read: a file of at most ``max_bytes``
    (checked from its reported size, before any byte is read).

    Raises:
        FileNotFoundError: no such object (names the URL).
        FileReadError: a directory, or larger than ``max_bytes`` (names the URL).
    """
    fs, path = filesystem(url, op)
    meta = with_retries(lambda: fs.info(path), url, "info")
    if meta.get("type") != "file":
        kind = meta.get("type") or "not a file"
        raise FileReadError(f"a {kind}, not a file; only files are read", url)
    size = meta.get("size")
    if isinstance(max_bytes, int) and isinstance(size, int) and size > max_bytes:
        raise FileReadError(_too_large(size, max_bytes), url)
    return fs, path, meta


def read_bytes(url: str, max_bytes: int | None) -> bytes:
    """The whole object at ``url``, at most ``max_bytes`` (None: no limit); refused before
    reading when its reported size is over the limit, and after when it delivered more.
    ``file://`` URLs read as local files (``read_regular_file``: regular files only)."""
    fs, path = filesystem(url)
    if _local(fs):
        from datapipe.io._safe_files import read_regular_file

        return read_regular_file(path, max_bytes)
    fs, path, meta = checked_info(url, max_bytes)
    size = meta.get("size")
    if isinstance(size, int) and size > 0:
        # The size is known: one ranged GET (s3fs's whole-object cat_file asks for the
        # size again first: 3 requests per object instead of 2; bench_s3_scale.py).
        data = with_retries(lambda: fs.cat_file(path, start=0, end=size), url, "read")
    else:
        data = with_retries(lambda: fs.cat_file(path), url, "read")
    if isinstance(max_bytes, int) and len(data) > max_bytes:
        raise FileReadError(_too_large(len(data), max_bytes), url)
    return data


def open_input(url: str, max_bytes: int | None = None, block_size: int | None = None) -> BinaryIO:
    """``url`` opened for binary reading: a seekable buffered reader whose reads are
    retried range requests (module docstring). ``file://`` URLs open as local files
    (``open_regular``: regular files only)."""
    fs, path = filesystem(url)
    if _local(fs):
        from datapipe.io._safe_files import open_regular

        return open_regular(path, max_bytes)
    fs, path, meta = checked_info(url, max_bytes)
    size = meta.get("size")
    if not isinstance(size, int):  # a server that does not say: read it whole, bounded
        return io.BytesIO(read_bytes(url, max_bytes))
    raw = RangeReader(fs, path, size, url)
    return io.BufferedReader(raw, buffer_size=block_size or BLOCK_SIZE)


class RangeReader(io.RawIOBase):
    """A read-only, seekable raw file over an object's byte ranges; every read is one
    retried ``cat_file(path, start, end)`` (stateless, so a retry resumes at its offset)."""

    def __init__(self, fs: Any, path: str, size: int, url: str):
        super().__init__()
        self.fs, self.path, self.size, self.url = fs, path, size, url
        self.pos = 0

    @property
    def name(self) -> str:  # readers' messages may show a file's name
        return redact_url(self.url)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise OSError(errno.EINVAL, "negative seek position", redact_url(self.url))
        self.pos = base + offset
        return self.pos

    def readinto(self, buf: Any) -> int:
        n = min(len(buf), self.size - self.pos)
        if n <= 0:
            return 0
        start, end = self.pos, self.pos + n
        # keywords: s3fs's cat_file takes version_id as its second positional argument
        read = lambda: self.fs.cat_file(self.path, start=start, end=end)  # noqa: E731
        data = with_retries(read, self.url, "read")
        if len(data) > n:  # a server that ignored the Range header sent the whole object
            data = data[start:end]
        buf[: len(data)] = data
        self.pos += len(data)
        return len(data)


# ---- listing and writing ---------------------------------------------------------------------
def glob(pattern: str, op: str) -> list[str]:
    """The files (not directories) matching ``pattern``, as URLs, sorted."""
    fs, path = filesystem(pattern, op)
    found = with_retries(lambda: fs.glob(path, detail=True), pattern, "glob")
    return sorted(fs.unstrip_protocol(p) for p, m in found.items() if m.get("type") == "file")


def find(url: str, op: str) -> list[tuple[str, str]]:
    """``(relative path, url)`` of every file below the directory ``url``, sorted."""
    fs, path = filesystem(url, op)
    found = with_retries(lambda: fs.find(path, withdirs=False, detail=True), url, "list")
    root = path.rstrip("/") + "/"
    out = []
    for p, m in found.items():
        if m.get("type") == "file" and p.startswith(root):
            out.append((p[len(root) :], fs.unstrip_protocol(p)))
    return sorted(out)


def subdirectories(url: str, op: str) -> list[str]:
    """Names of the directories directly below the directory ``url``, sorted."""
    fs, path = filesystem(url, op)
    entries = with_retries(lambda: fs.ls(path, detail=True), url, "list")
    names = [e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e["type"] == "directory"]
    return sorted(names)


def isdir(url: str) -> bool:
    fs, path = filesystem(url)
    return bool(with_retries(lambda: fs.isdir(path), url, "isdir"))


def exists(url: str) -> bool:
    fs, path = filesystem(url)
    return bool(with_retries(lambda: fs.exists(path), url, "exists"))


def move(src: str, dst: str) -> None:
    """Move the object ``src`` to ``dst`` (an object store copies, then deletes)."""
    fs, a = filesystem(src)
    b = filesystem(dst)[1]
    with_retries(lambda: fs.mv(a, b), src, "move")


def write_bytes(url: str, data: bytes) -> None:
    """Store ``data`` as the object ``url`` (one request, retried: a PUT is idempotent)."""
    fs, path = filesystem(url)
    with_retries(lambda: fs.pipe_file(path, data), url, "write")


def open_output(url: str) -> BinaryIO:
    """``url`` opened for binary writing (an object store stores it on ``close``)."""
    fs, path = filesystem(url)
    parent = path.rsplit("/", 1)[0]
    try:
        if parent and parent != path:
            fs.makedirs(parent, exist_ok=True)
        return fs.open(path, "wb")
    except Exception as e:  # noqa: BLE001 - named by its URL, redacted
        located = named(e, url)
        if located is e:
            raise
        raise located from redacted_cause(e)


def remove(url: str, recursive: bool = False) -> None:
    """Delete ``url`` (a directory with ``recursive``); a missing one is not an error."""
    fs, path = filesystem(url)
    try:
        with_retries(lambda: fs.rm(path, recursive=recursive), url, "delete")
    except FileNotFoundError:
        pass


def join(url: str, *names: str) -> str:
    """``url`` with ``names`` appended as path components (``/``-separated)."""
    return "/".join([url.rstrip("/"), *names])


def parent(url: str) -> str:
    """The URL of the directory that holds ``url``."""
    return url.rstrip("/").rsplit("/", 1)[0]


def basename(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]
