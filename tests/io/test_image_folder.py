"""image_dataset_from_directory: Keras's index, split, labels and shapes (``label_mode=None``
included), pixels equal to Keras's for PNG with bilinear and nearest resizing; bad files.
Keras's side comes through ``ref`` (tests/differential.py): read from tests/goldens/ in the
default run, computed by Keras under ``-m differential``."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from _io_helpers import BAD_FILES, encode, pixels, write
from differential import keras

import datapipe as dp
from datapipe._context import walk
from datapipe.io import image_dataset_from_directory, load_image
from datapipe.io.file_source import FileSource
from datapipe.io.image_folder import ImageFolderLoader

SEQ = dict(num_parallel_calls=None, verbose=False, data_format="channels_last")


def _tree(root, counts=(3, 2, 4), size=(6, 5), fmt="png"):
    for c, n in enumerate(counts):
        for i in range(n):
            arr = np.full((*size, 3), 10 * c + i, np.uint8)
            write(os.path.join(root, f"class_{c}", f"{i}.{fmt}"), encode(arr, fmt.upper()))
    write(os.path.join(root, "class_0", "notes.txt"), b"ignored: not an image extension")
    return root


SEQ_KERAS = dict(
    num_parallel_calls=None,
    verbose=False,
    shuffle=False,
    batch_size=None,
    data_format="channels_last",
)


def test_int_labels_shapes_order(tmp_path):
    root = _tree(str(tmp_path))
    ds = image_dataset_from_directory(root, image_size=(6, 5), batch_size=4, shuffle=False, **SEQ)
    assert ds.class_names == ["class_0", "class_1", "class_2"]
    assert [os.path.relpath(p, root) for p in ds.file_paths][:4] == [
        os.path.join("class_0", f"{i}.png") for i in range(3)
    ] + [os.path.join("class_1", "0.png")]
    batches = list(ds)
    assert [b[0].shape for b in batches] == [(4, 6, 5, 3), (4, 6, 5, 3), (1, 6, 5, 3)]
    images = np.concatenate([b[0] for b in batches])
    labels = np.concatenate([b[1] for b in batches])
    # int64: torch's class-index dtype (Keras gives int32: D-K-38)
    assert images.dtype == np.float32 and labels.dtype == np.int64
    assert labels.tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2]
    assert images[:, 0, 0, 0].tolist() == [0, 1, 2, 10, 11, 20, 21, 22, 23]


def test_int_labels_are_torch_class_indices(tmp_path):
    # to_torch() and as_torch_dataset() give int64 labels, which F.cross_entropy takes as
    # class indices (int32 targets raise "expected scalar type Long"); explicit labels too.
    import torch
    import torch.nn.functional as F

    root = _tree(str(tmp_path))
    ds = image_dataset_from_directory(root, image_size=(6, 5), batch_size=4, shuffle=False, **SEQ)
    x, y = next(iter(ds.to_torch()))
    assert y.dtype == torch.int64 and y.tolist() == [0, 0, 0, 1]
    assert ds.to_torch().element_spec[1].dtype == torch.int64
    logits = torch.zeros(4, 3)
    assert float(F.cross_entropy(logits, y)) == pytest.approx(np.log(3), rel=1e-6)
    loader = torch.utils.data.DataLoader(ds.as_torch_dataset(), batch_size=None)
    assert [b[1].dtype for b in loader] == [torch.int64] * 3
    explicit = image_dataset_from_directory(
        root, labels=[2, 1, 0, 2, 1, 0, 2, 1, 0], image_size=(6, 5), batch_size=None, **SEQ
    )
    first = next(iter(explicit.to_torch()))[1]
    assert first.dtype == torch.int64 and first.ndim == 0


def test_label_modes_color_modes_resize(tmp_path):
    root = _tree(str(tmp_path), counts=(2, 3))
    common = dict(image_size=(3, 4), shuffle=False, batch_size=None, **SEQ)
    img, lab = next(iter(image_dataset_from_directory(root, label_mode="categorical", **common)))
    assert img.shape == (3, 4, 3) and lab.dtype == np.float32 and lab.tolist() == [1.0, 0.0]
    img, lab = next(iter(image_dataset_from_directory(root, label_mode="binary", **common)))
    assert lab.shape == (1,) and lab.dtype == np.float32
    gray = next(
        iter(image_dataset_from_directory(root, color_mode="grayscale", label_mode=None, **common))
    )
    assert gray.shape == (3, 4, 1)
    rgba = next(iter(image_dataset_from_directory(root, color_mode="rgba", labels=None, **common)))
    assert rgba.shape == (3, 4, 4) and float(rgba[0, 0, 3]) == 255.0
    cf = next(iter(image_dataset_from_directory(root, **{**common, "data_format": None})))
    assert cf[0].shape == (3, 3, 4)  # the package default: channels_first
    # a constant image stays constant through the resize (bilinear: Keras's, unrounded)
    np.testing.assert_array_equal(img, np.zeros((3, 4, 3), np.float32))


def test_class_names_and_explicit_labels(tmp_path):
    root = _tree(str(tmp_path))
    ds = image_dataset_from_directory(
        root, class_names=["class_2", "class_0"], image_size=(6, 5), shuffle=False, **SEQ
    )
    _, labels = next(iter(ds))
    assert ds.class_names == ["class_2", "class_0"] and labels.tolist() == [0] * 4 + [1] * 3
    ds = image_dataset_from_directory(
        root, labels=[5] * 4 + [7] * 5, image_size=(6, 5), shuffle=False, **SEQ
    )
    assert ds.class_names == ["5", "7"]
    assert next(iter(ds))[1].tolist() == [5] * 4 + [7] * 5
    with pytest.raises(ValueError, match="class_names .* do not match the subdirectories"):
        image_dataset_from_directory(root, class_names=["nope"], **SEQ)
    with pytest.raises(ValueError, match="got 2 labels for 9 files"):
        image_dataset_from_directory(root, labels=[0, 1], **SEQ)
    with pytest.raises(ValueError, match="needs exactly 2 classes"):
        image_dataset_from_directory(root, label_mode="binary", **SEQ)


def test_validation_split_and_per_epoch_shuffle(tmp_path):
    root = _tree(str(tmp_path), counts=(5, 5, 5))
    kw = dict(image_size=(6, 5), batch_size=None, seed=3, validation_split=0.2, **SEQ)
    train, val = image_dataset_from_directory(root, subset="both", **kw)
    assert len(train.file_paths) == 12 and len(val.file_paths) == 3
    assert set(train.file_paths).isdisjoint(val.file_paths)
    t2 = image_dataset_from_directory(root, subset="training", **kw)
    assert t2.file_paths == train.file_paths
    e1 = [float(x[0, 0, 0]) for x, _ in train]
    e2 = [float(x[0, 0, 0]) for x, _ in train]
    assert sorted(e1) == sorted(e2) and e1 != e2  # a new order each epoch
    assert [float(x[0, 0, 0]) for x, _ in val] == [float(x[0, 0, 0]) for x, _ in val]
    with pytest.raises(ValueError, match="give a seed"):
        image_dataset_from_directory(root, validation_split=0.2, subset="training", **SEQ)
    with pytest.raises(ValueError, match="must be given together"):
        image_dataset_from_directory(root, validation_split=0.2, **SEQ)


def test_crop_and_pad_to_aspect_ratio(tmp_path):
    arr = np.zeros((4, 8, 3), np.uint8)
    arr[:, 2:6] = 200  # the centre square is bright
    write(os.path.join(str(tmp_path), "a", "x.png"), encode(arr, "PNG"))
    common = dict(image_size=(4, 4), batch_size=None, shuffle=False, label_mode=None, **SEQ)
    common["interpolation"] = "nearest"  # exact pixels: no filter support across the edge
    crop = next(
        iter(image_dataset_from_directory(str(tmp_path), crop_to_aspect_ratio=True, **common))
    )
    assert crop.min() == 200.0  # only the centre 4x4 survives the crop
    pad = next(
        iter(image_dataset_from_directory(str(tmp_path), pad_to_aspect_ratio=True, **common))
    )
    assert pad.shape == (4, 4, 3) and pad[0].max() == 0.0  # top rows are padding


def test_jpeg_draft_decoding_covers_target(tmp_path):
    write(os.path.join(str(tmp_path), "a", "big.jpg"), encode(pixels(256, 192, 3), "JPEG"))
    ds = image_dataset_from_directory(
        str(tmp_path), image_size=(30, 20), batch_size=None, shuffle=False, **SEQ
    )
    img, _ = next(iter(ds))
    assert img.shape == (30, 20, 3)
    loader = ImageFolderLoader((30, 20), 3, "bilinear", False, False, "channels_last", "int", 1)
    assert loader._draft(256, 192) == (30, 20)
    path = os.path.join(str(tmp_path), "a", "big.jpg")
    assert load_image(path, channels=3, draft_size=loader._draft).shape == (32, 24, 3)  # 1/8
    crop = ImageFolderLoader((30, 30), 3, "bilinear", True, False, "channels_last", "int", 1)
    assert crop._draft(256, 192) == (40, 30)  # the 192x192 centre crop must keep 30x30


def test_is_a_file_source_and_parallel_map(tmp_path):
    root = _tree(str(tmp_path))
    ds = image_dataset_from_directory(root, image_size=(6, 5), seed=1, verbose=False)
    sources = [n for n in walk(ds) if isinstance(n, FileSource)]
    assert len(sources) == 1 and len(sources[0].files) == 9
    labels = sorted(int(v) for _, y in ds for v in y)
    assert labels == [0, 0, 0, 1, 1, 2, 2, 2, 2]


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_image_names_path_and_earlier_batches_arrive(tmp_path, name):
    root = str(tmp_path)
    for i in range(4):
        write(os.path.join(root, "a", f"{i}.png"), encode(pixels(6, 5, 3, i), "PNG"))
    make, reason = BAD_FILES[name]
    ext = os.path.splitext(name)[1]
    bad = write(os.path.join(root, "a", f"9_bad{ext}"), make())
    ds = image_dataset_from_directory(root, image_size=(6, 5), batch_size=2, shuffle=False, **SEQ)
    it = iter(ds)
    assert [next(it)[0].shape[0] for _ in range(2)] == [2, 2]
    with pytest.raises(dp.PipelineError) as info:
        next(it)
    assert info.value.path == bad and reason in str(info.value)


def test_no_images_found(tmp_path):
    os.makedirs(tmp_path / "a")
    with pytest.raises(ValueError, match="no images found"):
        image_dataset_from_directory(str(tmp_path), **SEQ)


def keras_directory(files, kw, images=False):
    """Keras's image_dataset_from_directory(**kw) over a tree written here (``{relative path:
    pixels of a PNG, or bytes}``): its files (relative), class names, and with ``images``
    its (image, label) elements."""
    with tempfile.TemporaryDirectory() as root:
        for rel, data in files.items():
            write(os.path.join(root, rel), data if isinstance(data, bytes) else encode(data, "PNG"))
        ds = keras().utils.image_dataset_from_directory(root, **kw)
        out = {
            "file_paths": [os.path.relpath(p, root) for p in ds.file_paths],
            "class_names": ds.class_names,
        }
        if images:
            out["elements"] = [(np.asarray(x, np.float32), int(y)) for x, y in ds]
        return out


def test_same_index_and_split_as_keras(ref, tmp_path):
    root = _tree(str(tmp_path), counts=(4, 6, 5))
    files = {  # the same tree for Keras
        os.path.join(f"class_{c}", f"{i}.png"): np.full((6, 5, 3), 10 * c + i, np.uint8)
        for c, n in enumerate((4, 6, 5))
        for i in range(n)
    }
    files[os.path.join("class_0", "notes.txt")] = b"ignored: not an image extension"
    for subset in ("training", "validation"):
        kw = dict(image_size=(6, 5), seed=11, validation_split=0.3, subset=subset, verbose=False)
        ours = image_dataset_from_directory(root, num_parallel_calls=None, **kw)
        theirs = ref(keras_directory, files, kw)
        assert [os.path.relpath(p, root) for p in ours.file_paths] == theirs["file_paths"]
        assert ours.class_names == theirs["class_names"]


def test_label_mode_none_indexes_like_labels_none(tmp_path):
    # Keras: label_mode=None means labels=None, so images outside class folders count too
    root = str(tmp_path)
    for rel in ("a/0.png", "b/0.png", "top.png", ".hidden/h.png"):
        write(os.path.join(root, rel), encode(np.zeros((2, 2, 3), np.uint8), "PNG"))
    ds = image_dataset_from_directory(root, image_size=(2, 2), label_mode=None, **SEQ_KERAS)
    assert ds.class_names is None
    rel = [os.path.relpath(p, root) for p in ds.file_paths]
    want = ["top.png", os.path.join(".hidden", "h.png")]  # os.walk order, roots sorted
    assert rel == want + [os.path.join("a", "0.png"), os.path.join("b", "0.png")]
    assert len(list(ds)) == 4


def test_pixels_match_keras_for_png_bilinear_and_nearest(ref, tmp_path):
    rng = np.random.default_rng(0)
    root = str(tmp_path)
    pngs = {}
    for c, (h, w) in enumerate([(10, 14), (13, 20), (7, 9)]):
        pngs[os.path.join(f"c{c}", "x.png")] = arr = rng.integers(0, 256, (h, w, 3), np.uint8)
        write(os.path.join(root, f"c{c}", "x.png"), encode(arr, "PNG"))
    for kw in (
        dict(image_size=(6, 7)),
        dict(image_size=(20, 30)),
        dict(image_size=(6, 7), interpolation="nearest"),
        dict(image_size=(20, 30), interpolation="nearest"),
        dict(image_size=(8, 8), crop_to_aspect_ratio=True),
    ):
        ours = list(image_dataset_from_directory(root, **SEQ_KERAS, **kw))
        keras_kw = dict(verbose=False, shuffle=False, batch_size=None, **kw)
        theirs = ref(keras_directory, pngs, keras_kw, True)["elements"]
        assert len(ours) == len(theirs) == 3
        for (a, la), (b, lb) in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-3)
            assert int(la) == lb
