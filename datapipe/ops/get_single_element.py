"""``get_single_element``: the one element of a dataset
(``tf.data.Dataset.get_single_element``)."""

from __future__ import annotations

from typing import Any


def _where(dataset: Any) -> str:
    """A hint for the error message when a worker context shards the dataset."""
    from datapipe.distribute.context import resolve_worker_context

    w = resolve_worker_context(dataset.options)
    if w.count == 1:
        return ""
    return (
        f" (this is worker {w.index} of {w.count}'s share under auto-sharding; "
        "ds.shard(1, 0).get_single_element() reads the whole dataset)"
    )


def get_single_element(dataset: Any) -> Any:
    """The only element of ``dataset`` (``tf.data.Dataset.get_single_element``): e.g.
    ``ds.batch(len(ds)).get_single_element()`` loads a small dataset as one batch.

    Reads at most two elements. Under a worker context it reads this worker's share, as
    ``iter()`` does (see ``reduce``).

    Raises:
        ValueError: the dataset is empty ("... was empty") or has more than one element
            ("... had more than one element"), as tf.data's ``InvalidArgumentError``.
        PipelineError: producing the element failed.

    Example:
        >>> import datapipe as dp
        >>> dp.range(4).batch(4).get_single_element().tolist()
        [0, 1, 2, 3]
    """
    with iter(dataset) as it:
        first = next(it, _END)
        if first is _END:
            raise ValueError(f"get_single_element: the dataset was empty{_where(dataset)}")
        if next(it, _END) is not _END:
            raise ValueError(
                f"get_single_element: the dataset had more than one element{_where(dataset)}"
            )
    return first


_END = object()
