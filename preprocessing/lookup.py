"""StringLookup and IntegerLookup: Keras 3's vocabulary layers (``IndexLookup`` family).

Semantics follow ``keras/src/layers/preprocessing/index_lookup.py`` (Keras 3.15): index 0
is the mask token (``int`` output with a ``mask_token``), then ``num_oov_indices`` OOV
indices, then the vocabulary; ``adapt`` orders tokens by count, ties by the token,
descending; out-of-vocabulary values go to the OOV indices by FarmHash64 (strings, or
integers with ``oov_method="farmhash"``; SipHash-2-4 with a ``salt``) or ``floormod``
(integers, the default); TF-IDF weights are ``log(1 + documents / (1 + document count))``.

Where the vocabulary lives: in ``state_dict`` as buffers (StringLookup: the tokens' UTF-8
bytes concatenated in ``vocabulary_bytes`` (uint8) with their end offsets in
``vocabulary_ends`` (int64), so any text round-trips exactly; IntegerLookup: the tokens in
``vocabulary`` (int64)), plus ``idf_weights`` (float32, ``tf_idf`` only); and in
``get_config()["vocabulary"]`` as the JSON list ``get_vocabulary()`` returns (special
tokens first), with ``idf_weights`` beside it. So ``layer_from_config(serialize_layer(l))``
alone rebuilds an adapted layer, and ``load_state_dict`` loads a vocabulary into any layer
of the same class and arguments (the buffers take the checkpoint's sizes). A checkpoint's
vocabulary passes the checks a ``vocabulary=`` argument does, before any buffer changes:
at most ``max_tokens`` entries, no repeats, the special tokens only first; for
StringLookup, ``vocabulary_ends`` non-negative, non-decreasing and within
``vocabulary_bytes``, the bytes UTF-8; ``idf_weights`` finite, one per index.
"""

from __future__ import annotations

import collections
import os
from typing import Any, ClassVar

import numpy as np
import torch

from . import _categorical as cat
from . import _hash
from ._targets import as_tensor
from .base import MAX_ENCODING_DEPTH, Layer, check_bool


