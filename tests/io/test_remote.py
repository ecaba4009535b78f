"""Remote paths through fsspec: memory://, an HTTP server on 127.0.0.1 started here, and
S3 from moto's server mode on 127.0.0.1 read through s3fs. Every path-taking API: list_files,
TextLineDataset, read_file / images / image_dataset_from_directory, Parquet / Arrow / CSV,
save / load, cache(filename), save_state / load_state, TFRecord and WebDataset shards.
Retries on transient errors, errors naming the URL, size limits before reading."""

from __future__ import annotations

import errno
import gzip
import io
import os
import sys
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from _io_helpers import encode, pixels
from _remote_helpers import FileServer, loopback_only, s3_bucket

import datapipe as dp
from datapipe.io import _remote as remote

fsspec = pytest.importorskip("fsspec")


class Mem:
    """A fresh directory of fsspec's in-memory filesystem."""

    def __init__(self):
        self.fs = fsspec.filesystem("memory")
        self.root = f"/t-{uuid.uuid4().hex[:8]}"

    def url(self, rel: str = "") -> str:
        return f"memory://{self.root}/{rel}"

    def put(self, rel: str, data: bytes) -> str:
        self.fs.pipe_file(f"{self.root}/{rel}", data)
        return self.url(rel)


@pytest.fixture
def mem():
    m = Mem()
    yield m
    if m.fs.exists(m.root):
        m.fs.rm(m.root, recursive=True)


@pytest.fixture
def fast_retries():
    dp.io.set_remote_retries(attempts=4, initial_backoff_s=0.001, max_backoff_s=0.01)
    yield
    dp.io.set_remote_retries()


@pytest.fixture
def limit():
    old = dp.io.max_file_bytes()
    yield dp.io.set_max_file_bytes
    dp.io.set_max_file_bytes(old)


def lines_file(n: int, tag: str = "") -> bytes:
    return "".join(f"{tag}line {i}\n" for i in range(n)).encode()


# ---- memory:// : every API -------------------------------------------------------------------
def test_list_files_globs_urls(mem):
    for rel in ["b.txt", "a.txt", "c.csv", "sub/d.txt", "sub/deep/e.txt"]:
        mem.put(rel, b"x")
    got = list(dp.list_files(mem.url("*.txt"), shuffle=False))
    assert got == [f"memory://{mem.root}/a.txt", f"memory://{mem.root}/b.txt"]
    rec = dp.list_files(mem.url("**/*.txt"), shuffle=False)
    assert [u.rsplit(mem.root + "/", 1)[1] for u in rec] == [
        "a.txt",
        "b.txt",
        "sub/d.txt",
        "sub/deep/e.txt",
    ]
    both = dp.list_files([mem.url("*.csv"), mem.url("a.*")], shuffle=False)
    assert [u.rsplit("/", 1)[1] for u in both] == ["a.txt", "c.csv"]
    shuffled = dp.list_files(mem.url("**/*.txt"), seed=1)
    assert sorted(shuffled) == list(rec) and list(shuffled) != list(rec)
    with pytest.raises(FileNotFoundError, match=r"no files match the pattern\(s\) 'memory://"):
        dp.list_files(mem.url("*.nope"))


def test_text_lines_plain_gzip_parallel_and_resumed(mem):
    a = mem.put("a.txt", lines_file(5, "a"))
    b = mem.put("b.txt.gz", gzip.compress(lines_file(4, "b")))
    assert list(dp.TextLineDataset(a)) == [f"aline {i}" for i in range(5)]
    assert list(dp.TextLineDataset(b, compression_type="GZIP")) == [f"bline {i}" for i in range(4)]
    c = mem.put("c.txt", lines_file(3, "c"))
    ds = dp.TextLineDataset([a, c], num_parallel_reads=2)
    full = list(ds)
    assert full[:4] == ["aline 0", "cline 0", "aline 1", "cline 1"]
    it = iter(ds)
    head = [next(it) for _ in range(3)]
    state = it.state_dict()
    it.close()
    it2 = iter(ds)
    it2.load_state_dict(state)  # byte offsets in remote objects
    assert head + list(it2) == full


