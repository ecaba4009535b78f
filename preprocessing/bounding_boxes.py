"""Bounding-box formats, conversion and clipping (Keras 3's ``keras.utils.bounding_boxes``).

Coordinates are continuous pixel coordinates: pixel ``i`` spans ``[i, i + 1)``, so a box
``[x1, y1, x2, y2]`` in ``"xyxy"`` covers the pixels whose centres ``(i + 0.5, j + 0.5)`` lie
inside it and an image of width W spans ``[0, W]``. Formats (Keras's names):

=================== ======================================================
``xyxy``            left, top, right, bottom (pixels)
``yxyx``            top, left, bottom, right
``xywh``            left, top, width, height
``center_xywh``     centre x, centre y, width, height
``center_yxhw``     centre y, centre x, height, width
``rel_*``           ``rel_xyxy``, ``rel_yxyx``, ``rel_xywh``, ``rel_center_xywh``: the same,
                    as fractions of the image's width (x) and height (y)
=================== ======================================================
"""

from __future__ import annotations

from typing import Any

import torch

from ._targets import as_tensor

FORMATS = (
    "xyxy",
    "yxyx",
    "xywh",
    "center_xywh",
    "center_yxhw",
    "rel_xyxy",
    "rel_yxyx",
    "rel_xywh",
    "rel_center_xywh",
)


def check_format(layer: Any, value: Any) -> str | None:
    """A layer's ``bounding_box_format`` argument: None or one of ``FORMATS``."""
    if value is not None and value not in FORMATS:
        layer._fail("bounding_box_format", f"must be None or one of {FORMATS}", value)
    return value


def _to_xyxy(boxes: torch.Tensor, fmt: str, height: float, width: float) -> torch.Tensor:
    a, b, c, d = boxes.unbind(-1)
    if fmt.startswith("rel_"):
        fmt = fmt[4:]
        if fmt == "yxyx":
            a, b, c, d = a * height, b * width, c * height, d * width
        else:
            a, b, c, d = a * width, b * height, c * width, d * height
    if fmt == "yxyx":
        a, b, c, d = b, a, d, c
    elif fmt == "xywh":
        c, d = a + c, b + d
    elif fmt == "center_xywh":
        a, b, c, d = a - c / 2, b - d / 2, a + c / 2, b + d / 2
    elif fmt == "center_yxhw":
        a, b, c, d = b - d / 2, a - c / 2, b + d / 2, a + c / 2
    return torch.stack([a, b, c, d], dim=-1)


def _from_xyxy(boxes: torch.Tensor, fmt: str, height: float, width: float) -> torch.Tensor:
    x1, y1, x2, y2 = boxes.unbind(-1)
    rel = fmt.startswith("rel_")
    base = fmt[4:] if rel else fmt
    if base == "xyxy":
        out = [x1, y1, x2, y2]
    elif base == "yxyx":
        out = [y1, x1, y2, x2]
    elif base == "xywh":
        out = [x1, y1, x2 - x1, y2 - y1]
    elif base == "center_xywh":
        out = [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1]
    else:  # center_yxhw
        out = [(y1 + y2) / 2, (x1 + x2) / 2, y2 - y1, x2 - x1]
    if rel:
        scale = [height, width] * 2 if base == "yxyx" else [width, height] * 2
        out = [v / s for v, s in zip(out, scale)]
    return torch.stack(out, dim=-1)


def convert_format(
    boxes: torch.Tensor,
    source: str,
    target: str,
    height: float | None = None,
    width: float | None = None,
) -> torch.Tensor:
    """Convert ``(..., 4)`` boxes from ``source`` to ``target`` format (Keras's function).

    Args:
        boxes: a float tensor ``(..., 4)``; integer input is converted to float32.
        source, target: names from ``FORMATS``.
        height, width: the image size in pixels, needed when either format is relative.

    Returns:
        A tensor of the same shape (a new one; float dtypes are kept).

    Raises:
        ValueError: an unknown format, a last axis other than 4, or a relative format
            without ``height`` and ``width``.

    Example:
        >>> convert_format(torch.tensor([[10.0, 20.0, 30.0, 60.0]]), "xyxy", "center_xywh")
        tensor([[20., 40., 20., 40.]])
    """
    for name, fmt in (("source", source), ("target", target)):
        if fmt not in FORMATS:
            raise ValueError(f"convert_format: {name} must be one of {FORMATS}; got {fmt!r}")
    if boxes.shape[-1] != 4:
        raise ValueError(f"convert_format: boxes must be (..., 4); got {tuple(boxes.shape)}")
    if (source.startswith("rel_") or target.startswith("rel_")) and (
        height is None or width is None
    ):
        raise ValueError(
            f"convert_format: {source!r} -> {target!r} needs the image's height and width"
        )
    if not boxes.is_floating_point():
        boxes = boxes.to(torch.float32)
    if source == target:
        return boxes.clone()
    h, w = 1.0, 1.0
    if height is not None and width is not None:
        h, w = float(height), float(width)
    return _from_xyxy(_to_xyxy(boxes, source, h, w), target, h, w)


def clip_to_image_size(
    bounding_boxes: dict[str, torch.Tensor],
    height: float,
    width: float,
    bounding_box_format: str = "xyxy",
) -> dict[str, torch.Tensor]:
    """Clip boxes to the image and mark those left with no area (Keras's function).

    Every coordinate is clipped to ``[0, width]`` / ``[0, height]`` (``[0, 1]`` for
    relative formats); a box left with no area (``x2 <= x1`` or ``y2 <= y1``, or NaN) gets
    label -1, Keras's marker of a dropped (padding) box. (Keras tests the product of
    width and height, which keeps a box inverted on both axes; here it is dropped.)
    Boxes keep their place, so shapes do not change.

    Args:
        bounding_boxes: ``{"boxes": (..., N, 4), "labels": (..., N)}`` (other keys kept).
        height, width: the image size in pixels.
        bounding_box_format: the boxes' format (any of ``FORMATS``).

    Returns:
        A new dict with clipped ``boxes`` (same format) and ``labels``.

    Example:
        >>> out = clip_to_image_size(
        ...     {"boxes": torch.tensor([[-5.0, 2.0, 4.0, 8.0], [12.0, 0.0, 20.0, 3.0]]),
        ...      "labels": torch.tensor([1, 2])}, height=6, width=10)
        >>> out["boxes"], out["labels"]
        (tensor([[ 0.,  2.,  4.,  6.],
                [10.,  0., 10.,  3.]]), tensor([ 1, -1]))
    """
    boxes = convert_format(bounding_boxes["boxes"], bounding_box_format, "xyxy", height, width)
    x1, y1, x2, y2 = boxes.unbind(-1)
    x1, x2 = x1.clamp(0.0, float(width)), x2.clamp(0.0, float(width))
    y1, y2 = y1.clamp(0.0, float(height)), y2.clamp(0.0, float(height))
    # Keras tests (x2 - x1) * (y2 - y1) > 0, which keeps a box inverted on both axes.
    has_area = (x2 > x1) & (y2 > y1)
    boxes = torch.stack([x1, y1, x2, y2], dim=-1)
    out = dict(bounding_boxes)
    out["boxes"] = convert_format(boxes, "xyxy", bounding_box_format, height, width)
    labels = as_tensor(bounding_boxes["labels"])
    out["labels"] = torch.where(has_area, labels, torch.full_like(labels, -1))
    return out
