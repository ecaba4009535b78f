"""list_files, read_file, TextLineDataset, and the FileSource contract."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

import datapipe as dp
from datapipe.io import FileSource, TextLineDataset, list_files, read_file


def _touch(d, names):
    for n in names:
        p = os.path.join(d, n)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(n)
    return [os.path.join(d, n) for n in names]


def test_list_files_sorted_unshuffled_and_patterns(tmp_path):
    d = str(tmp_path)
    _touch(d, ["b.txt", "a.txt", "c.csv", "sub/d.txt"])
    ds = list_files(os.path.join(d, "*.txt"), shuffle=False)
    assert list(ds) == [os.path.join(d, "a.txt"), os.path.join(d, "b.txt")]
    assert ds.cardinality() == 2 and ds.element_spec == dp.TensorSpec((), object)
    both = list_files([os.path.join(d, "*.csv"), os.path.join(d, "a.*")], shuffle=False)
    assert [os.path.basename(p) for p in both] == ["a.txt", "c.csv"]
    rec = list_files(os.path.join(d, "**", "*.txt"), shuffle=False)
    assert [os.path.relpath(p, d) for p in rec] == ["a.txt", "b.txt", os.path.join("sub", "d.txt")]


def test_list_files_no_match_names_patterns(tmp_path):
    p1, p2 = str(tmp_path / "*.nope"), str(tmp_path / "x*")
    with pytest.raises(FileNotFoundError, match=r"no files match the pattern\(s\)") as info:
        list_files([p1, p2])
    assert repr(p1) in str(info.value) and repr(p2) in str(info.value)


def test_list_files_shuffle_seeded_per_epoch(tmp_path):
    files = _touch(str(tmp_path), [f"{i:02d}" for i in range(20)])
    ds = list_files(str(tmp_path / "*"), seed=3)  # shuffle=None means True (tf.data)
    e1, e2 = list(ds), list(ds)
    assert sorted(e1) == files and sorted(e2) == files
    assert e1 != files and e1 != e2  # reshuffled each epoch
    again = list_files(str(tmp_path / "*"), seed=3)
    assert list(again) == e1 and list(again) == e2  # same seed: same sequence of epochs


def test_file_source_contract(tmp_path):
    files = _touch(str(tmp_path), ["a", "b", "c", "d"])
    ds = list_files(str(tmp_path / "*"), shuffle=False)
    assert isinstance(ds, FileSource) and ds.files == tuple(files)
    part = ds.with_files(ds.files[1::2])
    assert list(part) == [files[1], files[3]] and part.cardinality() == 2
    assert list(ds) == files  # the original is untouched
    with pytest.raises(ValueError, match="with_files got 'zzz', which is not one of its files"):
        ds.with_files(["zzz"])


def test_list_files_checkpoint_resumes(tmp_path):
    _touch(str(tmp_path), [f"{i}" for i in range(7)])
    ds = list_files(str(tmp_path / "*"), seed=5)
    it = iter(ds)
    head = [next(it) for _ in range(3)]
    state = it.get_state()
    rest = list(it)
    it2 = iter(ds)
    it2.set_state(state)
    assert list(it2) == rest and len(head + rest) == 7


def test_read_file_in_map_and_errors(tmp_path):
    p = str(tmp_path / "x.bin")
    with open(p, "wb") as f:
        f.write(b"\x00\x01abc")
    assert read_file(p) == b"\x00\x01abc" and read_file(p.encode()) == b"\x00\x01abc"
    missing = str(tmp_path / "missing.bin")
    ds = dp.from_tensor_slices(np.array([p, missing], dtype=object)).map(read_file)
    it = iter(ds)
    assert next(it) == b"\x00\x01abc"
    with pytest.raises(dp.PipelineError) as info:
        next(it)
    assert info.value.path == missing and info.value.index == 1
    assert isinstance(info.value.cause, FileNotFoundError)


def _write_lines(path, lines, gz=False, newline="\n"):
    data = "".join(line + newline for line in lines).encode()
    opener = gzip.open if gz else open
    with opener(path, "wb") as f:
        f.write(data)
    return path


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


# Orders recorded from tf.data.TextLineDataset(files, num_parallel_reads=k) (TF 2.21).
TF_ORDERS = [
    (2, "abc", "a0 b0 a1 a2 c0 c1"),
    (2, "abcd", "a0 b0 a1 a2 c0 c1 d0 d1 d2 d3"),
    (2, "badc", "b0 a0 a1 d0 a2 d1 d2 c0 d3 c1"),
    (3, "abc", "a0 b0 c0 a1 c1 a2"),
    (3, "badc", "b0 a0 d0 a1 d1 c0 a2 d2 c1 d3"),
]


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
    with pytest.raises(ValueError, match="compression_type must be None, '' or 'GZIP'"):
        TextLineDataset(bad, compression_type="ZIP")
    notgz = _write_lines(str(tmp_path / "plain.txt"), ["a"])
    with pytest.raises(dp.DatapipeError, match="cannot read line 1") as info:
        list(TextLineDataset(notgz, compression_type="GZIP"))
    assert notgz in str(info.value)
