"""MixUp and CutMix (Keras's ``keras.layers.MixUp`` / ``keras.layers.CutMix``).

Both mix each image of a batch with a partner from the same batch: Keras draws one
permutation of the batch per call (``random.shuffle`` of ``arange(B)``; an image may be
its own partner, which then leaves it unchanged) and a weight per image.
"""

from __future__ import annotations

from typing import Any

import torch

from . import _regions
from ._random import GAMMA_TRIES, beta_from_gammas, log_standard_gamma
from .base import RandomLayer, _is_number


class _MixingLayer(RandomLayer):
    """What MixUp and CutMix share: the partner permutation, Beta draws, label mixing and
    the targets Keras gives no meaning for these layers."""

    _abstract = True
    _refused: tuple[tuple[str, str], ...] = (
        ("keypoints", "Keras 3 has no keypoints, and a mixed image has no one set of points"),
    )

    def _permutation(self, n: int, device: torch.device, generator: Any) -> torch.Tensor:
        """A uniform permutation of ``range(n)`` (the order of ``n`` uniform draws; a stable
        sort, so ties, one in 2**24 per pair, still give the same order on every device)."""
        return torch.argsort(self._rand((n,), device, generator), stable=True)

    def _beta(self, alpha: torch.Tensor, device: torch.device, generator: Any) -> torch.Tensor:
        """Beta(alpha, alpha) draws, one per element of ``alpha`` (float32, shape kept)."""
        shape = tuple(alpha.shape)
        z = self._randn((2, GAMMA_TRIES, *shape), device, generator)
        u = self._rand((2, GAMMA_TRIES + 1, *shape), device, generator)
        g_a = log_standard_gamma(alpha, z[0], u[0, :-1], u[0, -1])
        g_b = log_standard_gamma(alpha, z[1], u[1, :-1], u[1, -1])
        return beta_from_gammas(g_a, g_b)

    def _apply_targets(self, data: dict, batch: torch.Tensor, single: bool, params: Any) -> dict:
        for key, why in self._refused:
            if key in data:
                raise ValueError(
                    f"{type(self).__name__}: dict key {key!r} is not supported ({why}); "
                    "drop it from the input or apply this layer to the other targets only"
                )
        return super()._apply_targets(data, batch, single, params)

    def _partner(self, target: torch.Tensor, params: dict, what: str) -> torch.Tensor:
        perm = params["permutation_order"].to(target.device)
        if target.shape[0] != perm.shape[0]:
            raise ValueError(
                f"{type(self).__name__}: {what} hold {target.shape[0]} entries for "
                f"{perm.shape[0]} images; got shape {tuple(target.shape)}"
            )
        return target.index_select(0, perm)

    def transform_labels(self, labels: torch.Tensor, params: Any) -> torch.Tensor:
        """``w * labels + (1 - w) * labels[partner]`` with each image's own weight ``w``;
        labels must be float (one-hot or soft, ``(B, num_classes)`` or any ``(B, ...)``)."""
        if not labels.is_floating_point():
            raise ValueError(
                f"{type(self).__name__}: labels must be floating point (one-hot or soft "
                f"labels, e.g. F.one_hot(y, num_classes).float()) to be mixed; got "
                f"{labels.dtype} labels of shape {tuple(labels.shape)}"
            )
        other = self._partner(labels, params, "labels")
        w = params["label_weight"].to(labels.device, labels.dtype)
        # lerp: exact when the partner is the image itself (labels == other).
        return torch.lerp(other, labels, w.view(-1, *([1] * (labels.ndim - 1))))


