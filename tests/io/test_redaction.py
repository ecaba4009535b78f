"""Issue 22: a URL's secrets (user info; signatures, tokens and keys in its query) never
reach a message, a chained cause or a log record: ``datapipe.io.redact_url`` is applied
wherever a URL is named. Every path-taking reader is tried against an HTTP server on
127.0.0.1 started here, with a URL that carries a password and a signature."""

from __future__ import annotations

import logging

import pytest
from _remote_helpers import FileServer

import datapipe as dp
from datapipe._redact import redacted_cause
from datapipe.io import redact_url

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")

PASSWORD, SIGNATURE = "pa55-w0rd", "SIG0xdeadbeef"


@pytest.mark.parametrize(
    "url, shown",
    [
        ("https://user:pa55@host/a.tar", "https://***@host/a.tar"),
        ("https://ghp_T0KEN@github.com/o/r.git", "https://***@github.com/o/r.git"),
        ("http://u:p@ss@host:81/x", "http://***@host:81/x"),  # an unescaped "@" in it
        (
            "https://b.s3.amazonaws.com/k.tar?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIA%2F1"
            "&X-Amz-Date=20260101&X-Amz-Expires=60&X-Amz-Signature=abc&X-Amz-Security-Token=t",
            "https://b.s3.amazonaws.com/k.tar?X-Amz-Algorithm=AWS4&X-Amz-Credential=***"
            "&X-Amz-Date=20260101&X-Amz-Expires=60&X-Amz-Signature=***&X-Amz-Security-Token=***",
        ),
        ("https://a.blob.core.windows.net/c/b?sv=2022&sp=r&sig=Zm9v%3D", "https://a.blob.core"
         ".windows.net/c/b?sv=2022&sp=r&sig=***"),
        ("gs://b/o?GoogleAccessId=x&Signature=s#frag", "gs://b/o?GoogleAccessId=x&Signature=***#frag"),
        ("https://h/p?access_token=a;api_key=b&APIKEY=c&page=2",
         "https://h/p?access_token=***;api_key=***&APIKEY=***&page=2"),
        ("simplecache::s3://k:s@bucket/x", "simplecache::s3://***@bucket/x"),
        ("/data/key=1/token/part-0.parquet", "/data/key=1/token/part-0.parquet"),  # local
        ("https://host/keys/token.txt", "https://host/keys/token.txt"),  # a path, not a query
    ],
)  # fmt: skip
def test_redact_url(url, shown):
    assert redact_url(url) == shown
    assert redact_url(f"cannot open {url!r}: gone") == f"cannot open {shown!r}: gone"


def test_redact_url_in_messages_with_several_urls():
    text = "copy 'https://a:b@x/1?sig=q' to 'https://c:d@y/2' failed"
    assert redact_url(text) == "copy 'https://***@x/1?sig=***' to 'https://***@y/2' failed"


# RFC 3986 3.2.1: userinfo = *( unreserved / pct-encoded / sub-delims / ":" ), and every
# sub-delim may stand in the user name or the password (issue 35 item 8).
@pytest.mark.parametrize("delim", list("!$&'()*+,;="))
def test_every_sub_delim_in_user_info_is_redacted(delim):
    for url in (f"https://us{delim}er:pw@host/a", f"https://user:p{delim}w@host/a",
                f"https://{delim}tok{delim}@host:81/a?b=1"):  # fmt: skip
        shown = "https://***@" + url.split("@", 1)[1]
        assert redact_url(url) == shown
        quoted = f"cannot open {url!r}: gone"  # repr() picks '"' when the URL holds "'"
        assert redact_url(quoted) == quoted.replace(url, shown)
        assert redact_url(f"see ({url}) now") == f"see ({shown}) now"


@pytest.mark.parametrize(
    "text, shown",
    [
        ("https://h1/a,https://u:p@h2/b", "https://h1/a,https://***@h2/b"),
        ("https://h1/a|s3://k:s@b/x", "https://h1/a|s3://***@b/x"),
        ("https://h1?x=1;https://u:p@h2", "https://h1?x=1;https://***@h2"),
        ("https://h/login?next=https://u:p@h2/b?token=t&page=2",
         "https://h/login?next=https://***@h2/b?token=***&page=2"),
        ("https://a:b@h1/a?sig=s&https://c:d@h2", "https://***@h1/a?sig=***&https://***@h2"),
    ],
)  # fmt: skip
def test_a_second_url_in_one_message_is_redacted(text, shown):
    assert redact_url(text) == shown
    assert redact_url(f"x {text} y {text}") == f"x {shown} y {shown}"


