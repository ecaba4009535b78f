"""Issue 11: hostile files never hang or exhaust memory.

Only regular files are read (a FIFO would block ``open`` for ever; ``/dev/zero`` never
ends): readers refuse them with a ``FileReadError`` naming them, directory listings skip
them with a warning. Files read whole have a size limit; link loops are not followed;
``load_state`` caps what it decompresses and the shapes arrays declare."""

from __future__ import annotations

import io
import logging
import os
import zipfile

import numpy as np
import pytest
from PIL import Image

import datapipe as dp
from datapipe.distribute.state_io import load_state, save_state, state_from_bytes
from datapipe.io import FileReadError

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and /dev/zero")


def _png(path, value=0):
    Image.fromarray(np.full((4, 4, 3), value, np.uint8)).save(path)
    return str(path)


@pytest.fixture
def hostile(tmp_path):
    """Two classes of one image each, plus a FIFO, a link to /dev/zero and a link loop."""
    root = tmp_path / "data"
    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
        _png(root / c / "img.png", 10 if c == "a" else 20)
    os.mkfifo(root / "a" / "pipe.png")
    os.symlink("/dev/zero", root / "b" / "zero.png")
    os.symlink(str(root), root / "a" / "loop")  # back to the dataset's directory
    os.symlink(str(root / "a"), root / "a" / "self")  # back to the class directory
    return root


@pytest.mark.timeout(60)
@pytest.mark.parametrize("follow_links", [False, True])
def test_image_folder_lists_only_regular_files_once(hostile, follow_links, caplog):
    with caplog.at_level(logging.WARNING, logger="datapipe"):
        ds = dp.image_dataset_from_directory(
            str(hostile),
            image_size=(4, 4),
            batch_size=None,
            follow_links=follow_links,
            shuffle=False,
            verbose=False,
        )
        out = [(int(img[0, 0, 0]), int(label)) for img, label in ds]
    assert out == [(10, 0), (20, 1)]  # a folder of 2 images gives 2 images
    assert "not regular files" in caplog.text
    if follow_links:
        assert "is a link loop; skipped" in caplog.text


@pytest.mark.timeout(60)
def test_image_folder_without_labels_skips_loops(hostile):
    ds = dp.image_dataset_from_directory(
        str(hostile),
        labels=None,
        image_size=(4, 4),
        batch_size=None,
        follow_links=True,
        verbose=False,
    )
    assert len(list(ds)) == 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "name, kind", [("a/pipe.png", r"a FIFO \(named pipe\)"), ("b/zero.png", "a character device")]
)
def test_read_file_refuses_what_is_not_a_regular_file(hostile, name, kind):
    path = str(hostile / name)
    with pytest.raises(FileReadError, match=f"{kind}, not a regular file") as e:
        dp.read_file(path)
    assert e.value.path == path
    with pytest.raises(dp.PipelineError) as e:  # inside a pipeline the error names the file
        list(dp.from_tensor_slices([path]).map(dp.io.load_image))
    assert e.value.path == path
    with pytest.raises(dp.PipelineError, match="not a regular file"):
        list(dp.TextLineDataset(path))


@pytest.mark.timeout(60)
def test_columnar_readers_refuse_a_fifo(hostile, tmp_path):
    fifo = tmp_path / "t.parquet"
    os.mkfifo(fifo)
    with pytest.raises(FileReadError, match="not a regular file"):
        dp.ParquetDataset(str(fifo))
    with pytest.raises(FileReadError, match="not a regular file"):
        dp.from_csv(str(fifo))


def test_files_read_whole_have_a_size_limit(tmp_path):
    path = _png(tmp_path / "x.png")
    size = os.path.getsize(path)
    with pytest.raises(FileReadError, match=f"holds {size} bytes, over the limit of 10 bytes"):
        dp.io.read_file(path, max_bytes=10)
    assert dp.io.max_file_bytes() == 1 << 30
    try:
        dp.io.set_max_file_bytes(size - 1)
        with pytest.raises(dp.PipelineError) as e:
            list(dp.from_tensor_slices([path]).map(dp.io.load_image))
        assert e.value.path == path and "over the limit" in str(e.value)
        dp.io.set_max_file_bytes(None)
        assert len(dp.read_file(path)) == size
        with pytest.raises(ValueError, match="limit must be >= 1"):
            dp.io.set_max_file_bytes(0)
    finally:
        dp.io.set_max_file_bytes(1 << 30)
    assert len(dp.read_file(path)) == size


def _npy(shape, payload: bytes) -> bytes:
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        head, {"descr": "<f8", "fortran_order": False, "shape": shape}
    )
    return head.getvalue() + payload


