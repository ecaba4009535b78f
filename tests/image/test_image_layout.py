"""Every datapipe.image function takes channels-last input, as tf.image's, and refuses an
input that looks channels-first, naming the permute (issue 33 items 1 and 3)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from datapipe import image

# every public function, called with valid arguments besides the image
CALLS = {
    "flip_left_right": (), "flip_up_down": (), "rot90": (1,), "transpose": (),
    "central_crop": (0.5,), "crop_to_bounding_box": (0, 0, 2, 2),
    "pad_to_bounding_box": (0, 0, 60, 60), "resize_with_crop_or_pad": (8, 8),
    "resize": ((8, 8),), "rgb_to_grayscale": (), "grayscale_to_rgb": (), "rgb_to_hsv": (),
    "hsv_to_rgb": (), "adjust_brightness": (0.1,), "adjust_contrast": (1.5,),
    "adjust_saturation": (0.5,), "adjust_hue": (0.1,), "adjust_gamma": (0.5,),
    "per_image_standardization": (), "random_flip_left_right": (), "random_flip_up_down": (),
    "random_crop": ((2, 2, 2),), "stateless_random_flip_left_right": ((1, 2),),
    "stateless_random_flip_up_down": ((1, 2),), "stateless_random_crop": ((2, 2, 2), (1, 2)),
    "stateless_random_brightness": (0.1, (1, 2)), "stateless_random_contrast": (0.5, 1.5, (1, 2)),
    "stateless_random_saturation": (0.5, 1.5, (1, 2)), "stateless_random_hue": (0.1, (1, 2)),
}  # fmt: skip


def test_the_calls_cover_every_public_function():
    assert sorted(CALLS) == sorted(n for n in image.__all__ if n != "convert_image_dtype")


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("shape", [(3, 50, 40), (2, 3, 50, 40)])
def test_a_channels_first_input_is_refused_naming_the_permute(name, shape):
    args = CALLS[name]
    if name == "random_crop" or name == "stateless_random_crop":
        args = ((1,) * len(shape), *args[1:])
    with pytest.raises(ValueError) as info:
        getattr(image, name)(np.zeros(shape, np.float32), *args)
    msg = str(info.value)
    perm = "(1, 2, 0)" if len(shape) == 3 else "(0, 2, 3, 1)"
    assert msg.startswith(f"{name}: ") and "looks channels_first" in msg
    if name != "resize":  # resize is dp.resize_image's: it names data_format
        assert f"{shape} looks channels_first" in msg and perm in msg
    else:
        assert "data_format" in msg


@pytest.mark.parametrize("name", sorted(CALLS))
def test_hwc_numpy_and_tensor_in_give_the_same_kind_out(name):
    channels = 1 if name == "grayscale_to_rgb" else 3
    x = np.random.default_rng(0).uniform(0, 1, (2, 5, 6, channels)).astype(np.float32)
    args = CALLS[name]
    if name in ("random_crop", "stateless_random_crop"):
        args = ((2, 4, 4, channels), *args[1:])
    got_np = getattr(image, name)(x, *args)
    got_t = getattr(image, name)(torch.from_numpy(x), *args)
    assert isinstance(got_np, np.ndarray) and isinstance(got_t, torch.Tensor)
    assert tuple(got_t.shape) == got_np.shape and got_np.ndim == 4
    assert got_t.dtype == torch.float32 and got_np.dtype == np.float32
