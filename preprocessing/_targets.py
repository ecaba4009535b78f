"""Dict inputs: Keras 3's keys plus ``keypoints``, checked and brought to batch form.

One place turns each target of a dict element into the batched tensor a layer's
``transform_*`` method receives, and back: a single image (rank 3) comes with unbatched
targets (boxes ``(N, 4)``, masks ``(H, W)`` or ``(C, H, W)``, keypoints ``(K, 2+)``), a
batch with batched ones, and every error names the layer, the key and the shapes.
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np
import torch

TARGETS = ("images", "labels", "bounding_boxes", "segmentation_masks", "keypoints")

# Other libraries' names for the targets (torchvision's "boxes"/"masks", albumentations'
# "bboxes"/"mask"): far from Keras's spelling, yet data given under them would pass
# through untransformed.
_ALIASES = {
    "boxes": "bounding_boxes",
    "bboxes": "bounding_boxes",
    "masks": "segmentation_masks",
    "mask": "segmentation_masks",
}


def as_tensor(value: Any) -> torch.Tensor:
    """``value`` as a tensor, sharing a numpy array's memory; a read-only array (the
    elements of ``from_tensor_slices``, ``from_tensors`` and ``cache`` are) is copied
    first: torch has no read-only tensors, warns on one, and a layer's in-place step would
    write into the pipeline's source."""
    if isinstance(value, torch.Tensor):
        return value
    arr = np.asarray(value)
    return torch.as_tensor(arr if arr.flags.writeable else arr.copy())


def check_keys(layer: Any, data: dict) -> None:
    """``images`` must be there; a key that looks like a misspelt target, or is another
    library's name for one (``boxes``, ``bboxes``, ``masks``, ``mask``), is refused (it
    would pass through untransformed); other keys pass through unchanged, as in Keras."""
    name = type(layer).__name__
    if "images" not in data:
        raise ValueError(
            f"{name}: a dict input needs an 'images' key (Keras's keys: {list(TARGETS)}); "
            f"got keys {sorted(map(str, data))}"
        )
    for key in data:
        if key in TARGETS or not isinstance(key, str):
            continue
        close = difflib.get_close_matches(key, TARGETS, n=1, cutoff=0.75)
        close = [_ALIASES[key]] if key in _ALIASES else close
        if close:
            raise ValueError(
                f"{name}: dict key {key!r} is not a target this layer transforms; did you "
                f"mean {close[0]!r}? (other keys pass through unchanged)"
            )


def batch_boxes(layer: Any, value: Any, single: bool, n: int) -> dict[str, torch.Tensor]:
    """``{"boxes": (B, N, 4) float, "labels": (B, N)}`` from a single or batched target.

    Integer boxes become float32; unsigned or bool labels become int64 (they cannot hold
    -1, the label of a dropped box)."""
    name = type(layer).__name__
    if not isinstance(value, dict) or "boxes" not in value or "labels" not in value:
        raise ValueError(
            f"{name}: 'bounding_boxes' must be a dict with keys 'boxes' and 'labels' "
            f"(Keras's form); got {type(value).__name__}"
            + (f" with keys {sorted(value)}" if isinstance(value, dict) else "")
        )
    boxes, labels = as_tensor(value["boxes"]), as_tensor(value["labels"])
    if not boxes.is_floating_point():
        boxes = boxes.to(torch.float32)
    kind = labels.dtype  # dtype attributes, not tensor methods: torch.compile traces them
    if kind == torch.bool or not (kind.is_floating_point or kind.is_complex or kind.is_signed):
        # A dropped or padding box gets label -1 (Keras's marker); uint8 would wrap it
        # to 255, a real class id.
        labels = labels.to(torch.int64)
    rank = 2 if single else 3
    if boxes.ndim != rank or boxes.shape[-1] != 4 or (not single and boxes.shape[0] != n):
        want = "(N, 4) for one image" if single else f"({n}, N, 4) for a batch of {n}"
        raise ValueError(
            f"{name}: bounding_boxes['boxes'] must have shape {want}; got {tuple(boxes.shape)}"
        )
    if tuple(labels.shape) != tuple(boxes.shape[:-1]):
        raise ValueError(
            f"{name}: bounding_boxes['labels'] must have shape {tuple(boxes.shape[:-1])} "
            f"(one label per box); got {tuple(labels.shape)}"
        )
    if single:
        boxes, labels = boxes.unsqueeze(0), labels.unsqueeze(0)
    return {**value, "boxes": boxes, "labels": labels}


def unbatch_boxes(value: dict[str, torch.Tensor], single: bool) -> dict[str, torch.Tensor]:
    if not single:
        return value
    return {**value, "boxes": value["boxes"][0], "labels": value["labels"][0]}


def batch_masks(
    layer: Any, value: Any, single: bool, n: int, size: tuple[int, int] | None = None
) -> tuple[torch.Tensor, bool]:
    """Masks as a rank-4 batch in the layer's data_format, and whether they came without
    a channel axis.

    Masks have the images' layout with their own channel count (Keras's form), or no
    channel axis at all (``(B, H, W)`` / ``(H, W)``, torch's usual form); with ``size``,
    their (height, width) must equal it (the images')."""
    masks = as_tensor(value)
    rank = 3 if single else 4
    no_channel = masks.ndim == rank - 1
    if no_channel:  # channels_first: before (H, W); channels_last: at the end
        masks = masks.unsqueeze(masks.ndim - 2 if layer.data_format == "channels_first" else -1)
    if masks.ndim != rank:
        raise ValueError(
            f"{type(layer).__name__}: segmentation_masks must have the images' rank "
            f"({rank}, with a channel axis) or one less (no channel axis); got shape "
            f"{tuple(as_tensor(value).shape)}"
        )
    if single:
        masks = masks.unsqueeze(0)
    if masks.shape[0] != n:
        raise ValueError(
            f"{type(layer).__name__}: segmentation_masks hold {masks.shape[0]} masks for "
            f"{n} images; got shape {tuple(as_tensor(value).shape)}"
        )
    if size is not None and tuple(layer._hw(masks)) != tuple(size):
        # A geometric layer would warp the mask on its own grid: misaligned, silently.
        raise ValueError(
            f"{type(layer).__name__}: segmentation_masks must have the images' size "
            f"{tuple(size)}; got {tuple(layer._hw(masks))} (shape {tuple(as_tensor(value).shape)})"
        )
    return masks, no_channel


def unbatch_masks(layer: Any, masks: torch.Tensor, single: bool, no_channel: bool) -> torch.Tensor:
    """Undo ``batch_masks``."""
    if no_channel:
        masks = masks.squeeze(1 if layer.data_format == "channels_first" else 3)
    return masks.squeeze(0) if single else masks


def batch_keypoints(layer: Any, value: Any, single: bool, n: int) -> torch.Tensor:
    """Keypoints ``(B, K, D)`` (D >= 2: x, y, then anything that rides along)."""
    points = as_tensor(value)
    if not points.is_floating_point():
        points = points.to(torch.float32)
    rank = 2 if single else 3
    if points.ndim != rank or points.shape[-1] < 2 or (not single and points.shape[0] != n):
        want = "(K, 2+) for one image" if single else f"({n}, K, 2+) for a batch of {n}"
        raise ValueError(
            f"{type(layer).__name__}: keypoints must have shape {want} (x, y first); got "
            f"{tuple(points.shape)}"
        )
    return points.unsqueeze(0) if single else points


def batch_labels(value: Any, single: bool) -> torch.Tensor:
    labels = as_tensor(value)
    return labels.unsqueeze(0) if single else labels
