"""Issue 22: hostile shards and records. Every size a tar shard or a TFRecord file declares
is checked before it is read (``datapipe.io._bounded``): tar long-name / PAX headers,
members, record lengths, ``.npy`` shapes; the memory cases run in a subprocess under an
address-space limit, so the old behaviour (hundreds of MB for a small ``.tar.gz``) fails
at once instead of swapping. WebDataset enforces the field rules its docstring states;
``TarShardWriter`` refuses keys it cannot write faithfully. The same on S3 (moto on
127.0.0.1)."""

from __future__ import annotations

import gzip
import io
import os
import struct
import tarfile
import textwrap
import tracemalloc

import numpy as np
import pytest
from _remote_helpers import s3_bucket
from harness import run_under_memory_limit

import datapipe as dp
from datapipe.io import TarShardWriter, WebDataset, write_webdataset
from datapipe.io._bounded import MAX_HEADER_BYTES
from datapipe.io.tfrecord import masked_crc32c

MIB = 1 << 20
END = b"\0" * 1024


def header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> bytes:
    """One 512-byte tar header block (GNU format) declaring ``size`` bytes of ``kind``."""
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    return info.tobuf(format=tarfile.GNU_FORMAT)


def padded(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 512)


def write_long_name_targz(path: str, name_bytes: int) -> str:
    """A ``.tar.gz`` whose GNU long-name header really holds ``name_bytes`` bytes of name
    (gzip squeezes them ~1000x: a few hundred KB on disk), then one small member."""
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) as gz:
        gz.write(header("././@LongLink", name_bytes, tarfile.GNUTYPE_LONGNAME))
        chunk = b"k" * MIB
        for _ in range(name_bytes // MIB):
            gz.write(chunk)
        gz.write(b"\0" * (-name_bytes % 512))
        gz.write(header("x.txt", 2) + padded(b"hi") + END)
    return path


def hostile_run(body: str, headroom_mb: int = 96):
    out = run_under_memory_limit("import datapipe as dp", body, headroom_mb=headroom_mb)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_a_long_name_header_past_its_bound_is_refused_before_it_is_read(tmp_path):
    shard = write_long_name_targz(str(tmp_path / "evil.tar.gz"), 64 * MIB)
    assert os.path.getsize(shard) < 2 * MIB  # a small file declaring 64 MiB of header
    out = hostile_run(
        f"""
        dp.io.set_max_file_bytes(8 << 20)
        try:
            list(dp.WebDataset({shard!r}))
            print("no error")
        except Exception as e:
            print(type(e).__name__, e)
        """
    )
    # old: read the 64 MiB name whole (~3x that in memory: MemoryError here), then said
    # "holds no samples"
    assert out.startswith("PipelineError webdataset at element 0"), out
    assert "evil.tar.gz: a GNU long-name header" in out
    assert (
        f"a GNU long-name header (member '././@LongLink' at byte 0) declares {64 * MIB} "
        f"bytes, over the limit of {MAX_HEADER_BYTES} bytes"
    ) in out


@pytest.mark.parametrize(
    "kind, what",
    [
        (tarfile.GNUTYPE_LONGNAME, "a GNU long-name header"),
        (tarfile.GNUTYPE_LONGLINK, "a GNU long-link header"),
        (tarfile.XHDTYPE, "a PAX extended header"),
        (tarfile.XGLTYPE, "a PAX global header"),
    ],
)
def test_every_header_kind_is_bounded_and_names_the_shard_and_member(tmp_path, kind, what):
    good = write_webdataset([{"__key__": "a", "txt": "ok"}], str(tmp_path / "g-%d.tar"))[0]
    head = open(good, "rb").read()[:1024]  # sample "a": its header and data block
    p = tmp_path / "bad.tar"
    p.write_bytes(head + header("hdr", 5 * MIB, kind) + b"\0" * 512 + END)
    it = iter(WebDataset(str(p)))
    assert next(it)["txt"] == b"ok"  # the whole sample before the bad header is kept
    state = it.state_dict()
    with pytest.raises(dp.PipelineError) as info:
        next(it)
    msg = str(info.value)
    assert "bad.tar" in msg and f"{what} (member 'hdr' at byte 1024)" in msg
    assert f"declares {5 * MIB} bytes, over the limit of {MAX_HEADER_BYTES}" in msg
    assert list(it) == []  # the rest of the shard is skipped
    again = iter(WebDataset(str(p)))
    again.set_state(state)  # resumed after "a": the bad header again, then the end
    with pytest.raises(dp.PipelineError, match=f"{what} .member 'hdr' at byte 1024."):
        next(again)
    assert list(again) == []


def test_headers_within_the_bound_still_read(tmp_path):
    key = "k/" + "ü" * 3000  # a PAX path header of ~6 KB
    shards = write_webdataset([{"__key__": key, "txt": "long"}], str(tmp_path / "s-%d.tar"))
    assert [(s["__key__"], s["txt"]) for s in WebDataset(shards)] == [(key, b"long")]


def pax_record(keyword: str, value: str) -> bytes:
    """One PAX record, ``"<length> <keyword>=<value>\\n"`` (the length counts itself)."""
    body = f" {keyword}={value}\n".encode()
    n = len(body) + 1
    while len(str(n)) + len(body) != n:
        n += 1
    return str(n).encode() + body


def pax_header(records: bytes, kind: bytes = tarfile.XGLTYPE) -> bytes:
    return header("pax_global_header", len(records), kind) + padded(records)


def test_global_pax_headers_cannot_accumulate(tmp_path):
    """Issue 35 item 7: tarfile keeps every global PAX attribute for the rest of the stream.
    64 global headers of ~1 MiB (each under the header bound), one per sample: 64 MB held
    on main (384 of them took +384 MB from a 0.4 MB file); now the second is refused."""
    p = tmp_path / "globals.tar.gz"
    with gzip.open(p, "wb", compresslevel=1) as gz:
        for i in range(64):
            gz.write(pax_header(pax_record(f"k{i}", "v" * (MIB - 4096))))
            gz.write(header(f"s{i}.txt", 2) + padded(b"hi"))
        gz.write(END)
    assert os.path.getsize(p) < 8 * MIB
    dp.io.set_max_file_bytes(8 << 20)
    tracemalloc.start()
    try:
        it = iter(WebDataset(str(p)))
        assert next(it) == {"__key__": "s0", "__url__": str(p), "txt": b"hi"}
        with pytest.raises(dp.PipelineError) as info:
            next(it)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        dp.io.set_max_file_bytes(1 << 30)
    assert peak < 16 * MIB, peak  # main: ~67 MB, and the whole stream read
    second = 512 + (MIB - 4096 + 512) + 1024  # after global header 1 and sample 0
    assert (
        f"globals.tar.gz: a PAX global header (member 'pax_global_header' at byte {second}) "
        f"brings the global PAX attributes to {2 * (MIB - 4096) + 4} characters, over the "
        f"limit of {MAX_HEADER_BYTES} characters"
    ) in str(info.value)
    assert list(it) == []  # the rest of the shard is skipped


def test_global_pax_keywords_are_bounded_and_a_small_global_header_reads(tmp_path):
    many = b"".join(pax_record(f"k{i}", "v") for i in range(2000))  # ~20 KB, 2,000 keywords
    p = tmp_path / "keys.tar"
    p.write_bytes(pax_header(many) + header("a.txt", 2) + padded(b"hi") + END)
    with pytest.raises(dp.PipelineError) as info:
        list(WebDataset(str(p), fields=["txt"]))
    assert (
        "keys.tar: a PAX global header (member 'pax_global_header' at byte 0) brings the "
        "global PAX attributes to 2000 keywords, over the limit of 1024"
    ) in str(info.value)
    # A global header as git archive writes one (a comment) is read as before.
    q = tmp_path / "git.tar"
    with tarfile.open(q, "w", format=tarfile.PAX_FORMAT, pax_headers={"comment": "c0ffee"}) as t:
        info_ = tarfile.TarInfo("a.txt")
        info_.size = 2
        t.addfile(info_, io.BytesIO(b"hi"))
    assert list(WebDataset(str(q))) == [{"__key__": "a", "__url__": str(q), "txt": b"hi"}]


def header_chain(path, count: int, kind: bytes) -> str:
    """``count`` GNU long-name or PAX extended headers in a row, then one member."""
    with open(path, "wb") as f:
        for i in range(count):
            if kind == tarfile.XHDTYPE:
                f.write(pax_header(pax_record("path", f"k{i}.txt"), kind))
            else:
                name = f"k{i}.txt".encode() + b"\0"
                f.write(header("././@LongLink", len(name), kind) + padded(name))
        f.write(header("k.txt", 2) + padded(b"hi") + END)
    return str(path)


@pytest.mark.parametrize(
    "kind, what",
    [
        (tarfile.GNUTYPE_LONGNAME, "a GNU long-name header (member '././@LongLink' at byte"),
        (tarfile.XHDTYPE, "a PAX extended header (member 'pax_global_header' at byte"),
    ],
)
@pytest.mark.parametrize("fields", [None, ["txt"]])
def test_a_chain_of_headers_is_a_named_error_that_ignore_errors_skips(tmp_path, kind, what, fields):
    """Issue 35 item 7: 3,000 headers before one member recursed in tarfile until an
    unnamed RecursionError, and (fields=None) the shard after it was never read."""
    bad = header_chain(tmp_path / "chain.tar", 3000, kind)
    good = write_webdataset([{"__key__": "a", "txt": "ok"}], str(tmp_path / "g-%d.tar"))[0]
    with pytest.raises(dp.PipelineError) as info:
        list(WebDataset([bad, good], fields=fields))
    assert isinstance(info.value.__cause__, dp.FileReadError)
    assert (
        f"chain.tar: {what} {32 * 1024}) is header 33 of a chain before one member, over "
        "the limit of 32"
    ) in str(info.value)
    got = list(WebDataset([bad, good], fields=fields).ignore_errors())
    assert got == [{"__key__": "a", "__url__": good, "txt": b"ok"}]
    short = header_chain(tmp_path / "short.tar", 3, kind)  # a chain within the bound reads
    # (tarfile applies a chain's headers from the last to the first: the first name wins)
    assert list(WebDataset(short, fields=fields)) == [
        {"__key__": "k0", "__url__": short, "txt": b"hi"}
    ]


def test_a_gzip_amplified_member_is_refused_before_it_is_read(tmp_path):
    p = tmp_path / "zeros.tar.gz"
    with gzip.open(p, "wb") as gz:
        gz.write(header("a.bin", 64 * MIB))
        for _ in range(64):
            gz.write(b"\0" * MIB)
        gz.write(END)
    out = hostile_run(
        f"""
        dp.io.set_max_file_bytes(8 << 20)
        try:
            list(dp.WebDataset({str(p)!r}, fields=["bin"]))
        except Exception as e:
            print(type(e).__name__, e)
        """
    )
    assert "member 'a.bin' at byte 0 declares 67108864 bytes, over the limit of 8388608" in out


def test_an_npy_field_declaring_more_than_its_bytes_is_refused(tmp_path):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f8", "fortran_order": False, "shape": (16384, 16384)}
    )
    sample = {"__key__": "s", "npy": buf.getvalue() + b"\0" * 64}
    shards = write_webdataset([sample], str(tmp_path / "n-%d.tar"), encode=False)
    out = hostile_run(
        f"""
        try:
            list(dp.WebDataset({shards!r}, decode=True))
        except Exception as e:
            print(type(e).__name__, e)
        """
    )
    # old: np.load allocated the declared 2 GiB first (MemoryError under the limit)
    assert "sample 's', field 'npy': cannot decode" in out
    assert "declares an array of shape (16384, 16384) and dtype float64" in out


