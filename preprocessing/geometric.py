"""GeometricLayer: the base of every layer that moves pixels, and what it does to targets.

A geometric layer implements three things and gets every target of a dict input moved
consistently with its pixels:

- ``warp(x, params, interpolation)``: the pixel operation on a float ``(B, C, H, W)`` batch
  (images use the layer's interpolation; segmentation masks use ``"nearest"``);
- ``point_matrix(params, height, width)``: ``(B, 3, 3)`` matrices mapping a point of the
  *input* image to where it lands in the *output* (continuous pixel coordinates: pixel i
  spans [i, i + 1); a projective bottom row is allowed);
- ``output_size(params, height, width)`` when the output size differs from the input's.

Boxes: the four corners of each box go through ``point_matrix``; the new box is the
extent of the moved box's part inside the output image (exact for flips, crops and
resizes; for rotations, shears and perspective it is the smallest axis-aligned box holding
what remains visible of the moved box, which is tighter than clipping the moved box's
extent as Keras does when a turned box is cut by the border); a box left with no area gets
label -1 (Keras's ``clip_to_image_size``), and so does a box that had none in the input
(inverted, zero-width or NaN), whatever the move. Keypoints go through the same
matrix: a keypoint at the centre of pixel (i, j) lands at the centre of the output pixel
that samples pixel (i, j). Masks are resampled with ``"nearest"`` and keep their dtype.

Keras 3 transforms boxes in coordinates where a 90-degree turn about ``(W - 1) / 2`` moves
them by a pixel, and its RandomCrop ignores the crop's offset; here every target moves
exactly where its pixels go.
"""

from __future__ import annotations

from typing import Any

import torch

from .base import Layer
from .bounding_boxes import check_format, clip_to_image_size, convert_format


def apply_points(matrix: torch.Tensor, xy: torch.Tensor) -> torch.Tensor:
    """Map points ``(B, N, 2)`` by ``(B, 3, 3)`` matrices (with the projective division)."""
    m = matrix.to(xy.dtype)
    x, y = xy[..., 0], xy[..., 1]
    mx, my, mw = (m[:, r, :].unsqueeze(1) for r in range(3))  # (B, 1, 3) each
    den = mw[..., 0] * x + mw[..., 1] * y + mw[..., 2]
    out_x = (mx[..., 0] * x + mx[..., 1] * y + mx[..., 2]) / den
    out_y = (my[..., 0] * x + my[..., 1] * y + my[..., 2]) / den
    return torch.stack([out_x, out_y], dim=-1)


