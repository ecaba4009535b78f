"""TFRecordDataset: records and CRCs against tf.data's TFRecordDataset on the same files
(tensorflow writes the reference files), corrupt files, GZIP, checkpoints, FILE sharding,
elastic resume and interleave.

TensorFlow's side (the files it writes, what tf.data reads from a file) comes through
``ref`` (tests/differential.py): read from tests/goldens/ in the default run, computed by
TensorFlow under ``-m differential``.
"""

from __future__ import annotations

import gzip
import os
import struct
import sys
import tempfile
from collections import Counter

import pytest
from differential import tf

import datapipe as dp
from datapipe.io import TFRecordDataset
from datapipe.io.tfrecord import masked_crc32c


def records(n: int, seed: int = 0) -> list[bytes]:
    # sizes 0 .. ~3000 bytes, an empty record included
    return [bytes([(seed + i) % 256]) * ((i * 613 + seed * 7) % 3001) for i in range(n)]


def tf_record_file(recs: list[bytes], gzip_: bool) -> bytes:
    """The bytes of the file tf.io.TFRecordWriter writes for ``recs``."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "r.tfrecord")
        with tf().io.TFRecordWriter(path, options="GZIP" if gzip_ else None) as w:
            for r in recs:
                w.write(r)
        with open(path, "rb") as f:
            return f.read()


def tf_write(ref, path: str, recs: list[bytes], gzip_: bool = False) -> str:
    """A file at ``path`` with the bytes TensorFlow writes for ``recs``."""
    with open(path, "wb") as f:
        f.write(ref(tf_record_file, recs, gzip_))
    return path


def tf_data_read(files: list[bytes], kw: dict) -> tuple[list[bytes], str | None]:
    """What tf.data.TFRecordDataset(**kw) reads from files with these contents: the records
    before its error, and the error's class name (a tf.errors.OpError) or None."""
    tf_ = tf()
    out, err = [], None
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, data in enumerate(files):
            paths.append(os.path.join(d, f"f{i}.tfrecord"))
            with open(paths[-1], "wb") as f:
                f.write(data)
        try:
            for x in tf_.data.TFRecordDataset(paths, **kw):
                out.append(x.numpy())
        except tf_.errors.OpError as e:
            err = type(e).__name__
    return out, err


def tf_read(ref, paths, **kw) -> tuple[list[bytes], str | None]:
    """tf.data's records of the files at ``paths`` and its error's class name or None."""
    files = []
    for p in paths:
        with open(p, "rb") as f:
            files.append(f.read())
    return ref(tf_data_read, files, kw)


def ours(paths, **kw) -> tuple[list[bytes], BaseException | None]:
    out, err = [], None
    it = iter(TFRecordDataset(paths, **kw))
    try:
        for x in it:
            out.append(x)
    except dp.PipelineError as e:
        err = e
    it.close()
    return out, err


def offset_of(recs: list[bytes], k: int) -> int:
    return sum(16 + len(r) for r in recs[:k])


def test_masked_crc32c_matches_tensorflow(ref):
    # the framing of a record written by tf: length, masked crc of length, data, masked crc
    data = ref(tf_record_file, [b"hello world"], False)
    (n,) = struct.unpack("<Q", data[:8])
    assert n == 11
    assert struct.unpack("<I", data[8:12])[0] == masked_crc32c(data[:8])
    assert struct.unpack("<I", data[-4:])[0] == masked_crc32c(b"hello world")


@pytest.mark.parametrize("gz", [False, True])
def test_same_records_as_tf_data(ref, tmp_path, gz):
    paths = [
        tf_write(ref, str(tmp_path / f"f{i}.tfrecord"), records(20 + 7 * i, seed=i), gz)
        for i in range(3)
    ]
    comp = "GZIP" if gz else None
    expected, err = tf_read(ref, paths, compression_type=comp)
    assert err is None and len(expected) == 20 + 27 + 34
    got, err2 = ours(paths, compression_type=comp)
    assert err2 is None and got == expected
    # num_parallel_reads: tf.data's deterministic interleave (cycle k, block 1)
    tf_par, _ = tf_read(ref, paths, compression_type=comp, num_parallel_reads=2)
    assert ours(paths, compression_type=comp, num_parallel_reads=2)[0] == tf_par
    assert tf_par != expected  # the order differs from reading file after file