def tfrecord_frame(data: bytes, length: int | None = None) -> bytes:
    n = struct.pack("<Q", len(data) if length is None else length)
    crc = struct.pack("<I", masked_crc32c(n))
    return n + crc + data + struct.pack("<I", masked_crc32c(data))


@pytest.mark.parametrize("gz", [False, True])
def test_a_tfrecord_length_within_the_limit_but_not_in_the_file_allocates_nothing(tmp_path, gz):
    data = tfrecord_frame(b"one") + tfrecord_frame(b"", length=900 * MIB)[:12] + b"tail"
    p = tmp_path / ("r.tfrecord.gz" if gz else "r.tfrecord")
    p.write_bytes(gzip.compress(data) if gz else data)
    kind = "GZIP" if gz else None
    out = hostile_run(
        f"""
        it = iter(dp.TFRecordDataset({str(p)!r}, compression_type={kind!r}))
        print(next(it))
        try:
            next(it)
        except Exception as e:
            print(type(e).__name__, e)
        """
    )
    # old: f.read(900 MiB) allocated the whole length first (MemoryError here)
    assert out.splitlines()[0] == "b'one'"
    assert f"corrupted record 1 at byte offset 19: truncated (length {900 * MIB})" in out


def test_a_zlib_record_file_inflates_only_as_far_as_it_is_read(tmp_path):
    import zlib

    p = tmp_path / "z.tfrecord"
    p.write_bytes(zlib.compress(tfrecord_frame(b"\0" * (64 * MIB)), 9))  # ~64 KiB on disk
    out = hostile_run(
        f"""
        dp.io.set_max_file_bytes(8 << 20)
        try:
            list(dp.TFRecordDataset({str(p)!r}, compression_type="ZLIB"))
        except Exception as e:
            print(type(e).__name__, e)
        """
    )
    # old: the first 64 KiB of compressed bytes inflated to 64 MiB at once, then copied
    assert "corrupted record 0 at byte offset 0: its length field declares 67108864 bytes" in out


