"""Rectangles of pixels per image: the region RandomErasing fills and CutMix pastes.

Keras 3 draws a rectangle as float corners ``x0 <= x < x1``, ``y0 <= y < y1`` (each side
``ratio * length`` long, placed at ``U * (length - side)``) and takes the pixels whose
integer coordinates fall inside. For integer ``i``, ``i >= x0`` is ``i >= ceil(x0)`` and
``i < x1`` is ``i < ceil(x1)``, so the region is exactly the integer window
``[ceil(x0), ceil(x1)) x [ceil(y0), ceil(y1))``: the layers work on that window (a slice
copy per image on CPU; one masked select elsewhere) and CutMix counts its pixels.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def crop_bounds(u: torch.Tensor, length: int, ratio: torch.Tensor):
    """Keras's ``_compute_crop_bounds``: (start, end) floats of a side ``ratio * length``
    placed at ``u * (length - side)``; ``u`` in U[0, 1), all float32 as Keras computes."""
    side = ratio * length
    start = u * (length - side)
    return start, start + side


def pixel_window(corners: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(B, 4) int64 ``[x_start, x_end, y_start, y_end]`` of the pixels inside float
    ``corners`` (B, 4) ``[x0, x1, y0, y1]``, clipped to the image (an empty window has
    start == end)."""
    w = torch.ceil(corners).long()
    x_start, x_end = w[:, 0].clamp(0, width), w[:, 1].clamp(0, width)
    y_start, y_end = w[:, 2].clamp(0, height), w[:, 3].clamp(0, height)
    return torch.stack(
        [x_start, torch.maximum(x_end, x_start), y_start, torch.maximum(y_end, y_start)], 1
    )


def window_mask(window: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """(B, 1, H, W) bool: the pixels of each image's window (NCHW broadcast form)."""
    dev = window.device
    rows = torch.arange(height, device=dev).view(1, -1)
    cols = torch.arange(width, device=dev).view(1, -1)
    in_rows = (rows >= window[:, 2:3]) & (rows < window[:, 3:4])
    in_cols = (cols >= window[:, 0:1]) & (cols < window[:, 1:2])
    return (in_rows.unsqueeze(2) & in_cols.unsqueeze(1)).unsqueeze(1)


def window_pixels(window: torch.Tensor) -> torch.Tensor:
    """(B,) int64 number of pixels of each window."""
    return (window[:, 1] - window[:, 0]) * (window[:, 3] - window[:, 2])


def on_host(x: torch.Tensor) -> bool:
    """Whether per-image slice copies on the host are the way (CPU, eager): reading the
    window on the host costs nothing there, and a few slice copies beat a select over the
    whole batch; on devices and under ``torch.compile`` the masked select keeps everything
    in the graph."""
    return x.device.type == "cpu" and not torch.compiler.is_compiling()


def fill_windows(
    out: torch.Tensor,
    window: torch.Tensor,
    active: torch.Tensor,
    values: Callable[[int, int, int, int, int], torch.Tensor],
) -> torch.Tensor:
    """Write ``values(i, y0, y1, x0, x1)`` (broadcastable to ``(C, y1 - y0, x1 - x0)``)
    into the window ``[y0, y1) x [x0, x1)`` of each NCHW image ``i`` of ``out`` where
    ``active`` holds, in place: one slice copy per image (the host path)."""
    for (x0, x1, y0, y1), on, i in zip(window.tolist(), active.tolist(), range(out.shape[0])):
        if x1 > x0 and y1 > y0 and on:
            out[i, :, y0:y1, x0:x1] = values(i, y0, y1, x0, x1)
    return out
