"""``sample_from_datasets``: each element comes from a randomly chosen input
(``tf.data.Dataset.sample_from_datasets``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe._iterator import OpIterator
from datapipe._positions import Failed, buffer_from_state, buffer_to_state, read_positions
from datapipe._validate import check_bool, check_seed
from datapipe.dataset_ops import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset
from datapipe.errors import annotate
from datapipe.ops._directed_interleave import DirectedInterleaveIterator, Selector
from datapipe.ops.choose_from_datasets import check_datasets
from datapipe.ops.concatenate import merge_specs


def _check_weights(op: str, w: Any, k: int, where: str = "weights") -> np.ndarray:
    arr = np.asarray(w, dtype=np.float64)
    if arr.shape != (k,):
        raise ValueError(f"{op}: {where} must have shape ({k},) (one per dataset), got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{op}: {where} must be finite and non-negative, got {arr.tolist()}")
    return arr  # all zero: nothing is sampled (tf.data), the output ends there


class SampleFromDatasets(Dataset):
    """Each element is the next element of an input chosen at random with probability
    proportional to ``weights`` (``tf.data.Dataset.sample_from_datasets``).

    Args:
        datasets: non-empty list of datasets with compatible element specs (same structure
            and dtypes; shapes merge as in ``concatenate``).
        weights: one non-negative weight per dataset (normalised; default uniform; all
            zero: an empty output, as tf.data; integers are accepted), or a Dataset whose
            elements are such vectors (one per output element, as tf.data allows; the
            output ends when it ends).
        seed: op seed; default derives from ``Options.seed`` and the op's position.
        stop_on_empty_dataset: False (default, as tf.data): when an input ends, keep
            sampling from the others with their weights renormalised; the output ends when
            every input with a positive weight has ended. True: end at the first draw of
            an exhausted input.
        rerandomize_each_iteration: draw a new sequence each epoch (each ``iter()`` and
            ``repeat`` pass). Default False, as tf.data: the same sequence every epoch.

    Raises:
        ValueError: ``datasets`` empty; ``weights`` of the wrong length, negative or not
            finite (a weights Dataset: at iteration, naming the element).
        TypeError: a datasets entry is not a Dataset; incompatible element specs.

    Sampling draws one uniform number per element from a seeded generator, so the sequence
    is reproducible and independent of how elements are read in chunks. Cardinality: with
    constant weights and ``stop_on_empty_dataset=False``, the sum of the inputs with a
    positive weight (tf.data reports unknown); infinite if one of those is infinite;
    otherwise unknown. No random access.

    Example:
        >>> import datapipe as dp
        >>> ds = dp.sample_from_datasets([dp.range(0, 3), dp.range(10, 13)], seed=1)
        >>> sorted(int(x) for x in ds)
        [0, 1, 2, 10, 11, 12]
        >>> [int(x) for x in ds] == [int(x) for x in ds]
        True
    """

    _name = "sample_from_datasets"
    commutes_with_shard = True
    uses_randomness = True

    def __init__(
        self,
        datasets: Sequence[Dataset],
        weights: Sequence[float] | Dataset | None = None,
        seed: int | None = None,
        stop_on_empty_dataset: bool = False,
        rerandomize_each_iteration: bool = False,
    ):
        datasets = check_datasets(self._name, datasets)
        k = len(datasets)
        self._weights_ds = weights if isinstance(weights, Dataset) else None
        super().__init__(*datasets, *([self._weights_ds] if self._weights_ds else []))
        self._num = k
        if self._weights_ds is None:
            self._weights = (
                np.full(k, 1.0 / k) if weights is None else _check_weights(self._name, weights, k)
            )
            total = self._weights.sum()
            self._weights = self._weights / total if total > 0 else self._weights
        op = self._name
        self._seed = check_seed(op, seed)
        self._stop = check_bool(op, "stop_on_empty_dataset", stop_on_empty_dataset)
        self._rerandomize = check_bool(op, "rerandomize_each_iteration", rerandomize_each_iteration)
        self._spec = merge_specs(self._name, [d.element_spec for d in datasets])

    @property
    def element_spec(self) -> Any:
        return self._spec

    def cardinality(self) -> int:
        cards = [d.cardinality() for d in self._inputs[: self._num]]
        if self._weights_ds is not None:
            return UNKNOWN_CARDINALITY
        cards = [n for n, w in zip(cards, self._weights) if w > 0]
        if not cards:  # every weight is 0: nothing is sampled
            return 0
        if self._stop:
            if all(n == INFINITE_CARDINALITY for n in cards):
                return INFINITE_CARDINALITY
            return UNKNOWN_CARDINALITY
        if INFINITE_CARDINALITY in cards:
            return INFINITE_CARDINALITY
        if UNKNOWN_CARDINALITY in cards:
            return UNKNOWN_CARDINALITY
        return sum(cards)

    def _make_iterator(self, ctx, epoch):
        inners = [ctx.make(d, epoch) for d in self._inputs[: self._num]]
        rng = ctx.rng(self, epoch if self._rerandomize else ())
        w_it = None if self._weights_ds is None else ctx.make(self._weights_ds, epoch)
        weights = None if w_it is not None else self._weights
        selector = _SampleSelector(rng, weights, w_it, self._num, self._name)
        it = DirectedInterleaveIterator(inners, selector, self._stop, self._name)
        if w_it is not None:
            it.inputs.append(w_it)  # close() reaches the weights iterator too
        return it


class _SampleSelector(Selector):
    """One uniform draw ``u`` per position mapped through the cumulative weights of the
    inputs not yet found empty. When the chosen input is empty, ``u``'s position inside
    that input's interval is itself uniform and independent of the choice, so rescaling it
    gives the fresh draw for the retry without consuming the generator."""

    def __init__(
        self,
        rng: np.random.Generator,
        weights: np.ndarray | None,
        w_it: OpIterator | None,
        num: int,
        op: str,
    ):
        self.rng, self.weights, self.w_it, self.num, self.op = rng, weights, w_it, num, op
        self.u = np.zeros(0)
        self.w = np.zeros((0, num))
        self.count = 0  # weight rows read, for error indices
        self.leftover: list = []  # weight rows read past a bad one
        self.err: BaseException | None = None

    def draw(self, n: int) -> int:
        if self.w_it is None:
            assert self.weights is not None  # fixed weights when no dataset gives them
            self.u = self.rng.random(n)
            self.w = np.broadcast_to(self.weights, (n, self.num))
            return n
        rows, self.leftover = self.leftover[:n], self.leftover[n:]
        if len(rows) < n:
            read_positions(self.w_it, rows, n, exact=True)
        good = []
        for j, r in enumerate(rows):
            # A failing or invalid weights element ends the draw (raised after the positions
            # before it); the rows read after it are kept for the next draw.
            if type(r) is Failed:
                self.err = r.error
            else:
                try:
                    good.append(_check_weights(self.op, r, self.num, "each weights element"))
                    continue
                except ValueError as e:
                    self.err = annotate(self.op, self.count + j, e)
            self.leftover = rows[j + 1 :] + self.leftover
            break
        self.count += len(good) + (self.err is not None)
        self.u = self.rng.random(len(good))
        self.w = np.asarray(good, dtype=np.float64).reshape(len(good), self.num)
        return len(good)

    def choices(self, start: int, active: np.ndarray) -> np.ndarray:
        self.active_used = active.copy()  # on_exhausted needs the intervals of this choice
        wa = self.w[start:] * active
        cum = np.cumsum(wa, axis=1)
        total = cum[:, -1]
        x = self.u[start:] * total
        ch = (cum <= x[:, None]).sum(axis=1)
        # Rounding can put x on the last boundary: clamp to the last positive weight.
        last = self.num - 1 - np.argmax((wa > 0)[:, ::-1], axis=1)
        ch = np.minimum(ch, last)
        ch[total <= 0] = -1  # every remaining input has weight 0 or has ended: stop
        return ch

    def on_exhausted(self, pos: int, i: int) -> bool:
        wa = self.w[pos] * self.active_used
        cum = np.cumsum(wa)
        lo = cum[i] - wa[i]
        u = (self.u[pos] * cum[-1] - lo) / wa[i]
        self.u[pos] = min(max(u, 0.0), np.nextafter(1.0, 0.0))
        return True

    def pop_error(self) -> BaseException | None:
        err, self.err = self.err, None
        return err

    def get_state(self) -> dict:
        state = {"rng": self.rng.bit_generator.state, "count": self.count}
        if self.w_it is not None:
            state["weights"] = self.w_it.get_state()
            state["leftover"] = buffer_to_state(self.leftover)
        return state

    def set_state(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.count = int(state["count"])
        self.err = None
        if self.w_it is not None:
            self.w_it.set_state(state["weights"])
            self.leftover = buffer_from_state(state.get("leftover", []), self.op)
