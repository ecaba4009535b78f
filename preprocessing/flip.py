"""RandomFlip (Keras's ``keras.layers.RandomFlip``)."""

from __future__ import annotations

from typing import Any

import torch

from .affine import AffineLayer, flip_matrix

MODES = ("horizontal", "vertical", "horizontal_and_vertical")


def flip_batch(
    x: torch.Tensor,
    flip_h: torch.Tensor,
    flip_v: torch.Tensor,
    h_axis: int,
    w_axis: int,
    mode: str = "horizontal_and_vertical",
) -> torch.Tensor:
    """Mirror the samples of ``x`` where ``flip_h`` (along ``w_axis``) / ``flip_v`` (along
    ``h_axis``) hold: exact copies.

    On CPU the decisions are read on the host (no device sync there): one ``flip`` kernel
    writes the whole output (the mode's main axis), then each run of samples that needed
    something else is rewritten from ``x`` by a copy or its own flip. Measured here on
    64x3x224x224 float32, this costs about one ``x.flip`` (a copy of a few samples is
    cheaper than the per-run temporaries and first-touch page faults of filling a fresh
    tensor run by run), half a ``torch.where`` over the whole batch and a quarter of
    ``clone`` plus an indexed flip. Elsewhere, and under ``torch.compile`` (where
    data-dependent Python control flow cannot be traced), a ``torch.where`` per axis that
    ``mode`` allows keeps everything on the device.
    """
    if x.device.type != "cpu" or torch.compiler.is_compiling():
        out = x
        if mode != "vertical":
            out = torch.where(flip_h.view(-1, 1, 1, 1), out.flip(w_axis), out)
        if mode != "horizontal":
            out = torch.where(flip_v.view(-1, 1, 1, 1), out.flip(h_axis), out)
        return out
    codes = (flip_h.to(torch.int8) + 2 * flip_v.to(torch.int8)).tolist()
    base = 2 if mode == "vertical" else 1  # the flip most samples of this mode may need
    out = x.flip(w_axis if base == 1 else h_axis)
    start = 0
    for end in range(1, len(codes) + 1):
        if end < len(codes) and codes[end] == codes[start]:
            continue
        code = codes[start]
        if code != base:
            dims = [d for bit, d in ((1, w_axis), (2, h_axis)) if code & bit]
            out[start:end] = x[start:end].flip(dims) if dims else x[start:end]
        start = end
    return out


class RandomFlip(AffineLayer):
    """Mirror each image left-right and/or up-down with probability 1/2 per axis.

    Args:
        mode: ``"horizontal"`` (default), ``"vertical"`` or ``"horizontal_and_vertical"``;
            the last flips each axis independently, so all four outcomes occur.
        seed: seeds the layer's draws; None uses torch's global RNG.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        bounding_box_format: the format of boxes in dict inputs (``preprocessing.
            bounding_boxes``); a box [x1, x2) becomes [W - x2, W - x1).
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch, or a dict of targets (``Layer``). Output: same
    shape, exact pixel copies (masks keep their dtype); float dtypes are kept, integer
    inputs come back as float32 (Keras's policy). Identity (but for the dtype) in
    ``eval()``. Only the flipped samples are flipped; the others are copied.

    Raises:
        ValueError: an unknown ``mode`` or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> flip = RandomFlip("horizontal", seed=0)
        >>> x = torch.tensor([[[1.0, 2.0, 3.0]]])
        >>> flip.transform_images(x, {"flip_h": torch.tensor([True]),
        ...                           "flip_v": torch.tensor([False])})
        tensor([[[3., 2., 1.]]])
    """

    def __init__(
        self,
        mode: str = "horizontal",
        seed: int | None = None,
        data_format: str | None = None,
        bounding_box_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            seed=seed,
            data_format=data_format,
            bounding_box_format=bounding_box_format,
            dtype=dtype,
            **kwargs,
        )
        if mode not in MODES:
            self._fail("mode", f"must be one of {MODES}", mode)
        self.mode = mode

    def _fill_key(self) -> None:
        return None  # exact copies: joins any run of matrix layers in a Pipeline

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        n, dev = images.shape[0], images.device
        # Two independent coins per image, always drawn, so a seed gives the same
        # horizontal decisions whatever the mode.
        coins = self._uniform(2 * n, 0.0, 1.0, dev, generator) < 0.5
        flip_h, flip_v = coins[:n], coins[n:]
        if self.mode == "vertical":
            flip_h = torch.zeros_like(flip_h)
        if self.mode == "horizontal":
            flip_v = torch.zeros_like(flip_v)
        return {"flip_h": flip_h, "flip_v": flip_v}

    def matrix(self, params, height: int, width: int) -> torch.Tensor:
        """(B, 3, 3) output->input matrices, so ``Pipeline`` can fold flips into one warp."""
        return flip_matrix(params["flip_h"], params["flip_v"], height, width)

    def point_matrix(self, params, height: int, width: int) -> torch.Tensor:
        # Exact in closed form: x -> W - x, y -> H - y (continuous coordinates).
        fh = params["flip_h"].to(torch.float32)
        fv = params["flip_v"].to(torch.float32)
        m = torch.zeros(fh.shape[0], 3, 3, device=fh.device)
        m[:, 0, 0], m[:, 0, 2] = 1.0 - 2.0 * fh, fh * width
        m[:, 1, 1], m[:, 1, 2] = 1.0 - 2.0 * fv, fv * height
        m[:, 2, 2] = 1.0
        return m

    def warp(self, x: torch.Tensor, params: Any, interpolation: str) -> torch.Tensor:
        return flip_batch(x, params["flip_h"], params["flip_v"], 2, 3, self.mode)

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        h_axis, w_axis = self._spatial_axes
        x = self._to_float(images)
        return flip_batch(x, params["flip_h"], params["flip_v"], h_axis, w_axis, self.mode)

    def transform_segmentation_masks(self, masks: torch.Tensor, params: Any) -> torch.Tensor:
        h_axis, w_axis = self._spatial_axes
        return flip_batch(masks, params["flip_h"], params["flip_v"], h_axis, w_axis, self.mode)
