"""WebDataset tar shards: TarShardWriter / write_webdataset, WebDataset, decode_sample;
checkpoints, FILE auto-sharding, elastic resume and interleave over shards."""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections import Counter

import numpy as np
import pytest
from _io_helpers import encode, pixels

import datapipe as dp
from datapipe.io import TarShardWriter, WebDataset, decode_sample, write_webdataset
from datapipe.io._record_files import END


def samples(n: int, size: int = 10) -> list[dict]:
    return [
        {"__key__": f"s{i:04d}", "bin": bytes([i % 256]) * (size + i), "cls": i, "txt": f"t{i}"}
        for i in range(n)
    ]


def as_plain(sample: dict) -> tuple:
    return sample["__key__"], sample["bin"], int(sample["cls"]), sample["txt"]


def write(tmp_path, n=10, **kw) -> list[str]:
    return write_webdataset(samples(n), str(tmp_path / "shard-%04d.tar"), **kw)


def tar_bytes(members: list[tuple]) -> bytes:
    """A tar built by hand: (name, data) regular files, or (name, [TarInfo type])."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if isinstance(data, bytes):
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
            else:
                info.type = data[0]
                info.linkname = "x" if data[0] == tarfile.SYMTYPE else ""
                t.addfile(info)
    return buf.getvalue()


# ---- writer and reader ------------------------------------------------------------------------
def test_round_trip_bytes_and_decoded(tmp_path):
    shards = write(tmp_path, 7, max_count=3)
    assert [os.path.basename(s) for s in shards] == [f"shard-{i:04d}.tar" for i in range(3)]
    raw = list(WebDataset(shards))
    assert [s["__key__"] for s in raw] == [f"s{i:04d}" for i in range(7)]
    assert raw[4] == {
        "__key__": "s0004",
        "__url__": shards[1],
        "bin": bytes([4]) * 14,
        "cls": b"4",
        "txt": b"t4",
    }
    decoded = list(WebDataset(shards, decode=True))
    assert [as_plain(s) for s in decoded] == [as_plain(s) for s in samples(7)]
    assert type(decoded[0]["cls"]) is np.int64 and type(decoded[0]["txt"]) is str
    spec = WebDataset(shards, decode=True).element_spec
    assert spec["cls"] == dp.TensorSpec((), np.int64) and spec["bin"] == dp.TensorSpec((), object)
    with tarfile.open(shards[0]) as t:  # one member per field, named <key>.<field>
        assert t.getnames() == [f"s000{i}.{f}" for i in range(3) for f in ("bin", "cls", "txt")]
        assert {m.mode for m in t.getmembers()} == {0o444} and {m.mtime for m in t} == {0}


def test_arrays_images_json_round_trip(tmp_path):
    img, gray = pixels(6, 5, 3, seed=1), pixels(4, 4, 1, seed=2)
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    sample = {"__key__": "a", "png": img, "seg.png": gray, "npy": arr, "json": {"k": [1, 2]}}
    shards = write_webdataset([sample], str(tmp_path / "x-%d.tar"))
    (got,) = list(WebDataset(shards, decode=True))
    np.testing.assert_array_equal(got["png"], img)  # PNG is lossless
    assert got["png"].dtype == np.uint8 and got["png"].shape == (6, 5, 3)
    np.testing.assert_array_equal(got["seg.png"], gray[:, :, None])  # gray: HxWx1
    assert got["npy"].dtype == np.float32 and got["npy"].tolist() == arr.tolist()
    assert got["json"] == {"k": [1, 2]}
    spec = WebDataset(shards, decode=True).element_spec
    assert spec["png"] == dp.TensorSpec((None, None, None), np.uint8)
    assert spec["npy"] == dp.TensorSpec((None, None), np.float32)


def test_same_samples_give_byte_identical_shards(tmp_path):
    a = write_webdataset(samples(5), str(tmp_path / "a-%d.tar"))
    b = write_webdataset(samples(5), str(tmp_path / "b-%d.tar"))
    assert open(a[0], "rb").read() == open(b[0], "rb").read()


def test_max_count_and_max_size_bound_every_shard(tmp_path):
    sizes = [100, 3000, 700, 9000, 20, 5000, 12000, 1, 400, 2600]
    items = [{"__key__": f"k{i}", "bin": b"x" * s} for i, s in enumerate(sizes)]
    max_size = 3 * 10240
    shards = write_webdataset(items, str(tmp_path / "s-%03d.tar"), max_count=3, max_size=max_size)
    counts = []
    for s in shards:
        assert os.path.getsize(s) <= max_size
        with tarfile.open(s) as t:
            counts.append(len(t.getnames()))
    assert max(counts) <= 3 and sum(counts) == len(sizes)
    got = [x["bin"] for x in WebDataset(shards)]
    assert got == [it["bin"] for it in items]  # order kept across shards
    # greedy: a shard is closed only when the next sample would not fit
    w = TarShardWriter(str(tmp_path / "t-%03d.tar"), max_count=3, max_size=max_size)
    assert w._final_size(0) == 10240 and w._final_size(9 * 1024) == 10240
    assert w._final_size(9 * 1024 + 1) == 20480


def test_a_sample_larger_than_max_size_gets_a_shard_of_its_own(tmp_path):
    items = [{"__key__": "a", "bin": b"1"}, {"__key__": "b", "bin": b"2" * 50_000},
             {"__key__": "c", "bin": b"3"}]  # fmt: skip
    shards = write_webdataset(items, str(tmp_path / "s-%d.tar"), max_size=20480)
    assert [[m["__key__"] for m in WebDataset(s)] for s in shards] == [["a"], ["b"], ["c"]]


def test_hand_built_tar_follows_webdataset_conventions(tmp_path):
    data = tar_bytes(
        [
            ("__meta__", b"skipped"),
            ("train", [tarfile.DIRTYPE]),
            ("train/000.JPG", b"j0"),  # extension lower-cased
            ("train/000.seg.png", b"p0"),  # field: everything after the first dot
            ("train/000.lnk", [tarfile.SYMTYPE]),  # not a regular file: skipped
            ("README", b"no extension: skipped"),
            ("train/001.jpg", b"j1"),
            ("train/a.b/002.jpg", b"j2"),  # a dot in a directory is not an extension
        ]
    )
    p = tmp_path / "h.tar"
    p.write_bytes(data)
    got = list(WebDataset(str(p), fields=["jpg"]))
    assert [(s["__key__"], s["jpg"]) for s in got] == [
        ("train/000", b"j0"),
        ("train/001", b"j1"),
        ("train/a.b/002", b"j2"),
    ]
    first = next(iter(WebDataset(str(p))))
    assert set(first) == {"__key__", "__url__", "jpg", "seg.png"}


def test_fields_projection_and_missing_or_different_fields(tmp_path):
    shards = write(tmp_path, 4)
    only = list(WebDataset(shards, fields=["cls", "TXT"]))
    assert [set(s) for s in only] == [{"__key__", "__url__", "cls", "txt"}] * 4
    mixed = [{"__key__": "a", "cls": 1, "txt": "x"}, {"__key__": "b", "cls": 2},
             {"__key__": "c", "cls": 3, "txt": "z"}]  # fmt: skip
    s = write_webdataset(mixed, str(tmp_path / "m-%d.tar"))
    it = iter(WebDataset(s))
    assert next(it)["__key__"] == "a"
    with pytest.raises(dp.PipelineError, match=r"sample 'b' has the fields \['cls'\], expected"):
        next(it)
    assert next(it)["__key__"] == "c"  # the bad sample was skipped
    explicit = WebDataset(s, fields=["txt"]).ignore_errors()
    assert [x["txt"] for x in explicit] == [b"x", b"z"]


def test_duplicate_field_is_an_error_naming_the_sample(tmp_path):
    p = tmp_path / "d.tar"
    p.write_bytes(tar_bytes([("a.txt", b"1"), ("b.txt", b"2"), ("b.txt", b"3"), ("b.cls", b"4"),
                             ("c.txt", b"5")]))  # fmt: skip
    it = iter(WebDataset(str(p)))
    assert next(it)["txt"] == b"1"
    with pytest.raises(dp.PipelineError, match=r"sample 'b' at byte \d+ repeats the field 'txt'"):
        next(it)
    assert next(it)["txt"] == b"5"


def test_corrupt_and_truncated_shards_name_the_shard(tmp_path):
    shards = write(tmp_path, 6, max_count=2)
    data = open(shards[1], "rb").read()
    with open(shards[1], "wb") as f:  # cut inside the second sample's data
        f.write(data[: 512 * 7])
    garbage = tmp_path / "garbage.tar"
    garbage.write_bytes(b"not a tar file at all" * 40)
    it = iter(WebDataset([shards[0], shards[1], str(garbage), shards[2]]))
    keys = [next(it)["__key__"] for _ in range(3)]
    assert keys == ["s0000", "s0001", "s0002"]
    with pytest.raises(dp.PipelineError, match="shard-0001.tar") as info:
        next(it)
    assert "the rest of the shard is skipped" in str(info.value)
    with pytest.raises(dp.PipelineError, match="garbage.tar"):
        next(it)
    assert [x["__key__"] for x in it] == ["s0004", "s0005"]


def test_member_over_the_size_limit_is_refused(tmp_path):
    shards = write_webdataset([{"__key__": "a", "bin": b"x" * 5000}], str(tmp_path / "s%d.tar"))
    old = dp.io.max_file_bytes()
    dp.io.set_max_file_bytes(4096)
    try:
        over = r"a.bin' at byte 0 declares 5000 bytes, over the limit of 4096"
        with pytest.raises(dp.PipelineError, match=over):
            list(WebDataset(shards, fields=["bin"]))
    finally:
        dp.io.set_max_file_bytes(old)


def test_gzip_shards(tmp_path):
    shards = write_webdataset(samples(5), str(tmp_path / "g-%d.tar.gz"), max_count=3)
    with open(shards[0], "rb") as f:
        assert f.read(2) == b"\x1f\x8b"
    assert [as_plain(s) for s in WebDataset(shards, decode=True)] == [
        as_plain(s) for s in samples(5)
    ]


def test_decode_sample_table_overrides_and_errors(tmp_path):
    s = {"__key__": "k", "__url__": "u.tar", "cls": b"7", "jpg": encode(pixels(8, 8, 3), "JPEG")}
    out = decode_sample(s)
    assert out["cls"] == 7 and out["jpg"].shape == (8, 8, 3) and out["__url__"] == "u.tar"
    kept = decode_sample(s, {"jpg": None, "cls": lambda b: b.decode() + "!"})
    assert kept["jpg"] == s["jpg"] and kept["cls"] == "7!"
    with pytest.raises(dp.ImageDecodeError, match=r"u.tar: sample 'k', field 'png'") as info:
        decode_sample({"__key__": "k", "__url__": "u.tar", "png": b"\x89PNG broken"})
    assert info.value.path == "u.tar"
    shards = write_webdataset([{"__key__": "a", "png": b"not a png"}], str(tmp_path / "s%d.tar"))
    with pytest.raises(dp.PipelineError, match="field 'png': cannot decode"):
        list(WebDataset(shards, fields=["png"], decode=True))
    with pytest.raises(TypeError, match="decode must be a bool or a dict"):
        WebDataset(shards, decode="yes")


def test_writer_refuses_bad_names_types_and_patterns(tmp_path):
    w = TarShardWriter(str(tmp_path / "w-%d.tar"))
    with pytest.raises(ValueError, match="key's base name must not contain '.'"):
        w.write({"__key__": "a.b", "txt": "x"})
    with pytest.raises(ValueError, match="fields are lower-case"):
        w.write({"__key__": "a", "TXT": "x"})
    with pytest.raises(ValueError, match="__key__ must be a non-empty str"):
        w.write({"txt": "x"})
    with pytest.raises(ValueError, match="has no fields to write"):
        w.write({"__key__": "a", "__url__": "u"})
    with pytest.raises(TypeError, match="no encoding for a float in a 'txt' field"):
        w.write({"__key__": "a", "txt": 1.5})
    with pytest.raises(TypeError, match=r"an image field takes a uint8 array"):
        w.write({"__key__": "a", "png": np.zeros((4, 4), np.float32)})
    assert w.close() == []  # nothing was written: no shard at all
    with pytest.raises(ValueError, match="one %-format for the shard index"):
        TarShardWriter(str(tmp_path / "no-index.tar"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        TarShardWriter(str(tmp_path / "missing" / "s-%d.tar"))


def test_failed_write_leaves_finished_shards_and_no_partial_one(tmp_path):
    def gen():
        yield from samples(5)
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError, match="source failed"):
        write_webdataset(gen(), str(tmp_path / "p-%d.tar"), max_count=2)
    assert sorted(os.listdir(tmp_path)) == ["p-0.tar", "p-1.tar"]  # p-2 was in progress


# ---- positions: checkpoints, sharding, interleave -------------------------------------------
@pytest.mark.parametrize("pattern", ["c-%d.tar", "c-%d.tar.gz"])
@pytest.mark.parametrize("reads", [None, 2])
def test_checkpoint_resumes_at_every_position(tmp_path, pattern, reads):
    shards = write_webdataset(samples(7), str(tmp_path / pattern), max_count=3)
    ds = WebDataset(shards, num_parallel_reads=reads)
    full = [s["__key__"] for s in ds]
    assert sorted(full) == [f"s{i:04d}" for i in range(7)]
    for k in range(len(full) + 1):
        it = iter(ds)
        head = [next(it)["__key__"] for _ in range(k)]
        state = it.state_dict()
        it.close()
        it2 = iter(ds)
        it2.load_state_dict(state)
        assert head + [s["__key__"] for s in it2] == full, k


def test_state_records_the_offset_of_the_next_sample(tmp_path):
    shards = write(tmp_path, 3, max_count=10)
    with tarfile.open(shards[0]) as t:
        offsets = [m.offset for m in t.getmembers()]
    reader = WebDataset(shards)._make_iterator(None, ())  # the source's own iterator
    assert [s["__key__"] for s in reader.next_chunk(1)] == ["s0000"]
    # [file index, byte offset of the next sample's first member, samples read]
    assert reader.get_state()["slots"] == [[0, offsets[3], 1]]
    assert len(reader.next_chunk(2)) == 2
    assert reader.get_state()["slots"] == [[0, END, 3]]  # the end was seen with the last
    reader.close()


def worker_opts(count, index, policy="FILE"):
    return dp.Options(
        distribute=dp.DistributeOptions(
            num_workers=count, worker_index=index, auto_shard_policy=policy, uneven="allow"
        )
    )


def test_file_auto_sharding_gives_each_worker_its_shards(tmp_path):
    shards = write(tmp_path, 10, max_count=2)  # 5 shards
    ds = WebDataset(shards)
    parts = [[s["__key__"] for s in ds.with_options(worker_opts(2, i))] for i in range(2)]
    assert parts[0] == ["s0000", "s0001", "s0004", "s0005", "s0008", "s0009"]
    assert parts[1] == ["s0002", "s0003", "s0006", "s0007"]


@pytest.mark.parametrize("old, new", [(2, 3), (3, 2), (1, 2), (3, 1)])
def test_elastic_resume_under_file_sharding(tmp_path, old, new):
    shards = write_webdataset(samples(17), str(tmp_path / "e-%03d.tar"), max_count=3)
    ds = WebDataset(shards, num_parallel_reads=2).batch(2)
    before, states = [], []
    for i in range(old):
        it = iter(ds.with_options(worker_opts(old, i)))
        for _ in range((2 * i + 1) % 3 + 1):
            before += list(next(it)["__key__"])
        state = it.state_dict()
        path = str(tmp_path / f"w{i}.state")
        dp.save_state(state, path)
        states.append(dp.load_state(path))
        it.close()
    after = []
    for p in range(new):
        it = iter(ds.with_options(worker_opts(new, p)))
        it.set_state(states)
        after += [k for b in it for k in b["__key__"]]
    counts = Counter(before + after)
    assert counts == Counter(f"s{i:04d}" for i in range(17)), counts


def test_interleave_over_listed_shards_in_parallel(tmp_path, threads):
    write(tmp_path, 12, max_count=3)  # 4 shards
    files = dp.list_files(str(tmp_path / "*.tar"), shuffle=False)
    seq = files.interleave(WebDataset, cycle_length=2)
    par = files.interleave(WebDataset, cycle_length=2, num_parallel_calls=2)
    expected = [s["__key__"] for s in seq]
    assert sorted(expected) == [f"s{i:04d}" for i in range(12)]
    it = iter(par)
    head = [next(it)["__key__"] for _ in range(5)]
    state = it.state_dict()
    it.close()
    it2 = iter(par)
    it2.load_state_dict(state)
    assert head + [s["__key__"] for s in it2] == expected
    it2.close()
    assert threads.settle() == []


def test_spec_of_an_empty_first_shard_is_an_error(tmp_path):
    p = tmp_path / "empty.tar"
    p.write_bytes(tar_bytes([]))
    ds = WebDataset(str(p))
    with pytest.raises(dp.FileReadError, match="empty.tar: holds no samples"):
        _ = ds.element_spec
    assert list(WebDataset(str(p), fields=["txt"])) == []


def test_json_field_is_parsed_and_argument_checks(tmp_path):
    shards = write_webdataset([{"__key__": "a", "json": [1, {"b": 2}]}], str(tmp_path / "j%d.tar"))
    assert next(iter(WebDataset(shards, decode=True)))["json"] == [1, {"b": 2}]
    assert json.loads(next(iter(WebDataset(shards)))["json"]) == [1, {"b": 2}]
    with pytest.raises(TypeError, match="fields must be a list of str"):
        WebDataset(shards, fields="json")
    with pytest.raises(ValueError, match="fields must be distinct field names"):
        WebDataset(shards, fields=["json", "JSON"])
    with pytest.raises(ValueError, match="filenames is empty"):
        WebDataset([])
    with pytest.raises(TypeError, match="not a Dataset"):
        WebDataset(dp.list_files(shards))
