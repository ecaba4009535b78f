"""TextLineDataset: plain, gzip and CRLF lines, tf.data's interleave order, a checkpoint at
every position, errors naming the file."""

from __future__ import annotations

import gzip

import pytest

import datapipe as dp
from datapipe.io import TextLineDataset


def _write_lines(path, lines, gz=False, newline="\n"):
    data = "".join(line + newline for line in lines).encode()
    opener = gzip.open if gz else open
    with opener(path, "wb") as f:
        f.write(data)
    return path


# Orders recorded from tf.data.TextLineDataset(files, num_parallel_reads=k) (TF 2.21).
TF_ORDERS = [
    (2, "abc", "a0 b0 a1 a2 c0 c1"),
    (2, "abcd", "a0 b0 a1 a2 c0 c1 d0 d1 d2 d3"),
    (2, "badc", "b0 a0 a1 d0 a2 d1 d2 c0 d3 c1"),
    (3, "abc", "a0 b0 c0 a1 c1 a2"),
    (3, "badc", "b0 a0 d0 a1 d1 c0 a2 d2 c1 d3"),
]


def test_text_lines_plain_gzip_crlf(tmp_path):
    a = _write_lines(str(tmp_path / "a.txt"), ["one", "two", ""])
    b = _write_lines(str(tmp_path / "b.txt.gz"), ["x", "ü"], gz=True)
    c = _write_lines(str(tmp_path / "c.txt"), ["r1", "r2"], newline="\r\n")
    assert list(TextLineDataset([a, c])) == ["one", "two", "", "r1", "r2"]
    assert list(TextLineDataset(b, compression_type="GZIP")) == ["x", "ü"]
    assert list(TextLineDataset(a, encoding=None)) == [b"one", b"two", b""]
    with open(str(tmp_path / "noeol.txt"), "w") as f:
        f.write("last")
    assert list(TextLineDataset(str(tmp_path / "noeol.txt"))) == ["last"]


@pytest.mark.parametrize("k,names,want", TF_ORDERS)
def test_text_interleave_order_matches_tf(tmp_path, k, names, want):
    content = {
        "a": ["a0", "a1", "a2"],
        "b": ["b0"],
        "c": ["c0", "c1"],
        "d": ["d0", "d1", "d2", "d3"],
    }
    files = [_write_lines(str(tmp_path / n), content[n]) for n in names]
    assert list(TextLineDataset(files, num_parallel_reads=k)) == want.split()


def test_text_checkpoint_every_position(tmp_path):
    files = [
        _write_lines(str(tmp_path / f"{i}.gz"), [f"{i}-{j}" for j in range(i + 2)], gz=True)
        for i in range(3)
    ]
    for k in (1, 2):
        ds = TextLineDataset(files, compression_type="GZIP", num_parallel_reads=k)
        full = list(ds)
        assert len(full) == 2 + 3 + 4
        for cut in range(len(full) + 1):
            it = iter(ds)
            head = [next(it) for _ in range(cut)]
            state = it.get_state()
            it.close()
            it2 = iter(ds)
            it2.set_state(state)
            assert head + list(it2) == full


def test_text_errors_name_file(tmp_path):
    bad = str(tmp_path / "bad.txt")
    with open(bad, "wb") as f:
        f.write(b"ok\n\xff\xfe\n")
    with pytest.raises(dp.DatapipeError) as info:
        list(TextLineDataset(bad))
    assert bad in str(info.value) and "line 2 is not valid utf-8" in str(info.value)
    missing = str(tmp_path / "missing.txt")
    with pytest.raises(dp.PipelineError) as info:
        list(TextLineDataset(missing))
    assert info.value.path == missing
    with pytest.raises(ValueError, match="compression_type must be None, '', 'GZIP' or 'ZLIB'"):
        TextLineDataset(bad, compression_type="ZIP")
    notgz = _write_lines(str(tmp_path / "plain.txt"), ["a"])
    with pytest.raises(dp.DatapipeError, match="cannot read line 1") as info:
        list(TextLineDataset(notgz, compression_type="GZIP"))
    assert notgz in str(info.value)


