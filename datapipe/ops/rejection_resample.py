"""``rejection_resample``: keep elements at random so that their classes follow a target
distribution (``tf.data.Dataset.rejection_resample``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from datapipe._functions import ElementwiseIterator, call
from datapipe._iterator import OpIterator
from datapipe._spec import UnknownSpec, seen_spec, spec_of
from datapipe._validate import check_seed
from datapipe.dataset_ops import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset, UnaryDataset
from datapipe.errors import annotate
from datapipe.ops.group_by_window import as_key

_OP = "rejection_resample"
# tf.data's online estimate starts every class at this count (its smoothing_constant).
SMOOTHING = 10


def _distribution(name: str, value: Any, k: int | None) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{_OP}: {name} must be a vector of probabilities, got {value!r}") from e
    if arr.ndim != 1 or arr.size == 0 or (k is not None and arr.shape != (k,)):
        want = "a non-empty vector" if k is None else f"shape ({k},) (one per class)"
        raise ValueError(f"{_OP}: {name} must be {want}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or arr.sum() <= 0:
        raise ValueError(
            f"{_OP}: {name} must be finite, non-negative and not all zero, got {arr.tolist()}"
        )
    return arr / arr.sum()


def acceptance(initial: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Probability of keeping an element of each class: ``r_i / max(r)`` with
    ``r_i = target_i / initial_i`` (rejection sampling; tf.data's ``a_i`` when
    ``min(r) == 0``). The kept classes then follow ``target``."""
    ratio = target / (initial + np.finfo(np.float64).tiny)  # tf.data adds `tiny` too
    return ratio / ratio.max()