def test_read_file_images_and_image_folder(mem):
    img = pixels(6, 5, 3, seed=3)
    mem.put("img/cat/0.png", encode(img, "PNG"))
    mem.put("img/cat/1.png", encode(pixels(6, 5, 3, seed=4), "PNG"))
    mem.put("img/dog/0.png", encode(pixels(6, 5, 3, seed=5), "PNG"))
    mem.put("img/dog/notes.txt", b"not an image")
    url = mem.url("img/cat/0.png")
    assert dp.read_file(url) == encode(img, "PNG")
    np.testing.assert_array_equal(dp.load_image(url), img)
    paths = dp.from_tensor_slices(np.array([url, mem.url("img/dog/0.png")], dtype=object))
    decoded = list(paths.map(dp.read_file).map(dp.decode_image))
    np.testing.assert_array_equal(decoded[0], img)
    ds = dp.image_dataset_from_directory(
        mem.url("img"), image_size=(6, 5), batch_size=None, shuffle=False, verbose=False
    )
    assert ds.class_names == ["cat", "dog"]
    assert [p.rsplit(mem.root + "/", 1)[1] for p in ds.file_paths] == [
        "img/cat/0.png",
        "img/cat/1.png",
        "img/dog/0.png",
    ]
    x, y = next(iter(ds))
    assert x.shape == (3, 6, 5) and int(y) == 0
    np.testing.assert_allclose(x.transpose(1, 2, 0), img.astype(np.float32))


def test_parquet_arrow_csv(mem):
    t = pa.table({"x": [1, 2, 3, 4, 5], "y": [0.5, 1.5, 2.5, 3.5, 4.5]})
    with mem.fs.open(f"{mem.root}/pq/a.parquet", "wb") as f:
        pq.write_table(t, f, row_group_size=2)
    with mem.fs.open(f"{mem.root}/pq/_ignored.parquet", "wb") as f:
        pq.write_table(t, f)
    ds = dp.ParquetDataset(mem.url("pq"), batch_size=2)
    assert [u[1] for u in ds.files] == [0, 1, 2] and ds.cardinality() == 3
    assert [b["x"].tolist() for b in ds] == [[1, 2], [3, 4], [5]]
    with mem.fs.open(f"{mem.root}/t.feather", "wb") as f:
        feather.write_feather(t, f)
    assert [r["x"].item() for r in dp.from_arrow_ipc(mem.url("t.feather"))] == [1, 2, 3, 4, 5]
    mem.put("c1.csv", b"a,b\n1,x\n2,y\n")
    mem.put("c2.csv", b"a,b\n3,z\n")
    rows = list(dp.from_csv(mem.url("c*.csv")))
    assert [(int(r["a"]), r["b"]) for r in rows] == [(1, "x"), (2, "y"), (3, "z")]
    with pytest.raises(FileNotFoundError, match="no such object"):
        dp.ParquetDataset(mem.url("nothing.parquet"))


def test_save_load_replace_and_incomplete(mem):
    url = mem.url("saved")
    dp.from_tensor_slices({"x": np.arange(5), "s": ["a", "b", "c", "d", "e"]}).save(url)
    assert sorted(mem.fs.ls(f"{mem.root}/saved", detail=False)) == [
        f"{mem.root}/saved/{n}" for n in ("_COMPLETE", "data.arrow", "spec.json")
    ]
    loaded = dp.Dataset.load(url)
    assert [(int(e["x"]), e["s"]) for e in loaded] == list(zip(range(5), "abcde"))
    assert loaded.cardinality() == 5
    dp.from_tensor_slices({"x": np.arange(2), "s": ["p", "q"]}).save(url)  # replaced
    assert [e["s"] for e in dp.Dataset.load(url)] == ["p", "q"]
    assert not [p for p in mem.fs.find(mem.root) if ".tmp-" in p]  # temporaries removed
    mem.fs.rm(f"{mem.root}/saved/_COMPLETE")
    with pytest.raises(dp.FileReadError, match="not a complete saved dataset"):
        dp.Dataset.load(url)
    with pytest.raises(FileNotFoundError, match="no saved dataset at 'memory://"):
        dp.Dataset.load(mem.url("never"))


