"""RandAugment (Keras 3's ``keras.layers.RandAugment``; Cubuk et al., 2019,
https://arxiv.org/abs/1909.13719)."""

from __future__ import annotations

from typing import Any

import torch

from ._augment_ops import apply_slot, build_ops, draw_slots
from .affine import INTERPOLATIONS
from .base import MAX_OPS, RandomLayer, check_int
from .bounding_boxes import check_format

OPS = (
    "random_shear",
    "random_translation",
    "random_rotation",
    "random_brightness",
    "random_color_degeneration",
    "random_contrast",
    "random_sharpness",
    "random_posterization",
    "solarization",
    "auto_contrast",
    "equalization",
)


class RandAugment(RandomLayer):
    """Apply ``num_ops`` operations in a row, each picked at random from Keras 3's eleven,
    to each image (Keras 3's ``RandAugment``).

    The ops, in Keras's order, and how Keras configures them from the magnitude range
    ``factor`` = ``(lower, upper)``: ``RandomShear(x_factor=factor, y_factor=factor)``,
    ``RandomTranslation(factor, factor)``, ``RandomRotation(factor)``,
    ``RandomBrightness(factor)``, ``RandomColorDegeneration(factor)``,
    ``RandomContrast(factor)``, ``RandomSharpness(factor)``,
    ``RandomPosterization(max(1, int(8 * upper)))``, ``Solarization(factor, factor)``,
    ``AutoContrast()`` and ``Equalization()`` (geometric ops with ``interpolation`` and
    their default ``fill_mode="reflect"``; photometric ones with ``value_range``). Each op
    keeps its own semantics: e.g. ``RandomTranslation((0, 0.5), (0, 0.5))`` shifts by up
    to half the image down and right, ``RandomRotation((0, 0.5))`` turns by up to half a
    turn counter-clockwise, as in Keras.

    For every slot ``i < num_ops`` each image picks an op uniformly (RandAugment's rule,
    as in the paper and torchvision; Keras picks one op per slot for the whole batch),
    and the op runs only on the images that picked it, with parameters drawn per image.
    Boxes, masks and keypoints of a dict input move with the geometric ops (the
    photometric ones leave them alone); labels pass through.

    Args:
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        num_ops: operations per image, an int in [0, 32] (default 2;
            ``preprocessing.base.MAX_OPS``: each is a pass over the batch).
        factor: the magnitude, a number ``f`` in [0, 1] meaning ``(0, f)`` or a pair
            ``(lower, upper)`` in [0, 1]; default 0.5.
        interpolation: ``"bilinear"`` (default) or ``"nearest"``, for the geometric ops.
        seed: seeds the layer's draws (each op gets a seed derived from it; Keras hands
            all ops the same seed); None uses torch's global RNG.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        bounding_box_format: the format of boxes in dict inputs (``preprocessing.
            bounding_boxes``).
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch (3 channels for the colour ops' grayscale) or a
    dict of targets. Output: same shape; float dtypes are kept, integer inputs come back
    as float32. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> layer = RandAugment(value_range=(0, 1), num_ops=2, factor=0.3, seed=0)
        >>> x = torch.rand(8, 3, 32, 32, generator=torch.Generator().manual_seed(0))
        >>> out = layer(x)
        >>> out.shape, bool(out.min() >= 0 and out.max() <= 1)
        (torch.Size([8, 3, 32, 32]), True)
        >>> params = layer.get_random_transformation(x)
        >>> params["layer_idxes"].shape  # (B, num_ops): each image's op per slot
        torch.Size([8, 2])
    """

    def __init__(
        self,
        value_range: tuple[float, float] = (0, 255),
        num_ops: int = 2,
        factor: float | tuple[float, float] = 0.5,
        interpolation: str = "bilinear",
        seed: int | None = None,
        data_format: str | None = None,
        bounding_box_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype, **kwargs)
        self.num_ops, self.interpolation = num_ops, interpolation
        self.bounding_box_format = bounding_box_format
        self._set_value_range(value_range)
        check_int(self, "num_ops", num_ops, 0, high=MAX_OPS)
        if interpolation not in INTERPOLATIONS:
            self._fail("interpolation", f"must be one of {INTERPOLATIONS}", interpolation)
        check_format(self, bounding_box_format)
        self.ops = build_ops(
            OPS,
            self._set_factor(factor),  # the magnitude range (lower, upper)
            value_range,
            interpolation,
            seed,
            self.data_format,
            bounding_box_format,
            self.dtype,
        )

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        """``{"layer_idxes": (B, num_ops) int64 op indices, "transforms": [one dict per
        slot: {op name: that op's parameters for the batch}]}``."""
        n, dev = images.shape[0], images.device
        u = self._rand((n, self.num_ops), dev, generator)
        choice = (u * len(self.ops)).to(torch.int64).clamp_(max=len(self.ops) - 1)
        return {
            "layer_idxes": choice,
            "transforms": draw_slots(self.ops, images, self.num_ops, generator),
        }

    def _per_slot(self, method: str, value: Any, params: dict[str, Any], n: int) -> Any:
        for i in range(self.num_ops):
            choice = params["layer_idxes"][:, i]
            value = apply_slot(self.ops, method, value, choice, params["transforms"][i], n)
        return value

    def transform_images(self, images: torch.Tensor, params: dict[str, Any]) -> torch.Tensor:
        return self._per_slot("transform_images", self._to_float(images), params, images.shape[0])

    def transform_bounding_boxes(self, bounding_boxes: dict, params: Any) -> dict:
        n = bounding_boxes["boxes"].shape[0]
        return self._per_slot("transform_bounding_boxes", bounding_boxes, params, n)

    def transform_segmentation_masks(self, masks: torch.Tensor, params: Any) -> torch.Tensor:
        return self._per_slot("transform_segmentation_masks", masks, params, masks.shape[0])

    def transform_keypoints(self, keypoints: torch.Tensor, params: Any) -> torch.Tensor:
        return self._per_slot("transform_keypoints", keypoints, params, keypoints.shape[0])