class _IndexLookup(Layer):
    """Shared machinery of StringLookup / IntegerLookup (not registered: ``_`` name)."""

    _keras_derived_keys = ("vocabulary_size",)  # Keras 3 configs hold it
    _image_layer = False  # not a Keras image layer: no bounding_box_format

    _checks_layout = False

    # ------------------------------------------------------------ construction
    # buffers (register_buffer), declared for type checkers
    idf_weights: torch.Tensor

    def _init_lookup(self, args: dict[str, Any]) -> None:
        # No bound of its own: it only caps the vocabulary (the encodings' width is bounded
        # below, with pad_to_max_tokens).
        self.max_tokens = cat.check_int(self, "max_tokens", args["max_tokens"], 2, optional=True)
        self.num_oov_indices = cat.check_int(
            self, "num_oov_indices", args["num_oov_indices"], 0, high=MAX_ENCODING_DEPTH
        )
        self.invert = check_bool(self, "invert", args["invert"])
        mode = args["output_mode"]
        mode = {"binary": "multi_hot", "tf-idf": "tf_idf"}.get(mode, mode)
        self.output_mode = cat.check_choice(self, "output_mode", mode, cat.OUTPUT_MODES)
        self.sparse = check_bool(self, "sparse", args["sparse"])
        self.pad_to_max_tokens = check_bool(self, "pad_to_max_tokens", args["pad_to_max_tokens"])
        self.mask_token, self.oov_token = args["mask_token"], args["oov_token"]
        self.salt = self._check_salt(args["salt"])
        if self.pad_to_max_tokens and self.max_tokens is None:
            self._fail("pad_to_max_tokens", "needs max_tokens", True)
        if (
            self.pad_to_max_tokens
            and self.output_mode != "int"
            and self.max_tokens is not None
            and self.max_tokens > MAX_ENCODING_DEPTH
        ):
            self._fail(
                "max_tokens",
                f"must be at most {MAX_ENCODING_DEPTH} with pad_to_max_tokens (the width of "
                f"every {self.output_mode} row)",
                self.max_tokens,
            )
        if self.invert and self.output_mode != "int":
            self._fail("output_mode", "must be 'int' when invert=True", self.output_mode)
        if self.sparse and self.output_mode == "int":
            self._fail("sparse", "needs output_mode other than 'int'", True)
        idf = args["idf_weights"]
        if idf is not None and self.output_mode != "tf_idf":
            self._fail("idf_weights", "is only used with output_mode='tf_idf'", "given")
        vocabulary = args["vocabulary"]
        self._has_input_vocabulary = vocabulary is not None
        if self.output_mode == "tf_idf" and vocabulary is not None and idf is None:
            self._fail("idf_weights", "must be given with a vocabulary in tf_idf mode", None)
        self._config_values = {"vocabulary": None, "idf_weights": None}
        self.register_buffer("idf_weights", torch.zeros(0, dtype=torch.float32))
        self._tokens: list = []
        self._init_buffers()
        if vocabulary is not None:
            self.set_vocabulary(vocabulary, idf)

    def _check_salt(self, salt: Any) -> list[int] | None:
        if salt is None:
            return None
        if isinstance(salt, (int, np.integer)) and not isinstance(salt, bool):
            salt = [int(salt), int(salt)]
        if (
            not isinstance(salt, (list, tuple))
            or len(salt) != 2
            or not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in salt)
        ):
            self._fail("salt", "must be an int, a pair of ints or None", salt)
        return [int(s) for s in salt]

    # ----------------------------------------------------------------- indices
    def _oov_start_index(self) -> int:
        return 1 if self.mask_token is not None and self.output_mode == "int" else 0

    def _token_start_index(self) -> int:
        return self._oov_start_index() + self.num_oov_indices

    def vocabulary_size(self) -> int:
        """Indices the layer can output: special tokens plus the vocabulary."""
        return self._token_start_index() + len(self._tokens)

    def get_vocabulary(self, include_special_tokens: bool = True) -> list:
        """The vocabulary by index (Keras's ``get_vocabulary``): with the special tokens,
        entry ``i`` is what index ``i`` means (``mask_token`` first in ``int`` mode)."""
        if not include_special_tokens:
            return list(self._tokens)
        specials = [self.mask_token] * self._oov_start_index()
        return specials + [self.oov_token] * self.num_oov_indices + list(self._tokens)

    # ----------------------------------------------------------- vocabularies
    def set_vocabulary(self, vocabulary: Any, idf_weights: Any = None) -> None:
        """Set the vocabulary (Keras's ``set_vocabulary``): a list/array of tokens, with or
        without the special tokens at its start, or the path of a text file with one token
        per line. ``idf_weights``: one per entry of ``vocabulary`` (``tf_idf`` only).

        Raises:
            ValueError: an empty or repeated vocabulary, a special token elsewhere than at
                the start, more than ``max_tokens`` entries, ``idf_weights`` missing, of
                the wrong length or given outside ``tf_idf`` mode, an unreadable file.
        """
        if self.output_mode == "tf_idf" and idf_weights is None:
            self._fail("idf_weights", "must be set in tf_idf mode", None)
        if self.output_mode != "tf_idf" and idf_weights is not None:
            self._fail("idf_weights", "is only used with output_mode='tf_idf'", "given")
        if isinstance(vocabulary, (str, os.PathLike)):
            if self.output_mode == "tf_idf":
                self._fail("vocabulary", "cannot be a file in tf_idf mode", vocabulary)
            vocabulary = self._read_vocabulary_file(os.fspath(vocabulary))
        vocab = [self._as_token(t, "vocabulary") for t in cat.to_numpy(vocabulary).tolist()]
        if not vocab:
            self._fail("vocabulary", "must not be empty", vocabulary)
        token_start = self._token_start_index()
        specials = self.get_vocabulary()[:token_start]
        found_specials = vocab[:token_start] == specials
        tokens = vocab[token_start:] if found_specials else vocab
        self._check_tokens(tokens, specials)
        idf = None
        if idf_weights is not None:
            idf = self._padded_idf(idf_weights, len(vocab), found_specials)
        self._set_state(tokens, idf)

    def _read_vocabulary_file(self, path: str) -> list:
        if not os.path.isfile(path):
            self._fail("vocabulary", "file does not exist or is not a regular file", path)
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        while lines and lines[-1] == "":
            lines.pop()
        return self._file_tokens([ln.rstrip("\r") for ln in lines], path)

    def _file_tokens(self, lines: list[str], path: str) -> list:
        """A vocabulary file's lines as tokens (strings as they are)."""
        return lines

    def _check_tokens(self, tokens: list, specials: list) -> None:
        repeated = [t for t, c in collections.Counter(tokens).items() if c > 1]
        if repeated:
            self._fail("vocabulary", "has repeated tokens", repeated[:10])
        if self.mask_token is not None and self.mask_token in tokens:
            self._fail(
                "vocabulary",
                f"holds the mask token away from the start (special tokens go first, in "
                f"this order: {specials})",
                self.mask_token,
            )
        if self.invert and self.oov_token is not None and self.oov_token in tokens:
            self._fail("vocabulary", "holds the OOV token away from the start", self.oov_token)
        size = self._token_start_index() + len(tokens)
        if self.max_tokens is not None and size > self.max_tokens:
            self._fail("vocabulary", f"has {size} entries, more than max_tokens", self.max_tokens)

    def _padded_idf(self, idf_weights: Any, vocab_len: int, found_specials: bool) -> np.ndarray:
        idf = np.asarray(cat.to_numpy(idf_weights), dtype=np.float64)
        if idf.ndim != 1 or len(idf) != vocab_len:
            self._fail("idf_weights", f"must be 1-D with {vocab_len} entries", idf.shape)
        front = 0 if found_specials else self._token_start_index()
        # Keras: the special tokens get the mean weight, pad_to_max_tokens pads with zeros.
        idf = np.concatenate([np.full(front, np.average(idf) if front else 0.0), idf])
        if self.pad_to_max_tokens:
            idf = np.concatenate([idf, np.zeros(self._padded_size() - len(idf))])
        return idf.astype(np.float32)

    def _set_state(self, tokens: list, idf: np.ndarray | None) -> None:
        self._tokens = list(tokens)
        self._write_buffers()
        if idf is not None:
            self.idf_weights = torch.from_numpy(idf).to(self.idf_weights.device)
        self._sync_config()

    def _sync_config(self) -> None:
        """The config carries the current vocabulary (adapted or given), so a JSON config
        alone rebuilds the layer; idf weights as many as vocabulary entries."""
        if not self._tokens:
            return
        vocab = self.get_vocabulary()
        idf = None
        if self.output_mode == "tf_idf" and self.idf_weights.numel():
            idf = self.idf_weights[: len(vocab)].tolist()
        self._config_values = {"vocabulary": vocab, "idf_weights": idf}

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # A checkpoint is data: its vocabulary passes the checks a vocabulary= argument
        # does (set_vocabulary), before any buffer changes, so a bad one leaves the layer
        # as it was instead of silently remapping tokens.
        tokens = self._tokens_from_state(state_dict, prefix)
        if tokens is not None:
            self._check_tokens(tokens, self.get_vocabulary()[: self._token_start_index()])
            self._check_idf_state(state_dict.get(prefix + "idf_weights"), len(tokens))
        cat.resize_buffers_from(self, state_dict, prefix, self._state_buffers + ("idf_weights",))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._read_buffers()
        self._sync_config()

    def _check_idf_state(self, idf: Any, num_tokens: int) -> None:
        """A checkpoint's ``idf_weights``: finite, one per index (or ``max_tokens`` with
        ``pad_to_max_tokens``), as ``set_vocabulary`` makes them."""
        if not isinstance(idf, torch.Tensor) or idf.numel() == 0:
            return
        size = self._token_start_index() + num_tokens
        sizes = {size, self._padded_size()} if self.pad_to_max_tokens else {size}
        if idf.ndim != 1 or idf.shape[0] not in sizes:
            self._fail("state_dict['idf_weights']", f"must be 1-D with {size} entries", idf.shape)
        if not bool(torch.isfinite(idf).all()):
            self._fail("state_dict['idf_weights']", "must be finite", idf[:10].tolist())

    def _tokens_from_state(self, state_dict: dict, prefix: str) -> list | None:
        """The vocabulary a checkpoint holds (validated), or None when it holds none."""
        raise NotImplementedError

    # ----------------------------------------------------------------- adapt
    def adapt(
        self,
        data: Any,
        batch_size: int | None = None,
        steps: int | None = None,
        progress: bool | None = None,
    ) -> None:
        """Learn the vocabulary from ``data`` (Keras's ``adapt``), streaming over it.

        ``data``: an array/list (one batch; a rank-1 array is a column: each value is its
        own document) or an iterable such as a ``datapipe.Dataset`` of batches (a rank-1
        batch is one document; tuple elements give their first component). Tokens are
        counted, the mask and OOV tokens left out, and ordered by count then by token,
        descending; ``max_tokens`` keeps the most frequent. ``tf_idf`` also counts the
        documents each token is in. ``steps`` limits the batches read, ``progress``
        controls the tqdm bar.

        Raises:
            ValueError: the layer was given a ``vocabulary`` (Keras refuses this too).
        """
        whole = isinstance(data, (np.ndarray, torch.Tensor, list, tuple))
        self._adapt_stream(
            data, batch_size, steps, progress, lambda b: self._adapt_rows(b, column=whole)
        )

    def _adapt_stream(self, data, batch_size, steps, progress, to_rows, owner=None) -> None:
        """Count the tokens of ``to_rows(batch)`` (a list of documents, each a list of
        tokens) over ``data``'s batches, then set the vocabulary. ``owner``: the layer
        whose name the errors and the progress bar carry (TextVectorization)."""
        owner = self if owner is None else owner
        if self._has_input_vocabulary:
            raise ValueError(
                f"{type(owner).__name__}.adapt: the layer was built with a vocabulary; build "
                "one without it to adapt"
            )
        counts: collections.Counter = collections.Counter()
        docs: collections.Counter = collections.Counter()
        num_docs = [0]

        def update(batch: Any) -> None:
            rows = to_rows(batch)
            for row in rows:
                counts.update(row)
            if self.output_mode == "tf_idf":
                for row in rows:
                    docs.update(set(row))
                num_docs[0] += len(rows)

        cat.run_adapt(owner, data, batch_size, steps, progress, update)
        self._finish_adapt(counts, docs, num_docs[0])

    def _adapt_rows(self, batch: Any, column: bool) -> list[list]:
        if cat.is_empty(batch):  # nothing to count (an empty list has no string dtype)
            return []
        arr = self._as_array(batch)
        if arr.ndim == 0:
            arr = arr.reshape(1, 1)
        elif arr.ndim == 1:
            arr = arr.reshape(-1, 1) if column else arr.reshape(1, -1)
        arr = arr.reshape(arr.shape[0], -1)
        return [[self._as_token(t, "adapt data") for t in row] for row in arr.tolist()]

    def _finish_adapt(self, counts: collections.Counter, docs: collections.Counter, n: int):
        for special in (self.mask_token, self.oov_token):
            if special is not None:
                counts.pop(special, None)
        if not counts:
            return  # Keras keeps the vocabulary it had when no token was seen
        # Keras: np.lexsort((tokens, counts))[::-1] - by count, then token, descending.
        tokens = sorted(counts, key=lambda t: (counts[t], self._sort_key(t)), reverse=True)
        if self.max_tokens is not None:
            tokens = tokens[: self.max_tokens - self._token_start_index()]
        idf = None
        if self.output_mode == "tf_idf":
            doc_counts = np.array([docs[t] for t in tokens], dtype=np.float64)
            weights = np.log(1.0 + n / (1.0 + doc_counts)).astype(np.float32)
            front = np.full(self._token_start_index(), weights.mean(dtype=np.float32))
            idf = np.concatenate([front, weights]).astype(np.float32)
            if self.pad_to_max_tokens:
                idf = np.concatenate([idf, np.zeros(self._padded_size() - len(idf), np.float32)])
        self._set_state(tokens, idf)

    # ------------------------------------------------------------------ call
    def _depth(self) -> int:
        return self._padded_size() if self.pad_to_max_tokens else self.vocabulary_size()

    def _padded_size(self) -> int:
        """``max_tokens``, which ``pad_to_max_tokens`` requires (checked at construction)."""
        assert self.max_tokens is not None
        return self.max_tokens

    def _check_ready(self) -> None:
        if not self._tokens and (self.output_mode != "int" or self.invert):
            raise ValueError(
                f"{type(self).__name__}: no vocabulary; pass vocabulary=, call adapt() or "
                "load a state_dict"
            )

    def _oov_error(self, values: list) -> None:
        raise ValueError(
            f"{type(self).__name__}: with num_oov_indices=0 every input must be in the "
            f"vocabulary; found {values[:10]} (set num_oov_indices=1)"
        )

    def _encode(self, indices: torch.Tensor) -> torch.Tensor:
        out = cat.encode(indices, self.output_mode, self._depth())
        if self.output_mode == "tf_idf":
            out = out * self.idf_weights.to(out.device)
        return out.to_sparse() if self.sparse else out

    # Subclass hooks.
    _state_buffers: ClassVar[tuple[str, ...]] = ()

    def _init_buffers(self) -> None:
        raise NotImplementedError

    def _write_buffers(self) -> None:
        raise NotImplementedError

    def _read_buffers(self) -> None:
        raise NotImplementedError

    def _as_token(self, value: Any, what: str) -> Any:
        raise NotImplementedError

    def _as_array(self, batch: Any) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def _sort_key(token: Any) -> Any:
        return token