class MixUp(_MixingLayer):
    """Blend each image (and its labels) with a partner from the batch.

    MixUp (Zhang et al., "mixup: Beyond Empirical Risk Minimization", ICLR 2018) as Keras 3
    draws it: one permutation of the batch per call and a weight ``lam ~ Beta(alpha,
    alpha)`` per image; image ``i`` becomes ``lam_i * x_i + (1 - lam_i) * x_perm[i]`` and
    its labels likewise. Beta draws are exact in distribution (Marsaglia-Tsang gamma
    draws, ``preprocessing._random``) and run on the input's device from the layer's
    counter-based stream, so ``torch.compile(fullgraph=True)`` traces them.

    Args:
        alpha: the Beta concentration, a number > 0 (default 0.2, Keras's and the paper's
            ImageNet value); small values keep images nearly unmixed.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        seed: seeds the layer's draws; None uses torch's global RNG.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-4 batch, a rank-3 image (its own partner: unchanged, as in Keras), or a
    dict. ``labels`` must be float, ``(B, ...)``. ``bounding_boxes``: as Keras, each
    image gets its partner's boxes appended (``(B, N, 4)`` becomes ``(B, 2N, 4)``, labels
    ``(B, 2N)``; the mixed image shows both sets), in any box format.
    ``segmentation_masks`` are blended like the images (float soft masks: Keras's
    meaning). ``keypoints`` are refused (ValueError). Output images: float dtypes kept,
    integer inputs come back as float32. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad ``alpha``, an input that is not rank 3 or 4, integer labels,
            labels for another number of images, or a ``keypoints`` key.

    Example:
        >>> import torch
        >>> layer = MixUp(alpha=0.2, seed=0)
        >>> x = torch.stack([torch.zeros(1, 2, 2), torch.ones(1, 2, 2)])
        >>> labels = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> out = layer({"images": x, "labels": labels})
        >>> bool((out["images"][:, 0, 0, 0] == out["labels"][:, 1]).all())  # same weights
        True
    """

    _keras_base_factor = True  # Keras's takes its base layer's (unused) factor

    def __init__(
        self,
        alpha: float = 0.2,
        data_format: str | None = None,
        seed: int | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype, **kwargs)
        if not _is_number(alpha) or alpha <= 0:
            self._fail("alpha", "must be a finite number > 0", alpha)
        self.alpha = alpha

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        n, dev = images.shape[0], images.device
        perm = self._permutation(n, dev, generator)
        weight = self._beta(torch.full((n,), float(self.alpha), device=dev), dev, generator)
        return {"mix_weight": weight, "label_weight": weight, "permutation_order": perm}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        x = self._to_float(images)
        w = params["mix_weight"].to(x.device, x.dtype).view(-1, 1, 1, 1)
        # x_perm + w * (x - x_perm): exact when an image is its own partner.
        return torch.lerp(self._partner(x, params, "images"), x, w)

    def transform_bounding_boxes(self, bounding_boxes: dict, params: Any) -> dict:
        boxes, labels = bounding_boxes["boxes"], bounding_boxes["labels"]
        return {
            **bounding_boxes,
            "boxes": torch.cat([boxes, self._partner(boxes, params, "bounding boxes")], 1),
            "labels": torch.cat([labels, self._partner(labels, params, "box labels")], 1),
        }

    def transform_segmentation_masks(self, masks: torch.Tensor, params: Any) -> torch.Tensor:
        m = self._to_float(masks)
        w = params["mix_weight"].to(m.device, m.dtype).view(-1, 1, 1, 1)
        return torch.lerp(self._partner(m, params, "segmentation_masks"), m, w)


