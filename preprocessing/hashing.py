"""Hashing and HashedCrossing (Keras 3's ``keras.layers.Hashing`` / ``HashedCrossing``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from . import _categorical as cat
from . import _hash
from ._targets import as_tensor
from .base import MAX_ENCODING_DEPTH, MAX_INT64, Layer, check_bool


def _check_salt(layer: Layer, salt: Any) -> list[int] | None:
    if salt is None:
        return None
    if isinstance(salt, (int, np.integer)) and not isinstance(salt, bool):
        salt = [int(salt), int(salt)]
    ok = isinstance(salt, (list, tuple)) and len(salt) == 2
    if not ok or not all(
        isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in salt
    ):
        layer._fail("salt", "must be an int, a pair of ints or None", salt)
    return [int(s) for s in salt]


def _string_array(x: Any) -> np.ndarray | None:
    """``x`` as a numpy array when it holds strings, else None (numbers). Python strings
    (a str, lists of them) become an object array: ``np.asarray`` would make a fixed-width
    ``U`` array padding every string to the longest (one 200 kB string among 1,000 words:
    800 MB)."""
    if isinstance(x, torch.Tensor):
        return None
    if isinstance(x, np.ndarray):
        return x if x.dtype.kind in "USO" else None
    if isinstance(x, (str, bytes)):
        return np.array(x, dtype=object)
    first = x
    while isinstance(first, (list, tuple)) and first:
        first = first[0]
    if isinstance(first, (str, bytes)):  # (numbers skip the object array)
        try:
            arr = np.array(x, dtype=object)
        except ValueError:  # ragged: the error np.asarray gives below
            arr = None
        if arr is not None and all(isinstance(v, (str, bytes)) for v in arr.flat):
            return arr
    arr = np.asarray(x)  # numbers, or strings mixed with numbers (numpy writes those as text)
    return arr if arr.dtype.kind in "USO" else None


def _buckets(layer: Layer, x: Any, salt, bins: int) -> tuple[torch.Tensor, Any]:
    """``hash % bins`` of strings or integers (floats are truncated to int64 first, as
    Keras), int64; returns ``(buckets shaped like x, the values as tensor or array)``.
    Strings are hashed and reduced in numpy (a compiled binding where installed:
    ``_hash_native``), integers in torch (any device, ``torch.export``)."""
    arr = _string_array(x)
    if arr is not None:
        flat = arr.reshape(-1)
        if arr.dtype.kind == "O":
            flat = flat.tolist()
            if not all(isinstance(v, (str, bytes)) for v in flat):
                layer._fail("input", "must hold only strings (or be numeric)", arr.dtype)
        out = _hash.string_buckets(flat, salt, bins, "utf-8")
        return torch.from_numpy(out.reshape(arr.shape)), arr
    t = as_tensor(x)
    if t.is_complex() or t.dtype == torch.bool:
        layer._fail("input", "must be strings or numbers", f"dtype {t.dtype}")
    if t.is_floating_point():
        t = t.to(torch.int64)  # Keras: floats are first normalised to int64
    t = t.to(torch.int64)
    return _hash.unsigned_mod(_hash.hash_int64(t, salt).reshape(t.shape), bins), t


def _check_encoded_bins(layer: Any) -> None:
    """An encoding's rows are ``num_bins`` wide: bounded (``int`` mode allocates nothing)."""
    if layer.output_mode != "int" and layer.num_bins > MAX_ENCODING_DEPTH:
        layer._fail(
            "num_bins",
            f"must be at most {MAX_ENCODING_DEPTH} with output_mode={layer.output_mode!r} "
            "(the width of every output row)",
            layer.num_bins,
        )


def _int_or_float_dtype(layer: Layer, dtype: Any, output_mode: Any, num_bins: int) -> str:
    """Keras's ``dtype`` of Hashing / HashedCrossing: int64 indices, float32 encodings."""
    name = cat.output_dtype(layer, dtype, int_output=output_mode == "int")
    if name == "int32" and num_bins > 2**31 - 1:
        layer._fail("dtype", "'int32' holds at most 2**31 - 1 bins", (dtype, num_bins))
    return name


