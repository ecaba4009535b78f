"""Docstrings of the thin ``Dataset`` methods, taken from the op each one builds.

The semantics (shapes, dtypes, errors, the tf.data/Keras anchor) are documented once, on the
op's class in ``datapipe/ops`` / ``datapipe/sources`` / ``datapipe/io``; ``help(ds.map)``
shows that text. Runnable examples stay on the op classes (doctests run there once).
"""

from __future__ import annotations

import importlib
import inspect

# method -> (module, object) whose docstring documents it
_SOURCES = {
    "from_tensor_slices": ("datapipe.sources.tensor_slices", "TensorSlicesDataset"),
    "from_tensors": ("datapipe.sources.tensors", "TensorsDataset"),
    "range": ("datapipe.sources.range", "RangeDataset"),
    "from_generator": ("datapipe.sources.generator", "GeneratorDataset"),
    "counter": ("datapipe.sources.counter", "CounterDataset"),
    "random": ("datapipe.sources.random", "RandomDataset"),
    "zip": ("datapipe.ops.zip", "ZipDataset"),
    "sample_from_datasets": ("datapipe.ops.sample_from_datasets", "SampleFromDatasets"),
    "choose_from_datasets": ("datapipe.ops.choose_from_datasets", "ChooseFromDatasets"),
    "map": ("datapipe.ops.map", "MapDataset"),
    "random_map": ("datapipe.ops.random_map", "RandomMapDataset"),
    "filter": ("datapipe.ops.filter", "FilterDataset"),
    "flat_map": ("datapipe.ops.flat_map", "FlatMapDataset"),
    "interleave": ("datapipe.ops.interleave", "InterleaveDataset"),
    "batch": ("datapipe.ops.batch", "BatchDataset"),
    "padded_batch": ("datapipe.ops.padded_batch", "PaddedBatchDataset"),
    "ragged_batch": ("datapipe.ops.ragged_batch", "RaggedBatchDataset"),
    "rebatch": ("datapipe.ops.rebatch", "RebatchDataset"),
    "bucket_by_sequence_length": (
        "datapipe.ops.bucket_by_sequence_length",
        "BucketBySequenceLengthDataset",
    ),
    "group_by_window": ("datapipe.ops.group_by_window", "GroupByWindowDataset"),
    "rejection_resample": ("datapipe.ops.rejection_resample", "RejectionResampleDataset"),
    "first_fit_pack": ("datapipe.ops.first_fit_pack", "FirstFitPackDataset"),
    "assert_cardinality": ("datapipe.ops.assert_cardinality", "AssertCardinalityDataset"),
    "reduce": ("datapipe.ops.reduce", "reduce_dataset"),
    "get_single_element": ("datapipe.ops.get_single_element", "get_single_element"),
    "unbatch": ("datapipe.ops.unbatch", "UnbatchDataset"),
    "shuffle": ("datapipe.ops.shuffle", "ShuffleDataset"),
    "global_shuffle": ("datapipe.ops.global_shuffle", "GlobalShuffleDataset"),
    "repeat": ("datapipe.ops.repeat", "RepeatDataset"),
    "take": ("datapipe.ops.take", "TakeDataset"),
    "skip": ("datapipe.ops.skip", "SkipDataset"),
    "enumerate": ("datapipe.ops.enumerate", "EnumerateDataset"),
    "cache": ("datapipe.ops.cache", "CacheDataset"),
    "shard": ("datapipe.ops.shard", "ShardDataset"),
    "scan": ("datapipe.ops.scan", "ScanDataset"),
    "take_while": ("datapipe.ops.take_while", "TakeWhileDataset"),
    "unique": ("datapipe.ops.unique", "UniqueDataset"),
    "window": ("datapipe.ops.window", "WindowDataset"),
    "concatenate": ("datapipe.ops.concatenate", "ConcatenateDataset"),
    "prefetch": ("datapipe.ops.prefetch", "PrefetchDataset"),
    "prefetch_to_device": ("datapipe.ops.prefetch_to_device", "PrefetchToDeviceDataset"),
    "ignore_errors": ("datapipe.ops.ignore_errors", "IgnoreErrorsDataset"),
    "to_torch": ("datapipe.ops.to_torch", "ToTorchDataset"),
    "with_options": ("datapipe.ops.with_options", "OptionsDataset"),
    "save": ("datapipe.io.save", "save_dataset"),
    "load": ("datapipe.io.save", "load_dataset"),
}

# cache(filename) is a different op from cache(): both texts are shown.
_EXTRA = {"cache": ("datapipe.io.file_cache", "FileCacheDataset")}


def _without_examples(doc: str) -> str:
    lines = inspect.cleandoc(doc).splitlines()
    for i, line in enumerate(lines):
        if line.strip() in ("Example:", "Examples:"):
            return "\n".join(lines[:i]).rstrip()
    return "\n".join(lines)


def _doc_of(module: str, name: str) -> str:
    obj = getattr(importlib.import_module(module), name)
    text = _without_examples(obj.__doc__ or "")
    return f"{text}\n\n(Documented on ``{module}.{name}``, which has a runnable example.)"


def attach(dataset_cls: type) -> None:
    """Give each thin ``Dataset`` method the docstring of the op it builds."""
    for method, (module, name) in _SOURCES.items():
        doc = _doc_of(module, name)
        if method in _EXTRA:
            doc += "\n\nWith a filename:\n\n" + _doc_of(*_EXTRA[method])
        attr = dataset_cls.__dict__[method]
        func = attr.__func__ if isinstance(attr, staticmethod) else attr
        if not func.__doc__:
            func.__doc__ = doc