def corrupt(ref, tmp_path, name: str, recs: list[bytes], k: int) -> str:
    """A copy of a tf-written file with record ``k`` damaged as ``name`` says."""
    data = bytearray(ref(tf_record_file, recs, False))
    at = offset_of(recs, k)
    if name == "data_crc":
        data[at + 12] ^= 0xFF  # a byte of the payload
    elif name == "length_crc":
        data[at + 1] ^= 0x01  # the length no longer matches its CRC
    elif name == "truncated_data":
        data = data[: at + 12 + 3]
    elif name == "truncated_header":
        data = data[: at + 5]
    p = tmp_path / f"{name}.tfrecord"
    p.write_bytes(bytes(data))
    return str(p)


@pytest.mark.parametrize("name", ["data_crc", "length_crc", "truncated_data"])
def test_corrupt_records_fail_where_tf_data_fails(ref, tmp_path, name):
    recs = records(30)
    p = corrupt(ref, tmp_path, name, recs, 10)
    tf_got, tf_err = tf_read(ref, [p])
    got, err = ours([p])
    assert tf_got == got == recs[:10]
    assert tf_err == "DataLossError"  # tf: DataLossError at record 10
    assert isinstance(err, dp.PipelineError) and err.index == 10
    cause = err.cause
    assert isinstance(cause, dp.FileReadError) and cause.path == p
    assert f"corrupted record 10 at byte offset {offset_of(recs, 10)}" in str(err)


def test_truncated_last_header_is_an_error_where_tf_data_stops_quietly(ref, tmp_path):
    recs = records(30)
    p = corrupt(ref, tmp_path, "truncated_header", recs, 10)
    tf_got, tf_err = tf_read(ref, [p])
    assert tf_got == recs[:10] and tf_err is None  # tf.data treats it as the end
    got, err = ours([p])
    assert got == recs[:10] and "truncated length header" in str(err)


def test_ignore_errors_skips_a_bad_payload_but_ends_a_broken_frame(ref, tmp_path):
    recs = records(30)
    bad_data = corrupt(ref, tmp_path, "data_crc", recs, 10)
    bad_len = corrupt(ref, tmp_path, "length_crc", recs, 10)
    other = tf_write(ref, str(tmp_path / "other.tfrecord"), records(5, seed=9))
    # the payload CRC fails but the framing is intact: only record 10 is skipped
    assert list(TFRecordDataset([bad_data, other]).ignore_errors()) == (
        recs[:10] + recs[11:] + records(5, seed=9)
    )
    # the length's CRC fails: nothing after it can be trusted, the file ends there
    assert list(TFRecordDataset([bad_len, other]).ignore_errors()) == (
        recs[:10] + records(5, seed=9)
    )
    # tf.data ends the file at either corruption
    assert tf_read(ref, [bad_data])[0] == recs[:10]