def test_cache_to_a_url(mem):
    calls = []
    ds = dp.range(6).map(lambda x: calls.append(int(x)) or x * 2).cache(mem.url("cache"))
    first = [int(x) for x in ds]
    n = len(calls)
    second = [int(x) for x in ds]
    assert first == second == [0, 2, 4, 6, 8, 10] and len(calls) == n  # read from the cache
    assert mem.fs.exists(f"{mem.root}/cache/_COMPLETE")
    with pytest.raises(ValueError, match="'xyz' URL scheme|scheme 'xyz'"):
        dp.range(3).cache("xyz://bucket/c")


def test_save_state_load_state(mem):
    def make():
        return dp.range(20).shuffle(5, seed=1)

    it = iter(make())
    head = [int(next(it)) for _ in range(4)]
    url = mem.url("ckpt/rank0.state")
    dp.save_state(it.state_dict(), url)
    it2 = iter(make())
    it2.load_state_dict(dp.load_state(url))
    assert head + [int(x) for x in it2] == [int(x) for x in make()]
    size = mem.fs.info(f"{mem.root}/ckpt/rank0.state")["size"]
    with pytest.raises(dp.FileReadError, match=f"holds {size} bytes, over the limit of 100"):
        dp.load_state(url, max_bytes=100)


def test_size_limit_and_directories(mem, limit):
    url = mem.put("big.bin", b"x" * 5000)
    limit(4096)
    with pytest.raises(dp.FileReadError, match="5000 bytes, over the limit of 4096") as info:
        dp.read_file(url)
    assert info.value.path == url
    assert dp.read_file(url, max_bytes=None) == b"x" * 5000
    mem.put("d/inner.bin", b"y")
    with pytest.raises(dp.FileReadError, match="a directory, not a file"):
        dp.read_file(mem.url("d"))


def test_missing_object_and_bad_schemes_name_the_url(mem):
    url = mem.url("missing.bin")
    with pytest.raises(FileNotFoundError) as info:
        dp.read_file(url)
    assert info.value.filename == url and info.value.errno == errno.ENOENT
    with pytest.raises(dp.PipelineError, match=f"{url!r}.*cannot open: no such object"):
        list(dp.TextLineDataset(url))
    for call in (
        lambda: dp.read_file("xyz://bucket/a.txt"),
        lambda: dp.list_files("xyz://bucket/*.txt"),
        lambda: dp.ParquetDataset("xyz://bucket/a.parquet"),
        lambda: dp.save_state({"a": 1}, "xyz://bucket/s.state"),
    ):
        with pytest.raises(ValueError, match=r"'xyz://bucket/[^']+' has the URL scheme 'xyz'"):
            call()
    with pytest.raises(dp.PipelineError, match="'xyz://bucket/a.txt' has the URL scheme"):
        list(dp.TextLineDataset("xyz://bucket/a.txt"))


def test_a_scheme_whose_filesystem_is_not_installed_names_the_url():
    pytest.importorskip("fsspec")
    try:
        import gcsfs  # noqa: F401

        pytest.skip("gcsfs is installed")
    except ImportError:
        pass
    with pytest.raises(ImportError, match="'gs://bucket/x': .*gcsfs"):
        dp.read_file("gs://bucket/x")


