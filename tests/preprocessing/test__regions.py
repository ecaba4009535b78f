"""preprocessing._regions: the rectangles RandomErasing and CutMix write: pixel windows of
float corners, their masks and pixel counts, and the host fill against the device mask.
The layers' own checks of both paths are in test_erasing.py and test_mixing.py.
"""

import numpy as np
import pytest
import torch

from preprocessing import _regions


def test_pixel_window_holds_the_integers_inside_the_float_corners():
    # [x0, x1, y0, y1]: i >= x0 and i < x1 for integers i is [ceil(x0), ceil(x1)).
    corners = torch.tensor(
        [
            [0.5, 3.0, 1.0, 2.5],  # x in {1, 2}, y in {1, 2}
            [-2.0, 0.2, 3.1, 9.0],  # clipped: x in {0}, y in {4} (height 5)
            [4.0, 4.0, 0.0, 5.0],  # no width
            [2.5, 1.5, 0.0, 1.0],  # inverted: empty, start == end
        ]
    )
    window = _regions.pixel_window(corners, 5, 6)
    assert window.dtype == torch.int64
    assert window.tolist() == [[1, 3, 1, 3], [0, 1, 4, 5], [4, 4, 0, 5], [3, 3, 0, 1]]
    assert _regions.window_pixels(window).tolist() == [4, 1, 0, 0]
    # The same integers as testing each pixel against the float corners.
    for (x0, x1, y0, y1), mask in zip(corners.tolist(), _regions.window_mask(window, 5, 6)):
        expected = [[x0 <= j < x1 and y0 <= i < y1 for j in range(6)] for i in range(5)]
        assert mask[0].tolist() == expected


@pytest.mark.parametrize("seed", range(4))
def test_host_fill_equals_the_masked_select(seed):
    rng = np.random.default_rng(seed)
    n, c, h, w = 7, 2, 9, 11
    corners = torch.tensor(rng.uniform(-3, 14, (n, 4)), dtype=torch.float32)
    window = _regions.pixel_window(corners, h, w)
    active = torch.tensor(rng.random(n) < 0.7)
    x = torch.tensor(rng.random((n, c, h, w)), dtype=torch.float32)
    fill = torch.tensor(rng.random((n, c, h, w)), dtype=torch.float32)
    host = _regions.fill_windows(
        x.clone(), window, active, lambda i, y0, y1, x0, x1: fill[i, :, y0:y1, x0:x1]
    )
    mask = _regions.window_mask(window, h, w) & active.view(-1, 1, 1, 1)
    assert torch.equal(host, torch.where(mask, fill, x))
    changed = (host != x).flatten(1).any(1)
    assert not changed[~active].any()  # inactive images are never written


def test_crop_bounds_place_a_side_of_ratio_times_length():
    u = torch.tensor([0.0, 0.5, 0.999])
    ratio = torch.tensor([0.25, 0.5, 1.0])
    start, end = _regions.crop_bounds(u, 8, ratio)
    assert torch.allclose(end - start, ratio * 8)
    assert start.tolist() == [0.0, 0.5 * (8 - 4), pytest.approx(0.0)]
    assert (start >= 0).all() and (end <= 8).all()


def test_on_host_only_for_eager_cpu_tensors():
    assert _regions.on_host(torch.zeros(1))
    assert not _regions.on_host(torch.zeros(1, device="meta"))