class RejectionResampleDataset(UnaryDataset):
    """Pairs ``(class_func(x), x)`` for a random subset of the elements whose classes
    follow ``target_dist`` (``tf.data.Dataset.rejection_resample``).

    Each element of class ``c`` is kept with probability ``r_c / max_i r_i``, where
    ``r_i = target_dist[i] / initial_dist[i]``: rejection sampling, so the kept classes
    follow ``target_dist`` when the input's follow ``initial_dist``. About
    ``n / max_i r_i`` of ``n`` elements are kept.

    tf.data mixes two passes over its input (the input as it is, with probability
    ``min_i r_i``, and a rejection-sampled pass), so its output can repeat elements and
    be longer than the input. This op reads the input once: every element at most once,
    in input order, with the same target distribution. When ``initial_dist`` equals
    ``target_dist`` every element is kept, as in tf.data; when some ``target_dist[i]`` is
    0 the acceptance probabilities are tf.data's.

    Args:
        class_func: element (unpacked when a plain tuple, as tf.data) -> its class, a
            scalar integer in ``[0, num_classes)``.
        target_dist: the wanted class probabilities, shape ``[num_classes]`` (normalised).
        initial_dist: the input's class probabilities, same shape. Default None: estimated
            while reading, as tf.data does: every class starts at a count of 10, and
            each element's class is counted before it is decided on.
        seed: op seed; default derives from ``Options.seed`` and the op's position. One
            uniform number is drawn per element, from one generator, in input order.

    Raises:
        TypeError / ValueError (when built): ``class_func`` not callable; a distribution
            not a non-empty vector of finite non-negative numbers with a positive sum, or
            of another length than ``target_dist``; ``seed`` not an integer.
        PipelineError (at iteration): ``class_func`` raised or returned something other
            than a scalar integer in range; names the op and the element's index.

    ``element_spec`` is ``(spec of the class value, input spec)`` (the class value is kept
    as ``class_func`` returns it). ``cardinality()`` is unknown (infinite stays infinite).
    The iterator state holds the generator, the class counts and the input's state. No
    random access. Under a worker context DATA auto-sharding shards below it (each worker
    resamples its own share).

    Example:
        >>> import datapipe as dp
        >>> import numpy as np
        >>> labels = np.array([0] * 800 + [1] * 200)
        >>> ds = dp.from_tensor_slices(labels).rejection_resample(
        ...     lambda y: y, target_dist=[0.5, 0.5], initial_dist=[0.8, 0.2], seed=0)
        >>> kept = np.array([int(c) for c, _ in ds])
        >>> len(kept), round(float(kept.mean()), 1)  # ~800 * 0.25 + 200 kept, half of them 1s
        (390, 0.5)
    """

    _name = _OP
    commutes_with_shard = True
    uses_randomness = True

    def __init__(
        self,
        input_ds: Dataset,
        class_func: Callable,
        target_dist: Any,
        initial_dist: Any = None,
        seed: int | None = None,
    ):
        super().__init__(input_ds)
        if not callable(class_func):
            raise TypeError(f"{_OP}: class_func must be callable, got {type(class_func).__name__}")
        self._class_func = class_func
        self._target = _distribution("target_dist", target_dist, None)
        k = len(self._target)
        self._initial = (
            None if initial_dist is None else _distribution("initial_dist", initial_dist, k)
        )
        self._seed = check_seed(_OP, seed)
        self._spec_cache: Any = None

    @property
    def element_spec(self) -> Any:
        if self._spec_cache is None:
            first = self._inputs[0]._first_element()
            if first is None:
                return UnknownSpec()
            value, _ = self.class_of(first, 0)
            self._spec_cache = (seen_spec(spec_of(value)), self._inputs[0].element_spec)
        return self._spec_cache

    def cardinality(self) -> int:
        n = self._inputs[0].cardinality()
        return INFINITE_CARDINALITY if n == INFINITE_CARDINALITY else UNKNOWN_CARDINALITY

    def class_of(self, x: Any, index: int) -> tuple[Any, int]:
        """(the class value as returned, the class as an int), checked."""
        try:
            value = call(self._class_func, x)
            c = as_key(value, "class_func")
            if not 0 <= c < len(self._target):
                raise ValueError(
                    f"class_func returned class {c}, outside [0, {len(self._target)}) "
                    "(num_classes is len(target_dist))"
                )
        except Exception as e:  # noqa: BLE001 - located and re-raised
            raise annotate(self._name, index, e) from e
        return value, c

    def _make_iterator(self, ctx, epoch):
        return RejectionResampleIterator(
            self, ctx.make(self._inputs[0], epoch), ctx.rng(self, epoch)
        )


class RejectionResampleIterator(ElementwiseIterator):
    op_name = _OP

    def __init__(self, node: RejectionResampleDataset, inner: OpIterator, rng: np.random.Generator):
        super().__init__(inner)
        self.node, self.rng = node, rng
        k = len(node._target)
        # Class counts of the online estimate (unused with an initial_dist).
        self.counts = np.full(k, SMOOTHING, dtype=np.int64)
        self.fixed = None if node._initial is None else acceptance(node._initial, node._target)

    def _keep(self, c: int) -> bool:
        if self.fixed is not None:
            p = self.fixed[c]
        else:
            self.counts[c] += 1
            p = acceptance(self.counts / self.counts.sum(), self.node._target)[c]
        return bool(self.rng.random() < p)

    def next_chunk(self, n: int) -> list:
        self._raise_pending()
        while True:
            chunk = self._take(n)
            if not chunk:
                return []
            out: list = []
            for j, x in enumerate(chunk):
                try:
                    value, c = self.node.class_of(x, self.count + j)
                except Exception as e:  # noqa: BLE001 - handed to the consumer in order
                    return self._fail(chunk, j, out, e, None)
                if self._keep(c):
                    out.append((value, x))
            self._commit(len(chunk))
            if out:
                return out

    def get_state(self) -> dict:
        return {
            "rng": self.rng.bit_generator.state,
            "counts": self.counts.tolist(),
            **super().get_state(),
        }

    def set_state(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.counts = np.asarray(state["counts"], dtype=np.int64)
        super().set_state(state)