# ---- the field rules -----------------------------------------------------------------------
def test_fields_none_refuses_a_sample_with_a_field_the_first_lacked(tmp_path):
    samples = [{"__key__": "a", "cls": 1}, {"__key__": "b", "cls": 2, "jpg": b"\xff"},
               {"__key__": "c", "cls": 3}]  # fmt: skip
    shards = write_webdataset(samples, str(tmp_path / "f-%d.tar"))
    it = iter(WebDataset(shards))
    assert next(it)["cls"] == b"1"
    # old: sample 'b' came without its jpg field, silently
    with pytest.raises(dp.PipelineError) as info:
        next(it)
    msg = str(info.value)
    assert "f-0.tar" in msg
    assert "sample 'b' has the fields ['cls', 'jpg'], expected ['cls'] (the first sample's)" in msg
    assert "['jpg'] would be dropped" in msg
    assert next(it)["__key__"] == "c"
    # fields= reads a subset on purpose
    assert [s["cls"] for s in WebDataset(shards, fields=["cls"])] == [b"1", b"2", b"3"]


def test_a_missing_field_error_lists_the_samples_real_fields(tmp_path):
    samples = [{"__key__": "a", "txt": "x", "cls": 1}, {"__key__": "b", "cls": 2, "jpg": b"1"}]
    shards = write_webdataset(samples, str(tmp_path / "m-%d.tar"))
    it = iter(WebDataset(shards, fields=["txt"]))
    assert next(it)["txt"] == b"x"
    with pytest.raises(dp.PipelineError) as info:  # old: "has the fields []"
        next(it)
    assert "sample 'b' has the fields ['cls', 'jpg'], expected ['txt']: it lacks ['txt']" in str(
        info.value
    )


