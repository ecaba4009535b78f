"""AugMix (Keras 3's ``keras.layers.AugMix``; Hendrycks et al., 2020,
https://arxiv.org/abs/1912.02781)."""

from __future__ import annotations

from typing import Any

import torch

from ._augment_ops import apply_slot, build_ops, draw_slots
from ._random import GAMMA_TRIES, beta_from_gammas, log_standard_gamma
from .affine import INTERPOLATIONS
from .base import MAX_OPS, RandomLayer, _is_number, check_bool, check_int

OPS_ALL = (
    "random_shear",
    "random_translation",
    "random_rotation",
    "random_posterization",
    "solarization",
    "auto_contrast",
    "equalization",
    "random_brightness",
    "random_color_degeneration",
    "random_contrast",
    "random_sharpness",
)
OPS = OPS_ALL[:7]  # all_ops=False: without the four that overlap common test corruptions


class AugMix(RandomLayer):
    """Mix each image with ``num_chains`` augmented versions of itself (Keras 3's
    ``AugMix``).

    Per image: chain ``k`` applies up to ``chain_depth`` ops in a row (each step picks one
    of the ops or none, uniformly: Keras's rule, so a chain's depth is random in
    ``[0, chain_depth]``); the chains are mixed with weights ``w ~ Dirichlet(alpha)`` and
    the mix blended with the image: ``m x + (1 - m) sum_k w_k chain_k(x)``, ``m ~ Beta(alpha,
    alpha)``, clipped to ``value_range``. Keras draws the ops, weights and blend once per
    batch (its op choice even from Python's unseeded ``random``); here every image draws
    its own, from the layer's seed. The ops are ``RandAugment``'s, configured the same
    way from ``factor``; ``all_ops=False`` leaves out brightness, colour degeneration,
    contrast and sharpness (the paper's rule: they overlap ImageNet-C's corruptions).

    Only images change: boxes, masks and keypoints pass through (the chains move pixels
    differently, so no single place exists for them; Keras leaves boxes as they are).

    Args:
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        num_chains: chains per image, an int in [1, 32] (default 3).
        chain_depth: the most ops per chain, an int in [1, 32] (default 3). Both bounds are
            ``preprocessing.base.MAX_OPS``: each chain keeps a copy of the batch, each op
            is a pass over it (the paper and Keras use 3 and 1-3).
        factor: the ops' magnitude, a number ``f`` in [0, 1] meaning ``(0, f)`` or a pair
            ``(lower, upper)`` in [0, 1]; default 0.3.
        alpha: the Dirichlet and Beta concentration, a number > 0 (default 1.0).
        all_ops: use all eleven ops (default True) or the seven geometric and tonal ones.
        interpolation: ``"bilinear"`` (default) or ``"nearest"``, for the geometric ops.
        seed: seeds the layer's draws (each op gets a seed derived from it); None uses
            torch's global RNG.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch (3 channels for colour degeneration) or a dict
    of targets (only ``images`` change). Output: same shape; float dtypes are kept,
    integer inputs come back as float32. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> layer = AugMix(value_range=(0, 1), seed=0)
        >>> x = torch.rand(4, 3, 16, 16, generator=torch.Generator().manual_seed(0))
        >>> params = layer.get_random_transformation(x)
        >>> w = params["chain_mixing_weights"]  # one Dirichlet draw per image
        >>> w.shape, bool(torch.allclose(w.sum(dim=1), torch.ones(4)))
        (torch.Size([4, 3]), True)
        >>> layer.transform_images(x, params).shape
        torch.Size([4, 3, 16, 16])
    """

    def __init__(
        self,
        value_range: tuple[float, float] = (0, 255),
        num_chains: int = 3,
        chain_depth: int = 3,
        factor: float | tuple[float, float] = 0.3,
        alpha: float = 1.0,
        all_ops: bool = True,
        interpolation: str = "bilinear",
        seed: int | None = None,
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype, **kwargs)
        self.num_chains, self.chain_depth = num_chains, chain_depth
        self.alpha, self.all_ops, self.interpolation = alpha, all_ops, interpolation
        self._set_value_range(value_range)
        for name, value in (("num_chains", num_chains), ("chain_depth", chain_depth)):
            check_int(self, name, value, 1, high=MAX_OPS)
        if not _is_number(alpha) or alpha <= 0:
            self._fail("alpha", "must be a finite number > 0", alpha)
        check_bool(self, "all_ops", all_ops)
        if interpolation not in INTERPOLATIONS:
            self._fail("interpolation", f"must be one of {INTERPOLATIONS}", interpolation)
        magnitude = self._set_factor(factor)
        names = OPS_ALL if all_ops else OPS
        self.ops = build_ops(
            names, magnitude, value_range, interpolation, seed, self.data_format, None, self.dtype
        )

    def _log_gamma(self, shape: tuple[int, ...], device: torch.device, generator: Any):
        """``log`` of Gamma(alpha, 1) draws of ``shape``: in logs, because for a small
        ``alpha`` the draws themselves underflow to 0 (alpha = 0.01: a third of them in
        float32), and a Dirichlet or Beta of zeros is 0 / 0."""
        alpha = torch.full(shape, float(self.alpha), device=device)
        z = self._randn((GAMMA_TRIES, *shape), device, generator)
        u = self._rand((GAMMA_TRIES + 1, *shape), device, generator)
        return log_standard_gamma(alpha, z, u[:-1], u[-1])

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        """``chain_mixing_weights`` (B, num_chains), ``weight_sample`` (B,),
        ``layer_idxes`` (B, num_chains * chain_depth) (``len(ops)``: no op), and
        ``transforms``: per step, every op's parameters."""
        n, dev = images.shape[0], images.device
        # Dirichlet(alpha) = normalised Gamma(alpha) draws: a softmax of their logs.
        weights = torch.softmax(self._log_gamma((n, self.num_chains), dev, generator), dim=1)
        pair = self._log_gamma((2, n), dev, generator)
        steps = self.num_chains * self.chain_depth
        u = self._rand((n, steps), dev, generator)
        choice = (u * (len(self.ops) + 1)).to(torch.int64).clamp_(max=len(self.ops))
        return {
            "chain_mixing_weights": weights,
            "weight_sample": beta_from_gammas(pair[0], pair[1]),
            "layer_idxes": choice,
            "transforms": draw_slots(self.ops, images, steps, generator),
        }

    def transform_images(self, images: torch.Tensor, params: dict[str, Any]) -> torch.Tensor:
        x = self._to_float(images)
        n = x.shape[0]
        weights = params["chain_mixing_weights"].to(x.dtype)
        mixed: torch.Tensor | None = None
        for k in range(self.num_chains):
            chain = x
            for d in range(self.chain_depth):
                step = k * self.chain_depth + d
                choice, slot = params["layer_idxes"][:, step], params["transforms"][step]
                chain = apply_slot(self.ops, "transform_images", chain, choice, slot, n)
            term = chain * weights[:, k].view(-1, 1, 1, 1)
            mixed = term if mixed is None else mixed.add_(term)
        assert mixed is not None  # num_chains >= 1 (checked in __init__)
        m = params["weight_sample"].to(x.dtype).view(-1, 1, 1, 1)
        return torch.lerp(mixed, x, m).clamp_(*self._range)
