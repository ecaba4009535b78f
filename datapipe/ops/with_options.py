"""``with_options``: attach ``Options`` to a pipeline (``tf.data.Dataset.with_options``)."""

from __future__ import annotations

from datapipe.dataset_ops import Dataset, RandomAccessUnaryDataset
from datapipe.options import Options


class OptionsDataset(RandomAccessUnaryDataset):
    """Elements unchanged; ``options`` merge into the graph's options at ``iter()`` time
    (fields set here win over fields set upstream).

    Example:
        >>> import datapipe as dp
        >>> options = dp.Options()
        >>> options.deterministic = False
        >>> ds = dp.range(4).with_options(options)
        >>> ds.options.deterministic, sorted(int(x) for x in ds)
        (False, [0, 1, 2, 3])
    """

    _name = "with_options"
    elementwise = True
    commutes_with_shard = True

    def __init__(self, input_ds: Dataset, options: Options):
        super().__init__(input_ds)
        if not isinstance(options, Options):
            raise TypeError(
                f"with_options: expected datapipe.Options, got {type(options).__name__}"
            )
        self._options = options

    def _make_iterator(self, ctx, epoch):
        return ctx.make(self._inputs[0], epoch)