class CutMix(_MixingLayer):
    """Paste a rectangle of a partner image into each image; mix labels by pasted area.

    CutMix (Yun et al., "CutMix: Regularization Strategy to Train Strong Classifiers with
    Localizable Features", ICCV 2019) as Keras 3 draws it: per call one permutation and
    one ``alpha ~ U(factor) + 1e-6``; per image ``lam ~ Beta(alpha, alpha)`` and a
    rectangle of sides ``sqrt(1 - lam) * W`` by ``sqrt(1 - lam) * H`` (floats) at ``U *
    (W - width)``, ``U * (H - height)``, covering the pixels whose integer coordinates lie
    inside (``preprocessing._regions``). Those pixels are copied from the partner. The
    label weight of the partner is the pasted pixel count over ``H * W``, exactly (Keras
    uses the rectangle's float area, which is off by up to a border of pixels); labels
    become ``(1 - k / (H W)) * y + k / (H W) * y_partner``.

    Args:
        factor: ``alpha``'s range: a number ``f`` in [0, 1] means ``[0, f]`` (default 1.0),
            a pair ``(lo, hi)`` (``0 <= lo <= hi <= 1``) is taken as is.
        seed: seeds the layer's draws; None uses torch's global RNG.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-4 batch, a rank-3 image (its own partner: unchanged; Keras skips rank 3),
    or a dict. ``labels`` must be float, ``(B, ...)``. ``segmentation_masks`` get the
    same rectangle pasted from the partner's mask (Keras's meaning; dtype kept).
    ``bounding_boxes`` and ``keypoints`` are refused (ValueError): Keras 3's CutMix raises
    ``NotImplementedError`` for boxes, and a pasted rectangle cuts boxes and points in
    ways no box format can state. Output images: float dtypes kept, integer inputs come
    back as float32. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad ``factor``, an input that is not rank 3 or 4, integer labels,
            labels or masks for another number of images, masks of another size, or a
            ``bounding_boxes`` / ``keypoints`` key.

    Example:
        >>> import torch
        >>> layer = CutMix(seed=0)
        >>> x = torch.stack([torch.zeros(1, 4, 4), torch.ones(1, 4, 4)])
        >>> out = layer({"images": x, "labels": torch.eye(2)})
        >>> pasted = (out["images"] != x).flatten(1).sum(1) / 16  # pixels from the partner
        >>> bool(torch.equal(out["labels"][:, 0] + out["labels"][:, 1], torch.ones(2)))
        True
        >>> bool(torch.equal(1 - out["labels"].diagonal(), pasted))
        True
    """

    _refused = (
        *_MixingLayer._refused,
        ("bounding_boxes", "Keras 3's CutMix raises NotImplementedError for boxes"),
    )

    def __init__(
        self,
        factor: float | tuple[float, float] = 1.0,
        seed: int | None = None,
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype, **kwargs)
        self._set_factor(factor)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        n, dev = images.shape[0], images.device
        h, w = self._hw(images)
        u = self._rand((3, n), dev, generator)
        lo, hi = self._factor
        alpha = (lo + (hi - lo) * u[0, :1] + 1e-6).expand(n)  # one per call, as Keras
        lam = self._beta(alpha, dev, generator)
        ratio = torch.sqrt(1.0 - lam)
        x0, x1 = _regions.crop_bounds(u[1], w, ratio)
        y0, y1 = _regions.crop_bounds(u[2], h, ratio)
        corners = torch.stack([x0, x1, y0, y1], 1)
        pasted = _regions.window_pixels(_regions.pixel_window(corners, h, w))
        return {
            "corners": corners,
            "permutation_order": self._permutation(n, dev, generator),
            "label_weight": 1.0 - pasted.to(torch.float32) / (h * w),
        }

    def _paste(self, x: torch.Tensor, source: torch.Tensor, params: dict) -> torch.Tensor:
        """Copy each partner's window from ``source`` into ``x`` (NCHW, fresh output)."""
        h, w = x.shape[2], x.shape[3]
        window = _regions.pixel_window(params["corners"].to(x.device), h, w)
        perm = params["permutation_order"].to(x.device)
        if perm.shape[0] != x.shape[0]:
            self._partner(x, params, "images")  # raises, naming the counts
        if _regions.on_host(x):
            out = x.clone() if x.data_ptr() == source.data_ptr() else x
            partners = perm.tolist()
            moved = perm != torch.arange(len(partners))  # its own partner: nothing to copy
            return _regions.fill_windows(
                out, window, moved, lambda i, y0, y1, x0, x1: source[partners[i], :, y0:y1, x0:x1]
            )
        return torch.where(_regions.window_mask(window, h, w), x.index_select(0, perm), x)

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        x = self._to_nchw(self._to_float(images))
        out = self._paste(x, self._to_nchw(images), params)
        return self._from_nchw(out)

    def transform_segmentation_masks(self, masks: torch.Tensor, params: Any) -> torch.Tensor:
        # Masks of another size than the images are refused before (``_targets``).
        m = self._to_nchw(masks)
        return self._from_nchw(self._paste(m, m, params))
