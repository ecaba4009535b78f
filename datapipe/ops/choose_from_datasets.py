"""``choose_from_datasets``: a dataset of indices picks which input each element comes
from (``tf.data.Dataset.choose_from_datasets``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe._iterator import OpIterator
from datapipe._positions import buffer_from_state, buffer_to_state, first_failure, read_positions
from datapipe._spec import TensorSpec, UnknownSpec, dtype_name
from datapipe._validate import check_bool
from datapipe.dataset_ops import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset
from datapipe.errors import annotate
from datapipe.ops._directed_interleave import DirectedInterleaveIterator, Selector
from datapipe.ops.concatenate import merge_specs


def check_datasets(op: str, datasets: Sequence[Dataset]) -> list[Dataset]:
    if isinstance(datasets, Dataset) or not isinstance(datasets, (list, tuple)):
        raise TypeError(f"{op}: datasets must be a list of Datasets, got {type(datasets).__name__}")
    if not datasets:
        raise ValueError(f"{op}: datasets must not be empty")
    for i, d in enumerate(datasets):
        if not isinstance(d, Dataset):
            raise TypeError(f"{op}: datasets[{i}] must be a Dataset, got {type(d).__name__}")
    return list(datasets)


def directed_cardinality(input_cards: Sequence[int], selector_card: int) -> int:
    """When every input is infinite the selector alone decides the length; otherwise an
    input may run out first and the length is unknown."""
    if selector_card == 0:
        return 0
    if all(n == INFINITE_CARDINALITY for n in input_cards):
        return selector_card
    return UNKNOWN_CARDINALITY


class ChooseFromDatasets(Dataset):
    """Element ``j`` is the next element of ``datasets[c_j]``, ``c_j`` the ``j``-th element
    of ``choice_dataset`` (``tf.data.Dataset.choose_from_datasets``).

    Args:
        datasets: non-empty list of datasets with compatible element specs (same structure
            and dtypes; shapes merge as in ``concatenate``).
        choice_dataset: dataset of scalar int64 values in ``[0, len(datasets))``.
        stop_on_empty_dataset: when a chosen input is exhausted, end (True, the default,
            as in tf.data) or skip that choice and go on (False).

    Raises:
        TypeError: ``choice_dataset`` elements are not scalar int64; a datasets entry is
            not a Dataset; element specs are incompatible (the message shows both).
        ValueError: ``datasets`` is empty.
        PipelineError (at iteration): a choice value is out of range; names the value and
            its index in ``choice_dataset``. The elements before it are delivered first.

    Cardinality: the choice dataset's when every input is infinite, else unknown. No random
    access.

    Example:
        >>> import datapipe as dp
        >>> a, b = dp.range(0, 3), dp.range(10, 13)
        >>> choice = dp.from_tensor_slices([0, 1, 1, 0, 1])
        >>> [int(x) for x in dp.choose_from_datasets([a, b], choice)]
        [0, 10, 11, 1, 12]
    """

    _name = "choose_from_datasets"

    def __init__(
        self,
        datasets: Sequence[Dataset],
        choice_dataset: Dataset,
        stop_on_empty_dataset: bool = True,
    ):
        datasets = check_datasets(self._name, datasets)
        if not isinstance(choice_dataset, Dataset):
            raise TypeError(
                f"{self._name}: choice_dataset must be a Dataset, got "
                f"{type(choice_dataset).__name__}"
            )
        spec = choice_dataset.element_spec
        if not isinstance(spec, UnknownSpec) and not (
            isinstance(spec, TensorSpec) and spec.shape == () and dtype_name(spec.dtype) == "int64"
        ):
            raise TypeError(
                f"{self._name}: elements of choice_dataset must be scalar int64 values, but "
                f"its element_spec is {spec!r}"
            )
        super().__init__(*datasets, choice_dataset)
        self._num = len(datasets)
        self._stop = check_bool(self._name, "stop_on_empty_dataset", stop_on_empty_dataset)
        self._spec = merge_specs(self._name, [d.element_spec for d in datasets])

    @property
    def element_spec(self) -> Any:
        return self._spec

    def cardinality(self) -> int:
        inputs = self._inputs[: self._num]
        choice = self._inputs[-1].cardinality()
        return directed_cardinality([d.cardinality() for d in inputs], choice)

    def _make_iterator(self, ctx, epoch):
        inners = [ctx.make(d, epoch) for d in self._inputs[: self._num]]
        selector = _ChoiceSelector(ctx.make(self._inputs[-1], epoch), self._num, self._name)
        it = DirectedInterleaveIterator(inners, selector, self._stop, self._name)
        it.inputs.append(selector.it)  # close() reaches the choice iterator too
        return it


class _ChoiceSelector(Selector):
    """Choices read from the choice dataset; a skipped choice is dropped."""

    def __init__(self, it: OpIterator, num: int, op: str):
        self.it, self.num, self.op = it, num, op
        self.count = 0  # choice elements read, for error indices
        self.values = np.zeros(0, dtype=np.int64)
        self.leftover: list[Any] = []  # choices (or Failed) read past a bad one
        self.err: BaseException | None = None

    def draw(self, n: int) -> int:
        vals = self.leftover[:n]
        self.leftover = self.leftover[n:]
        if len(vals) < n:
            read_positions(self.it, vals, n, exact=True)
        # The first choice that failed (keeps its position) or is out of range ends the
        # draw: its error is raised after the positions before it; the rest is kept.
        j = first_failure(vals)
        arr = np.asarray([int(v) for v in vals[:j]], dtype=np.int64)
        bad = np.flatnonzero((arr < 0) | (arr >= self.num))
        if bad.size:
            j = int(bad[0])
            self.err = annotate(
                self.op,
                self.count + j,
                ValueError(
                    f"choice_dataset element {self.count + j} is {int(arr[j])}, outside the "
                    f"valid range [0, {self.num}) of dataset indices"
                ),
            )
        elif j < len(vals):
            self.err = vals[j].error
        if j < len(vals):
            self.leftover = vals[j + 1 :] + self.leftover
            arr = arr[:j]
            self.count += 1
        self.count += len(arr)
        self.values = arr
        return len(arr)

    def choices(self, start: int, active: np.ndarray) -> np.ndarray:
        ch = self.values[start:]
        if not active.all():
            # Choices of inputs already found empty (stop_on_empty_dataset=False) are
            # skipped: compact them away so positions stay those of the values kept.
            ch = ch[active[ch]]
            self.values = np.concatenate([self.values[:start], ch])
        return ch

    def on_exhausted(self, pos: int, i: int) -> bool:
        return False

    def pop_error(self) -> BaseException | None:
        err, self.err = self.err, None
        return err

    def get_state(self) -> dict:
        return {
            "count": self.count,
            "leftover": buffer_to_state(self.leftover),
            "input": self.it.get_state(),
        }

    def set_state(self, state: dict) -> None:
        self.count = int(state["count"])
        self.leftover = buffer_from_state(state["leftover"], self.op)
        self.err = None
        self.it.set_state(state["input"])
