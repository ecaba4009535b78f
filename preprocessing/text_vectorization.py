"""TextVectorization (Keras 3's ``keras.layers.TextVectorization``) on numpy strings."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from . import _categorical as cat
from .base import MAX_NGRAM, MAX_SEQUENCE_LENGTH, Layer, check_bool
from .lookup import StringLookup

# Keras's DEFAULT_STRIP_REGEX (text_vectorization.py), the same in Python's re as in RE2.
STRIP_PUNCTUATION = re.compile(r'[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']')
# tf.strings.split without a separator splits on ASCII whitespace (absl::ascii_isspace);
# str.split() would also split on Unicode spaces such as U+00A0.
_WHITESPACE = re.compile(r"[ \t\n\v\f\r]+")
# tf.strings.lower without an encoding lowers ASCII letters only.
_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}

STANDARDIZE = ("lower_and_strip_punctuation", "lower", "strip_punctuation")
SPLIT = ("whitespace", "character")


def _lower(text: str) -> str:
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


def standardize_text(text: str, standardize: str | None) -> str:
    """Keras's built-in standardizations of one string."""
    if standardize in ("lower", "lower_and_strip_punctuation"):
        text = _lower(text)
    if standardize in ("strip_punctuation", "lower_and_strip_punctuation"):
        text = STRIP_PUNCTUATION.sub("", text)
    return text


def ngrams(tokens: list[str], widths: tuple[int, ...]) -> list[str]:
    """``tf.strings.ngrams(tokens, widths, separator=" ")``: every width in turn."""
    out: list[str] = []
    for w in widths:
        out.extend(" ".join(tokens[i : i + w]) for i in range(len(tokens) - w + 1))
    return out


