"""RandomSharpness (Keras 3's ``keras.layers.RandomSharpness``)."""

from __future__ import annotations

import torch

from ._photometric import FactorLayer, per_image


class RandomSharpness(FactorLayer):
    """Sharpen or blur each image by a random amount (Keras 3's ``RandomSharpness``).

    Per image ``f`` is drawn from ``factor``'s range and ``s = 2 f``; the image becomes
    ``clip(x + (1 - s) * (smooth(x) - x), low, high)`` with ``smooth`` the 3x3 kernel
    ``[[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13`` per channel. ``f = 0.5`` changes nothing,
    smaller values blur, larger values sharpen (PIL's ``ImageEnhance.Sharpness`` with
    factor ``s``). Border pixels, where the kernel would reach outside the image, are
    kept as they are (PIL's and torchvision's rule); Keras pads with zeros there, which
    darkens (``s < 1``) or brightens (``s > 1``) a one-pixel frame. Interior pixels agree
    with Keras.

    Args:
        factor: a number ``a`` in [0, 1] draws ``f`` from ``[0, a]``; a pair ``(lo, hi)``
            (``0 <= lo <= hi <= 1``) from ``[lo, hi]``.
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        seed: seeds the layer's draws; None uses torch's global RNG.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch (any channel count) or a dict of targets (only
    ``images`` change). Output: same shape; float dtypes are kept, integer inputs come
    back as float32. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> x = torch.zeros(1, 3, 3)
        >>> x[0, 1, 1] = 13.0
        >>> RandomSharpness((0.0, 0.0))(x)  # s = 0: the smoothed image inside the border
        tensor([[[0., 0., 0.],
                 [0., 5., 0.],
                 [0., 0., 0.]]])
    """

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        x = self._to_nchw(self._to_float(images))
        out = x.clone()
        if x.shape[2] > 2 and x.shape[3] > 2:
            # smooth(x) - x = (box3x3(x) - 9 x) / 13 inside the border; the 3x3 box sum
            # as two passes of shifted adds costs half of a depthwise conv2d on CPU.
            rows = x[..., :, :-2] + x[..., :, 1:-1]
            rows.add_(x[..., :, 2:])
            box = rows[..., :-2, :] + rows[..., 1:-1, :]
            box.add_(rows[..., 2:, :])
            w = (1.0 - 2.0 * per_image(params["factor"], x)) / 13.0
            inner = out[:, :, 1:-1, 1:-1]
            inner.mul_(1.0 - 9.0 * w).add_(box.mul_(w))
        out = out.clamp_(*self._range)
        return self._from_nchw(out)