class Hashing(Layer):
    """Hash strings or integers into ``num_bins`` bins (Keras 3's ``Hashing``).

    A value is hashed as TensorFlow's ``tf.strings.to_hash_bucket_fast``: the FarmHash64
    fingerprint of its UTF-8 bytes (integers: of their decimal string; floats are first
    truncated to int64), modulo the bins; with a ``salt``, ``to_hash_bucket_strong``'s
    SipHash-2-4 keyed by the salt. Outputs equal Keras's for the same inputs.

    Args:
        num_bins: the number of bins, the mask bin included: 1 to 2**63 - 1 in ``int``
            mode (int64 outputs), at most 2**24 in the encodings (``preprocessing.base.
            MAX_ENCODING_DEPTH``: every output row is this wide).
        mask_value: a value sent to bin 0 (the others hash into ``1 .. num_bins - 1``);
            None (default): no mask bin.
        salt: an int (used for both keys) or a pair of ints: SipHash-2-4 keys; None:
            FarmHash64.
        output_mode: ``"int"`` (default), ``"one_hot"``, ``"multi_hot"`` or ``"count"``.
        sparse: a torch sparse COO tensor for the encodings.
        dtype: the output dtype (Keras's): ``int`` mode ``"int64"`` (default) or
            ``"int32"`` (num_bins up to 2**31 - 1); encodings a float name, default
            ``"float32"``.
        **kwargs: Keras's base-layer arguments (``name``, ...; see ``Layer``).

    Input: strings (a str, nested lists, a numpy ``U``/``S``/object array; use inside
    ``Dataset.map``) or numbers (a tensor, array or list; computed in torch, so integer
    hashing runs on any device and exports with ``torch.export``). Output: ``int`` mode
    indices of the input's shape; encodings ``(..., num_bins)`` (multi_hot / count reduce
    Keras's axis, see ``CategoryEncoding``); in ``dtype``.

    Raises:
        ValueError: bad arguments (named), input that is neither strings nor numbers.

    Example:
        >>> Hashing(num_bins=3)([["A"], ["B"], ["C"], ["D"], ["E"]]).flatten().tolist()
        [1, 0, 1, 1, 2]
        >>> Hashing(num_bins=3, salt=133)(["A", "B", "C", "D", "E"]).tolist()
        [0, 0, 2, 1, 0]
    """

    _image_layer = False  # not a Keras image layer: no bounding_box_format

    _checks_layout = False

    def __init__(
        self,
        num_bins: int,
        mask_value: str | int | None = None,
        salt: int | list[int] | None = None,
        output_mode: str = "int",
        sparse: bool = False,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.num_bins = cat.check_int(self, "num_bins", num_bins, 1, high=MAX_INT64)
        out_name = _int_or_float_dtype(self, dtype, output_mode, num_bins)
        self.dtype, self._out_dtype = out_name, cat.torch_dtype(out_name)
        if mask_value is not None and (
            isinstance(mask_value, bool) or not isinstance(mask_value, (str, int, np.integer))
        ):
            self._fail("mask_value", "must be a str, an int or None", mask_value)
        self.mask_value = int(mask_value) if isinstance(mask_value, np.integer) else mask_value
        self.salt = _check_salt(self, salt)
        self.output_mode = cat.check_choice(
            self, "output_mode", output_mode, ("int", "one_hot", "multi_hot", "count")
        )
        _check_encoded_bins(self)
        self.sparse = check_bool(self, "sparse", sparse)
        if self.sparse and self.output_mode == "int":
            self._fail("sparse", "needs output_mode other than 'int'", True)

    def forward(self, inputs: Any) -> torch.Tensor:  # type: ignore[override]  # no generator
        bins = self.num_bins
        masked = self.mask_value is not None and bins > 1
        if masked:
            bins -= 1
        out, values = _buckets(self, inputs, self.salt, bins)
        if masked:
            out = torch.where(self._mask_positions(values), 0, out + 1)
        out = cat.encode(out, self.output_mode, self.num_bins, self._out_dtype)
        out = out.to(self._out_dtype)
        return out.to_sparse() if self.sparse else out

    def _mask_positions(self, values: Any) -> torch.Tensor:
        mask = self.mask_value
        if isinstance(values, torch.Tensor):
            if isinstance(mask, str):  # a string mask never equals a number
                return torch.zeros_like(values, dtype=torch.bool)
            assert mask is not None  # called only with a mask_value
            return torch.eq(values, mask)
        # Bytes compare as bytes (Keras compares TensorFlow's byte strings): no decoding.
        as_bytes = mask.encode() if isinstance(mask, str) else mask
        flat = values.reshape(-1).tolist()
        hit = [v == (as_bytes if isinstance(v, bytes) else mask) for v in flat]
        hit = np.array(hit, dtype=bool).reshape(values.shape)
        return torch.from_numpy(hit)


class HashedCrossing(Layer):
    """Hash the cross of two or more categorical features into ``num_bins`` bins (Keras 3's
    ``HashedCrossing``, i.e. ``tf.sparse.cross_hashed``).

    The cross of one sample's values ``(v_1, ..., v_k)`` is
    ``FingerprintCat64(... FingerprintCat64(0xDECAFCAFFE, f(v_1)) ..., f(v_k)) % num_bins``
    where ``f`` is the FarmHash64 fingerprint of a string and the value itself for an
    integer (TensorFlow's ``SparseCrossHashed``). Outputs equal Keras's.

    Args:
        num_bins: the number of bins (1 to 2**63 - 1; at most 2**24 for ``one_hot``:
            ``preprocessing.base.MAX_ENCODING_DEPTH``).
        output_mode: ``"int"`` (default) or ``"one_hot"``.
        sparse: a torch sparse COO tensor for ``one_hot``.
        dtype: the output dtype (Keras's): ``int`` mode ``"int64"`` (default) or
            ``"int32"``; ``one_hot`` a float name, default ``"float32"``.
        **kwargs: Keras's base-layer arguments (``name``, ...; see ``Layer``).

    ``forward(inputs)``: a list or tuple of at least two features, each a scalar, shape
    ``(batch,)`` or ``(batch, 1)``, all of one shape; integers (tensor/array/list: torch,
    exportable) or strings (numpy/list: inside ``Dataset.map``). Output: indices of that
    shape, or ``(..., num_bins)`` for ``one_hot``; in ``dtype``.

    Raises:
        ValueError: fewer than two inputs, unequal shapes, a shape other than the above,
            a float input.

    Example:
        >>> layer = HashedCrossing(num_bins=5)
        >>> layer((torch.tensor([1, 2, 3]), ["A", "B", "C"])).tolist()
        [2, 3, 3]
    """

    _image_layer = False  # not a Keras image layer: no bounding_box_format

    _checks_layout = False

    def __init__(
        self,
        num_bins: int,
        output_mode: str = "int",
        sparse: bool = False,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.num_bins = cat.check_int(self, "num_bins", num_bins, 1, high=MAX_INT64)
        out_name = _int_or_float_dtype(self, dtype, output_mode, num_bins)
        self.dtype, self._out_dtype = out_name, cat.torch_dtype(out_name)
        self.output_mode = cat.check_choice(self, "output_mode", output_mode, ("int", "one_hot"))
        _check_encoded_bins(self)
        self.sparse = check_bool(self, "sparse", sparse)
        if self.sparse and self.output_mode == "int":
            self._fail("sparse", "needs output_mode='one_hot'", True)

    def _feature_hash(self, x: Any) -> torch.Tensor:
        arr = _string_array(x)
        if arr is not None:
            return _hash.hash_strings(arr.reshape(-1), None).reshape(arr.shape)
        t = as_tensor(x)
        if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
            self._fail("inputs", "must be integers or strings", f"dtype {t.dtype}")
        return t.to(torch.int64)

    def forward(self, inputs: Any) -> torch.Tensor:  # type: ignore[override]  # no generator
        if not isinstance(inputs, (list, tuple)) or len(inputs) < 2:
            self._fail("inputs", "must be a list or tuple of at least two features", type(inputs))
        hashes = [self._feature_hash(x) for x in inputs]
        shape = tuple(hashes[0].shape)
        if len(shape) > 2 or (len(shape) == 2 and shape[-1] != 1):
            self._fail("inputs", "must have shape (), (batch,) or (batch, 1)", shape)
        if any(tuple(h.shape) != shape for h in hashes[1:]):
            self._fail("inputs", "must all have one shape", [tuple(h.shape) for h in hashes])
        out = torch.full(shape, _hash.CROSS_HASH_KEY, dtype=torch.int64, device=hashes[0].device)
        for h in hashes:
            out = _hash.fingerprint_cat64(out, h.to(out.device))
        out = _hash.unsigned_mod(out, self.num_bins)
        out = cat.encode(out, self.output_mode, self.num_bins, self._out_dtype)
        out = out.to(self._out_dtype)
        return out.to_sparse() if self.sparse else out