def test_broken_gzip_stream_names_the_file(ref, tmp_path):
    p = tf_write(ref, str(tmp_path / "g.tfrecord.gz"), records(40), gzip_=True)
    data = open(p, "rb").read()
    bad = tmp_path / "bad.gz"
    bad.write_bytes(data[: len(data) // 2])
    got, err = ours([str(bad)], compression_type="GZIP")
    assert 0 < len(got) < 40 and got == records(40)[: len(got)]
    assert "bad.gz" in str(err) and f"corrupted record {len(got)}" in str(err)
    assert tf_read(ref, [str(bad)], compression_type="GZIP")[1] is not None  # an OpError


def test_record_longer_than_the_limit_is_refused(ref, tmp_path):
    p = tf_write(ref, str(tmp_path / "big.tfrecord"), [b"a" * 10, b"b" * 5000])
    old = dp.io.max_file_bytes()
    dp.io.set_max_file_bytes(4096)
    try:
        got, err = ours([p])
    finally:
        dp.io.set_max_file_bytes(old)
    assert got == [b"a" * 10]
    assert "its length field declares 5000 bytes, over the limit of 4096" in str(err)


@pytest.mark.parametrize("gz, reads", [(False, None), (True, None), (False, 2), (True, 3)])
def test_checkpoint_resumes_at_every_record(ref, tmp_path, gz, reads):
    paths = [
        tf_write(ref, str(tmp_path / f"f{i}.tfrecord"), records(4 + i, seed=i), gz)
        for i in range(3)
    ]
    ds = TFRecordDataset(paths, "GZIP" if gz else None, num_parallel_reads=reads)
    full = list(ds)
    assert len(full) == 4 + 5 + 6
    for k in range(len(full) + 1):
        it = iter(ds)
        head = [next(it) for _ in range(k)]
        state = it.state_dict()
        it.close()
        it2 = iter(ds)
        it2.load_state_dict(state)
        assert head + list(it2) == full, k


def worker_opts(count, index):
    return dp.Options(
        distribute=dp.DistributeOptions(
            num_workers=count, worker_index=index, auto_shard_policy="FILE", uneven="allow"
        )
    )


def five_files(ref, tmp_path) -> tuple[list[str], list[bytes]]:
    paths, universe = [], []
    for i, n in enumerate((5, 7, 3, 6, 4)):
        recs = [f"{i}-{j}".encode() for j in range(n)]
        paths.append(tf_write(ref, str(tmp_path / f"f{i}.tfrecord"), recs))
        universe += recs
    return paths, universe


def test_file_auto_sharding_splits_files(ref, tmp_path):
    paths, universe = five_files(ref, tmp_path)
    ds = TFRecordDataset(paths)
    parts = [list(ds.with_options(worker_opts(2, i))) for i in range(2)]
    assert {r.split(b"-")[0] for r in parts[0]} == {b"0", b"2", b"4"}
    assert {r.split(b"-")[0] for r in parts[1]} == {b"1", b"3"}
    assert sorted(parts[0] + parts[1]) == sorted(universe)


@pytest.mark.parametrize("old, new", [(2, 3), (3, 2), (4, 1), (1, 2)])
def test_elastic_resume_under_file_sharding(ref, tmp_path, old, new):
    paths, universe = five_files(ref, tmp_path)
    ds = TFRecordDataset(paths, num_parallel_reads=2).batch(2)
    before, states = [], []
    for i in range(old):
        it = iter(ds.with_options(worker_opts(old, i)))
        for _ in range((3 * i + 2) % 4):
            try:
                before += list(next(it))
            except StopIteration:
                break
        path = str(tmp_path / f"w{i}.state")
        dp.save_state(it.state_dict(), path)
        states.append(dp.load_state(path))
        it.close()
    after = []
    for p in range(new):
        it = iter(ds.with_options(worker_opts(new, p)))
        it.set_state(states)
        after += [r for b in it for r in b]
    assert Counter(before + after) == Counter(universe)


def test_interleave_over_listed_files_in_parallel(ref, tmp_path, threads):
    paths, universe = five_files(ref, tmp_path)
    files = dp.list_files(str(tmp_path / "*.tfrecord"), shuffle=False)
    seq = list(files.interleave(TFRecordDataset, cycle_length=3))
    assert sorted(seq) == sorted(universe)
    par = files.interleave(TFRecordDataset, cycle_length=3, num_parallel_calls=dp.AUTOTUNE)
    it = iter(par)
    head = [next(it) for _ in range(9)]
    state = it.state_dict()
    it.close()
    it2 = iter(par)
    it2.load_state_dict(state)
    assert head + list(it2) == seq
    it2.close()
    assert threads.settle() == []


def test_arguments_and_missing_files(tmp_path):
    with pytest.raises(ValueError, match="compression_type must be None, '', 'GZIP' or 'ZLIB'"):
        TFRecordDataset("x", compression_type="BZIP2")
    with pytest.raises(ValueError, match="filenames is empty"):
        TFRecordDataset([])
    with pytest.raises(TypeError, match=r"use ds.interleave\(lambda p: TFRecordDataset\(p\)\)"):
        TFRecordDataset(dp.from_tensor_slices(["a.tfrecord"]))
    got, err = ours([str(tmp_path / "missing.tfrecord")])
    assert got == [] and "missing.tfrecord" in str(err) and "cannot open" in str(err)
    assert TFRecordDataset("x").element_spec == dp.TensorSpec((), object)
    assert TFRecordDataset("x").cardinality() == dp.UNKNOWN_CARDINALITY


def test_without_google_crc32c_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "google_crc32c", None)
    with pytest.raises(ImportError, match=r'pip install "datapipe-torch\[tfrecord\]"'):
        TFRecordDataset("x.tfrecord")


def test_plain_gzip_module_reads_what_tf_writes(ref, tmp_path):
    # GZIP TFRecords are one gzip stream over the plain framing (tf's ZlibOutputBuffer)
    recs = records(12)
    p = tf_write(ref, str(tmp_path / "g.tfrecord.gz"), recs, gzip_=True)
    assert gzip.decompress(open(p, "rb").read()) == ref(tf_record_file, recs, False)
