"""ContrastLimitedAdaptiveHistogramEqualization: against Keras 3 (the anchor) on fixed inputs,
a hand-computed case, arguments, config, export, dict inputs and memory layouts. The shared
photometric checks (eval, ranks, layouts, uint8, empty batches, dtype policy) are in
test__photometric.py.

Tolerance against Keras: both compute in float32 with the same order of operations (the
layer follows Keras's formulas step by step), so the only room for a difference is the
summation order of a tile's clipped excess and of its cumulative histogram (TensorFlow's
reductions against torch's): a few ulps of a tile's pixel count (<= 784 here: ulp 6e-5),
scaled by 255 / pixel count, i.e. < 1e-4 of the [0, 255] scale. The outputs observed are
bit-equal; ATOL = 1e-4 (times the range / 255) still catches a one-grey-level error by
four orders of magnitude.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import json

import numpy as np
import pytest
import torch
from differential import keras

import preprocessing as pp
from preprocessing.clahe import _symmetric

CLAHE = pp.ContrastLimitedAdaptiveHistogramEqualization
ATOL = 1e-4


def keras_clahe(kw, x):
    """Keras's ContrastLimitedAdaptiveHistogramEqualization(**kw) of ``x``, as numpy."""
    return np.asarray(keras().layers.ContrastLimitedAdaptiveHistogramEqualization(**kw)(x))


def structured(shape, seed, low=0.0, high=255.0):
    """Images (B, H, W, C) with smooth gradients plus noise (near-constant regions, where
    clipping matters) and one image of uniform noise."""
    rng = np.random.default_rng(seed)
    b, h, w, c = shape
    yy, xx = np.mgrid[0:h, 0:w] / max(h, w)
    x = rng.random(shape)
    for i in range(1, b):
        ramp = 0.5 + 0.3 * np.sin(6 * yy * i) * xx + 0.05 * rng.random((h, w))
        x[i] = ramp[..., None] + 0.02 * rng.random((h, w, c))
    return (low + np.clip(x, 0, 1) * (high - low)).astype(np.float32)


CASES = [
    # shape (B, H, W, C), tile_grid_size, clip_limit, value_range
    ((2, 16, 16, 3), (2, 2), 4.0, (0, 255)),  # tiles divide the image
    ((3, 17, 23, 3), (3, 4), 2.0, (0, 255)),  # mirrored bottom/right edge
    ((2, 17, 23, 3), (3, 4), 0.0, (0, 1)),  # no clipping, another range
    ((1, 32, 20, 1), (8, 8), 40.0, (0, 255)),  # grey, clip above every bin
    ((2, 19, 21, 3), (4, 5), 3.0, (-1, 1)),
    ((2, 5, 7, 3), (8, 8), 4.0, (0, 255)),  # one-pixel tiles, mirror as long as the image
    ((2, 32, 24, 3), (8, 8), 4.0, (0, 255)),  # Keras's default grid
]


@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
@pytest.mark.parametrize("shape, grid, clip, value_range", CASES)
def test_float_inputs_equal_keras(ref, fmt, shape, grid, clip, value_range):
    x = structured(shape, seed=sum(shape), low=value_range[0], high=value_range[1])
    if fmt == "channels_first":
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    kw = dict(value_range=value_range, clip_limit=clip, tile_grid_size=grid, data_format=fmt)
    expected = ref(keras_clahe, kw, x)
    got = CLAHE(**kw)(torch.from_numpy(x))
    assert got.shape == x.shape and got.dtype == torch.float32
    scale = (value_range[1] - value_range[0]) / 255.0
    np.testing.assert_allclose(got.numpy(), expected, rtol=0, atol=ATOL * scale)
    assert not np.allclose(got.numpy(), x, atol=scale)  # it did change the images


