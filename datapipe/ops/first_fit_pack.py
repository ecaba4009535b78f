"""``first_fit_pack``: pack variable-length sequences into fixed-length rows with segment
ids and positions (Grain's ``FirstFitPackIterDataset``)."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe._functions import raise_pending
from datapipe._iterator import OpIterator
from datapipe._positions import error_from_state, error_to_state
from datapipe._spec import TensorSpec, UnknownSpec
from datapipe._validate import check_bool, check_int, check_optional_int, check_seed
from datapipe.dataset_ops import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset
from datapipe.errors import annotate

_OP = "first_fit_pack"


def _per_feature(name: str, value: Any, keys: list[str], check: Any) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != set(keys):
        raise ValueError(f"{_OP}: {name} must be a dict with the keys of length_struct {keys}")
    return {k: check(k, v) for k, v in value.items()}


class _Packer:
    """One packed batch of ``bins`` rows being filled first-fit (Grain's
    ``FirstFitPackedBatch``): each element goes to the first row where every feature
    fits (and, with ``max_sequences``, that holds fewer sequences)."""

    def __init__(self, node: FirstFitPackDataset, first: dict):
        self.node, bins = node, node._bins
        self.values, self.segment_ids, self.positions, self.free = {}, {}, {}, {}
        for k, length in node._lengths.items():
            x = first[k]
            shape, dtype = (), np.asarray(x).dtype
            if np.ndim(x) > 0:
                shape, dtype = np.shape(x)[1:], np.asarray(x).dtype
            fill = 0 if node._padding is None else node._padding[k]
            self.values[k] = np.full((bins, length, *shape), fill, dtype=dtype)
            self.segment_ids[k] = np.zeros((bins, length), dtype=np.int32)
            self.positions[k] = np.zeros((bins, length), dtype=np.int32)
            self.free[k] = np.zeros(bins, dtype=np.int64)
        self.examples = np.zeros(bins, dtype=np.int32)
        self.meta: dict[str, list[list]] = {k: [[] for _ in range(bins)] for k in node._meta_only}

    def try_add(self, x: dict) -> bool:
        """Add ``x`` to the first row it fits in; False when it fits in none.

        Raises:
            ValueError: a feature of ``x`` is longer than its row length."""
        node = self.node
        fits = self.examples < (node._max_sequences or np.iinfo(np.int32).max)
        lengths = {}
        for k, cap in node._lengths.items():
            n = 1 if np.ndim(x[k]) == 0 else len(x[k])
            if n > cap:
                raise ValueError(
                    f"feature {k!r} has length {n}, more than its row length {cap} "
                    "(truncate sequences to length_struct first)"
                )
            lengths[k] = n
            fits &= self.free[k] + n <= cap
        if not fits.any():
            return False
        self._add(x, int(np.argmax(fits)), lengths)
        return True

    def _add(self, x: dict, row: int, lengths: dict) -> None:
        segment = self.examples[row] + 1
        for k, n in lengths.items():
            start = int(self.free[k][row])
            end = start + n
            self.values[k][row, start:end] = x[k]
            self.segment_ids[k][row, start:end] = segment
            self.positions[k][row, start:end] = np.arange(n, dtype=np.int32)
            align = 1 if self.node._alignment is None else self.node._alignment[k]
            self.free[k][row] = -(-end // align) * align
        self.examples[row] += 1
        for k in self.meta:
            self.meta[k][row].append(x[k])

    def rows(self) -> list[dict]:
        """The rows that hold a sequence (a prefix: rows fill in order), as elements."""
        used = int(np.count_nonzero(self.examples > 0))
        out = []
        for r in range(used):
            row: dict = {}
            for k in self.values:
                row[k] = self.values[k][r]
                if k not in self.node._meta:  # sequence meta features: values only
                    row[f"{k}_segment_ids"] = self.segment_ids[k][r]
                    row[f"{k}_positions"] = self.positions[k][r]
            for k in self.meta:
                row[k] = list(self.meta[k][r])
            out.append(row)
        return out


class FirstFitPackDataset(Dataset):
    """Sequences packed first-fit into rows of fixed length, with segment ids and
    positions (Grain's ``grain.experimental.FirstFitPackIterDataset``: same arguments,
    algorithm and output).

    Elements are dicts of sequences (numpy arrays whose first dimension is the length; a
    scalar counts as length 1). Rows are built ``num_packing_bins`` at a time: each
    element goes to the first row where every feature of ``length_struct`` still fits
    (and that holds fewer than ``max_sequences_per_bin`` sequences); when one does not
    fit anywhere, the rows that hold sequences are delivered and a new set of rows starts
    with it. At the end of the input the last set is delivered.

    Each output row is a dict with, for each feature ``k`` of ``length_struct``:

    - ``k``: shape ``[length_struct[k], ...]``, the input's dtype; the sequences one
      after the other, the rest ``padding_struct[k]`` (default 0);
    - ``k_segment_ids``: int32 ``[length_struct[k]]``, 1 for the row's first sequence, 2
      for the second, ..., 0 on padding;
    - ``k_positions``: int32 ``[length_struct[k]]``, each sequence's positions
      ``0, 1, ...``, 0 on padding.

    A feature in ``meta_features`` and ``length_struct`` is packed without the two extra
    keys; one only in ``meta_features`` becomes, per row, the list of its values for the
    row's sequences. Other keys are dropped.

    Args:
        length_struct: dict feature -> row length (>= 1).
        num_packing_bins: rows packed at a time (>= 1); more rows pack tighter.
        shuffle_bins: deliver each set of rows in a random order (Grain's default True):
            ``numpy.random.default_rng(seed + rows delivered before).permuted(range(rows))``,
            Grain's draw, so the same ``seed`` gives Grain's order.
        seed: the seed of that draw; default: derived from ``Options.seed`` and the op's
            position (fresh on each ``iter()`` without either). The same every epoch, as
            in Grain.
        meta_features: feature names packed without segment ids and positions (see above).
        pack_alignment_struct: dict feature -> alignment (>= 1): each sequence starts at a
            multiple of it.
        padding_struct: dict feature -> the scalar to pad values with.
        max_sequences_per_bin: at most this many sequences per row (>= 1).

    Raises:
        TypeError / ValueError (when built): ``length_struct`` not a non-empty dict of
            positive integers; a struct argument with other keys; bad integers or flags;
            an input spec that is not a dict holding those features.
        PipelineError (at iteration): an element without a feature, or with a feature
            longer than its row length (Grain: "must be truncated to max length"); names
            the op and the element's index.

    ``element_spec``: each value ``TensorSpec((length, *trailing), dtype)``, the ids and
    positions ``TensorSpec((length,), int32)``, a list meta feature ``TensorSpec((None,),
    object)``. ``cardinality()`` is unknown (infinite stays infinite). The iterator state
    holds the elements of the set being packed and the rows not yet delivered. No random
    access. Under a worker context DATA auto-sharding shards below it (each worker packs
    its own sequences).

    Example:
        >>> import datapipe as dp
        >>> import numpy as np
        >>> seqs = [np.array([1, 2, 3]), np.array([4, 5]), np.array([6]), np.array([7, 8, 9, 10])]
        >>> ds = dp.from_generator(lambda: ({"tokens": s} for s in seqs),
        ...                        {"tokens": dp.TensorSpec((None,), np.int64)})
        >>> rows = list(ds.first_fit_pack({"tokens": 5}, num_packing_bins=2, shuffle_bins=False))
        >>> [r["tokens"].tolist() for r in rows]
        [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]
        >>> rows[1]["tokens_segment_ids"].tolist(), rows[1]["tokens_positions"].tolist()
        ([1, 2, 2, 2, 2], [0, 0, 1, 2, 3])
    """

    _name = _OP
    commutes_with_shard = True

    def __init__(
        self,
        input_ds: Dataset,
        length_struct: dict,
        num_packing_bins: int,
        shuffle_bins: bool = True,
        seed: int | None = None,
        meta_features: Sequence[str] = (),
        pack_alignment_struct: dict | None = None,
        padding_struct: dict | None = None,
        max_sequences_per_bin: int | None = None,
    ):
        super().__init__(input_ds)
        if not isinstance(length_struct, dict) or not length_struct:
            raise TypeError(f"{_OP}: length_struct must be a non-empty dict feature -> length")
        self._lengths = {
            str(k): check_int(_OP, f"length_struct[{k!r}]", v, minimum=1)
            for k, v in length_struct.items()
        }
        keys = list(self._lengths)
        self._bins = check_int(_OP, "num_packing_bins", num_packing_bins, minimum=1)
        self._shuffle = check_bool(_OP, "shuffle_bins", shuffle_bins)
        self.uses_randomness = self._shuffle  # a trait of this instance (Dataset docstring)
        self._seed = check_seed(_OP, seed)
        if isinstance(meta_features, str) or not all(isinstance(m, str) for m in meta_features):
            raise TypeError(f"{_OP}: meta_features must be a sequence of feature names")
        self._meta = tuple(meta_features)
        self._meta_only = tuple(k for k in self._meta if k not in self._lengths)
        self._alignment = _per_feature(
            "pack_alignment_struct",
            pack_alignment_struct,
            keys,
            lambda k, v: check_int(_OP, f"pack_alignment_struct[{k!r}]", v, minimum=1),
        )
        self._padding = _per_feature("padding_struct", padding_struct, keys, _scalar)
        self._max_sequences = check_optional_int(
            _OP, "max_sequences_per_bin", max_sequences_per_bin, minimum=1
        )
        self._check_spec(input_ds.element_spec)

    def _check_spec(self, spec: Any) -> None:
        if isinstance(spec, UnknownSpec):
            return
        need = [*self._lengths, *self._meta_only]
        if not isinstance(spec, dict) or any(k not in spec for k in need):
            raise ValueError(
                f"{_OP}: elements must be dicts with the features {need}; the input's "
                f"element_spec is {spec!r}"
            )

    @property
    def element_spec(self) -> Any:
        spec = self._inputs[0].element_spec
        if isinstance(spec, UnknownSpec):
            return spec
        out: dict = {}
        for k, length in self._lengths.items():
            s = spec[k]
            trailing = () if s.shape is None or len(s.shape) == 0 else s.shape[1:]
            out[k] = TensorSpec((length, *trailing), s.dtype)
            if k not in self._meta:
                out[f"{k}_segment_ids"] = TensorSpec((length,), np.int32)
                out[f"{k}_positions"] = TensorSpec((length,), np.int32)
        for k in self._meta_only:
            out[k] = TensorSpec((None,), object)
        return out

    def cardinality(self) -> int:
        n = self._inputs[0].cardinality()
        return INFINITE_CARDINALITY if n == INFINITE_CARDINALITY else UNKNOWN_CARDINALITY

    def prune(self, x: Any) -> dict:
        """The features ``x`` is packed by (a KeyError names a missing one)."""
        if not isinstance(x, dict):
            raise TypeError(f"elements must be dicts, got {type(x).__name__}")
        missing = [k for k in (*self._lengths, *self._meta_only) if k not in x]
        if missing:
            raise KeyError(f"the element has no feature {missing[0]!r}")
        return {k: x[k] for k in (*self._lengths, *self._meta_only)}

    def _make_iterator(self, ctx, epoch):
        if self._seed is not None:
            base = self._seed
        else:  # Grain adds the rows delivered to its seed: keep the sum in int64
            base = int(ctx.seed_sequence(self, ()).generate_state(1, np.uint32)[0])
        return FirstFitPackIterator(self, ctx.make(self._inputs[0], epoch), base)


def _scalar(key: str, value: Any) -> Any:
    if np.ndim(value) != 0:
        raise ValueError(f"{_OP}: padding_struct[{key!r}] must be a scalar, got {value!r}")
    return value


class FirstFitPackIterator(OpIterator):
    """Grain's packing loop: elements go into the open set of rows until one does not fit;
    then the set's rows are delivered (in a random order with ``shuffle_bins``). The state
    holds the open set's elements (packed again on restore) and the rows not delivered."""

    op_name = _OP

    def __init__(self, node: FirstFitPackDataset, inner: OpIterator, base_seed: int):
        super().__init__([inner])
        self.node, self.inner, self.base_seed = node, inner, base_seed
        self.open: list[dict] = []  # elements in the set being packed, in order
        self.packer: _Packer | None = None
        self.rows: collections.deque = collections.deque()  # rows to deliver, in order
        self.delivered = 0  # rows delivered (Grain's counter: seeds the shuffles)
        self.count = 0  # input elements read
        self.done = False
        self.pending: BaseException | None = None

    def _finish(self, packer: _Packer) -> None:
        """Queue the open set's rows (``packer``'s); start an empty set."""
        rows = packer.rows()
        if self.node._shuffle:
            order = np.random.default_rng(self.base_seed + self.delivered).permuted(
                range(len(rows))
            )
            rows = [rows[int(i)] for i in order]
        self.rows.extend(rows)
        self.open, self.packer = [], None

    def _pack(self, x: Any) -> None:
        index, self.count = self.count, self.count + 1
        try:
            x = self.node.prune(x)
            if self.packer is None:
                self.packer = _Packer(self.node, x)
            if not self.packer.try_add(x):
                self._finish(self.packer)
                self.packer = _Packer(self.node, x)
                self.packer.try_add(x)  # an empty set takes any element that is not too long
        except Exception as e:  # noqa: BLE001 - located here
            raise annotate(self.op_name, index, e) from e
        self.open.append(x)

    def next_chunk(self, n: int) -> list:
        raise_pending(self)
        out: list = []
        while len(out) < n:
            if self.rows:
                out.append(self.rows.popleft())
                self.delivered += 1
                continue
            if out:
                break  # never read ahead once rows are ready
            if self.done:
                if self.packer is None:
                    break
                self._finish(self.packer)
                continue
            got = self.inner.next_chunk(1)
            if not got:
                self.done = True
                continue
            self._pack(got[0])
        return out

    def get_state(self) -> dict:
        return {
            "open": list(self.open),
            "rows": list(self.rows),
            "delivered": self.delivered,
            "count": self.count,
            "done": self.done,
            "pending_error": error_to_state(self.pending),
            "input": self.inner.get_state(),
        }

    def set_state(self, state: dict) -> None:
        self.open, self.packer = [], None
        for x in state["open"]:  # packing is deterministic: the same rows again
            if self.packer is None:
                self.packer = _Packer(self.node, x)
            self.packer.try_add(x)
            self.open.append(x)
        self.rows = collections.deque(state["rows"])
        self.delivered, self.count = int(state["delivered"]), int(state["count"])
        self.done = bool(state["done"])
        self.pending = error_from_state(state.get("pending_error"), self.op_name)
        self.inner.set_state(state["input"])
