# ruff: noqa: E501 - the table's keys are upstream test ids, one per line
"""tf.data's own kernel tests, translated: ``test_<op>.py`` per op or source of datapipe.

Each test's docstring names its upstream file (under ``tensorflow/python/data/``) and
test method, ``kernel_tests/<file>_test.py::<Class>.<method>``; it keeps the upstream
literal inputs and expected values, and its ``combinations`` become ``parametrize``
cases. A test narrowed to a deliberate difference cites the row of
``docs/guides/differences.md`` (``D-TF-n``).

``SKIPPED`` is the one table of upstream tests not translated, each with its reason:
they test tf.data's own machinery (graph mode, symbolic tensors and shapes, tf.function
tracing, SparseTensor/RaggedTensor/TensorArray/Optional values, TF resources and
variables, TF's random number streams, devices, the tf.data service), not the
semantics datapipe shares. ``test_suite.py`` checks the table against the docstrings.

Not here: datapipe's ops and sources that tf.data has not (``random_map``,
``first_fit_pack``, ``to_torch``, Parquet / Arrow IPC / WebDataset sources,
``image_dataset_from_directory``, ``decode_*``; Keras's are in ``tests/conformance/keras``),
and tf.data's that datapipe has not (``make_csv_dataset``, ``FixedLengthRecordDataset``,
the tf.data service). Their own tests are in ``tests/``.
"""

from __future__ import annotations

_GRAPH = "graph mode / TF1 sessions: datapipe has no graph to build"
_SPARSE = "SparseTensor: datapipe has no sparse element type"
_RAGGED = "tf.RaggedTensor values: datapipe's ragged rows are object arrays (see ragged_batch)"
_TENSOR_ARRAY = "tf.TensorArray values: a TF-specific element type"
_RESOURCE = "TF resources (variables, queues, hash tables) captured by the traced function"
_TRACE = "tf.function tracing of the user function (datapipe calls it on values)"
_PHILOX = "expected values are TF's Philox random stream; the property is tested instead"
_NAME = "the op's `name=` argument names a TF graph node"
_SYMBOLIC_CKPT = "options.experimental_symbolic_checkpoint: a TF checkpoint format"
_BFLOAT16 = "bfloat16: a TF dtype that numpy has not"
_ROUND_TRIP = "graphRoundTrip: a dataset serialized to a TF GraphDef and back"
_PROTO = "the tf.data Options protobuf (dataset_options_pb2)"
_SNAPSHOT = "TF's snapshot shard files (shard_func, reader_func, checkpoint_args): D-TF-22"
_LEGACY = "legacy_snapshot's own arguments (mode, snapshot_name, shard_size_bytes, shuffle_on_read, expiry, reader/writer threads)"
_LEGACY_RESTORE = "legacy_snapshot's restore restarts a reading epoch; the current op's exact resume is SnapshotCheckpointTest"
_TF_CKPT = "tf.train.Checkpoint of an iterator resource (TF's checkpoint file format)"