# ---- the writer refuses keys it cannot write faithfully -------------------------------------
@pytest.mark.parametrize(
    "key, why",
    [
        ("a\x00b", "holds a control character"),
        ("line\nbreak", "holds a control character"),
        ("../escape", "'..' path component"),
        ("a/../../b", "'..' path component"),
        ("/etc/passwd", "is absolute"),
        ("a//b", "empty, '.' or '..' path component"),
        ("./a", "empty, '.' or '..' path component"),
        ("a\\b", "holds '\\'"),
        ("bad\ud800", "not valid Unicode text"),
        ("x" * (MAX_HEADER_BYTES // 2), "bytes long; a reader refuses headers over"),
    ],
)
def test_the_writer_refuses_keys_it_cannot_write_faithfully(tmp_path, key, why):
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ValueError) as info:
        with TarShardWriter(str(out / "s-%d.tar")) as w:
            w.write({"__key__": "fine", "txt": "first"})
            w.write({"__key__": key, "txt": "t"})
    msg = str(info.value)
    assert msg.startswith("TarShardWriter: sample ") and why in msg
    assert repr(key[:200])[1:-1][:40] in msg  # names the key
    assert os.listdir(out) == []  # the shard in progress was discarded


def test_keys_the_writer_accepts_come_back_exactly_and_extract_inside(tmp_path):
    keys = ["plain", "dir/sub/ü データ", "spaces in name", "a-b_c~d", "/".join(["segment"] * 200)]
    shards = write_webdataset(
        [{"__key__": k, "txt": str(i)} for i, k in enumerate(keys)], str(tmp_path / "w-%d.tar")
    )
    assert [s["__key__"] for s in WebDataset(shards)] == keys
    target = tmp_path / "extract"
    with tarfile.open(shards[0]) as tar:
        tar.extractall(target, filter="data")  # the strict filter: nothing escapes
        names = tar.getnames()
    assert names == [f"{k}.txt" for k in keys]
    for k in keys:
        assert (target / f"{k}.txt").resolve().is_relative_to(target.resolve())


# ---- the same on S3 (moto on 127.0.0.1) -----------------------------------------------------
@pytest.fixture(scope="module")
def s3():
    with s3_bucket("hostile") as fs:
        yield fs


def test_hostile_shards_and_records_on_s3(s3, tmp_path):
    shard = write_long_name_targz(str(tmp_path / "evil.tar.gz"), 4 * MIB)
    s3.put_file(shard, "hostile/evil.tar.gz")
    with pytest.raises(dp.PipelineError) as info:
        list(WebDataset("s3://hostile/evil.tar.gz"))
    msg = str(info.value)
    assert "s3://hostile/evil.tar.gz: a GNU long-name header" in msg
    assert f"declares {4 * MIB} bytes, over the limit of {MAX_HEADER_BYTES}" in msg
    s3.pipe_file("hostile/r.tfrecord", tfrecord_frame(b"a") + tfrecord_frame(b"", 512 * MIB))
    it = iter(dp.TFRecordDataset("s3://hostile/r.tfrecord"))
    assert next(it) == b"a"
    with pytest.raises(dp.PipelineError, match=r"s3://hostile/r.tfrecord.*truncated \(length"):
        next(it)
    samples = [{"__key__": "a", "cls": 1}, {"__key__": "b", "cls": 2, "txt": "extra"}]
    write_webdataset(samples, "s3://hostile/f-%d.tar")
    it = iter(WebDataset("s3://hostile/f-0.tar"))
    next(it)
    with pytest.raises(dp.PipelineError, match=r"s3://hostile/f-0.tar.*\['txt'\] would be"):
        next(it)


def test_run_under_memory_limit_does_limit():
    """The harness itself: an allocation past the headroom fails with MemoryError."""
    out = run_under_memory_limit(
        "import numpy as np",
        textwrap.dedent(
            """
            try:
                np.ones(512 << 20, dtype=np.uint8)
                print("allocated")
            except MemoryError:
                print("MemoryError")
            """
        ),
        headroom_mb=64,
    )
    assert out.stdout.strip() == "MemoryError", out.stderr


def write_endless_line_gz(path: str, line_bytes: int) -> str:
    """A ``.gz`` text file: one short line, then one of ``line_bytes`` bytes with no end."""
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) as gz:
        gz.write(b"first\n")
        chunk = b"z" * MIB
        for _ in range(line_bytes // MIB):
            gz.write(chunk)
    return path


def test_an_endless_compressed_line_is_refused_at_the_bound(tmp_path):
    # 256 MiB of one line in ~250 KB of gzip: readlines() read it whole (MemoryError under
    # the cap); the line reader stops at max_file_bytes() (here 8 MiB), naming line 2.
    path = write_endless_line_gz(str(tmp_path / "bomb.txt.gz"), 256 * MIB)
    assert os.path.getsize(path) < MIB
    out = hostile_run(
        f"""
        dp.io.set_max_file_bytes(8 << 20)
        got = []
        try:
            for line in dp.TextLineDataset({path!r}, compression_type="GZIP"):
                got.append(line)
            print("no error")
        except Exception as e:
            print(type(e).__name__, got, e)
        """
    )
    assert out.startswith("PipelineError ['first'] text_line at element 1"), out
    assert "line 2 is longer than max_file_bytes() (8388608 bytes" in out
    assert "bomb.txt.gz" in out
