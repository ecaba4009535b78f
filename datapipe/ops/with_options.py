"""``with_options``: attach ``Options`` to a pipeline (``tf.data.Dataset.with_options``)."""

from __future__ import annotations

from typing import Any

from datapipe.dataset import Dataset, passes_random_access
from datapipe.options import Options


class OptionsDataset(Dataset):
    """Elements unchanged; ``options`` merge into the graph's options at ``iter()`` time
    (fields set here win over fields set upstream)."""

    _name = "with_options"

    def __init__(self, input_ds: Dataset, options: Options):
        super().__init__(input_ds)
        if not isinstance(options, Options):
            raise TypeError(
                f"with_options: expected datapipe.Options, got {type(options).__name__}"
            )
        self._options = options

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def cardinality(self) -> int:
        return self._inputs[0].cardinality()

    def _random_access_breaker(self) -> str | None:
        return passes_random_access(self)

    def _make_random_access(self, ctx):
        return self._inputs[0]._make_random_access(ctx)

    def _make_iterator(self, ctx, epoch):
        return ctx.make(self._inputs[0], epoch)
