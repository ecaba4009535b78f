"""``reduce``: fold every element into one value (``tf.data.Dataset.reduce``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from datapipe import _structure as nest
from datapipe._functions import as_element
from datapipe.errors import annotate


def reduce_dataset(dataset: Any, initial_state: Any, reduce_func: Callable) -> Any:
    """``reduce_func(... reduce_func(reduce_func(initial_state, x_0), x_1) ..., x_n-1)``:
    the state after every element of one iteration, or ``initial_state`` for an empty
    dataset (``tf.data.Dataset.reduce``).

    Args:
        initial_state: a value or a nested tuple/dict of values.
        reduce_func: ``reduce_func(state, element) -> new_state``; the element is one
            argument even when it is a tuple (tf.data's rule for reduce); ``new_state``
            must nest like ``initial_state`` (same tuple lengths and dict keys).

    Returns:
        The final state, as ``reduce_func`` returned it.

    Raises:
        TypeError: ``reduce_func`` is not callable.
        PipelineError: ``reduce_func`` raised or returned a state of another structure
            (names ``reduce`` and the element index), or the pipeline failed.
        TypeError: the dataset is infinite (``reduce`` would never return).

    Like ``iter()``, it reads this worker's share under a worker context (auto-sharding;
    see README "Distributed training"): sum the per-worker results, or call it on
    ``ds.shard(1, 0)`` to read the whole dataset on every worker. Every thread the
    pipeline started is stopped before it returns or raises.

    Example:
        >>> import datapipe as dp
        >>> int(dp.range(5).reduce(0, lambda state, x: state + x))
        10
        >>> dp.zip(dp.range(3), dp.range(3)).reduce(0, lambda s, xy: s + int(xy[0] * xy[1]))
        5
    """
    from datapipe.dataset_ops import INFINITE_CARDINALITY

    if not callable(reduce_func):
        raise TypeError(f"reduce: reduce_func must be callable, got {type(reduce_func).__name__}")
    if dataset.cardinality() == INFINITE_CARDINALITY:
        raise TypeError("reduce: the dataset is infinite, so reduce would never return")
    state = initial_state
    with iter(dataset) as it:
        for i, x in enumerate(it):
            try:
                new = as_element(reduce_func(state, x))  # a list state is a tuple
            except Exception as e:  # noqa: BLE001 - located and re-raised
                raise annotate("reduce", i, e) from e
            if not nest.same_structure(new, initial_state):
                raise annotate(
                    "reduce",
                    i,
                    TypeError(
                        "reduce_func returned a state whose structure differs from "
                        f"initial_state ({type(new).__name__} vs {type(initial_state).__name__})"
                    ),
                )
            state = new
    return state