def test_a_foreign_chain_naming_a_secret_is_replaced_by_redacted_copies():
    try:
        try:
            raise ConnectionError("reset by https://u:pw@h/x?token=t")
        except ConnectionError as inner:
            raise RuntimeError("outer at https://u:pw@h/x") from inner
    except RuntimeError as e:
        chain = redacted_cause(e)
    assert isinstance(chain, dp.RedactedError)
    assert str(chain) == "builtins.RuntimeError: outer at https://***@h/x"
    assert str(chain.__cause__) == "builtins.ConnectionError: reset by https://***@h/x?token=***"
    clean = ValueError("nothing secret here")
    assert redacted_cause(clean) is clean


def _texts(e: BaseException) -> str:
    """Everything a traceback or a log shows of ``e`` and its chain (messages, reprs,
    ``filename``/``path`` attributes)."""
    out, seen = [], 0
    while e is not None and seen < 20:
        out += [repr(e), str(e), repr(getattr(e, "filename", None)), repr(getattr(e, "path", 0))]
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
        seen += 1
    return "\n".join(out)


def _assert_clean(text: str) -> None:
    assert PASSWORD not in text and SIGNATURE not in text, text


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    (root / "a.txt").write_bytes(b"not a tar, not a record\n")
    (root / "img").mkdir()
    with FileServer(str(root)) as srv:
        yield srv


def secret_url(srv: FileServer, rel: str, query: bool = True) -> str:
    q = f"?X-Amz-Signature={SIGNATURE}" if query else ""
    return f"http://reader:{PASSWORD}@127.0.0.1:{srv.port}/{rel}{q}"


READERS = {
    "read_file": lambda u: dp.io.read_file(u("missing.bin")),
    "load_image": lambda u: dp.io.load_image(u("missing.png")),
    "TextLineDataset": lambda u: list(dp.TextLineDataset(u("missing.txt"))),
    "TFRecordDataset": lambda u: list(dp.TFRecordDataset(u("missing.tfrecord"))),
    "TFRecordDataset corrupt": lambda u: list(dp.TFRecordDataset(u("a.txt"))),
    "WebDataset": lambda u: list(dp.WebDataset(u("missing.tar"))),
    "WebDataset not a tar": lambda u: list(dp.WebDataset(u("a.txt"))),
    "list_files": lambda u: dp.list_files(u("nothing-*.txt", query=False)),
    "ParquetDataset": lambda u: list(dp.ParquetDataset(u("missing.parquet"))),
    "from_csv": lambda u: list(dp.io.from_csv(u("missing.csv"))),
    "Dataset.load": lambda u: dp.Dataset.load(u("saved", query=False)),
    "load_state": lambda u: dp.load_state(u("missing.state")),
    "image_dataset_from_directory": lambda u: dp.image_dataset_from_directory(
        u("img", query=False), verbose=False
    ),
}


@pytest.mark.parametrize("name", sorted(READERS))
def test_no_reader_shows_a_urls_secrets(server, name, caplog):
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(Exception) as info:  # noqa: B017 - each reader raises its own
            READERS[name](lambda rel, query=True: secret_url(server, rel, query))
    text = _texts(info.value)
    _assert_clean(text)
    _assert_clean(caplog.text)
    assert f"http://***@127.0.0.1:{server.port}/" in text  # still names the object


def test_retries_and_their_log_records_show_no_secret(tmp_path, caplog):
    (tmp_path / "a.txt").write_bytes(b"x")
    dp.io.set_remote_retries(attempts=3, initial_backoff_s=0.001, max_backoff_s=0.01)
    try:
        with FileServer(str(tmp_path), fail=100) as srv:
            with caplog.at_level(logging.DEBUG, logger="datapipe.io"):
                with pytest.raises(OSError) as info:
                    dp.io.read_file(secret_url(srv, "a.txt"))
    finally:
        dp.io.set_remote_retries()
    assert "failed 3 times" in str(info.value)
    assert "transient" in caplog.text and "retrying" in caplog.text
    _assert_clean(_texts(info.value))
    _assert_clean(caplog.text)


def test_an_unknown_scheme_and_the_writer_show_no_secret():
    url = f"nosuch://user:{PASSWORD}@host/a.tar?token={SIGNATURE}"
    for call in (
        lambda: dp.io.read_file(url),
        lambda: list(dp.TextLineDataset(url)),
        lambda: dp.io.TarShardWriter(url.replace("a.tar", "s-%d.tar")).write({"__key__": "k",
                                                                               "txt": "t"}),
    ):  # fmt: skip
        with pytest.raises((ValueError, dp.PipelineError)) as info:
            call()
        text = _texts(info.value)
        _assert_clean(text)
        assert "nosuch://***@host/" in text and "which fsspec does not know" in text


def test_ignore_errors_logs_no_secret(server, caplog):
    good = f"http://127.0.0.1:{server.port}/a.txt"
    ds = dp.TextLineDataset([secret_url(server, "missing.txt"), good]).ignore_errors(
        log_warning=True
    )
    with caplog.at_level(logging.WARNING):
        assert list(ds) == ["not a tar, not a record"]
    assert "dropped an element" in caplog.text
    _assert_clean(caplog.text)