class TextVectorization(Layer):
    """Turn text into token indices or bag-of-words vectors (Keras 3's TextVectorization).

    Each string is standardized, split into tokens, optionally turned into n-grams, and
    looked up in a vocabulary (a ``StringLookup`` with ``mask_token=""``: index 0 pads,
    1 is ``[UNK]``, the vocabulary follows).

    Args:
        max_tokens: the vocabulary's size limit (special tokens included), or None (the
            bounds are ``StringLookup``'s).
        standardize: ``"lower_and_strip_punctuation"`` (default: ASCII letters lowered,
            as ``tf.strings.lower``, and Keras's punctuation regex removed), ``"lower"``,
            ``"strip_punctuation"``, None, or a callable ``str -> str`` (applied to each
            string; a layer with a callable cannot be saved as JSON).
        split: ``"whitespace"`` (default: runs of ASCII whitespace), ``"character"``
            (Unicode code points), a callable ``str -> list[str]``, or None: each string
            is one token and the output has the input's shape (any rank), as Keras's.
        ngrams: None, an int ``n`` (n-grams of 1 .. n) or a tuple of widths, each at most
            16 (``preprocessing.base.MAX_NGRAM``); needs a ``split`` (Keras also n-grams
            the last axis of unsplit input; not here).
        output_mode: ``"int"`` (default), ``"multi_hot"``, ``"count"``, ``"tf_idf"``, or
            ``"one_hot"`` (only with ``split=None``: one token per string).
        output_sequence_length: ``int`` mode: pad with 0 or truncate every row to this
            length, at most 1,048,576 (``preprocessing.base.MAX_SEQUENCE_LENGTH``; default:
            the longest row of the batch).
        pad_to_max_tokens, vocabulary, idf_weights, sparse, encoding: as ``StringLookup``.
        ragged: ``int`` mode: return the rows unpadded, as a numpy object array of int64
            arrays (datapipe's ragged component; ``to_torch()`` makes it a nested tensor),
            each cut to ``output_sequence_length`` when that is set (as Keras's).

    Input: a str, a list of str/bytes, or a numpy array of shape ``(batch,)`` or
    ``(batch, 1)``. Output: ``int`` mode int64 ``(batch, sequence_length)``; the others
    float32 ``(batch, depth)`` (depth: the vocabulary size, or ``max_tokens`` with
    ``pad_to_max_tokens``). A single str gives one row without the batch axis. Strings
    live in numpy: run the layer inside ``Dataset.map`` (or before the model).

    The vocabulary is the inner ``lookup`` module's (``state_dict`` keys ``lookup.*``) and
    ``get_config()["vocabulary"]``; see ``preprocessing.lookup``.

    Raises:
        ValueError: bad arguments (named), input of another rank, a ``(batch, k)`` input
            with ``k != 1`` when splitting, a non-``int`` call before a vocabulary exists.

    Example:
        >>> layer = TextVectorization(output_sequence_length=4)
        >>> layer.adapt(["The cat sat.", "The dog sat on the cat!"])
        >>> layer.get_vocabulary()
        ['', '[UNK]', 'the', 'sat', 'cat', 'on', 'dog']
        >>> layer(["the cat ran", "a dog"])
        tensor([[2, 4, 1, 0],
                [1, 6, 0, 0]])
    """

    _keras_derived_keys = ("vocabulary_size",)  # Keras 3 configs hold it
    _image_layer = False  # not a Keras image layer: no bounding_box_format

    _checks_layout = False

    def __init__(
        self,
        max_tokens: int | None = None,
        standardize: str | Callable | None = "lower_and_strip_punctuation",
        split: str | Callable | None = "whitespace",
        ngrams: int | tuple[int, ...] | None = None,
        output_mode: str = "int",
        output_sequence_length: int | None = None,
        pad_to_max_tokens: bool = False,
        vocabulary: Any = None,
        idf_weights: Any = None,
        sparse: bool = False,
        ragged: bool = False,
        encoding: str = "utf-8",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not (standardize is None or callable(standardize) or standardize in STANDARDIZE):
            self._fail(
                "standardize", f"must be one of {STANDARDIZE}, None or a callable", standardize
            )
        if not (split is None or callable(split) or split in SPLIT):
            self._fail("split", f"must be one of {SPLIT}, None or a callable", split)
        self.standardize, self.split = standardize, split
        self.ngrams = self._check_ngrams(ngrams)
        self._widths = tuple(range(1, ngrams + 1)) if isinstance(ngrams, int) else self.ngrams
        mode = {"binary": "multi_hot", "tf-idf": "tf_idf"}.get(output_mode, output_mode)
        self.output_mode = cat.check_choice(self, "output_mode", mode, cat.OUTPUT_MODES)
        if split is None and ngrams is not None:
            self._fail("ngrams", "needs a split (tokens to join)", ngrams)
        if self.output_mode == "one_hot" and split is not None:
            self._fail("output_mode", "'one_hot' needs split=None (one token per string)", mode)
        self.output_sequence_length = cat.check_int(
            self,
            "output_sequence_length",
            output_sequence_length,
            1,
            optional=True,
            high=MAX_SEQUENCE_LENGTH,
        )
        if self.output_mode != "int" and output_sequence_length is not None:
            self._fail(
                "output_sequence_length",
                "is only used with output_mode='int'",
                output_sequence_length,
            )
        self.ragged = check_bool(self, "ragged", ragged)
        if self.ragged and self.output_mode != "int":
            self._fail("ragged", "needs output_mode='int'", True)
        self.lookup = StringLookup(
            max_tokens=max_tokens,
            mask_token="",
            output_mode=self.output_mode,
            pad_to_max_tokens=pad_to_max_tokens,
            vocabulary=vocabulary,
            idf_weights=idf_weights,
            sparse=sparse,
            encoding=encoding,
        )

    def _check_ngrams(self, ngrams: Any) -> Any:
        if ngrams is None:
            return None
        if isinstance(ngrams, list):
            ngrams = tuple(ngrams)  # JSON has no tuples

        def width(w: Any) -> bool:
            return isinstance(w, int) and not isinstance(w, bool) and 1 <= w <= MAX_NGRAM

        if width(ngrams):
            return ngrams
        if isinstance(ngrams, tuple) and ngrams and all(width(w) for w in ngrams):
            return ngrams
        self._fail(
            "ngrams", f"must be None, an int >= 1 or a tuple of them, each <= {MAX_NGRAM}", ngrams
        )

    # ------------------------------------------------------------- delegation
    def get_vocabulary(self, include_special_tokens: bool = True) -> list[str]:
        return self.lookup.get_vocabulary(include_special_tokens)

    def vocabulary_size(self) -> int:
        return self.lookup.vocabulary_size()

    def set_vocabulary(self, vocabulary: Any, idf_weights: Any = None) -> None:
        self.lookup.set_vocabulary(vocabulary, idf_weights)

    def get_config(self) -> dict[str, Any]:
        if callable(self.standardize) or callable(self.split):
            raise ValueError(
                "TextVectorization.get_config: a callable standardize/split cannot be saved "
                "as JSON; rebuild the layer in code and load its state_dict"
            )
        lk = self.lookup
        return {
            "max_tokens": lk.max_tokens,
            "standardize": self.standardize,
            "split": self.split,
            "ngrams": list(self.ngrams) if isinstance(self.ngrams, tuple) else self.ngrams,
            "output_mode": self.output_mode,
            "output_sequence_length": self.output_sequence_length,
            "pad_to_max_tokens": lk.pad_to_max_tokens,
            "vocabulary": lk._config_values["vocabulary"],
            "idf_weights": lk._config_values["idf_weights"],
            "sparse": lk.sparse,
            "ragged": self.ragged,
            "encoding": lk.encoding,
            **self._keras_config,  # name, when given
        }

    # ------------------------------------------------------------- tokenizing
    def _strings(self, inputs: Any) -> tuple[list[str], bool]:
        """The input's strings, one per row, and whether it was a single string."""
        if isinstance(inputs, torch.Tensor):
            self._fail("input", "must be strings (a str, list or numpy array)", "a tensor")
        arr = np.asarray(inputs)
        single = arr.ndim == 0
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr[:, 0]
        if arr.ndim > 1 or (arr.ndim == 2 and self.split is not None):
            self._fail("input", "must have shape (batch,) or (batch, 1)", arr.shape)
        if arr.dtype.kind not in "USO":
            self._fail("input", "must hold strings", f"dtype {arr.dtype}")
        flat = arr.reshape(-1).tolist()
        enc = self.lookup.encoding
        strings = [cat.decode(self, s, enc, "input") if isinstance(s, bytes) else s for s in flat]
        if not all(isinstance(s, str) for s in strings):
            self._fail("input", "must hold only strings", arr.dtype)
        return strings, single

    def tokenize(self, text: str) -> list[str]:
        """One string's tokens: standardized, split and n-grammed as the layer does."""
        std = self.standardize
        text = std(text) if callable(std) else standardize_text(text, std)
        if self.split == "whitespace":
            tokens = [t for t in _WHITESPACE.split(text) if t]
        elif self.split == "character":
            tokens = list(text)
        elif callable(self.split):
            tokens = list(self.split(text))
        else:
            tokens = [text]
        return ngrams(tokens, self._widths) if self._widths else tokens

    # ---------------------------------------------------------------- adapt
    def adapt(
        self,
        data: Any,
        batch_size: int | None = None,
        steps: int | None = None,
        progress: bool | None = None,
    ) -> None:
        """Learn the vocabulary (and idf weights) from text, streaming over ``data``: a
        list/array of strings or an iterable of batches of them (a ``datapipe.Dataset``;
        tuple elements give their first component). Each string is one document. See
        ``StringLookup.adapt`` for the ordering and ``max_tokens``."""

        def rows(batch: Any) -> list[list[str]]:
            if cat.is_empty(batch):
                return []
            strings, _ = self._strings(batch)
            return [self.tokenize(s) for s in strings]

        self.lookup._adapt_stream(data, batch_size, steps, progress, rows, owner=self)

    # ------------------------------------------------------------------ call
    def _forward_unsplit(self, inputs: Any) -> Any:
        """``split=None``: each string is one token and the output keeps the input's shape,
        as a ``StringLookup`` of the standardized strings (Keras's dense path)."""
        arr = np.asarray(inputs)
        if isinstance(inputs, torch.Tensor) or arr.dtype.kind not in "USO":
            self._fail("input", "must hold strings", type(inputs).__name__)
        strings, _ = self._strings(arr.reshape(-1))
        std = self.standardize
        out = [std(t) if callable(std) else standardize_text(t, std) for t in strings]
        result = self.lookup(np.array(out, dtype=object).reshape(arr.shape))
        length = self.output_sequence_length
        if self.output_mode == "int" and length is not None and result.ndim:
            result = result[..., :length]
            result = torch.nn.functional.pad(result, (0, length - result.shape[-1]))
        return result

    def forward(self, inputs: Any) -> Any:  # type: ignore[override]  # no generator
        if self.split is None:
            return self._forward_unsplit(inputs)
        strings, single = self._strings(inputs)
        rows = [self.tokenize(s) for s in strings]
        lengths = [len(r) for r in rows]
        flat = [t for r in rows for t in r]
        lk = self.lookup
        if self.output_mode != "int":
            lk._check_ready()
        found = np.fromiter((lk._index.get(t, -1) for t in flat), dtype=np.int64, count=len(flat))
        # "" is the mask: 0 in int mode, dropped from the encodings (as Keras).
        ids = lk._resolve(found, flat)
        if self.output_mode == "int" and self.ragged:
            out = np.empty(len(rows), dtype=object)
            parts = np.split(ids, np.cumsum(lengths)[:-1]) if rows else []
            # Keras trims ragged rows to output_sequence_length (and pads none).
            out[:] = [p[: self.output_sequence_length] for p in parts]
            return out[0] if single else out
        pad = 0 if self.output_mode == "int" else -1  # -1 adds nothing to an encoding
        width = self.output_sequence_length or max(lengths, default=0)
        if self.output_mode != "int":
            width = max(lengths, default=0)
        matrix = np.full((len(rows), width), pad, dtype=np.int64)
        start = 0
        for i, n in enumerate(lengths):
            k = min(n, width)
            matrix[i, :k] = ids[start : start + k]
            start += n
        encoded = torch.from_numpy(matrix)
        if self.output_mode != "int":
            if self.output_mode == "one_hot":
                encoded = encoded[:, 0] if width else torch.full((len(rows),), -1)
            encoded = lk._encode(encoded)
        return encoded[0] if single else encoded

    def extra_repr(self) -> str:
        std = getattr(self.standardize, "__name__", self.standardize)
        split = getattr(self.split, "__name__", self.split)
        return (
            f"standardize={std!r}, split={split!r}, ngrams={self.ngrams!r}, "
            f"output_mode={self.output_mode!r}, vocabulary_size={self.vocabulary_size()}"
        )
