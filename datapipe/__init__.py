"""datapipe: tf.data's input pipelines for PyTorch.

A lazy, immutable ``Dataset`` graph (sources, transformations) whose iterators run on
threads, tune themselves (``AUTOTUNE``), shard across workers and checkpoint exactly.
See DESIGN.md in the shared folder for the architecture.

Example:
    >>> import datapipe as dp
    >>> ds = dp.from_tensor_slices([1, 2, 3, 4, 5]).map(lambda x: x * 10).batch(2)
    >>> [b.tolist() for b in ds]
    [[10, 20], [30, 40], [50]]
"""

from datapipe._spec import TensorSpec
from datapipe.dataset import (
    AUTOTUNE,
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
)
from datapipe.errors import DatapipeError, PipelineError, RandomAccessError
from datapipe.options import (
    AutoShardPolicy,
    AutotuneOptions,
    DistributeOptions,
    Options,
    StatsOptions,
    ThreadingOptions,
)

from_tensor_slices = Dataset.from_tensor_slices
from_tensors = Dataset.from_tensors
range = Dataset.range  # noqa: A001 - tf.data's name
from_generator = Dataset.from_generator
zip = Dataset.zip  # noqa: A001 - tf.data's name
sample_from_datasets = Dataset.sample_from_datasets
choose_from_datasets = Dataset.choose_from_datasets

__version__ = "0.1.0"

__all__ = [
    "AUTOTUNE",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
    "AutoShardPolicy",
    "AutotuneOptions",
    "Dataset",
    "DatapipeError",
    "DistributeOptions",
    "Options",
    "PipelineError",
    "RandomAccessError",
    "StatsOptions",
    "TensorSpec",
    "ThreadingOptions",
    "choose_from_datasets",
    "from_generator",
    "from_tensor_slices",
    "from_tensors",
    "range",
    "sample_from_datasets",
    "zip",
]