@pytest.mark.parametrize("limit", [5, 6, 100_000])
def test_lines_at_the_max_file_bytes_bound(tmp_path, limit):
    """A line of exactly ``max_file_bytes()`` bytes (without its newline) is read; one byte
    more raises FileReadError naming the file and the line, after the lines before it;
    across the reader's 64 KiB blocks too (limit 100,000)."""
    ok = b"a" * limit
    p = tmp_path / "lines.txt"
    p.write_bytes(b"x\n" + ok + b"\n" + b"y\n" + ok + b"b\n" + b"z\n")
    before = dp.io.max_file_bytes()
    dp.io.set_max_file_bytes(limit)
    try:
        it = iter(TextLineDataset(str(p), encoding=None))
        assert [next(it) for _ in range(3)] == [b"x", ok, b"y"]
        with pytest.raises(
            dp.DatapipeError, match=rf"line 4 is longer than max_file_bytes\(\) \({limit} bytes"
        ) as e:
            next(it)
        assert "lines.txt" in str(e.value)
        # A last line without a newline, at the bound, is read too.
        p.write_bytes(b"x\n" + ok)
        assert list(TextLineDataset(str(p), encoding=None)) == [b"x", ok]
    finally:
        dp.io.set_max_file_bytes(before)


def test_line_reader_resumes_inside_long_lines(tmp_path):
    """Lines longer than a 64 KiB block, a checkpoint after each line: the same lines."""
    lines = [b"%d" % i * (30_000 * (i % 4)) for i in range(12)]
    p = tmp_path / "long.txt"
    p.write_bytes(b"".join(x + b"\r\n" for x in lines))
    ds = TextLineDataset(str(p), encoding=None)
    assert list(ds) == lines
    for k in range(len(lines)):
        it = iter(ds)
        for _ in range(k):
            next(it)
        state = it.state_dict()
        again = iter(ds)
        again.load_state_dict(state)
        assert list(again) == lines[k:]


def test_a_file_gone_at_resume_fails_at_its_place_and_the_rest_is_read(tmp_path):
    # The one multi-file reader (datapipe.io._record_files) restores a file that no longer
    # opens as an error at the next element, as it does for TFRecord; the other files
    # are still read. (TextLineDataset's own copy raised FileNotFoundError from
    # load_state_dict, and the checkpoint could not be used at all.)
    a = _write_lines(str(tmp_path / "a.txt"), ["a0", "a1", "a2"])
    b = _write_lines(str(tmp_path / "b.txt"), ["b0", "b1"])
    ds = TextLineDataset([a, b], num_parallel_reads=2)
    it = iter(ds)
    assert [next(it) for _ in range(3)] == ["a0", "b0", "a1"]
    state = it.state_dict()
    it.close()
    (tmp_path / "a.txt").unlink()
    it2 = iter(ds)
    it2.load_state_dict(state)
    with pytest.raises(dp.PipelineError, match=r"a\.txt.*cannot open") as err:
        next(it2)
    assert "text_line" in str(err.value)
    assert list(it2) == ["b1"]


def test_arguments_are_checked_by_the_shared_reader():
    with pytest.raises(TypeError, match="text_line: compression_type must be a str or None"):
        TextLineDataset("x.txt", compression_type=5)
    with pytest.raises(ValueError, match="text_line: compression_type must be None, '', 'GZIP'"):
        TextLineDataset("x.txt", compression_type="BZIP2")
    with pytest.raises(ValueError, match="text_line: filenames is empty"):
        TextLineDataset([])
    with pytest.raises(ValueError, match="num_parallel_reads"):
        TextLineDataset("x.txt", num_parallel_reads=0)
    assert TextLineDataset("x.txt", compression_type="gzip")._compression == "GZIP"
    assert TextLineDataset("x.txt", num_parallel_reads=dp.AUTOTUNE)._cycle == 2
