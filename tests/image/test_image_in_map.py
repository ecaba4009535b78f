"""datapipe.image's functions inside ``Dataset.map`` on every executor (issue 33 item 1):
a small augmentation pipeline gives the same elements on the thread and process executors
as when the functions run in this process."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe import image

IMAGES = np.random.default_rng(5).integers(0, 256, (6, 12, 10, 3), dtype=np.uint8)


def augment(x, i):
    x = image.stateless_random_flip_left_right(x, seed=(int(i), 1))
    x = image.stateless_random_brightness(x, 0.2, seed=(int(i), 2))
    x = image.rot90(image.central_crop(x, 0.5), k=1)
    return image.convert_image_dtype(image.rgb_to_grayscale(x), np.float32)


def pipeline(executor):
    ds = dp.Dataset.zip((dp.from_tensor_slices(IMAGES), dp.range(len(IMAGES))))
    return ds.map(augment, num_parallel_calls=2, executor=executor)


@pytest.mark.parametrize("executor", [None, "thread", "process"])
def test_augmentations_in_map_give_the_same_elements_on_every_executor(executor):
    want = [augment(x, i) for i, x in enumerate(IMAGES)]
    got = list(pipeline(executor))
    assert len(got) == 6
    for g, w in zip(got, want):
        assert g.shape == (6, 6, 1) and g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=0, atol=0)  # one code path: the same floats