@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
def test_uint8_inputs_equal_keras(ref, fmt):
    x = (structured((2, 30, 27, 3), seed=3)).astype(np.uint8)
    if fmt == "channels_first":
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    kw = dict(clip_limit=2.5, tile_grid_size=(4, 3), data_format=fmt)
    got = CLAHE(**kw)(torch.from_numpy(x))
    assert got.dtype == torch.float32  # the package's rule for integer inputs
    # Keras's float result for the same grey levels ...
    expected = ref(keras_clahe, kw, x.astype(np.float32))
    np.testing.assert_allclose(got.numpy(), expected, rtol=0, atol=ATOL)
    # ... and its uint8 result, which is that truncated (away from integer ties).
    as_uint8 = ref(keras_clahe, kw, x)
    assert as_uint8.dtype == np.uint8
    ours = got.numpy()
    clear = np.abs(ours - np.round(ours)) > 1e-3
    np.testing.assert_array_equal(np.trunc(ours)[clear].astype(np.uint8), as_uint8[clear])


def test_hand_computed_tiles_clip_and_interpolation():
    # One row [10, 20 | 20, 30], two tiles of two pixels (tile_grid_size (1, 2)).
    x = torch.tensor([[[10.0, 20.0, 20.0, 30.0]]])
    # No clip: tile 0's table is cdf * 255 / 2 (cdf[0] = 0): 10 -> 127.5, 20 and 30 -> 255;
    # tile 1's: 20 -> 127.5, 30 -> 255. Column weights g = (x - 1) / 2 + 1: x = 0 -> tile 0
    # (the edge repeats), x = 1 -> tile 0, x = 2 -> half of each, x = 3 -> tile 1.
    layer = CLAHE(clip_limit=0, tile_grid_size=(1, 2), data_format="channels_first")
    expected = torch.tensor([[[127.5, 255.0, (255.0 + 127.5) / 2, 255.0]]])
    torch.testing.assert_close(layer(x), expected, rtol=0, atol=1e-5)
    # clip_limit 64: each bin clipped to 64 * 2 / 256 = 0.5, the excess 1 spread as 1/256
    # per bin, so cdf[v] = (v + 1) / 256 + 0.5 per occupied bin <= v, and the table is
    # (v + 128 * occupied bins <= v) * 255 / 511.
    layer = CLAHE(clip_limit=64, tile_grid_size=(1, 2), data_format="channels_first")
    expected = torch.tensor([[[138.0, 276.0, (276.0 + 148.0) / 2, 286.0]]]) * 255 / 511
    torch.testing.assert_close(layer(x), expected, rtol=0, atol=1e-4)


@pytest.mark.parametrize("n, padded", [(5, 8), (3, 8), (1, 4), (4, 4), (2, 9)])
def test_edge_extension_is_numpy_symmetric_pad(n, padded):
    expected = np.pad(np.arange(n), (0, padded - n), mode="symmetric")
    assert _symmetric(n, padded, torch.device("cpu")).tolist() == expected.tolist()


def test_tiles_wider_than_the_image_along_one_axis():
    # 3 rows, 8 tile rows: each tile row is one mirrored row (Keras's TensorFlow backend
    # refuses this mirror pad; numpy's, which this follows, extends periodically).
    x = torch.from_numpy(structured((2, 3, 16, 3), seed=1)).permute(0, 3, 1, 2)
    out = CLAHE(tile_grid_size=(8, 2))(x)
    assert out.shape == x.shape and torch.isfinite(out).all()
    assert float(out.min()) >= 0.0 and float(out.max()) <= 255.0
    torch.testing.assert_close(out[1], CLAHE(tile_grid_size=(8, 2))(x[1]), rtol=0, atol=0)


def test_each_image_is_equalised_on_its_own():
    x = torch.from_numpy(structured((4, 20, 24, 3), seed=2)).permute(0, 3, 1, 2)
    layer = CLAHE(tile_grid_size=(3, 4))
    batch = layer(x)
    for i in range(4):
        torch.testing.assert_close(layer(x[i : i + 1]), batch[i : i + 1], rtol=0, atol=0)


