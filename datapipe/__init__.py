"""datapipe: tf.data's input pipelines for PyTorch.

A lazy, immutable ``Dataset`` graph (sources, transformations) whose iterators run on
threads, tune themselves (``AUTOTUNE``), shard across workers and checkpoint exactly.
docs/architecture.md describes the architecture.

Example:
    >>> import datapipe as dp
    >>> ds = dp.from_tensor_slices([1, 2, 3, 4, 5]).map(lambda x: x * 10).batch(2)
    >>> [b.tolist() for b in ds]
    [[10, 20], [30, 40], [50]]
"""

from typing import TYPE_CHECKING

from datapipe._spec import TensorSpec
from datapipe.dataset_ops import (
    AUTOTUNE,
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
)
from datapipe.errors import (
    BatchShapeError,
    CardinalityError,
    DatapipeError,
    DeviceUnavailableError,
    DrawKeyError,
    FingerprintError,
    InputStuckError,
    PipelineBrokenError,
    PipelineError,
    RandomAccessError,
    RedactedError,
    RemoteTraceback,
    RestoredFailure,
    WorkerDiedError,
)
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
counter = Dataset.counter
random = Dataset.random
sample_from_datasets = Dataset.sample_from_datasets
choose_from_datasets = Dataset.choose_from_datasets

# parallel execution (datapipe/parallel): the count of elements ignore_errors dropped
from datapipe.ops.ignore_errors import ignored_count  # noqa: E402

# The distribution datapipe and preprocessing install as (pyproject.toml's one version).
_DISTRIBUTION = "datapipe-torch"
if TYPE_CHECKING:
    __version__: str  # read from the metadata on first use (__getattr__ below)

__all__ = [
    "AUTOTUNE",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
    "AutoShardPolicy",
    "AutotuneOptions",
    "BatchShapeError",
    "CardinalityError",
    "Dataset",
    "DatapipeError",
    "DeviceUnavailableError",
    "DistributeOptions",
    "DrawKeyError",
    "FingerprintError",
    "Options",
    "PipelineError",
    "InputStuckError",
    "PipelineBrokenError",
    "RandomAccessError",
    "RedactedError",
    "RemoteTraceback",
    "RestoredFailure",
    "StatsOptions",
    "TensorSpec",
    "ThreadingOptions",
    "WorkerDiedError",
    "choose_from_datasets",
    "counter",
    "from_generator",
    "ignored_count",
    "from_tensor_slices",
    "from_tensors",
    "random",
    "range",
    "sample_from_datasets",
    "zip",
]

# The user's word that a map function is safe in worker processes (AUTOTUNE then skips its
# reading: datapipe/parallel/fork_safety.py).
from datapipe.parallel.fork_safety import process_safe  # noqa: E402

__all__ += ["process_safe"]

# Statistics (Options.stats, Dataset.profile): importing the package installs its iterator hook.
from datapipe import stats  # noqa: E402

__all__ += ["stats"]

# Distribution: importing the package installs the auto-shard rewrite (datapipe.distribute).
from datapipe import distribute  # noqa: E402
from datapipe.distribute import (  # noqa: E402
    AutoShardError,
    WorkerContextError,
    load_state,
    save_state,
)

__all__ += [
    "AutoShardError",
    "TorchIterableDataset",
    "WorkerContextError",
    "distribute",
    "load_state",
    "save_state",
]

# Files: file lists, text lines, images, columnar formats, save/load (datapipe.io).
from datapipe import io  # noqa: E402
from datapipe.io import (  # noqa: E402
    ArrowIPCDataset,
    CsvDataset,
    FileReadError,
    FileSource,
    ImageDecodeError,
    NullValueError,
    ParquetDataset,
    SchemaMismatchError,
    TextLineDataset,
    TFRecordDataset,
    WebDataset,
    decode_image,
    decode_jpeg,
    decode_png,
    from_arrow_ipc,
    from_csv,
    from_feather,
    from_parquet,
    image_dataset_from_directory,
    list_files,
    load_image,
    read_file,
    resize_image,
    write_webdataset,
)

__all__ += [
    "ArrowIPCDataset",
    "CsvDataset",
    "FileReadError",
    "FileSource",
    "ImageDecodeError",
    "NullValueError",
    "ParquetDataset",
    "SchemaMismatchError",
    "TextLineDataset",
    "TFRecordDataset",
    "WebDataset",
    "decode_image",
    "decode_jpeg",
    "decode_png",
    "from_arrow_ipc",
    "from_csv",
    "from_feather",
    "from_parquet",
    "image_dataset_from_directory",
    "io",
    "list_files",
    "load_image",
    "read_file",
    "resize_image",
    "write_webdataset",
]

# Hugging Face datasets as sources (the huggingface extra; datasets is never imported here).
from datapipe.io.huggingface import HuggingFaceDataset, from_huggingface  # noqa: E402

__all__ += ["HuggingFaceDataset", "from_huggingface"]

# A preprocessing service on Ray (datapipe.service; Ray itself is imported on first use).
from datapipe import service  # noqa: E402

__all__ += ["service"]

# Stream ops (window): the spec of a Dataset-valued component.
from datapipe._spec import DatasetSpec  # noqa: E402

__all__ += ["DatasetSpec"]

# help(ds.map) etc.: the thin Dataset methods show the docstring of the op they build.
from datapipe import _docs  # noqa: E402

_docs.attach(Dataset)

# Renamed in issue 24 (one name per concept): `datapipe.dataset` (the Dataset class's
# module, next to the `datasets` package of sample data) is now `datapipe.dataset_ops`
# (tf.data's name for it). The old path still imports, with a DeprecationWarning.
from datapipe import _deprecated  # noqa: E402

_deprecated.alias_module(f"{__name__}.dataset", f"{__name__}.dataset_ops")


# Subpackages the imports above do not load: `dp.datasets` imports its package on first use
# (as `import datapipe.datasets` would), so `import datapipe` does not pay for them.
_LAZY_SUBPACKAGES = ("datasets", "image")
if TYPE_CHECKING:  # type checkers see the real module
    from datapipe import datasets as datasets
    from datapipe import image as image

__all__ += list(_LAZY_SUBPACKAGES)


def _version() -> str:
    """The installed distribution's version (PEP 440), ``"0+unknown"`` for a source tree
    that is on ``sys.path`` without being installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(_DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"


def __getattr__(name: str) -> object:
    if name == "__version__":  # read once, on first use: importlib.metadata costs ~10 ms
        globals()["__version__"] = _version()
        return globals()["__version__"]
    # Names whose import needs torch are loaded on first use: `import datapipe` stays
    # torch-free (~0.3 s instead of ~2.5 s) for pipelines that never touch torch.
    if name == "TorchIterableDataset":
        return distribute.TorchIterableDataset
    if name in _LAZY_SUBPACKAGES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")  # binds it on the package too
    if name == "dataset":  # the renamed module (see above): importing it warns
        import importlib

        return importlib.import_module(f"{__name__}.dataset")
    from datapipe._spellings import namespace_hint  # tf.data's namespaces: say where to look

    raise AttributeError(namespace_hint(name) or f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_SUBPACKAGES) | {"TorchIterableDataset"})
