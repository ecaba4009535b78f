"""preprocessing.crop: RandomCrop's windows per image (exact pixels, eval centre-crop,
layouts), its boxes, and ``crop_windows``' copy against slices and gathers.
"""

import pytest
import torch
from _layer_helpers import img

import preprocessing as pp
from preprocessing import crop


# ----------------------------------------------------------------------- crop
def _gathered(x, top, left, height, width):
    """crop_windows's device path (two gathers), run on CPU."""
    b, c, h, w = x.shape
    rows = top.view(b, 1) + torch.arange(height)
    cols = left.view(b, 1) + torch.arange(width)
    x = x.gather(2, rows.view(b, 1, height, 1).expand(b, c, height, w))
    return x.gather(3, cols.view(b, 1, 1, width).expand(b, c, height, width))


@pytest.mark.parametrize(
    "shape,size",
    [
        ((5, 3, 11, 13), (4, 6)),
        ((1, 1, 7, 7), (7, 7)),
        ((3, 2, 6, 9), (1, 9)),
        ((2, 4, 5, 8), (5, 1)),
    ],
)
def test_crop_windows_copy_equals_slices_and_gathers(shape, size):
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.rand(shape, generator=g)
    (b, _, h, w), (height, width) = shape, size
    top = torch.randint(0, h - height + 1, (b,), generator=g)
    left = torch.randint(0, w - width + 1, (b,), generator=g)
    top[0], left[-1] = h - height, w - width  # the last window at both far edges
    out = crop.crop_windows(x, top, left, height, width)
    assert out.shape == (b, shape[1], height, width) and out.is_contiguous()
    for i in range(b):
        t, s = int(top[i]), int(left[i])
        assert torch.equal(out[i], x[i, :, t : t + height, s : s + width])
    assert torch.equal(out, _gathered(x, top, left, height, width))
    # A copy, not a view of x.
    assert out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


def test_crop_windows_strided_and_tracked_inputs():
    base = torch.rand(4, 10, 12, 3)
    x = base.permute(0, 3, 1, 2)  # channels_last strides: the per-image slices path
    top, left = torch.tensor([0, 2, 5, 1]), torch.tensor([3, 0, 4, 4])
    assert torch.equal(crop.crop_windows(x, top, left, 5, 8), _gathered(x, top, left, 5, 8))
    shifted = torch.rand(5, 3, 10, 12)[1:]  # contiguous, at a storage offset
    assert shifted.storage_offset() > 0 and shifted.is_contiguous()
    want = _gathered(shifted, top, left, 5, 8)
    assert torch.equal(crop.crop_windows(shifted, top, left, 5, 8), want)
    tracked = torch.rand(4, 3, 10, 12, requires_grad=True)
    out = crop.crop_windows(tracked, top, left, 5, 8)
    out.sum().backward()
    assert tracked.grad is not None
    assert int(tracked.grad.sum()) == 4 * 3 * 5 * 8 and float(tracked.grad.max()) == 1.0
    assert float(tracked.grad[1, :, 0, 0].sum()) == 0.0  # image 1's window starts at (2, 0)


def test_crop_windows_outside_the_image_raise():
    x = torch.rand(2, 3, 8, 8)
    for top, left in (([0, 5], [0, 0]), ([0, 0], [-1, 0]), ([0, 0], [0, 6])):
        with pytest.raises(ValueError, match="crop_windows: 4x3 windows .* do not fit in 8x8"):
            crop.crop_windows(x, torch.tensor(top), torch.tensor(left), 4, 3)


def test_random_crop_layer_matches_its_params():
    layer = pp.RandomCrop(6, 7, seed=2)
    x = torch.rand(5, 3, 10, 11)
    params = pp.RandomCrop(6, 7, seed=2).get_random_transformation(x)
    out = layer(x)
    assert torch.equal(out, _gathered(x, params["top"], params["left"], 6, 7))


# --------------------------------------------------------------------- crops
def test_random_crop_location_per_image_and_exact_pixels():
    crop = pp.RandomCrop(2, 3, seed=0)
    x = img(b=16, h=6, w=8)
    p = crop.get_random_transformation(x)
    out = crop.transform_images(x, p)
    assert out.shape == (16, 3, 2, 3)
    for i in range(16):
        t, left = int(p["top"][i]), int(p["left"][i])
        assert torch.equal(out[i], x[i, :, t : t + 2, left : left + 3])
    assert len({(int(a), int(b)) for a, b in zip(p["top"], p["left"])}) > 1
    assert int(p["top"].max()) <= 4 and int(p["left"].max()) <= 5


def test_random_crop_eval_is_center_crop():
    crop = pp.RandomCrop(2, 3).eval()
    x = img(b=2, h=6, w=8)
    assert torch.equal(crop(x), x[:, :, 2:4, 2:5])
    assert torch.equal(crop(x), pp.CenterCrop(2, 3)(x))


def test_random_crop_channels_last_and_single_image():
    crop = pp.RandomCrop(2, 2, seed=5, data_format="channels_last")
    x = img(b=1, h=4, w=4)[0].permute(1, 2, 0)  # (H, W, C)
    out = crop(x)
    assert out.shape == (2, 2, 3)
    windows = [x[t : t + 2, s : s + 2] for t in range(3) for s in range(3)]
    assert any(torch.equal(out, wdw) for wdw in windows)


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: pp.RandomCrop(0, 3), r"RandomCrop: height must be an int in \[1, 65536\]"),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("/", "/")):
        build()


def test_random_crop_shifts_boxes_by_its_offset():
    # Keras 3 ignores the crop's offset; here a box moves by exactly (-left, -top).
    layer = pp.RandomCrop(6, 8, bounding_box_format="xyxy")
    params = {"top": torch.tensor([2]), "left": torch.tensor([3]), "input_shape": (1, 1, 10, 12)}
    out = layer.transform_bounding_boxes(
        {
            "boxes": torch.tensor([[[4.0, 3.0, 7.0, 5.0], [0.0, 0.0, 2.0, 1.0]]]),
            "labels": torch.tensor([[1, 2]]),
        },
        params,
    )
    assert out["boxes"].tolist() == [[[1.0, 1.0, 4.0, 3.0], [0.0, 0.0, 0.0, 0.0]]]
    assert out["labels"].tolist() == [[1, -1]]  # the second box left the crop
