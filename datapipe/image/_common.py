"""What every ``datapipe.image`` function shares: reading its input (an HWC numpy array or
torch tensor, one image or a batch), refusing a channels-first one, and returning the
input's kind.

tf.image's functions take ``(height, width, channels)`` images or ``(batch, height, width,
channels)`` batches and have no ``data_format`` argument, so neither do ours; an input whose
layout looks CHW (``datapipe.image_format.looks_like_other_layout``) is refused instead of
being misread (issue 33: ``resize_image`` read ``(3, 50, 40)`` as a 3x50 image of 40
channels).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from datapipe.image_format import looks_like_other_layout


def is_tensor(x: Any) -> bool:
    """Whether ``x`` is a torch tensor (without importing torch for numpy inputs)."""
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def to_numpy(image: Any, fn: str, ranks: tuple[int, ...] = (3, 4)) -> np.ndarray:
    """``image`` as a numpy array of rank in ``ranks``, channels last, numeric dtype.

    Raises:
        ValueError: another rank, a non-numeric dtype, or a shape that looks CHW.
    """
    arr = image.detach().cpu().numpy() if is_tensor(image) else np.asarray(image)
    if arr.ndim not in ranks:
        want = " or ".join(
            {3: "(height, width, channels)", 4: "(batch, height, width, channels)"}[r]
            for r in ranks
        )
        raise ValueError(f"{fn}: image must be {want}; got shape {arr.shape}")
    if arr.dtype.kind not in "buif":
        raise ValueError(f"{fn}: image must be integer or float, got dtype {arr.dtype}")
    if looks_like_other_layout(arr.shape, "channels_last") is not None:
        perm = "(1, 2, 0)" if arr.ndim == 3 else "(0, 2, 3, 1)"
        raise ValueError(
            f"{fn}: the input of shape {arr.shape} looks channels_first, but tf.image's "
            f"functions take channels_last images (no data_format argument); permute it "
            f"first: x.permute{perm} for a tensor, np.transpose(x, {perm}) for an array"
        )
    return arr


def like(out: np.ndarray, image: Any) -> Any:
    """``out`` as the kind of ``image``: a tensor (on ``image``'s device) for a tensor."""
    if not is_tensor(image):
        return out
    import torch

    return torch.from_numpy(np.ascontiguousarray(out)).to(image.device)


def need_channels(arr: np.ndarray, fn: str, channels: int) -> None:
    if arr.shape[-1] != channels:
        raise ValueError(
            f"{fn}: image must have {channels} channels (the last axis); got shape {arr.shape}"
        )
