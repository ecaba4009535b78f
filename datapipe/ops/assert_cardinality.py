"""``assert_cardinality``: declare, and check, the number of elements
(``tf.data.experimental.assert_cardinality``)."""

from __future__ import annotations

from datapipe._iterator import OpIterator
from datapipe._validate import check_int
from datapipe.dataset_ops import (
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
    RandomAccessUnaryDataset,
    raw_cardinality,
)
from datapipe.errors import CardinalityError


def _elements(n: int) -> str:
    if n == INFINITE_CARDINALITY:
        return "an infinite number of elements"
    return f"{n} element" + ("" if n == 1 else "s")


class AssertCardinalityDataset(RandomAccessUnaryDataset):
    """The input's elements, with ``cardinality()`` = ``expected_cardinality``; iteration
    raises ``CardinalityError`` when the input turns out to have another count
    (``tf.data.experimental.assert_cardinality``).

    Use it after ops whose count is unknown (``filter``, text files, generators) when you
    know the count: ``len(ds)``, ``repeat().take(n)`` arithmetic, progress bars and
    DistributedDataParallel's even ends (``Options.distribute.uneven``) can then use it.

    Args:
        expected_cardinality: ``>= 0``, or ``INFINITE_CARDINALITY`` (-1).

    Raises:
        TypeError: ``expected_cardinality`` is not an integer.
        ValueError: it is negative (other than -1); or the input's count is already known
            and differs (raised here, when the pipeline is built, where tf.data raises
            only while iterating).
        CardinalityError (at iteration): the input ended after ``m < expected`` elements
            ("... expected to contain 3 elements but contained only 2 elements."), or had
            an element past ``expected`` ("... but contained at least 4 elements.");
            the ``expected`` elements before are delivered first, as tf.data does.

    ``element_spec`` is the input's. Keeps random access (the input's count is then known
    and equal). Under a worker context the count is checked on the whole dataset (the
    auto-shard point goes above this op), as far as the workers read it: each reads the
    pool up to its share of the asserted count, so an input shorter than asserted raises
    there, while elements past the asserted count are not read.

    Example:
        >>> import datapipe as dp
        >>> ds = dp.range(10).filter(lambda x: x % 2 == 0).assert_cardinality(5)
        >>> ds.cardinality(), [int(x) for x in ds]
        (5, [0, 2, 4, 6, 8])
    """

    _name = "assert_cardinality"

    def __init__(self, input_ds: Dataset, expected_cardinality: int):
        super().__init__(input_ds)
        self._expected = check_int(
            "assert_cardinality",
            "expected_cardinality",
            expected_cardinality,
            minimum=0,
            special=(INFINITE_CARDINALITY,),
            what=">= 0, or INFINITE_CARDINALITY (-1)",
        )
        with raw_cardinality():
            known = input_ds.cardinality()
        if known != UNKNOWN_CARDINALITY and known != self._expected:
            raise ValueError(
                f"assert_cardinality: the input is known to have {_elements(known)}, but "
                f"the asserted cardinality is {_elements(self._expected)}"
            )

    def cardinality(self) -> int:
        return self._expected

    def _make_iterator(self, ctx, epoch):
        return AssertCardinalityIterator(ctx.make(self._inputs[0], epoch), self._expected)


class AssertCardinalityIterator(OpIterator):
    """Counts the elements; asks its input for one element past ``expected`` to find out
    whether there is one. A failure is sticky (part of the state)."""

    op_name = "assert_cardinality"

    def __init__(self, inner: OpIterator, expected: int):
        super().__init__([inner])
        self.inner, self.expected = inner, expected
        self.count = 0  # input positions read (elements, and failures of the input)
        self.failure: str | None = None

    def _fail(self, message: str) -> None:
        self.failure = message
        raise CardinalityError(message)

    def _message(self, found: str) -> str:
        return (
            f"assert_cardinality: the input dataset was expected to contain "
            f"{_elements(self.expected)} but contained {found}"
        )

    def next_chunk(self, n: int) -> list:
        if self.failure is not None:
            raise CardinalityError(self.failure)
        infinite = self.expected == INFINITE_CARDINALITY
        want = n if infinite else max(1, min(n, self.expected - self.count))
        try:
            out = self.inner.next_chunk(want)
        except Exception:
            self.count += 1  # a failing element keeps its position (datapipe._positions)
            raise
        if not out:
            if infinite or self.count < self.expected:
                self._fail(self._message(f"only {_elements(self.count)}."))
            return []
        if not infinite and self.count + len(out) > self.expected:
            self._fail(self._message(f"at least {_elements(self.expected + 1)}."))
        self.count += len(out)
        return out

    def index_base(self) -> tuple[int, int] | None:
        return self.inner.index_base()

    def get_state(self) -> dict:
        return {"count": self.count, "failure": self.failure, "input": self.inner.get_state()}

    def set_state(self, state: dict) -> None:
        self.count = int(state["count"])
        self.failure = state.get("failure")
        self.inner.set_state(state["input"])
