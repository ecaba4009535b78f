"""``redact_url``: a URL's secrets out of every message and log record that names it.

A URL may carry credentials: user info (``https://user:password@host/...``,
``https://TOKEN@host/...``) and query parameters that authorise the request (S3/GCS
presigned URLs' ``X-Amz-Signature`` / ``X-Amz-Credential`` / ``X-Amz-Security-Token``,
Azure SAS ``sig``, ``access_token``, ``api_key``, ...). Errors end up in tracebacks,
logs and experiment trackers, so every message this library builds around a path passes
through ``redact_url`` first, and so do the exceptions of fsspec, aiohttp or botocore that
are chained to ours (``redacted_cause``) and the log records of fsspec and the
filesystems and HTTP clients under it (``redact_foreign_logs``: a filter on their loggers).

What is replaced by ``***``: the whole user info of every ``scheme://`` URL in the text,
and the value of every query parameter whose name contains (case-insensitively) ``sig``,
``token``, ``key``, ``secret``, ``pass``, ``pwd``, ``auth``, ``credential`` or
``session``. The scheme, host, port, path and the other parameters stay, so a message
still says which object failed. Text without ``://`` (every local path) is returned as is,
at the cost of one substring test.
"""

from __future__ import annotations

import re
from typing import Any

# Where a URL starts inside a message: a scheme and "://". Every start is redacted on its
# own, so a URL inside another one (a redirect parameter, two URLs joined by "," or "|")
# loses its secrets too.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
# The authority ends at the path, query or fragment, or where the URL itself ends in a
# message (whitespace, a double quote, an angle bracket). Not at "'" or "(": RFC 3986's
# user info may hold every sub-delim ("!$&'()*+,;="), ":" and (unescaped, in practice) "@".
_AUTHORITY_END = re.compile(r"[/?#\s\"<>\\]")
# The rest of the URL (path, query, fragment): up to whitespace, a quote or a bracket
# (messages quote paths with repr()).
_REST = re.compile(r"[^\s'\"<>()\[\]]*")
_SECRET_NAMES = ("sig", "token", "key", "secret", "pass", "pwd", "auth", "credential", "session")
_PARAM = re.compile(
    r"(^|[&;])([^=&;#]*(?:" + "|".join(_SECRET_NAMES) + r")[^=&;#]*=)([^&;#]*)", re.IGNORECASE
)
MASK = "***"


def _redact_query(rest: str) -> str:
    head, sep, query = rest.partition("?")
    if not sep:
        return rest
    query, hash_, fragment = query.partition("#")
    query = _PARAM.sub(lambda m: m.group(1) + m.group(2) + MASK, query)
    return head + sep + query + hash_ + fragment


def _redact_at(text: str, start: int, end: int) -> str:
    """``text`` with the URL whose scheme spans ``text[start:end]`` redacted: its user info
    (up to the last "@" of the authority) and its secret query values."""
    stop = _AUTHORITY_END.search(text, end)
    authority_end = stop.start() if stop else len(text)
    at = text.rfind("@", end, authority_end)
    if at >= 0:
        text = text[:end] + MASK + text[at:]
        authority_end -= at - end - len(MASK)
    rest = _REST.match(text, authority_end)
    assert rest is not None  # the pattern matches the empty string
    return text[: rest.start()] + _redact_query(rest.group(0)) + text[rest.end() :]


def redact_url(text: str) -> str:
    """``text`` (a URL, a path, or a message naming them) with every URL's user info and
    secret query values replaced by ``***`` (module docstring).

    Example:
        >>> redact_url("https://user:pw@host:8080/a/b.tar?X-Amz-Signature=abc&part=1")
        'https://***@host:8080/a/b.tar?X-Amz-Signature=***&part=1'
        >>> redact_url("cannot open 's3://bucket/x.tfrecord?token=t0k'")
        "cannot open 's3://bucket/x.tfrecord?token=***'"
        >>> redact_url("https://h/a?next=https://u:p(w@h2/b,https://o'k:x@h3/c")
        'https://h/a?next=https://***@h2/b,https://***@h3/c'
        >>> redact_url("/data/train-0001.tar")
        '/data/train-0001.tar'
    """
    if not isinstance(text, str) or "://" not in text:
        return text
    # Right to left: redacting a URL changes only the text after its scheme, so the starts
    # found before it stay where they are; an outer URL re-reads an inner one already masked
    # (masking is idempotent).
    for match in reversed(list(_SCHEME.finditer(text))):
        text = _redact_at(text, match.start(), match.end())
    return text


def _chain_leaks(e: BaseException | None) -> bool:
    seen = 0
    while e is not None and seen < 16:
        if redact_url(str(e)) != str(e):
            return True
        e, seen = e.__cause__ or (None if e.__suppress_context__ else e.__context__), seen + 1
    return False


def redacted_cause(e: BaseException) -> BaseException:
    """``e`` to chain (``raise ours from redacted_cause(e)``): ``e`` itself when no message
    in its chain of causes names a URL's secrets, else a chain of ``RedactedError`` copies
    with the messages redacted (so a traceback prints no secret)."""
    if not _chain_leaks(e):
        return e
    from datapipe.errors import RedactedError

    link: BaseException | None = e
    copies: list[BaseException] = []
    while link is not None and len(copies) < 16:
        kind = f"{type(link).__module__}.{type(link).__qualname__}"
        copies.append(RedactedError(f"{kind}: {redact_url(str(link))}"))
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)
    for outer, inner in zip(copies, copies[1:]):
        outer.__cause__ = inner
    return copies[0]


# fsspec and the filesystems under it log the URLs they request at DEBUG (with the user info
# and the query), and the tracebacks of failed requests, whose aiohttp messages hold the
# query. Their records pass through this filter on the loggers they create them with
# (a logger's own filters see only its own records: each logger is named).
_FOREIGN_LOGGERS = (
    "fsspec", "fsspec.http", "fsspec.cached", "fsspec.caching", "fsspec.asyn", "fsspec.local",
    "fsspec.reference", "fsspec.sftp", "webhdfs", "s3fs", "gcsfs", "adlfs", "aiohttp.client",
    "botocore.endpoint", "urllib3.connectionpool",
)  # fmt: skip


class RedactingFilter:
    """A ``logging`` filter that rewrites a record's message and traceback text through
    ``redact_url`` (it drops nothing)."""

    def filter(self, record: Any) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logging's to report
            return True
        shown = redact_url(message)
        if shown != message:
            record.msg, record.args = shown, None
        if record.exc_info and not record.exc_text:
            import traceback

            text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
            record.exc_text = redact_url(text)  # the formatter prints this text
        elif record.exc_text:
            record.exc_text = redact_url(record.exc_text)
        return True


_installed = False


def redact_foreign_logs() -> None:
    """Put ``RedactingFilter`` on the loggers of fsspec, its filesystems and their HTTP
    clients (once; called when datapipe first resolves a URL)."""
    global _installed
    if _installed:
        return
    import logging

    for name in _FOREIGN_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())
    _installed = True