SKIPPED: dict[str, str] = {
    # batch_test.py
    "kernel_tests/batch_test.py::BatchTest.testSparse": _SPARSE,
    "kernel_tests/batch_test.py::BatchTest.testSparseWithDifferentDenseShapes": _SPARSE,
    "kernel_tests/batch_test.py::BatchTest.testSparseNested": _SPARSE,
    "kernel_tests/batch_test.py::BatchTest.testRagged": _RAGGED,
    "kernel_tests/batch_test.py::BatchTest.testRaggedWithDifferentShapes": _RAGGED,
    "kernel_tests/batch_test.py::BatchTest.testRaggedNested": _RAGGED,
    "kernel_tests/batch_test.py::BatchTest.testCheckpointLargeBatches": _TF_CKPT,
    "kernel_tests/batch_test.py::BatchTest.testName": _NAME,
    "kernel_tests/batch_test.py::BatchCheckpointTest.testSparse": _SPARSE,
    "kernel_tests/batch_test.py::BatchCheckpointTest.testNestedSparse": _SPARSE,
    # map_test.py
    "kernel_tests/map_test.py::MapTest.testCaptureIterator": _RESOURCE,
    "kernel_tests/map_test.py::MapTest.testCaptureHashTable": _RESOURCE,
    "kernel_tests/map_test.py::MapTest.testCaptureQueue": _RESOURCE,
    "kernel_tests/map_test.py::MapTest.testCaptureSameResourceMultipleTimes": _RESOURCE,
    "kernel_tests/map_test.py::MapTest.testSparse": _SPARSE,
    "kernel_tests/map_test.py::MapTest.testSparseChain": _SPARSE,
    "kernel_tests/map_test.py::MapTest.testSparseMapShapeInference": _SPARSE,
    "kernel_tests/map_test.py::MapTest.testSparseMapShapeInferencePartial": _SPARSE,
    "kernel_tests/map_test.py::MapTest.testTensorArray": _TENSOR_ARRAY,
    "kernel_tests/map_test.py::MapTest.testTensorArrayChain": _TENSOR_ARRAY,
    "kernel_tests/map_test.py::MapTest.testRagged": _RAGGED,
    "kernel_tests/map_test.py::MapTest.testRaggedChain": _RAGGED,
    "kernel_tests/map_test.py::MapTest.testWarnOnSeedFromOuterGraph": _GRAPH,
    "kernel_tests/map_test.py::MapTest.testBrokenFunctionErrorOnInitialization": _TRACE,
    "kernel_tests/map_test.py::MapTest.testNoInterOpParallelism": _GRAPH,
    "kernel_tests/map_test.py::MapTest.testShortCircuitCapturedInput": _RESOURCE,
    "kernel_tests/map_test.py::MapTest.testCollectionCopy": _GRAPH,
    "kernel_tests/map_test.py::MapTest.testMapCancellation": _GRAPH,
    "kernel_tests/map_test.py::MapTest.testCreateVariableInsideFunctionWithGetter": _RESOURCE,
    "kernel_tests/map_test.py::MapTest.testCaptureVariable": _RESOURCE,
    "kernel_tests/map_test.py::MapTest.testCaptureUninitializedVariableError": _RESOURCE,
    "kernel_tests/map_test.py::MapTest.testCaptureConstantsWithConflictingDevices": _GRAPH,
    "kernel_tests/map_test.py::MapTest.testReferenceVariablesWithMultipleDevices": _GRAPH,
    "kernel_tests/map_test.py::MapTest.testResourceVariablesWithMultipleDevices": _GRAPH,
    "kernel_tests/map_test.py::MapTest.testCheckpointLargeBuffer": _TF_CKPT,
    "kernel_tests/map_test.py::MapCheckpointTest.testSaveStatefulFunction": _RESOURCE,
    "kernel_tests/map_test.py::MapCheckpointTest.testCaptureVariableInMapFn": _RESOURCE,
    "kernel_tests/map_test.py::MapCheckpointTest.testCaptureDefunInMapFn": _TRACE,
    "kernel_tests/map_test.py::MapCheckpointTest.testBuildDefunInMapFn": _TRACE,
    "kernel_tests/map_test.py::MapCheckpointTest.testSparse": _SPARSE,
    # padded_batch_test.py
    "kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchSparseError": _SPARSE,
    "kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchShapeErrorPlaceholder": _GRAPH,
    "kernel_tests/padded_batch_test.py::PaddedBatchTest.testPaddedBatchBfloat16": _BFLOAT16,
    # shuffle_test.py
    "kernel_tests/shuffle_test.py::ShuffleTest.testMultipleIterators": _GRAPH,
    "kernel_tests/shuffle_test.py::ShuffleTest.testShuffleV2InFunction": _TRACE,
    "kernel_tests/shuffle_test.py::ShuffleTest.testRerandomizeOnReplicate": _ROUND_TRIP,
    "kernel_tests/shuffle_test.py::ShuffleTest.testCheckpointLargeShuffleBuffer": _TF_CKPT,
    # from_tensors_test.py, from_tensor_slices_test.py, from_generator_test.py
    "kernel_tests/from_tensors_test.py::FromTensorsTest.testSkipEagerFromTensorsSparse": _SPARSE,
    "kernel_tests/from_tensors_test.py::FromTensorsTest.testFromTensorsMixed": _SPARSE,
    "kernel_tests/from_tensors_test.py::FromTensorsTest.testSkipEagerSplitPipelineFailsWithPlacementError": _GRAPH,
    "kernel_tests/from_tensor_slices_test.py::FromTensorSlicesTest.testFromTensorSlicesSparse": _SPARSE,
    "kernel_tests/from_tensor_slices_test.py::FromTensorSlicesTest.testFromTensorSlicesMixed": _SPARSE,
    "kernel_tests/from_tensor_slices_test.py::FromTensorSlicesTest.testFromTensorSlicesRagged": _RAGGED,
    "kernel_tests/from_tensor_slices_test.py::FromTensorSlicesTest.testFromTensorSlicesMixedRagged": _RAGGED,
    "kernel_tests/from_tensor_slices_test.py::FromTensorSlicesRandomAccessTest.testName": _NAME,
    "kernel_tests/from_generator_test.py::FromGeneratorTest.testGeneratorDatasetFinalizeFunctionCalled": "tests TF's internal _GeneratorDataset (init/next/finalize functions)",
    "kernel_tests/from_generator_test.py::FromGeneratorTest.testSharedName": "shared_name: a TF resource shared between sessions",
    "kernel_tests/from_generator_test.py::FromGeneratorTest.testFromGeneratorRaggedTensor": _RAGGED,
    "kernel_tests/from_generator_test.py::FromGeneratorTest.testFromGeneratorSparseTensor": _SPARSE,
    # flat_map_test.py, unbatch_test.py
    "kernel_tests/flat_map_test.py::FlatMapCheckpointTest.testDisallowVariableCapture": _RESOURCE,
    "kernel_tests/flat_map_test.py::FlatMapCheckpointTest.testDisallowCapturingStatefulOps": _RESOURCE,
    "kernel_tests/unbatch_test.py::UnbatchTest.testUnbatchDatasetWithSparseTensor": _SPARSE,
    "kernel_tests/unbatch_test.py::UnbatchTest.testUnbatchDatasetWithDenseSparseAndRaggedTensor": _SPARSE,
    "kernel_tests/unbatch_test.py::UnbatchTest.testUnbatchDatasetWithRaggedTensor": _RAGGED,
    "kernel_tests/unbatch_test.py::UnbatchTest.testName": _NAME,
    # window_test.py
    "kernel_tests/window_test.py::WindowTest.testWindowSparse": _SPARSE,
    "kernel_tests/window_test.py::WindowTest.testWindowSparseWithDifferentDenseShapes": _SPARSE,
    "kernel_tests/window_test.py::WindowTest.testNestedWindowSparse": _SPARSE,
    "kernel_tests/window_test.py::WindowTest.testName": _NAME,
    # scan_test.py, reduce_test.py, unique_test.py
    "kernel_tests/scan_test.py::ScanTest.testSparseCount": _SPARSE,
    "kernel_tests/scan_test.py::ScanTest.testTensorArrayWithCondResetByExternalCaptureBreaks": _TENSOR_ARRAY,
    "kernel_tests/scan_test.py::ScanTest.testUseDefaultDevice": "use_default_device: TF op placement on a GPU",
    "kernel_tests/scan_test.py::ScanTest.testName": _NAME,
    "kernel_tests/reduce_test.py::ReduceTest.testSparse": _SPARSE,
    "kernel_tests/unique_test.py::UniqueTest.testName": _NAME,
    # cache_test.py, prefetch_test.py, shard_test.py
    "kernel_tests/cache_test.py::MemoryCacheTest.testCheckpointLargeCache": _TF_CKPT,
    "kernel_tests/prefetch_test.py::PrefetchTest.testPrefetchWithSlack": "slack_period: an argument of TF's internal PrefetchDataset",
    "kernel_tests/prefetch_test.py::PrefetchTest.testName": _NAME,
    "kernel_tests/shard_test.py::ShardTest.testName": _NAME,
    # group_by_window_test.py
    "kernel_tests/group_by_window_test.py::GroupByWindowTest.testName": _NAME,
    # bucket_by_sequence_length_test.py
    "kernel_tests/bucket_by_sequence_length_test.py::BucketBySequenceLengthTest.testBucketSparse": _SPARSE,
    # sample_from_datasets_test.py
    "kernel_tests/sample_from_datasets_test.py::SampleFromDatasetsTest.testSampleFromDatasetsRerandomizeInsideFunction": _TRACE,
    # random_test.py
    "kernel_tests/random_test.py::RandomTest.testRerandomizeEachIterationIgnored": "TF1 only: the argument is ignored with a warning there",
    "kernel_tests/random_test.py::RandomTest.testRerandomizeInsideFunction": _TRACE,
    "kernel_tests/random_test.py::RandomTest.testName": _NAME,
    # get_single_element_test.py
    "kernel_tests/get_single_element_test.py::GetSingleElementTest.testName": _NAME,
    # len_test.py, as_numpy_iterator_test.py
    "kernel_tests/len_test.py::LenTest.testGraphMode": _GRAPH,
    "kernel_tests/as_numpy_iterator_test.py::AsNumpyIteratorTest.testNonEager": _GRAPH,
    "kernel_tests/as_numpy_iterator_test.py::AsNumpyIteratorTest.testSparseElement": _SPARSE,
    "kernel_tests/as_numpy_iterator_test.py::AsNumpyIteratorTest.testRaggedElement": _RAGGED,
    # options_test.py
    "kernel_tests/options_test.py::OptionsTest.testOptionsProtoRoundTrip": _PROTO,
    "kernel_tests/options_test.py::OptionsTest.testOptionsProtoDefaultValuesRoundTrip": _PROTO,
    "kernel_tests/options_test.py::OptionsTest.testProtoOptionsDefaultValuesRoundTrip": _PROTO,
    "kernel_tests/options_test.py::OptionsTest.testPersistenceOptionsSetOutsideFunction": _TRACE,
    "kernel_tests/options_test.py::OptionsTest.testPersistenceOptionsSetInsideFunction": _TRACE,
    "kernel_tests/options_test.py::OptionsTest.testOptionsPersistenceGraphRoundTrip": _ROUND_TRIP,
    "kernel_tests/options_test.py::OptionsTest.testOptionsGraphRoundTripOptimization": _ROUND_TRIP,
    # tf_record_dataset_test.py
    "kernel_tests/tf_record_dataset_test.py::TFRecordDatasetTest.testName": _NAME,
    # io_test.py (save / load: D-TF-22)
    "kernel_tests/io_test.py::IOTest.testCustomShardFunction": _SNAPSHOT,
    "kernel_tests/io_test.py::IOTest.testCustomReaderFunction": _SNAPSHOT,
    "kernel_tests/io_test.py::IOTest.testSaveInsideFunction": _TRACE,
    "kernel_tests/io_test.py::IOTest.testWaitIsUnsupported": "wait=: TF's distributed snapshot",
    "kernel_tests/io_test.py::SaveCheckpointTest.testSaveCheckpointingAPI": _SNAPSHOT,
    "kernel_tests/io_test.py::SaveCheckpointTest.testSaveCheckpointingAPICustomCheckpointInterval": _SNAPSHOT,
    "kernel_tests/io_test.py::SaveCheckpointTest.testSaveCheckpointingAPIIncorrectArgs": _SNAPSHOT,
    # prefetch_to_device_test.py
    "experimental/kernel_tests/prefetch_to_device_test.py::PrefetchToDeviceTest.testPrefetchSparseTensorsToDevice": _SPARSE,
    # filter_test.py
    "kernel_tests/filter_test.py::FilterTest.testSparse": _SPARSE,
    "kernel_tests/filter_test.py::FilterTest.testName": _NAME,
    "kernel_tests/filter_test.py::FilterCheckpointTest.testSparse": _SPARSE,
    # take_test.py, skip_test.py, repeat_test.py
    "kernel_tests/take_test.py::TakeTest.testName": _NAME,
    "kernel_tests/skip_test.py::SkipTest.testName": _NAME,
    "kernel_tests/repeat_test.py::RepeatTest.testName": _NAME,
    # snapshot_test.py
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testSpecifySnapshotNameWriteAndRead": _LEGACY,
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testForcePassthroughMode": _LEGACY,
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testForceWriteMode": _LEGACY,
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testForceReadMode": _LEGACY,
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testForceReadNonexistentSnapshot": _LEGACY,
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testForceReadNonexistentNamedSnapshot": _LEGACY,
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testReadShuffledSnapshotAfterWrite": _LEGACY,
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testReadShuffledSnapshotWithSeedAfterWrite": _LEGACY,
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testReadSnapshotParallelAfterWrite": _LEGACY,
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testReadSnapshotBackAfterMultiThreadedWrite": _LEGACY,
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testExpiredSnapshotRewrite": _LEGACY,
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testSnapshotArgsCreateNewSnapshot": _LEGACY,
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testSpecifyShardSize": _LEGACY,
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotCheckpointTest.testCheckpointBeforeOneEpochThenRunFewStepsSmallShardMultiThread": _LEGACY,
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotCheckpointTest.testCheckpointAfterOneEpoch": _LEGACY_RESTORE,
    "experimental/kernel_tests/snapshot_test.py::LegacySnapshotCheckpointTest.testCheckpointAfterOneEpochThenRunFewSteps": _LEGACY_RESTORE,
    # csv_dataset_test.py
    "experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithSelectandExcludeCol": "select_cols and exclude_cols at once: datapipe has one selection argument, columns= (D-TF-24)",
}