def test_file_urls_read_as_local_files(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text("one\ntwo\n")
    assert list(dp.TextLineDataset(f"file://{p}")) == ["one", "two"]
    assert dp.read_file(f"file://{p}") == b"one\ntwo\n"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # the local protections hold for file:// URLs too
    with pytest.raises(dp.FileReadError, match="a FIFO"):
        dp.read_file(f"file://{fifo}")


def test_local_paths_never_use_fsspec(tmp_path, monkeypatch):
    """Without fsspec (an import of it fails), local paths work as before and a URL says
    what to install."""
    for name in [m for m in sys.modules if m == "fsspec" or m.startswith("fsspec.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "fsspec", None)
    d = str(tmp_path)
    (tmp_path / "a.txt").write_text("x\ny\n")
    assert list(dp.TextLineDataset(d + "/a.txt")) == ["x", "y"]
    assert dp.read_file(d + "/a.txt") == b"x\ny\n"
    assert len(dp.list_files(d + "/*.txt")) == 1
    dp.range(3).save(d + "/s")
    assert len(dp.Dataset.load(d + "/s")) == 3
    dp.save_state({"a": 1}, d + "/st")
    assert dp.load_state(d + "/st") == {"a": 1}
    with pytest.raises(ImportError, match=r'needs fsspec: pip install "datapipe-torch\[remote\]"'):
        dp.read_file("s3://bucket/a.txt")


def test_file_auto_sharding_over_remote_files(mem):
    urls = [mem.put(f"f{i}.txt", lines_file(3, f"f{i}-")) for i in range(4)]
    ds = dp.list_files(mem.url("*.txt"), shuffle=False).interleave(dp.TextLineDataset)
    opts = [
        dp.Options(
            distribute=dp.DistributeOptions(
                num_workers=2, worker_index=i, auto_shard_policy="FILE", uneven="allow"
            )
        )
        for i in range(2)
    ]
    parts = [list(ds.with_options(o)) for o in opts]
    assert {x.split("-")[0] for x in parts[0]} == {"f0", "f2"}
    universe = [f"f{i}-line {j}" for i in range(len(urls)) for j in range(3)]
    assert sorted(parts[0] + parts[1]) == sorted(universe)


def test_sharded_formats_on_memory(mem):
    shards = dp.io.write_webdataset(
        [{"__key__": f"k{i}", "cls": i, "png": pixels(4, 4, 3, seed=i)} for i in range(5)],
        mem.url("wds/train-%03d.tar"),
        max_count=2,
    )
    assert shards == [mem.url(f"wds/train-{i:03d}.tar") for i in range(3)]
    listed = dp.list_files(mem.url("wds/*.tar"), shuffle=False)
    got = list(dp.WebDataset(list(listed), decode=True))
    assert [int(s["cls"]) for s in got] == list(range(5))
    np.testing.assert_array_equal(got[3]["png"], pixels(4, 4, 3, seed=3))
    from datapipe.io.tfrecord import masked_crc32c

    def frame(data: bytes) -> bytes:
        n = len(data).to_bytes(8, "little")
        crc = masked_crc32c(n).to_bytes(4, "little")
        return n + crc + data + masked_crc32c(data).to_bytes(4, "little")

    url = mem.put("r.tfrecord", b"".join(frame(f"rec{i}".encode()) for i in range(4)))
    assert list(dp.TFRecordDataset(url)) == [b"rec0", b"rec1", b"rec2", b"rec3"]

    def failing():
        yield from ({"__key__": f"k{i}", "txt": "x"} for i in range(3))
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError, match="source failed"):
        dp.io.write_webdataset(failing(), mem.url("bad/s-%d.tar"), max_count=2)
    left = sorted(p.rsplit("/", 1)[1] for p in mem.fs.find(f"{mem.root}/bad"))
    assert left == ["s-0.tar"]  # the shard in progress was discarded


# ---- http:// from a server on 127.0.0.1 ------------------------------------------------------
@pytest.fixture
def http_root(tmp_path):
    (tmp_path / "a.txt").write_bytes(lines_file(50))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_bytes(lines_file(3, "b"))
    return tmp_path


def test_http_reads_lists_and_retries_transient_errors(http_root, fast_retries):
    with loopback_only() as seen, FileServer(str(http_root), fail=3) as srv:
        assert dp.read_file(srv.url("a.txt")) == lines_file(50)
        assert srv.failures == 3  # the first 3 requests got 503, then it succeeded
        listed = list(dp.list_files(srv.url("**/*.txt"), shuffle=False))
        assert listed == [srv.url("a.txt"), srv.url("sub/b.txt")]
        assert list(dp.TextLineDataset(srv.url("sub/b.txt"))) == ["bline 0", "bline 1", "bline 2"]
    assert seen and all(addr[0] == "127.0.0.1" for addr in seen)


def test_http_retries_each_range_read_at_its_offset(http_root, fast_retries, monkeypatch):
    monkeypatch.setattr(remote, "BLOCK_SIZE", 64)  # many range requests per file
    # ... and lines read 64 bytes at a time (a 64 KiB read would be one request).
    monkeypatch.setattr(dp.io.text, "_READ_HINT", 64)
    with FileServer(str(http_root), fail={3, 5, 6, 9}) as srv:
        got = list(dp.TextLineDataset(srv.url("a.txt")))
        assert got == [f"line {i}" for i in range(50)]
        assert srv.failures == 4 and srv.requests >= 11  # info + 6+ ranges + 4 retries


def test_http_gives_up_after_the_last_attempt_naming_the_url(http_root, fast_retries):
    with FileServer(str(http_root), fail=1000) as srv:
        url = srv.url("a.txt")
        with pytest.raises(OSError, match="failed 4 times") as info:
            dp.read_file(url)
        assert info.value.filename == url and info.value.errno == errno.EIO
        assert "ClientResponseError: 503" in str(info.value)  # the error behind fsspec's
        assert srv.requests <= 2 * 4  # bounded: HEAD + GET per attempt at most


def test_http_missing_object_is_not_retried(http_root, fast_retries):
    with FileServer(str(http_root)) as srv:
        url = srv.url("nope.txt")
        with pytest.raises(FileNotFoundError) as info:
            dp.read_file(url)
        assert info.value.filename == url and srv.requests <= 2  # HEAD, then GET: no retry


def test_http_size_limit_is_checked_before_any_byte_is_read(http_root, limit):
    limit(100)
    with FileServer(str(http_root)) as srv:
        with pytest.raises(dp.FileReadError, match="over the limit of 100"):
            dp.read_file(srv.url("a.txt"))
        assert srv.requests == 1  # the HEAD request only: the body was never fetched


def test_http_parallel_map_reads(http_root, threads):
    for i in range(12):
        (http_root / f"p{i}.bin").write_bytes(bytes([i]) * (100 + i))
    with FileServer(str(http_root), latency_s=0.005) as srv:
        files = dp.list_files(srv.url("p*.bin"), shuffle=False)
        got = list(files.map(dp.read_file, num_parallel_calls=6))
        order = [int(u.rsplit("/p", 1)[1][:-4]) for u in files]  # sorted by name: 0, 1, 10, ..
        assert order[:3] == [0, 1, 10] and sorted(order) == list(range(12))
        assert got == [bytes([i]) * (100 + i) for i in order]
    assert threads.settle() == []


@pytest.mark.parametrize(
    "error, transient",
    [
        (ConnectionResetError(), True),
        (TimeoutError(), True),
        (OSError(errno.EBUSY, "SlowDown"), True),  # s3fs's mapping of 503 / SlowDown
        (OSError(errno.EINVAL, "bad request"), False),
        (FileNotFoundError("x"), False),
        (PermissionError("denied"), False),
        (ValueError("bad"), False),
    ],
)
def test_transient_classification(error, transient):
    assert remote.is_transient(error) is transient


def test_transient_classification_of_http_and_s3_errors():
    aiohttp = pytest.importorskip("aiohttp")
    from botocore.exceptions import ClientError

    def status(code):
        return aiohttp.ClientResponseError(None, (), status=code)

    assert remote.is_transient(status(503)) and remote.is_transient(status(429))
    assert not remote.is_transient(status(404)) and not remote.is_transient(status(403))
    wrapped = FileNotFoundError("http://x")  # fsspec's HTTP info wraps every failure so
    wrapped.__cause__ = status(502)
    assert remote.is_transient(wrapped)
    gone = FileNotFoundError("http://x")
    gone.__cause__ = status(404)
    assert not remote.is_transient(gone)
    slow = ClientError({"Error": {"Code": "SlowDown"}, "ResponseMetadata": {}}, "GetObject")
    denied = ClientError(
        {"Error": {"Code": "AccessDenied"}, "ResponseMetadata": {"HTTPStatusCode": 403}}, "Get"
    )
    assert remote.is_transient(slow) and not remote.is_transient(denied)
    assert remote.is_transient(aiohttp.ServerDisconnectedError())


def test_retry_policy_arguments():
    assert dp.io.remote_retries().delays() == [0.05, 0.1, 0.2, 0.4]
    with pytest.raises(ValueError, match="attempts"):
        dp.io.set_remote_retries(attempts=0)
    with pytest.raises(ValueError, match="multiplier >= 1"):
        dp.io.set_remote_retries(multiplier=0.5)
    with pytest.raises(TypeError, match="initial_backoff_s must be a number"):
        dp.io.set_remote_retries(initial_backoff_s="1")


# ---- s3:// from moto's server on 127.0.0.1 -----------------------------------------------------
@pytest.fixture(scope="module")
def s3():
    with s3_bucket("bucket") as fs:
        yield fs


def test_s3_files_text_and_images(s3):
    s3.pipe_file("bucket/text/a.txt", lines_file(4, "a"))
    s3.pipe_file("bucket/text/b.txt", lines_file(2, "b"))
    s3.pipe_file("bucket/img/x/0.png", encode(pixels(4, 6, 3, seed=7), "PNG"))
    files = dp.list_files("s3://bucket/text/*.txt", shuffle=False)
    assert list(files) == ["s3://bucket/text/a.txt", "s3://bucket/text/b.txt"]
    assert list(files.interleave(dp.TextLineDataset, cycle_length=2, num_parallel_calls=2)) == [
        "aline 0", "bline 0", "aline 1", "bline 1", "aline 2", "aline 3",
    ]  # fmt: skip
    np.testing.assert_array_equal(dp.load_image("s3://bucket/img/x/0.png"), pixels(4, 6, 3, seed=7))
    ds = dp.image_dataset_from_directory(
        "s3://bucket/img", image_size=(4, 6), batch_size=1, verbose=False
    )
    assert ds.class_names == ["x"] and len(list(ds)) == 1
    with pytest.raises(FileNotFoundError) as info:
        dp.read_file("s3://bucket/text/none.txt")
    assert info.value.filename == "s3://bucket/text/none.txt"


def test_s3_parquet_save_load_state(s3):
    t = pa.table({"x": list(range(7))})
    buf = io.BytesIO()
    pq.write_table(t, buf, row_group_size=3)
    s3.pipe_file("bucket/pq/t.parquet", buf.getvalue())
    ds = dp.ParquetDataset("s3://bucket/pq", batch_size=3)
    assert [b["x"].tolist() for b in ds] == [[0, 1, 2], [3, 4, 5], [6]]
    dp.range(10).map(lambda x: x * 3).save("s3://bucket/saved")
    assert [int(x) for x in dp.Dataset.load("s3://bucket/saved")] == [3 * i for i in range(10)]
    dp.range(2).save("s3://bucket/saved")
    assert [int(x) for x in dp.Dataset.load("s3://bucket/saved")] == [0, 1]
    it = iter(dp.range(9).shuffle(3, seed=0))
    head = [int(next(it)) for _ in range(2)]
    dp.save_state(it.state_dict(), "s3://bucket/ckpt/w0.state")
    it2 = iter(dp.range(9).shuffle(3, seed=0))
    it2.load_state_dict(dp.load_state("s3://bucket/ckpt/w0.state"))
    assert head + [int(x) for x in it2] == [int(x) for x in dp.range(9).shuffle(3, seed=0)]


def test_s3_webdataset_and_tfrecord(s3):
    shards = dp.io.write_webdataset(
        [{"__key__": f"{i:03d}", "txt": f"t{i}"} for i in range(7)],
        "s3://bucket/wds/s-%02d.tar",
        max_count=3,
    )
    assert shards == [f"s3://bucket/wds/s-{i:02d}.tar" for i in range(3)]
    ds = dp.list_files("s3://bucket/wds/*.tar", shuffle=False).interleave(
        lambda u: dp.WebDataset(u, decode=True), cycle_length=3, num_parallel_calls=3
    )
    assert sorted(s["txt"] for s in ds) == [f"t{i}" for i in range(7)]
    it = iter(dp.WebDataset(shards))
    head = [next(it)["__key__"] for _ in range(4)]
    state = it.state_dict()
    it.close()
    it2 = iter(dp.WebDataset(shards))
    it2.load_state_dict(state)
    assert head + [s["__key__"] for s in it2] == [f"{i:03d}" for i in range(7)]
