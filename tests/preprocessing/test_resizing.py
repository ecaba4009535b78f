"""Resizing and CenterCrop: shapes and aspect modes, boxes, and against Keras 3.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import pytest
import torch
from _layer_helpers import FORMATS, compare, img, keras_batch

import preprocessing as pp


@pytest.mark.parametrize("fmt", FORMATS)
def test_resizing_and_center_crop_match_keras(ref, fmt):
    x = keras_batch(h=10, w=7, fmt=fmt)
    for kwargs in [
        dict(interpolation="bilinear"),
        dict(crop_to_aspect_ratio=True),
        dict(pad_to_aspect_ratio=True, fill_value=0.5),
    ]:
        kw = dict(data_format=fmt, **kwargs)
        compare(ref, pp.Resizing(5, 5, **kw), "Resizing", (5, 5), kw, x)
    kw = dict(data_format=fmt)
    compare(ref, pp.Resizing(13, 17, **kw), "Resizing", (13, 17), kw, x)
    compare(ref, pp.CenterCrop(4, 3, **kw), "CenterCrop", (4, 3), kw, x)
    compare(ref, pp.CenterCrop(12, 5, **kw), "CenterCrop", (12, 5), kw, x)


def test_center_crop_smaller_input_resizes_like_keras():
    out = pp.CenterCrop(4, 4)(torch.ones(1, 2, 2))
    assert out.shape == (1, 4, 4) and torch.allclose(out, torch.ones(1, 4, 4))


# -------------------------------------------------------------- resize etc.
def test_resizing_shapes_and_aspect_modes():
    x = img(b=2, h=4, w=8)
    assert pp.Resizing(2, 2)(x).shape == (2, 3, 2, 2)
    cropped = pp.Resizing(4, 4, crop_to_aspect_ratio=True)(x)
    assert torch.equal(cropped, x[:, :, :, 2:6])
    padded = pp.Resizing(8, 8, pad_to_aspect_ratio=True, fill_value=-1.0)(x)
    assert torch.equal(padded[:, :, 2:6], x) and (padded[:, :, :2] == -1).all()


def test_resizing_nearest_uint8_becomes_float32():
    x = torch.tensor([[[0, 10], [20, 30]]], dtype=torch.uint8)
    out = pp.Resizing(4, 4, interpolation="nearest")(x)
    assert out.dtype == torch.float32
    assert out[0].tolist()[0] == [0.0, 0.0, 10.0, 10.0]


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "build, message",
    [
        (
            lambda: pp.Resizing(2, 2, crop_to_aspect_ratio=True, pad_to_aspect_ratio=True),
            "Resizing: crop_to_aspect_ratio/pad_to_aspect_ratio cannot both be True",
        ),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("/", "/")):
        build()


def test_resizing_scales_relative_and_absolute_boxes():
    layer = pp.Resizing(5, 10, bounding_box_format="rel_xyxy")
    boxes = {"boxes": torch.tensor([[0.1, 0.2, 0.5, 0.6]]), "labels": torch.tensor([0])}
    out = layer({"images": torch.rand(3, 10, 20), "bounding_boxes": boxes})
    torch.testing.assert_close(
        out["bounding_boxes"]["boxes"], boxes["boxes"]
    )  # relative: unchanged
    absolute = pp.Resizing(5, 10, bounding_box_format="xywh")(
        {
            "images": torch.rand(3, 10, 20),
            "bounding_boxes": {
                "boxes": torch.tensor([[2.0, 2.0, 8.0, 4.0]]),
                "labels": torch.tensor([0]),
            },
        }
    )
    assert absolute["bounding_boxes"]["boxes"].tolist() == [[1.0, 1.0, 4.0, 2.0]]


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_with_a_dynamic_height_and_width(fmt):
    # Issue 32 item 8: the same-size shortcut guarded the symbolic height to differ from
    # the target ("Constraints violated (h)"). Exported once, the program takes any side
    # in the declared range and equals eager (the same F.interpolate; 1e-6 for float32
    # values in [0, 1]), the target size itself included.
    model = torch.nn.Sequential(pp.Resizing(8, 6, data_format=fmt)).eval()
    h, w = torch.export.Dim("h", min=2, max=512), torch.export.Dim("w", min=2, max=512)
    axes = {2: h, 3: w} if fmt == "channels_first" else {1: h, 2: w}
    example = img(2, 3, 20, 30)
    example = example if fmt == "channels_first" else example.permute(0, 2, 3, 1)
    program = torch.export.export(model, (example,), dynamic_shapes=(axes,)).module()
    for side_h, side_w in [(20, 30), (33, 17), (8, 6), (2, 2)]:
        x = img(2, 3, side_h, side_w, seed=side_h)
        x = x if fmt == "channels_first" else x.permute(0, 2, 3, 1).contiguous()
        got = program(x)
        assert got.shape == ((2, 3, 8, 6) if fmt == "channels_first" else (2, 8, 6, 3))
        torch.testing.assert_close(got, model(x), atol=1e-6, rtol=0)


def test_aspect_windows_equal_keras_float_rule():
    # aspect_window / pad_amounts use integer floor division (it stays symbolic under
    # torch.export); it equals Keras's int(a * b / c) over every side pair up to 64.
    from preprocessing.resizing import aspect_window, pad_amounts

    for h in range(1, 65):
        for w in range(1, 65):
            for height, width in [(7, 5), (3, 11), (8, 8), (1, 64)]:
                crop_h = max(min(h, int(w * height / width)), 1)
                crop_w = max(min(w, int(h * width / height)), 1)
                assert aspect_window(h, w, height, width) == (
                    int((h - crop_h) / 2),
                    int((w - crop_w) / 2),
                    crop_h,
                    crop_w,
                )
                pad_h, pad_w = max(h, int(w * height / width)), max(w, int(h * width / height))
                assert pad_amounts(h, w, height, width) == (
                    int((pad_h - h) / 2),
                    int((pad_w - w) / 2),
                )