def _archive(path, entries, compression=zipfile.ZIP_STORED):
    text = io.BytesIO()
    np.save(
        text,
        np.array('{"format": "datapipe-state-1", "state": {"__dp__": "ndarray", "ref": "a0"}}'),
    )
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        zf.writestr("__json__.npy", text.getvalue())
        for name, data in entries.items():
            zf.writestr(name, data)
    return str(path)


def test_load_state_refuses_an_archive_that_inflates(tmp_path):
    # 320 MB of zeros deflate to ~300 KB; nothing is decompressed before the refusal.
    path = _archive(
        tmp_path / "bomb",
        {"a0.npy": _npy((40_000_000,), b"\0" * 320_000_000)},
        zipfile.ZIP_DEFLATED,
    )
    assert os.path.getsize(path) < 1_000_000
    with pytest.raises(ValueError, match=r"bomb'.*entries hold over 67108864 bytes"):
        load_state(path)


def test_load_state_refuses_a_declared_shape_larger_than_its_entry(tmp_path):
    path = _archive(tmp_path / "shape", {"a0.npy": _npy((10**12,), b"\0" * 64)})
    with pytest.raises(ValueError, match=r"shape'.*declares an array of shape \(1000000000000,\)"):
        load_state(path)


def test_load_state_limits_and_regular_files(tmp_path):
    with pytest.raises(ValueError, match="not a regular file"):
        load_state("/dev/zero")
    good = str(tmp_path / "good")
    save_state({"a": np.arange(1000)}, good)
    assert load_state(good)["a"].tolist() == list(range(1000))
    with pytest.raises(ValueError, match="over the limit of 100 bytes"):
        load_state(good, max_bytes=100)
    data = open(good, "rb").read()
    with pytest.raises(ValueError, match="entries hold over 1000 bytes"):
        state_from_bytes(data, "x", max_bytes=1000)


# ---- every source and format (issue 22) ----------------------------------------------------
def _wds(path):
    return list(dp.WebDataset(path))


def _tfrecord(path):
    return list(dp.TFRecordDataset(path))


def _tfrecord_gz(path):
    return list(dp.TFRecordDataset(path, compression_type="GZIP"))


def _text_gz(path):
    return list(dp.TextLineDataset(path, compression_type="GZIP"))


# name -> (read the file at a path, what a file of garbage gives: an error matching this)
FORMATS = {
    "text.gz": (_text_gz, "cannot read line 1"),
    "tfrecord": (_tfrecord, "corrupted record 0 at byte offset 0"),
    "tfrecord.gz": (_tfrecord_gz, "corrupted record 0 at byte offset 0: cannot read"),
    "tar": (_wds, "not a readable tar shard at byte 0"),
    "tar.gz": (_wds, "not a readable tar shard at byte 0"),
    "image": (lambda p: dp.io.load_image(p), "not an image Pillow can read"),
    "parquet": (lambda p: list(dp.ParquetDataset(p)), "parquet"),
    "arrow": (lambda p: list(dp.io.from_arrow_ipc(p)), "arrow"),
    "csv": (lambda p: list(dp.io.from_csv(p)), None),  # garbage is a CSV of one column
    "state": (lambda p: load_state(p), "is not a valid datapipe state archive"),
}


def _hostile_file(tmp_path, kind: str, fmt: str) -> str:
    path = tmp_path / f"x.{fmt}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        os.symlink("/dev/zero", path)
    elif kind == "garbage":
        path.write_bytes(b"\x13\x37 not a file of this format \xff\xfe" * 40)
    return str(path)


def _names_the_file(err: BaseException, path: str) -> None:
    text, e = "", err
    while e is not None:
        text += str(e)
        e = e.__cause__
    assert path in text, text


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_every_reader_refuses_what_is_not_a_regular_file(tmp_path, fmt, kind):
    path = _hostile_file(tmp_path, kind, fmt)
    what = r"a FIFO \(named pipe\)" if kind == "fifo" else "a character device"
    with pytest.raises((ValueError, dp.PipelineError), match=f"{what}, not a regular file") as e:
        FORMATS[fmt][0](path)
    _names_the_file(e.value, path)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fmt", sorted(f for f, (_, m) in FORMATS.items() if m is not None))
def test_every_reader_names_a_file_of_garbage(tmp_path, fmt):
    path = _hostile_file(tmp_path, "garbage", fmt)
    read, message = FORMATS[fmt]
    with pytest.raises((ValueError, dp.PipelineError), match=message) as e:
        read(path)
    _names_the_file(e.value, path)
