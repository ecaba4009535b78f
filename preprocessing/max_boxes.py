"""MaxNumBoundingBoxes (Keras's ``keras.layers.MaxNumBoundingBoxes``)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .base import MAX_BOXES, Layer, check_int


class MaxNumBoundingBoxes(Layer):
    """Pad or truncate ``bounding_boxes`` to exactly ``max_number`` boxes per image.

    Boxes beyond ``max_number`` are dropped (the first ones are kept); missing ones are
    added with every coordinate and the label equal to ``fill_value`` (Keras's padding
    value, -1: the label Keras's layers give boxes that carry nothing). Fixed counts let
    elements with different numbers of boxes be batched. Images and other targets pass
    through unchanged (the dtype too: this layer computes nothing on pixels).

    Args:
        max_number: the number of boxes per image, an int in [1, 65536]
            (``preprocessing.base.MAX_BOXES``: the output is ``(batch, max_number, 4)``).
        fill_value: the value of added boxes' coordinates and labels; default -1.
        data_format: the images' layout (kept in the config, as every image layer's; the
            boxes do not depend on it). None: ``preprocessing.image_data_format()``.
        **kwargs: Keras's base-layer arguments (``name``, ``bounding_box_format``: boxes
            are padded or cut whatever their format; see ``Layer``).

    Input: a dict with ``images`` and ``bounding_boxes`` (``{"boxes": (N, 4) or (B, N, 4),
    "labels": (N,) or (B, N)}``); an image or batch alone is returned unchanged. Output:
    boxes ``(max_number, 4)`` / ``(B, max_number, 4)``, labels likewise.

    Raises:
        ValueError: a bad argument or malformed ``bounding_boxes``.

    Example:
        >>> import torch
        >>> out = MaxNumBoundingBoxes(3)({
        ...     "images": torch.zeros(3, 8, 8),
        ...     "bounding_boxes": {"boxes": torch.tensor([[1.0, 1.0, 4.0, 5.0]]),
        ...                        "labels": torch.tensor([7])}})
        >>> out["bounding_boxes"]["boxes"].tolist(), out["bounding_boxes"]["labels"].tolist()
        ([[1.0, 1.0, 4.0, 5.0], [-1.0, -1.0, -1.0, -1.0], [-1.0, -1.0, -1.0, -1.0]], [7, -1, -1])
    """

    _keras_base_factor = True  # Keras's takes its base layer's (unused) factor

    _checks_layout = False

    def __init__(
        self,
        max_number: int,
        fill_value: int = -1,
        data_format: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data_format=data_format, **kwargs)
        check_int(self, "max_number", max_number, 1, high=MAX_BOXES)
        if isinstance(fill_value, bool) or not isinstance(fill_value, int):
            self._fail("fill_value", "must be an int", fill_value)
        self.max_number, self.fill_value = max_number, fill_value

    def transform_images(self, images: torch.Tensor, params: Any) -> torch.Tensor:
        return images

    def transform_bounding_boxes(self, bounding_boxes: dict, params: Any) -> dict:
        boxes, labels = bounding_boxes["boxes"], bounding_boxes["labels"]
        n = boxes.shape[1]
        pad = max(self.max_number - n, 0)
        boxes = F.pad(boxes[:, : self.max_number], (0, 0, 0, pad), value=float(self.fill_value))
        labels = F.pad(labels[:, : self.max_number], (0, pad), value=self.fill_value)
        return {**bounding_boxes, "boxes": boxes, "labels": labels}
