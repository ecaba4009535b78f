"""RandomCrop (Keras's ``keras.layers.RandomCrop``, with a location per image)."""

from __future__ import annotations

from typing import Any

import torch

from .base import RandomLayer
from .geometric import GeometricLayer, window_matrix
from .resizing import _check_size, center_crop_nchw, center_window


def crop_windows(
    x: torch.Tensor, top: torch.Tensor, left: torch.Tensor, height: int, width: int
) -> torch.Tensor:
    """Crop (B, C, H, W) ``x`` at each image's own (top, left) to (height, width).

    On CPU the offsets are read on the host and each window is copied by ``torch.stack``
    of slices (measured: several times faster than index gathers, which compute an index
    per element). Elsewhere, and under ``torch.compile``, two gathers (rows, then
    columns) keep the offsets on the device; their index tensors are broadcast views.
    """
    b, c, h, w = x.shape
    if x.device.type == "cpu" and not torch.compiler.is_compiling() and b:
        spots = zip(top.tolist(), left.tolist())
        return torch.stack(
            [x[i, :, t : t + height, s : s + width] for i, (t, s) in enumerate(spots)]
        )
    rows = top.view(b, 1) + torch.arange(height, device=x.device)
    cols = left.view(b, 1) + torch.arange(width, device=x.device)
    x = x.gather(2, rows.view(b, 1, height, 1).expand(b, c, height, w))
    return x.gather(3, cols.view(b, 1, 1, width).expand(b, c, height, width))


class RandomCrop(GeometricLayer, RandomLayer):
    """Crop a random ``(height, width)`` window, at its own location in every image.

    In ``eval()`` mode it returns the centre crop at the target size (``CenterCrop``), so
    training and inference shapes agree. When the input is smaller than the target on
    either side, both modes fall back to ``CenterCrop``'s crop-to-aspect-and-resize (as
    Keras does). Unlike Keras (one location for the whole batch, and no randomness when
    one side already matches), the location is drawn per image along every side that
    is larger than the target; boxes and keypoints move by the crop's offset (Keras 3
    ignores it).

    Args:
        height, width: the output size (ints in [1, 65536]).
        seed: seeds the layer's draws; None uses torch's global RNG.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        bounding_box_format: the format of boxes in dict inputs (``preprocessing.
            bounding_boxes``); boxes are clipped to the crop, those left empty get label -1.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (``Layer``). Output: same
    rank, ``(height, width)`` spatially; float dtypes are kept, integer inputs come back as
    float32.

    Raises:
        ValueError: a bad size or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> crop = RandomCrop(2, 2, seed=0)
        >>> x = torch.arange(16.0).reshape(1, 4, 4)
        >>> crop.transform_images(x, {"top": torch.tensor([1]), "left": torch.tensor([2])})
        tensor([[[ 6.,  7.],
                 [10., 11.]]])
    """

    def __init__(
        self,
        height: int,
        width: int,
        seed: int | None = None,
        data_format: str | None = None,
        bounding_box_format: str | None = None,
        dtype: str | None = None,
    ) -> None:
        super().__init__(
            bounding_box_format=bounding_box_format, seed=seed, data_format=data_format, dtype=dtype
        )
        _check_size(self, height, width)
        self.height, self.width = height, width

    def _eval_params(self, images: torch.Tensor):
        n, dev = images.shape[0], images.device
        h, w = self._hw(images)
        top = torch.full((n,), max(h - self.height, 0) // 2, device=dev, dtype=torch.long)
        left = torch.full((n,), max(w - self.width, 0) // 2, device=dev, dtype=torch.long)
        return {"top": top, "left": left}

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        batch, _ = self._as_batch(images)
        n, dev = batch.shape[0], batch.device
        h, w = self._hw(batch)
        # floor(u * (slack + 1)) is uniform over 0..slack; the clamp guards u -> 1.
        u = self._rand((2, n), dev, generator)  # one draw for both offsets
        top = u[0] * max(h - self.height + 1, 1)
        left = u[1] * max(w - self.width + 1, 1)
        top = top.long().clamp_(0, max(h - self.height, 0))
        left = left.long().clamp_(0, max(w - self.width, 0))
        return {"top": top, "left": left}

    def output_size(self, params: Any, height: int, width: int) -> tuple[int, int]:
        return self.height, self.width

    def _fallback(self, height: int, width: int) -> bool:
        return height < self.height or width < self.width

    def warp(self, x: torch.Tensor, params: Any, interpolation: str) -> torch.Tensor:
        h, w = x.shape[-2:]
        if self._fallback(h, w):
            return center_crop_nchw(x, self.height, self.width, interpolation)
        return crop_windows(x, params["top"], params["left"], self.height, self.width)

    def point_matrix(self, params: Any, height: int, width: int) -> torch.Tensor:
        if self._fallback(height, width):
            top, left, win_h, win_w = center_window(height, width, self.height, self.width)
            m = window_matrix(torch.tensor(float(top)), left, win_h, win_w, self.height, self.width)
            return m.expand(params["top"].shape[0], 3, 3)
        return window_matrix(
            params["top"], params["left"], self.height, self.width, self.height, self.width
        )
