"""CategoryEncoding (Keras 3's ``keras.layers.CategoryEncoding``)."""

from __future__ import annotations

from typing import Any

import torch

from . import _categorical as cat
from ._targets import as_tensor
from .base import MAX_ENCODING_DEPTH, Layer, check_bool


class CategoryEncoding(Layer):
    """One-hot, multi-hot or count encoding of integer categories ``0 .. num_tokens - 1``.

    Args:
        num_tokens: the number of categories, 1 to 2**24 (``preprocessing.base.
            MAX_ENCODING_DEPTH``: every output row is this wide); the encoding's last axis.
        output_mode: ``"multi_hot"`` (default; Keras's ``"binary"`` is accepted),
            ``"one_hot"`` or ``"count"``.
        sparse: return a torch sparse COO tensor.
        dtype: the output dtype (Keras's): ``"float32"`` (default), another float name,
            or ``"int32"`` / ``"int64"``.
        **kwargs: Keras's base-layer arguments (``name``, ...; see ``Layer``).

    ``forward(inputs, count_weights=None)``: ``inputs`` int tensor/array/list.
    ``one_hot``: ``(..., 1)`` or ``(...)`` -> ``(..., num_tokens)``; ``multi_hot`` /
    ``count`` reduce Keras's axis: ``(n,) -> (num_tokens,)``, ``(batch, n) -> (batch,
    num_tokens)``, ``(a, n, c) -> (a, c, num_tokens)`` (axis 1); a scalar is one sample.
    ``count_weights`` (``count`` only, shaped like ``inputs``) are summed instead of ones.
    Output in ``dtype``; runs in torch (any device, ``torch.export``).

    Raises:
        ValueError: a bad argument, ``count_weights`` outside ``count`` mode, or (eagerly)
            a value outside ``[0, num_tokens)``. Keras drops values past the end silently
            and fails inside TensorFlow on negative ones; a category that does not exist
            is a bug in the data, so it is named here.

    Example:
        >>> CategoryEncoding(num_tokens=4, output_mode="one_hot")(torch.tensor([3, 2, 0]))
        tensor([[0., 0., 0., 1.],
                [0., 0., 1., 0.],
                [1., 0., 0., 0.]])
        >>> CategoryEncoding(num_tokens=4)(torch.tensor([[0, 1], [0, 0]]))
        tensor([[1., 1., 0., 0.],
                [1., 0., 0., 0.]])
    """

    _image_layer = False  # not a Keras image layer: no bounding_box_format

    _checks_layout = False

    def __init__(
        self,
        num_tokens: int | None = None,
        output_mode: str = "multi_hot",
        sparse: bool = False,
        dtype: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        out_name = cat.output_dtype(self, dtype, int_output=False, ints_allowed=True)
        self.dtype, self._out_dtype = out_name, cat.torch_dtype(out_name)
        if num_tokens is None:
            self._fail("num_tokens", "must be set (use IntegerLookup for unknown counts)", None)
        self.num_tokens = cat.check_int(self, "num_tokens", num_tokens, 1, high=MAX_ENCODING_DEPTH)
        mode = "multi_hot" if output_mode == "binary" else output_mode
        self.output_mode = cat.check_choice(
            self, "output_mode", mode, ("one_hot", "multi_hot", "count")
        )
        self.sparse = check_bool(self, "sparse", sparse)

    def forward(self, inputs: Any, count_weights: Any = None) -> torch.Tensor:
        x = as_tensor(inputs)
        if x.is_floating_point() or x.dtype == torch.bool or x.is_complex():
            self._fail("input", "must be integer categories", f"dtype {x.dtype}")
        x = x.to(torch.int64)
        if not cat.is_tracing() and x.numel():
            bad = (x < 0) | (x >= self.num_tokens)
            if bool(bad.any()):
                self._fail("input", f"must lie in [0, {self.num_tokens})", x[bad][:10].tolist())
        weights = None
        if count_weights is not None:
            if self.output_mode != "count":
                self._fail("count_weights", "is only used with output_mode='count'", "given")
            weights = as_tensor(count_weights)
            if weights.shape != x.shape:
                self._fail(
                    "count_weights",
                    f"must have the input's shape {tuple(x.shape)}",
                    tuple(weights.shape),
                )
            weights = weights.to(self._out_dtype)  # Keras: the layer's dtype
        out = cat.encode(x, self.output_mode, self.num_tokens, self._out_dtype, weights)
        return out.to_sparse() if self.sparse else out
