"""``random``: an infinite stream of pseudorandom integers (``tf.data.Dataset.random``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from datapipe._iterator import OpIterator
from datapipe._spec import TensorSpec
from datapipe._validate import check_optional_bool, check_seed
from datapipe.dataset_ops import INFINITE_CARDINALITY, Dataset

# tf.data's RandomDataset yields one 32-bit Philox output per element, as an int64.
_HIGH = 1 << 32


class RandomDataset(Dataset):
    """Uniform pseudorandom integers in ``[0, 2**32)`` as ``numpy.int64`` scalars, forever
    (``tf.data.Dataset.random``).

    Args:
        seed: op seed. Default: derived from ``Options.seed`` and the op's position; with
            neither, from entropy this op draws once (so one sequence per dataset object,
            as tf.data's; a new ``Dataset.random()`` draws another).
        rerandomize_each_iteration: True: a new sequence for each epoch (each ``iter()`` of
            the same dataset, each ``repeat`` pass), reproducible from the seed. False or
            None (tf.data's default): the same sequence every epoch.

    Raises:
        TypeError: ``seed`` not an integer, ``rerandomize_each_iteration`` not a bool.

    The values come from numpy's PCG64 seeded through ``IterContext`` (docs/architecture.md,
    "Randomness is explicit"), not from TensorFlow's Philox, so they are not the numbers
    tf.data draws; the range, dtype and the epoch behaviour are tf.data's. The iterator
    state is the generator's state. ``cardinality()`` is ``INFINITE_CARDINALITY``; no
    random access. Under a worker context DATA auto-sharding splits one stream among the
    workers, which needs a seed (``seed`` or ``Options.seed``): otherwise each worker would
    draw its own stream, and auto-sharding raises ``AutoShardError``.

    Example:
        >>> import datapipe as dp
        >>> a = [int(x) for x in dp.Dataset.random(seed=4).take(3)]
        >>> a == [int(x) for x in dp.Dataset.random(seed=4).take(3)]
        True
        >>> all(0 <= x < 2**32 for x in a)
        True
    """

    _name = "random"
    uses_randomness = True

    def __init__(self, seed: int | None = None, rerandomize_each_iteration: bool | None = None):
        super().__init__()
        self._seed = check_seed("random", seed)
        self._rerandomize = bool(
            check_optional_bool("random", "rerandomize_each_iteration", rerandomize_each_iteration)
        )

    @property
    def element_spec(self) -> Any:
        return TensorSpec((), np.int64)

    def cardinality(self) -> int:
        return INFINITE_CARDINALITY

    def _make_iterator(self, ctx, epoch):
        return RandomIterator(ctx.rng(self, epoch if self._rerandomize else ()))


class RandomIterator(OpIterator):
    op_name = "random"

    def __init__(self, rng: np.random.Generator):
        super().__init__()
        self.rng = rng

    def next_chunk(self, n: int) -> list:
        return list(self.rng.integers(0, _HIGH, size=n, dtype=np.int64))

    def get_state(self) -> dict:
        return {"rng": self.rng.bit_generator.state}

    def set_state(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
