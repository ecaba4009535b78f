"""datapipe.image's random augmentations (issue 33 item 1): the ``stateless_random_*``
functions keep tf's ``seed=(a, b)`` contract -- the same pair, the same draw, on every
call -- with numpy's Philox instead of tf's stream (D-IMG-3); ``random_*`` take tf's
``seed=None | int`` (D-IMG-4). Given its draw, each is the deterministic function that
test_image_color.py / test_image_geometry.py check against TensorFlow."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from datapipe import image
from datapipe.image._draws import generator

RNG = np.random.default_rng(7)
IMG = RNG.integers(0, 256, (6, 8, 3), dtype=np.uint8)
BATCH = RNG.integers(0, 256, (16, 6, 8, 3), dtype=np.uint8)
FLT = RNG.uniform(0, 1, (6, 8, 3)).astype(np.float32)

STATELESS = [
    ("stateless_random_flip_left_right", ()),
    ("stateless_random_flip_up_down", ()),
    ("stateless_random_crop", ((4, 5, 3),)),
    ("stateless_random_brightness", (0.3,)),
    ("stateless_random_contrast", (0.2, 1.8)),
    ("stateless_random_saturation", (0.2, 1.8)),
    ("stateless_random_hue", (0.4,)),
]


@pytest.mark.parametrize("name, args", STATELESS, ids=[n for n, _ in STATELESS])
def test_the_same_seed_pair_gives_the_same_result_and_pairs_vary_it(name, args):
    fn = getattr(image, name)
    first = fn(IMG, *args, seed=(3, 4))
    for _ in range(3):
        np.testing.assert_array_equal(fn(IMG, *args, seed=(3, 4)), first)
    # a tensor with the same seed: the same draw
    np.testing.assert_array_equal(fn(torch.from_numpy(IMG), *args, seed=(3, 4)).numpy(), first)
    outs = {fn(IMG, *args, seed=(s, 0)).tobytes() for s in range(12)}
    assert len(outs) >= 2  # flips: 2 outcomes; the others: a new value per pair


def test_flip_draws_per_image_of_a_batch_and_flips_each_or_not():
    out = image.stateless_random_flip_left_right(BATCH, seed=(1, 1))
    flipped = [bool((o == img[:, ::-1]).all()) for o, img in zip(out, BATCH)]
    kept = [bool((o == img).all()) for o, img in zip(out, BATCH)]
    assert all(f != k for f, k in zip(flipped, kept))  # each one or the other
    assert 0 < sum(flipped) < len(BATCH)  # 16 draws of p=1/2: both outcomes (seed fixed)


def test_crop_is_a_window_of_the_input_at_the_drawn_offset():
    out = image.stateless_random_crop(IMG, (4, 5, 3), seed=(9, 9))
    rng = generator((9, 9), "t")
    top, left, ch = (int(rng.integers(0, d - s + 1)) for s, d in zip((4, 5, 3), IMG.shape))
    assert ch == 0
    np.testing.assert_array_equal(out, IMG[top : top + 4, left : left + 5])


@pytest.mark.parametrize(
    "name, args, adjust",
    [
        ("stateless_random_brightness", (0.3,), lambda x, u: image.adjust_brightness(x, u)),
        ("stateless_random_contrast", (0.2, 1.8), lambda x, u: image.adjust_contrast(x, u)),
        ("stateless_random_saturation", (0.2, 1.8), lambda x, u: image.adjust_saturation(x, u)),
        ("stateless_random_hue", (0.4,), lambda x, u: image.adjust_hue(x, float(u))),
    ],
)
def test_color_draws_are_the_adjustment_by_a_value_in_range(name, args, adjust):
    lo, hi = (-args[0], args[0]) if len(args) == 1 else args
    u = generator((5, 6), name).uniform(lo, hi)
    assert lo <= u < hi
    got = getattr(image, name)(FLT, *args, seed=(5, 6))
    np.testing.assert_allclose(got, adjust(FLT, np.float32(u)), rtol=0, atol=0)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: image.stateless_random_flip_left_right(IMG, seed=3),
         "stateless_random_flip_left_right: seed must be a pair of ints (a, b), as tf's; got 3"),
        (lambda: image.stateless_random_crop(IMG, (7, 5, 3), seed=(1, 2)),
         "stateless_random_crop: size must have one entry per axis of the value, each between "
         "0 and that axis's length; got size [7, 5, 3] for shape (6, 8, 3)"),
        (lambda: image.stateless_random_brightness(IMG, -0.1, (1, 2)),
         "stateless_random_brightness: max_delta must be non-negative, got -0.1"),
        (lambda: image.stateless_random_contrast(IMG, 1.0, 1.0, (1, 2)),
         "stateless_random_contrast: upper must be > lower, got lower=1.0, upper=1.0"),
        (lambda: image.stateless_random_saturation(IMG, -1.0, 1.0, (1, 2)),
         "stateless_random_saturation: lower must be non-negative, got -1.0"),
        (lambda: image.stateless_random_hue(IMG, 0.6, (1, 2)),
         "stateless_random_hue: max_delta must be in [0, 0.5], got 0.6"),
        (lambda: image.random_crop(IMG, (2, 2, 3), seed="a"),
         "random_crop: seed must be an int or None, got 'a'"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_naming_the_function(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value) == message


def test_random_with_an_int_seed_repeats_its_sequence_in_a_new_process():
    code = (
        "import numpy as np; from datapipe import image\n"
        "x = np.arange(100).reshape(10, 10, 1)\n"
        "print([int(image.random_crop(x, (3, 3, 1), seed=5)[0, 0, 0]) for _ in range(6)],"
        " [bool(image.random_flip_left_right(x, seed=5)[0, 0, 0] == 9) for _ in range(6)])\n"
    )
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout for _ in range(2)]  # fmt: skip
    assert runs[0] == runs[1]
    crops = eval(runs[0].replace("] [", "], ["))  # two lists of 6 draws
    assert len(set(crops[0])) > 1  # later calls continue the stream: not one repeated draw


def test_random_without_a_seed_gives_crops_inside_the_image():
    x = np.arange(100).reshape(10, 10, 1)
    for _ in range(20):
        c = image.random_crop(x, (3, 4, 1))
        top, left = divmod(int(c[0, 0, 0]), 10)
        np.testing.assert_array_equal(c, x[top : top + 3, left : left + 4])