class StringLookup(_IndexLookup):
    """Map strings to integer indices (Keras 3's ``keras.layers.StringLookup``).

    Args:
        max_tokens: the most indices (special tokens included) ``adapt`` may create; None
            for no limit; at least 2; with ``pad_to_max_tokens`` in an encoding mode (the
            width of every output row) at most 2**24 (``preprocessing.base.
            MAX_ENCODING_DEPTH``); otherwise it only caps the vocabulary.
        num_oov_indices: OOV indices, 0 to 2**24 (default 1); with more, an OOV string goes to
            ``FarmHash64(s) % num_oov_indices`` (SipHash-2-4 with ``salt``); with 0, an OOV
            input raises.
        mask_token: a token for masked input: index 0 in ``int`` mode, dropped from the
            encodings otherwise. None (default): no mask.
        oov_token: what ``invert`` returns for OOV indices (default ``"[UNK]"``).
        vocabulary: a list/array of strings or a text file path (one token per line; read
            when the layer is built, and kept in the config as a list).
        idf_weights: ``tf_idf`` weights, one per vocabulary entry.
        invert: map indices back to strings (``int`` mode only).
        output_mode: ``"int"`` (default), ``"one_hot"``, ``"multi_hot"``, ``"count"`` or
            ``"tf_idf"`` (see ``_categorical.encode`` for the shapes).
        pad_to_max_tokens: encode to ``max_tokens`` entries instead of the vocabulary's.
        sparse: return a torch sparse COO tensor for the encodings.
        encoding: how ``bytes`` inputs (and the buffers) are decoded (default UTF-8).
        salt: an int or a pair of ints: SipHash-2-4 keys for the OOV buckets.
        oov_method: ``"floormod"`` (default) or ``"farmhash"``: Keras's ``IndexLookup``
            argument, which its ``StringLookup`` configs hold; strings always hash
            (``index_lookup.py``: floormod is for integer keys), so it has no effect.

    Input: a str, a nested list of str/bytes, or a numpy array of them (``U``, ``S`` or
    object dtype), any shape. Output: ``int`` mode a torch int64 tensor of the input's
    shape; the encodings float32 ``(..., depth)``; ``invert=True`` a numpy ``str`` array.
    Strings cannot live in a tensor: use the layer inside ``Dataset.map`` (or before the
    model), and ``IntegerLookup`` / ``CategoryEncoding`` inside an exported model.

    Raises:
        ValueError: bad arguments (named), an OOV input with ``num_oov_indices=0``, a
            call of a non-``int`` (or inverted) layer that has no vocabulary.

    Example:
        >>> layer = StringLookup(vocabulary=["a", "b", "c"])
        >>> layer([["a", "c"], ["d", "b"]])
        tensor([[1, 3],
                [0, 2]])
        >>> StringLookup(vocabulary=["a", "b"], output_mode="multi_hot")(["a", "z"])
        tensor([1., 1., 0.])
    """

    _state_buffers = ("vocabulary_bytes", "vocabulary_ends")

    def __init__(
        self,
        max_tokens: int | None = None,
        num_oov_indices: int = 1,
        mask_token: str | None = None,
        oov_token: str = "[UNK]",
        vocabulary: Any = None,
        idf_weights: Any = None,
        invert: bool = False,
        output_mode: str = "int",
        pad_to_max_tokens: bool = False,
        sparse: bool = False,
        encoding: str = "utf-8",
        salt: int | list[int] | None = None,
        oov_method: str = "floormod",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.oov_method = cat.check_choice(self, "oov_method", oov_method, ("floormod", "farmhash"))
        if not isinstance(encoding, str):
            self._fail("encoding", "must be a str", encoding)
        self.encoding = encoding
        for name, value in (("mask_token", mask_token), ("oov_token", oov_token)):
            if value is not None and not isinstance(value, str):
                self._fail(name, "must be a str or None", value)
        self._init_lookup(dict(locals()))

    def _init_buffers(self) -> None:
        self.register_buffer("vocabulary_bytes", torch.zeros(0, dtype=torch.uint8))
        self.register_buffer("vocabulary_ends", torch.zeros(0, dtype=torch.int64))
        self._index: dict[str, int] = {}

    def _write_buffers(self) -> None:
        data, ends = cat.pack_strings(self._tokens, "utf-8")
        self.vocabulary_bytes, self.vocabulary_ends = data, ends
        start = self._token_start_index()
        self._index = {t: start + i for i, t in enumerate(self._tokens)}

    def _read_buffers(self) -> None:
        self._tokens = cat.unpack_strings(self.vocabulary_bytes, self.vocabulary_ends, "utf-8")
        start = self._token_start_index()
        self._index = {t: start + i for i, t in enumerate(self._tokens)}

    def _tokens_from_state(self, state_dict: dict, prefix: str) -> list | None:
        data = state_dict.get(prefix + "vocabulary_bytes")
        ends = state_dict.get(prefix + "vocabulary_ends")
        if data is None and ends is None:
            return None
        if not isinstance(data, torch.Tensor) or data.dtype != torch.uint8 or data.ndim != 1:
            self._fail("state_dict['vocabulary_bytes']", "must be a 1-D uint8 tensor", data)
        if not isinstance(ends, torch.Tensor) or ends.dtype != torch.int64 or ends.ndim != 1:
            self._fail("state_dict['vocabulary_ends']", "must be a 1-D int64 tensor", ends)
        steps = torch.diff(ends, prepend=ends.new_zeros(1))
        if ends.numel() and (bool((steps < 0).any()) or int(ends[-1]) > data.numel()):
            self._fail(
                "state_dict['vocabulary_ends']",
                f"must be non-negative, non-decreasing end offsets within the {data.numel()} "
                "vocabulary bytes",
                ends[:10].tolist(),
            )
        try:
            return cat.unpack_strings(data, ends, "utf-8")
        except UnicodeDecodeError as e:
            self._fail("state_dict['vocabulary_bytes']", f"must be UTF-8 text ({e.reason})", e)

    def _as_token(self, value: Any, what: str) -> str:
        if isinstance(value, bytes):
            return cat.decode(self, value, self.encoding, what)
        if not isinstance(value, str):
            self._fail(what, "must hold strings", value)
        return value

    def _as_array(self, batch: Any) -> np.ndarray:
        if isinstance(batch, torch.Tensor):
            self._fail("input", "must be strings (a str, list or numpy array), not a tensor", batch)
        arr = np.asarray(batch)
        if arr.dtype.kind not in "USO":
            self._fail("input", "must hold strings", f"dtype {arr.dtype}")
        return arr

    def forward(self, inputs: Any) -> Any:  # type: ignore[override]  # no generator
        if self.invert:
            return self._invert(inputs)
        self._check_ready()
        arr = self._as_array(inputs)
        flat = arr.reshape(-1).tolist()
        if arr.dtype.kind != "U":
            flat = [self._as_token(t, "input") for t in flat]
        index = self._index
        found = np.fromiter((index.get(t, -1) for t in flat), dtype=np.int64, count=len(flat))
        out = torch.from_numpy(self._resolve(found, flat).reshape(arr.shape))
        return self._encode(out)

    def _resolve(self, found: np.ndarray, flat: list) -> np.ndarray:
        """Indices for the OOV and mask positions (-1 in ``found``)."""
        missing = np.flatnonzero(found < 0)
        mask = self.mask_token
        if mask is not None and missing.size:
            is_mask = np.fromiter((flat[i] == mask for i in missing), bool, missing.size)
            found[missing[is_mask]] = 0 if self.output_mode == "int" else -1
            missing = missing[~is_mask]
        if missing.size == 0:
            return found
        if self.num_oov_indices == 0:
            self._oov_error([flat[i] for i in missing])
        start = self._oov_start_index()
        if self.num_oov_indices == 1:
            found[missing] = start
        else:
            oov = [flat[i] for i in missing]
            bins = _hash.string_buckets(oov, self.salt, self.num_oov_indices, self.encoding)
            found[missing] = bins + start
        return found

    def _invert(self, inputs: Any) -> np.ndarray:
        self._check_ready()
        idx = cat.to_numpy(inputs)
        if idx.dtype.kind not in "iu":
            self._fail("input", "must be integer indices when invert=True", f"dtype {idx.dtype}")
        vocab = np.array(self.get_vocabulary(), dtype=object)
        valid = (idx >= 0) & (idx < len(vocab))
        out = np.where(valid, vocab[np.where(valid, idx, 0)], self.oov_token)
        return out.astype(str)


class IntegerLookup(_IndexLookup):
    """Map integers to indices (Keras 3's ``keras.layers.IntegerLookup``); runs in torch, so
    it works on any device and exports with ``torch.export``.

    Args: as ``StringLookup``, with integer tokens: ``mask_token`` (None) and
    ``oov_token`` (default -1) are ints; ``vocabulary_dtype`` must be ``"int64"``;
    ``oov_method``: how OOV values pick one of several OOV indices: ``"floormod"``
    (default, ``value mod num_oov_indices``) or ``"farmhash"`` (FarmHash64 of the decimal
    string, SipHash-2-4 with ``salt``; ``salt`` needs ``"farmhash"``).

    Input: an int tensor/array/list of any shape. Output: ``int`` mode int64 of the same
    shape (``invert=True``: the vocabulary values, ``oov_token`` for unknown indices);
    encodings float32 ``(..., depth)``. With ``num_oov_indices=0`` an OOV input raises a
    ``ValueError`` in eager mode (under ``torch.export`` it becomes -1).

    Example:
        >>> layer = IntegerLookup(vocabulary=[12, 36, 1138, 42])
        >>> layer(torch.tensor([[12, 1138, 42], [42, 1000, 36]]))
        tensor([[1, 3, 4],
                [4, 0, 2]])
    """

    _state_buffers = ("vocabulary",)

    # buffers (register_buffer), declared for type checkers
    vocabulary: torch.Tensor

    def __init__(
        self,
        max_tokens: int | None = None,
        num_oov_indices: int = 1,
        mask_token: int | None = None,
        oov_token: int = -1,
        vocabulary: Any = None,
        vocabulary_dtype: str = "int64",
        idf_weights: Any = None,
        invert: bool = False,
        output_mode: str = "int",
        sparse: bool = False,
        pad_to_max_tokens: bool = False,
        oov_method: str = "floormod",
        salt: int | list[int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if vocabulary_dtype != "int64":
            self._fail(
                "vocabulary_dtype", "must be 'int64' (Keras 3 supports only it)", vocabulary_dtype
            )
        self.vocabulary_dtype = vocabulary_dtype
        self.oov_method = cat.check_choice(self, "oov_method", oov_method, ("floormod", "farmhash"))
        if salt is not None and oov_method != "farmhash":
            self._fail("salt", "can only be used with oov_method='farmhash'", salt)
        for name, value in (("mask_token", mask_token), ("oov_token", oov_token)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, np.integer))
            ):
                self._fail(name, "must be an int or None", value)
        mask_token = None if mask_token is None else int(mask_token)
        oov_token = None if oov_token is None else int(oov_token)
        self._init_lookup(dict(locals()))

    def _init_buffers(self) -> None:
        self.register_buffer("vocabulary", torch.zeros(0, dtype=torch.int64))
        # Derived from `vocabulary` (searchsorted needs sorted keys); not in state_dict.
        self.register_buffer("_sorted_keys", torch.zeros(0, dtype=torch.int64), persistent=False)
        self.register_buffer("_sorted_index", torch.zeros(0, dtype=torch.int64), persistent=False)
        self.register_buffer("_by_index", torch.zeros(0, dtype=torch.int64), persistent=False)

    def _write_buffers(self) -> None:
        device = self.vocabulary.device
        self.vocabulary = torch.tensor(self._tokens, dtype=torch.int64, device=device)
        self._derive()

    def _read_buffers(self) -> None:
        self._tokens = self.vocabulary.tolist()
        self._derive()

    def _tokens_from_state(self, state_dict: dict, prefix: str) -> list | None:
        vocab = state_dict.get(prefix + "vocabulary")
        if vocab is None:
            return None
        if not isinstance(vocab, torch.Tensor) or vocab.dtype != torch.int64 or vocab.ndim != 1:
            self._fail("state_dict['vocabulary']", "must be a 1-D int64 tensor", vocab)
        return vocab.tolist()

    def _derive(self) -> None:
        keys, order = torch.sort(self.vocabulary)
        self._sorted_keys = keys
        self._sorted_index = order + self._token_start_index()
        full = [v if v is not None else 0 for v in self.get_vocabulary()]
        self._by_index = torch.tensor(full, dtype=torch.int64, device=self.vocabulary.device)

    def _file_tokens(self, lines: list[str], path: str) -> list:
        """A vocabulary file's lines as integers (Keras reads them as int64 keys)."""
        tokens = []
        for number, line in enumerate(lines, start=1):
            try:
                token = int(line.strip())
            except ValueError:
                token = None
            if token is None or not -(2**63) <= token < 2**63:
                self._fail("vocabulary", f"file {path!r} line {number} is not an int64", line)
            tokens.append(token)
        return tokens

    def _as_token(self, value: Any, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            self._fail(what, "must hold integers", value)
        return int(value)

    def _as_array(self, batch: Any) -> np.ndarray:
        arr = cat.to_numpy(batch)
        if arr.dtype.kind not in "iu":
            self._fail("adapt data", "must hold integers", f"dtype {arr.dtype}")
        return arr.astype(np.int64)

    def _as_tensor(self, inputs: Any) -> torch.Tensor:
        x = as_tensor(inputs)
        if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
            self._fail("input", "must be integers", f"dtype {x.dtype}")
        return x.to(torch.int64)

    def forward(self, inputs: Any) -> torch.Tensor:  # type: ignore[override]  # no generator
        self._check_ready()
        x = self._as_tensor(inputs)
        if self.invert:
            n = self._by_index.shape[0]
            valid = (x >= 0) & (x < n)
            out = self._by_index[torch.where(valid, x, 0)]
            return torch.where(valid, out, self.oov_token if self.oov_token is not None else -1)
        if self._sorted_keys.numel():
            pos = torch.searchsorted(self._sorted_keys, x).clamp_max(self._sorted_keys.numel() - 1)
            hit = self._sorted_keys[pos] == x
            found = self._sorted_index[pos]
        else:  # int mode before adapt: everything is OOV
            hit, found = torch.zeros_like(x, dtype=torch.bool), x
        out = torch.where(hit, found, self._oov_indices(x, hit))
        if self.mask_token is not None:
            out = torch.where(x == self.mask_token, 0 if self.output_mode == "int" else -1, out)
        return self._encode(out)

    def _oov_indices(self, x: torch.Tensor, hit: torch.Tensor) -> torch.Tensor:
        start = self._oov_start_index()
        if self.num_oov_indices == 0:
            if not cat.is_tracing():
                miss = ~hit if self.mask_token is None else ~hit & (x != self.mask_token)
                if bool(miss.any()):
                    self._oov_error(x[miss].tolist())
            return torch.full_like(x, -1)
        if self.num_oov_indices == 1:
            return torch.full_like(x, start)
        if self.oov_method == "floormod":
            return torch.remainder(x, self.num_oov_indices) + start
        h = _hash.hash_int64(x, self.salt).reshape(x.shape)
        return _hash.unsigned_mod(h, self.num_oov_indices) + start