def test_dtypes_and_memory_formats_are_kept():
    x = torch.from_numpy(structured((2, 12, 10, 3), seed=4)).permute(0, 3, 1, 2).contiguous()
    layer = CLAHE(tile_grid_size=(2, 2))
    reference = layer(x)
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        out = layer(x.to(dtype))
        assert out.dtype == dtype
    torch.testing.assert_close(layer(x.double()), reference.double(), rtol=0, atol=1e-4)
    cl = x.contiguous(memory_format=torch.channels_last)
    out = layer(cl)
    assert out.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(out, reference, rtol=0, atol=0)
    nhwc = x.permute(0, 2, 3, 1).contiguous()
    last = CLAHE(tile_grid_size=(2, 2), data_format="channels_last")(nhwc)
    assert last.is_contiguous()  # computed in the input's memory order, not permuted
    torch.testing.assert_close(last.permute(0, 3, 1, 2), reference, rtol=0, atol=0)


def test_config_round_trip():
    layer = CLAHE(
        value_range=(0, 1), clip_limit=2.5, tile_grid_size=(4, 6), data_format="channels_last"
    )
    config = layer.get_config()
    assert config == {
        "value_range": [0, 1],
        "clip_limit": 2.5,
        "tile_grid_size": [4, 6],
        "data_format": "channels_last",
        "dtype": None,
    }
    again = pp.layer_from_config(json.loads(json.dumps(pp.serialize_layer(layer))))
    assert type(again) is CLAHE and again.get_config() == config
    x = torch.rand(2, 9, 13, 3)
    torch.testing.assert_close(again(x), layer(x), rtol=0, atol=0)
    assert CLAHE().get_config()["tile_grid_size"] == [8, 8]  # Keras's defaults
    assert CLAHE().get_config()["clip_limit"] == 4.0


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        (dict(clip_limit=-1.0), "clip_limit"),
        (dict(clip_limit=float("nan")), "clip_limit"),
        (dict(clip_limit="4"), "clip_limit"),
        (dict(clip_limit=True), "clip_limit"),
        (dict(tile_grid_size=(0, 8)), "tile_grid_size"),
        (dict(tile_grid_size=8), "tile_grid_size"),
        (dict(tile_grid_size=(2, 2, 2)), "tile_grid_size"),
        (dict(tile_grid_size=(2.0, 2)), "tile_grid_size"),
        (dict(value_range=(1, 0)), "value_range"),
        (dict(data_format="nhwc"), "data_format"),
        (dict(dtype="float8"), "dtype"),
    ],
)
def test_bad_arguments_raise_naming_them(kwargs, argument):
    with pytest.raises(
        ValueError, match=f"ContrastLimitedAdaptiveHistogramEqualization.*{argument}"
    ):
        CLAHE(**kwargs)


def test_bad_input_rank_raises():
    with pytest.raises(ValueError, match="ContrastLimitedAdaptiveHistogramEqualization: expected"):
        CLAHE()(torch.rand(4, 4))


def test_dict_input_changes_only_images():
    x = torch.rand(3, 3, 16, 12)
    layer = CLAHE(value_range=(0, 1), tile_grid_size=(2, 3))
    data = {
        "images": x,
        "labels": torch.arange(3),
        "bounding_boxes": {"boxes": torch.rand(3, 2, 4), "labels": torch.ones(3, 2)},
        "segmentation_masks": torch.zeros(3, 16, 12, dtype=torch.uint8),
        "keypoints": torch.ones(3, 4, 2),
    }
    out = layer(data)
    torch.testing.assert_close(out["images"], layer(x), rtol=0, atol=0)
    for key in ("labels", "bounding_boxes", "segmentation_masks", "keypoints"):
        assert out[key] is data[key], key


@pytest.mark.parametrize("fmt", ["channels_first", "channels_last"])
def test_torch_export_equals_eager(fmt):
    layer = CLAHE(value_range=(0, 1), clip_limit=3.0, tile_grid_size=(3, 4), data_format=fmt)
    model = torch.nn.Sequential(layer).eval()  # applied in eval() too, as in Keras
    x = torch.rand(2, 3, 20, 18) if fmt == "channels_first" else torch.rand(2, 20, 18, 3)
    program = torch.export.export(model, (x,))
    y = torch.rand(x.shape)  # another input of that shape: nothing was baked in
    # Exact: the exported program runs the same ATen kernels on the same shapes.
    torch.testing.assert_close(program.module()(y), model(y), rtol=0, atol=0)
    assert not torch.equal(model(y), y)