def _cross(o: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """z of (a - o) x (b - o) over the last axis (x, y)."""
    return (a[..., 0] - o[..., 0]) * (b[..., 1] - o[..., 1]) - (a[..., 1] - o[..., 1]) * (
        b[..., 0] - o[..., 0]
    )


def quad_extent(quad: torch.Tensor, height: float, width: float) -> torch.Tensor:
    """xyxy extent of (convex quadrilateral ``quad`` (..., 4, 2), corners in polygon order)
    intersected with the image ``[0, width] x [0, height]``; a zero box if they do not meet.

    The extent of a convex polygon clipped to a rectangle is reached at a quad corner
    inside the image, an image corner inside the quad, or where a quad edge crosses an
    image border; all three kinds of candidate are computed and the valid ones kept.
    """
    dtype = quad.dtype
    a, b = quad, quad.roll(-1, dims=-2)  # edges a -> b
    inside_img = (a[..., 0] >= 0) & (a[..., 0] <= width) & (a[..., 1] >= 0) & (a[..., 1] <= height)
    cands, valid = [a], [inside_img]
    # Image corners inside the quad: on the same side of every edge (either orientation).
    img = torch.tensor([[0.0, 0.0], [width, 0.0], [width, height], [0.0, height]], dtype=dtype)
    img = img.to(quad.device)
    side = _cross(a.unsqueeze(-2), b.unsqueeze(-2), img.view(*([1] * (quad.ndim - 2)), 1, 4, 2))
    in_quad = (side >= -1e-6).all(dim=-2) | (side <= 1e-6).all(dim=-2)  # (..., 4)
    cands.append(img.expand(*quad.shape[:-2], 4, 2))
    valid.append(in_quad)
    # Quad edges crossing the four border lines.
    for axis, value, other_max in (
        (0, 0.0, height),
        (0, width, height),
        (1, 0.0, width),
        (1, height, width),
    ):
        d = b[..., axis] - a[..., axis]
        t = (value - a[..., axis]) / torch.where(d == 0, torch.ones_like(d), d)
        other = a[..., 1 - axis] + t * (b[..., 1 - axis] - a[..., 1 - axis])
        ok = (d != 0) & (t >= 0) & (t <= 1) & (other >= 0) & (other <= other_max)
        point = torch.stack(
            [torch.full_like(other, value), other]
            if axis == 0
            else [other, torch.full_like(other, value)],
            dim=-1,
        )
        cands.append(point)
        valid.append(ok)
    pts, ok = torch.cat(cands, dim=-2), torch.cat(valid, dim=-1).unsqueeze(-1)
    inf = torch.tensor(float("inf"), dtype=dtype, device=quad.device)
    low = torch.where(ok, pts, inf).amin(dim=-2)
    high = torch.where(ok, pts, -inf).amax(dim=-2)
    found = ok.any(dim=-2)
    extent = torch.cat([low, high], dim=-1)
    return torch.where(found, extent, torch.zeros_like(extent))


def boxes_extent(
    matrix: torch.Tensor,
    boxes: torch.Tensor,
    height: float | None = None,
    width: float | None = None,
) -> torch.Tensor:
    """xyxy boxes ``(B, N, 4)`` -> the extent of the box's four corners mapped by
    ``matrix``; with ``height`` and ``width``, of the moved box's part inside the image
    (tighter than clipping the extent when a turned box is cut by the border)."""
    b, n = boxes.shape[:2]
    x1, y1, x2, y2 = boxes.unbind(-1)
    corners = torch.stack(
        [torch.stack(c, dim=-1) for c in ((x1, y1), (x2, y1), (x2, y2), (x1, y2))], dim=2
    )  # (B, N, 4, 2), in polygon order
    moved = apply_points(matrix, corners.reshape(b, n * 4, 2)).reshape(b, n, 4, 2)
    if height is None or width is None:
        return torch.cat([moved.amin(dim=2), moved.amax(dim=2)], dim=-1)
    return quad_extent(moved, float(height), float(width))


def _at_least_float32(x: torch.Tensor) -> torch.Tensor:
    """Coordinates are moved in float32 at least: float16/bfloat16 arithmetic on pixel
    coordinates of a large image errs by several times the dtype's own rounding."""
    return x if x.dtype in (torch.float32, torch.float64) else x.to(torch.float32)


def window_matrix(
    top: torch.Tensor, left: torch.Tensor | int, win_h: Any, win_w: Any, out_h: int, out_w: int
) -> torch.Tensor:
    """``(B, 3, 3)`` for "crop the window (top, left, win_h, win_w), resize it to
    (out_h, out_w)": x_out = (x_in - left) * out_w / win_w (continuous coordinates)."""
    top = torch.as_tensor(top, dtype=torch.float32)
    left = torch.as_tensor(left, dtype=torch.float32, device=top.device)
    sy = out_h / torch.as_tensor(win_h, dtype=torch.float32, device=top.device)
    sx = out_w / torch.as_tensor(win_w, dtype=torch.float32, device=top.device)
    b = torch.broadcast_shapes(top.shape, left.shape, sy.shape, sx.shape)
    m = torch.zeros((*b, 3, 3), dtype=torch.float32, device=top.device)
    m[..., 0, 0] = sx
    m[..., 0, 2] = -left * sx
    m[..., 1, 1] = sy
    m[..., 1, 2] = -top * sy
    m[..., 2, 2] = 1.0
    return m


class GeometricLayer(Layer):
    """Base of layers that move pixels; moves boxes, masks and keypoints with them.

    Args:
        bounding_box_format: the format of ``bounding_boxes["boxes"]`` in dict inputs
            (Keras's names, see ``preprocessing.bounding_boxes``); required only when a
            dict input has ``bounding_boxes``. Other arguments go to the next base.

    Raises:
        ValueError: an unknown ``bounding_box_format``; boxes given to a layer without one.
    """

    _abstract = True
    _mask_interpolation = "nearest"  # what warp() is given for segmentation masks

    def __init__(self, bounding_box_format: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bounding_box_format = check_format(self, bounding_box_format)

    # ------------------------------------------------------ subclass interface
    def warp(self, x: torch.Tensor, params: Any, interpolation: str) -> torch.Tensor:
        """The pixel operation on a float ``(B, C, H, W)`` batch."""
        raise NotImplementedError

    def point_matrix(self, params: Any, height: int, width: int) -> torch.Tensor:
        """``(B, 3, 3)``: input point -> output point, continuous pixel coordinates."""
        raise NotImplementedError

    def output_size(self, params: Any, height: int, width: int) -> tuple[int, int]:
        """The output's (height, width) for an input of (height, width)."""
        return height, width

    # ----------------------------------------------------------------- targets
    @property
    def _image_interpolation(self) -> str:
        return getattr(self, "interpolation", "bilinear")

    def _input_hw(self, params: Any) -> tuple[int, int]:
        shape = params.get("input_shape") if isinstance(params, dict) else None
        if shape is None:
            raise ValueError(
                f"{type(self).__name__}: params lack 'input_shape' (the image batch's shape), "
                "which moving boxes and keypoints needs; use the dict from "
                "get_random_transformation, or call the layer on a dict input"
            )
        return (shape[-2], shape[-1]) if self.data_format == "channels_first" else shape[-3:-1]

    def transform_images(self, images: torch.Tensor, params: Any) -> torch.Tensor:
        x = self._to_nchw(self._to_float(images))
        out = self.warp(x, params, self._image_interpolation)
        return self._from_nchw(out)

    def transform_segmentation_masks(self, masks: torch.Tensor, params: Any) -> torch.Tensor:
        x = self._to_nchw(masks)
        dtype = x.dtype
        work = x if dtype in (torch.float32, torch.float64) else x.to(torch.float32)
        out = self.warp(work, params, self._mask_interpolation)
        if not dtype.is_floating_point:
            out = out.round()  # nearest sampling copies values; guard float round-off
        return self._from_nchw(out.to(dtype))

    def _box_format(self, params: Any) -> str:
        # Pipeline hands a fused run's format to the layer that applies the composition.
        fmt = params.get("bounding_box_format") if isinstance(params, dict) else None
        fmt = fmt or self.bounding_box_format
        if fmt is None:
            raise ValueError(
                f"{type(self).__name__}: the input has 'bounding_boxes' but the layer has no "
                "bounding_box_format; pass one, e.g. bounding_box_format='xyxy' (Keras's rule)"
            )
        return fmt

    def move_boxes(self, boxes: torch.Tensor, params: Any, height: int, width: int):
        """xyxy boxes ``(B, N, 4)`` of the input -> xyxy boxes of the output: the extent of
        the moved box's part inside the output image (clipping then marks empty ones)."""
        oh, ow = self.output_size(params, height, width)
        return boxes_extent(self.point_matrix(params, height, width), boxes, oh, ow)

    def transform_bounding_boxes(self, bounding_boxes: dict, params: Any) -> dict:
        fmt = self._box_format(params)
        h, w = self._input_hw(params)
        oh, ow = self.output_size(params, h, w)
        dtype = bounding_boxes["boxes"].dtype
        boxes = convert_format(_at_least_float32(bounding_boxes["boxes"]), fmt, "xyxy", h, w)
        # A box with no area (inverted, a line, NaN) holds no pixel wherever it moves; the
        # extent of its moved corners would re-order or widen it into a real box.
        held = (boxes[..., 2] > boxes[..., 0]) & (boxes[..., 3] > boxes[..., 1])
        moved_boxes = self.move_boxes(boxes, params, h, w)
        # A map with no inverse moves a box nowhere in particular (NaN): it is dropped.
        held = held & torch.isfinite(moved_boxes).all(dim=-1)
        moved = dict(bounding_boxes, boxes=torch.nan_to_num(moved_boxes, nan=0.0))
        out = clip_to_image_size(moved, oh, ow, "xyxy")
        out["labels"] = torch.where(held, out["labels"], torch.full_like(out["labels"], -1))
        out["boxes"] = convert_format(out["boxes"], "xyxy", fmt, oh, ow).to(dtype)
        return out

    def move_points(self, xy: torch.Tensor, params: Any, height: int, width: int):
        """Points ``(B, K, 2)`` of the input -> where they land in the output."""
        return apply_points(self.point_matrix(params, height, width), xy)

    def transform_keypoints(self, keypoints: torch.Tensor, params: Any) -> torch.Tensor:
        h, w = self._input_hw(params)
        xy = self.move_points(_at_least_float32(keypoints[..., :2]), params, h, w)
        return torch.cat([xy.to(keypoints.dtype), keypoints[..., 2:]], dim=-1)
