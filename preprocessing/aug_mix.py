"""AugMix (Keras 3's ``keras.layers.AugMix``; Hendrycks et al., 2020,
https://arxiv.org/abs/1912.02781)."""

from __future__ import annotations

import math
from typing import Any

import torch

from ._augment_ops import apply_slot, build_ops, draw_slots
from ._photometric import value_range_pair
from .affine import INTERPOLATIONS
from .base import RandomLayer, _is_number, check_bool, from_zero_pair

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

_TRIES = 12  # Marsaglia-Tsang proposals per gamma draw (each accepted with p > 0.95)


def gamma_from_uniform(alpha: float, u: torch.Tensor) -> torch.Tensor:
    """Gamma(alpha, 1) draws from uniform draws ``u`` of shape ``(2 * _TRIES + 1, *shape)``.

    Marsaglia and Tsang (2000): for ``a >= 1`` propose ``d (1 + c z)^3`` (``z`` normal,
    ``d = a - 1/3``, ``c = 1 / sqrt(9 d)``) and accept with their squeeze-free test; the
    first accepted of ``_TRIES`` proposals is taken (all rejected: probability < 0.05^12,
    then ``d``, the mode). For ``a < 1``: ``Gamma(a + 1) * U^(1 / a)``. Vectorised, no
    host sync, and a pure function of ``u`` (so counter-based draws stay reproducible).
    """
    boost = alpha < 1.0
    a = alpha + 1.0 if boost else alpha
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    u1, u2, u3 = u[:_TRIES], u[_TRIES : 2 * _TRIES], u[2 * _TRIES]
    # Box-Muller on the first two blocks of uniforms; log1p(-u) keeps log finite.
    half = _TRIES // 2
    radius = torch.sqrt(-2.0 * torch.log1p(-u1[:half]))
    angle = (2.0 * math.pi) * u1[half:]
    z = torch.cat([radius * torch.cos(angle), radius * torch.sin(angle)])
    v = (1.0 + c * z) ** 3
    safe_v = torch.where(v > 0, v, torch.ones_like(v))
    ok = (v > 0) & (torch.log1p(-u2) < 0.5 * z * z + d - d * safe_v + d * torch.log(safe_v))
    first = torch.argmax(ok.to(torch.int8), dim=0, keepdim=True)  # first accepted proposal
    accepted = d * torch.gather(safe_v, 0, first)[0]
    g = torch.where(ok.any(dim=0), accepted, torch.full_like(accepted, d))
    if boost:
        g = g * torch.exp(torch.log1p(-u3) / alpha)  # (1 - u) ~ U(0, 1]: never 0 ** (1/a)
    return g


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
        num_chains: chains per image, an int >= 1 (default 3).
        chain_depth: the most ops per chain, an int >= 1 (default 3).
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
        >>> params["chain_mixing_weights"].sum(dim=1)  # one Dirichlet draw per image
        tensor([1.0000, 1.0000, 1.0000, 1.0000])
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
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype)
        self.value_range, self.num_chains, self.chain_depth = value_range, num_chains, chain_depth
        self.factor, self.alpha, self.all_ops = factor, alpha, all_ops
        self.interpolation = interpolation
        self._range = value_range_pair(self, value_range)
        for name, value in (("num_chains", num_chains), ("chain_depth", chain_depth)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                self._fail(name, "must be an int >= 1", value)
        if not _is_number(alpha) or alpha <= 0:
            self._fail("alpha", "must be a finite number > 0", alpha)
        check_bool(self, "all_ops", all_ops)
        if interpolation not in INTERPOLATIONS:
            self._fail("interpolation", f"must be one of {INTERPOLATIONS}", interpolation)
        magnitude = from_zero_pair(self, "factor", factor)
        names = OPS_ALL if all_ops else OPS
        self.ops = build_ops(
            names, magnitude, value_range, interpolation, seed, self.data_format, None, self.dtype
        )

    def _gamma(self, shape: tuple[int, ...], device: torch.device, generator: Any):
        u = self._rand((2 * _TRIES + 1, *shape), device, generator)
        return gamma_from_uniform(float(self.alpha), u)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        """``chain_mixing_weights`` (B, num_chains), ``weight_sample`` (B,),
        ``layer_idxes`` (B, num_chains * chain_depth) (``len(ops)``: no op), and
        ``transforms``: per step, every op's parameters."""
        batch, _ = self._as_batch(images)
        n, dev = batch.shape[0], batch.device
        g = self._gamma((n, self.num_chains), dev, generator)
        weights = g / g.sum(dim=1, keepdim=True)
        pair = self._gamma((2, n), dev, generator)
        steps = self.num_chains * self.chain_depth
        u = self._rand((n, steps), dev, generator)
        choice = (u * (len(self.ops) + 1)).to(torch.int64).clamp_(max=len(self.ops))
        return {
            "chain_mixing_weights": weights,
            "weight_sample": pair[0] / (pair[0] + pair[1]),
            "layer_idxes": choice,
            "transforms": draw_slots(self.ops, batch, steps, generator),
        }

    def transform_images(self, images: torch.Tensor, params: dict[str, Any]) -> torch.Tensor:
        batch, single = self._as_batch(images)
        x = self._to_float(batch)
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
        out = torch.lerp(mixed, x, m).clamp_(*self._range)
        return self._unbatch(out, single)
