"""tf.data's ``snapshot`` kernel tests (``experimental/kernel_tests/snapshot_test.py``).

The directory layout is tf.data's: ``path/<fingerprint>/`` holds one directory per run
and ``snapshot.metadata``; a run holds ``%08d.shard`` directories, by default one per CPU
(``os.cpu_count()``, upstream's ``multiprocessing.cpu_count()``). The shard files are
Arrow IPC chunks and the codecs Arrow's (D-TF-26). ``LegacySnapshotTest`` cases whose
pipeline ``Dataset.snapshot`` can express are translated onto it (the layout then is the
current op's); those about ``legacy_snapshot``'s own arguments are in ``SKIPPED``.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pytest

import datapipe as dp

from ._support import as_value, assert_produces, create_tf_record_files, state_copy, tf_record

CPUS = os.cpu_count() or 1
COMPRESSIONS = [None, "GZIP", "SNAPPY"]  # snapshot.COMPRESSION_NONE, _GZIP, _SNAPPY


def _create_tf_records(tmp_path, num_files=10, num_records=100):
    """Upstream ``createTFRecords``."""
    pytest.importorskip("google_crc32c")  # the TFRecord reader checks every record's CRC
    return create_tf_record_files(tmp_path, num_files, num_records)


def _remove(filenames):
    for fn in filenames:
        os.remove(fn)


def _expected_records(num_files=10, num_records=100):
    return [tf_record(f, r) for f in range(num_files) for r in range(num_records)]


@pytest.fixture
def snapshot_dir(tmp_path):
    d = tmp_path / "snapshot"
    d.mkdir()
    return str(d)


def _listdir(dirname: str) -> list[str]:
    """Upstream ``listdir_and_filter``: sorted, without temporary files (datapipe writes a
    chunk under a dot-name and renames it into place)."""
    return sorted(p for p in os.listdir(dirname) if not p.startswith(".") and "-tmp-" not in p)


def assert_snapshot_directory_contains(directory, num_fingerprints, num_runs, num_shards):
    """Upstream ``assertSnapshotDirectoryContains``."""
    fingerprints = _listdir(directory)
    assert len(fingerprints) == num_fingerprints, fingerprints
    for fp in fingerprints:
        fp_dir = os.path.join(directory, fp)
        entries = _listdir(fp_dir)
        assert len(entries) == num_runs + 1, entries
        runs = [e for e in entries if e != "snapshot.metadata"]
        assert len(runs) == num_runs and "snapshot.metadata" in entries, entries
        for run in runs:
            shards = sorted(os.listdir(os.path.join(fp_dir, run)))
            assert shards == [f"{i:08d}.shard" for i in range(num_shards)]


def _ints(ds):
    return [int(x) for x in ds]


def test_create_snapshot_dataset(snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testCreateSnapshotDataset
    (built, not run: nothing is written, and the spec is the input's)."""
    ds = dp.from_tensors([1, 2, 3])
    snap = ds.apply(lambda d: d.snapshot(snapshot_dir))
    assert snap.element_spec == ds.element_spec
    assert os.listdir(snapshot_dir) == []


def test_read_snapshot_dataset_default(tmp_path, snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testReadSnapshotDatasetDefault."""
    filenames = _create_tf_records(tmp_path)
    expected = _expected_records()
    assert_produces(dp.TFRecordDataset(filenames).snapshot(snapshot_dir), expected)
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, CPUS)
    _remove(filenames)
    assert_produces(dp.TFRecordDataset(filenames).snapshot(snapshot_dir), expected)


def test_read_snapshot_dataset_auto_write_snappy_read(tmp_path, snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testReadSnapshotDatasetAutoWriteSnappyRead."""
    filenames = _create_tf_records(tmp_path)
    expected = _expected_records()
    ds = dp.TFRecordDataset(filenames).snapshot(snapshot_dir, compression="AUTO")
    assert_produces(ds, expected)
    _remove(filenames)
    ds2 = dp.TFRecordDataset(filenames).snapshot(snapshot_dir, compression="SNAPPY")
    assert_produces(ds2, expected)


def test_read_snapshot_dataset_custom_shard_fn(tmp_path, snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testReadSnapshotDatasetCustomShardFn."""
    filenames = _create_tf_records(tmp_path)
    expected = _expected_records()
    ds = dp.TFRecordDataset(filenames).snapshot(snapshot_dir, shard_func=lambda _: np.int64(0))
    assert_produces(ds, expected)
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, 1)
    _remove(filenames)
    ds2 = dp.TFRecordDataset(filenames).snapshot(snapshot_dir, shard_func=lambda _: 0)
    assert_produces(ds2, expected)


def test_read_snapshot_dataset_custom_reader_fn(tmp_path, snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testReadSnapshotDatasetCustomReaderFn:
    the writing pass is in order; the reading pass, an interleave over the shards, holds
    the same records."""
    filenames = _create_tf_records(tmp_path)
    expected = _expected_records()

    def reader_func(shards):
        return shards.interleave(lambda x: x, cycle_length=4, num_parallel_calls=4)

    ds = dp.TFRecordDataset(filenames).snapshot(snapshot_dir, reader_func=reader_func)
    assert_produces(ds, expected)
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, CPUS)
    _remove(filenames)
    ds2 = dp.TFRecordDataset(filenames).snapshot(snapshot_dir, reader_func=reader_func)
    assert_produces(ds2, expected, unordered=True)


def test_snapshot_dataset_invalid_shard_fn(snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testSnapshotDatasetInvalidShardFn."""
    ds = dp.range(1000).snapshot(snapshot_dir, shard_func=lambda _: "invalid_fn")
    with pytest.raises(TypeError, match="shard_func must return an int"):
        next(iter(ds))


def test_snapshot_dataset_invalid_reader_fn(snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testSnapshotDatasetInvalidReaderFn
    (the reader function runs on the first reading pass: a snapshot is written first)."""
    assert _ints(dp.range(1000).snapshot(snapshot_dir)) == list(range(1000))
    ds = dp.range(1000).snapshot(snapshot_dir, reader_func=lambda x: x + 1)
    with pytest.raises(TypeError):
        next(iter(ds))


def test_roundtrip_empty_snapshot(snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testRoundtripEmptySnapshot."""
    ds = dp.range(0).snapshot(snapshot_dir)
    assert_produces(ds, [])
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, 0)
    assert_produces(ds.snapshot(snapshot_dir), [])


def test_write_snapshot_dataset_simple(snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testWriteSnapshotDatasetSimple."""
    assert_produces(dp.range(1000).snapshot(snapshot_dir), list(range(1000)))
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, CPUS)


@pytest.mark.parametrize("second", [2000, 1001], ids=["range2000", "range1001"])
def test_write_snapshot_dataset_multiple_fingerprints(snapshot_dir, second):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testWriteSnapshotDatasetMultipleFingerprints,
    LegacySnapshotTest.testWriteDifferentPipelinesInOneDirectory."""
    assert_produces(dp.range(1000).snapshot(snapshot_dir), list(range(1000)))
    assert_produces(dp.range(second).snapshot(snapshot_dir), list(range(second)))
    assert_snapshot_directory_contains(snapshot_dir, 2, 1, CPUS)


def test_write_snapshot_dataset_same_fingerprint_multiple_complete_runs(snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testWriteSnapshotDatasetSameFingerprintMultipleCompleteRuns."""
    assert_produces(dp.range(1000).snapshot(snapshot_dir), list(range(1000)))
    assert_produces(dp.range(1000).snapshot(snapshot_dir), list(range(1000)))
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, CPUS)


@pytest.mark.parametrize("lead", [500, 0], ids=["restart", "simultaneous"])
def test_write_snapshot_dataset_same_fingerprint_incomplete_run_restart(snapshot_dir, lead):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testWriteSnapshotDatasetSameFingerprintIncompleteRunRestart,
    LegacySnapshotTest.testWriteSnapshotMultipleSimultaneous: two passes writing at once
    write two runs (``legacy_snapshot`` let the second pass through unwritten; the
    current op writes both, as upstream's restart case)."""
    next1 = iter(dp.range(1000).snapshot(snapshot_dir))
    for i in range(lead):
        assert int(next(next1)) == i
    next2 = iter(dp.range(1000).snapshot(snapshot_dir))
    for i in range(lead):
        assert int(next(next2)) == i
    for i in range(lead, 1000):
        assert int(next(next1)) == i
        assert int(next(next2)) == i
    for it in (next1, next2):
        with pytest.raises(StopIteration):
            next(it)
    assert_snapshot_directory_contains(snapshot_dir, 1, 2, CPUS)


def test_get_next_creates_dir(snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testGetNextCreatesDir:
    an iterator that is never read writes nothing."""
    next1 = iter(dp.range(1000).snapshot(snapshot_dir))
    _ = iter(dp.range(1001).snapshot(snapshot_dir))
    assert [int(next(next1)) for _ in range(1000)] == list(range(1000))
    with pytest.raises(StopIteration):
        next(next1)
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, CPUS)


def test_write_snapshot_custom_shard_function(snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testWriteSnapshotCustomShardFunction."""
    ds = dp.range(1000).enumerate()
    ds = ds.snapshot(snapshot_dir, shard_func=lambda i, _: i % 2)
    ds = ds.map(lambda _, elem: elem)
    assert_produces(ds, list(range(1000)))
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, 2)


def test_write_snapshot_dataset_with_tuples(snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testWriteSnapshotDatasetWithTuples."""
    ds = dp.Dataset.zip(
        (dp.range(0, 1000), dp.range(1000, 2000), dp.range(2000, 3000), dp.range(3000, 4000))
    )
    ds = ds.snapshot(snapshot_dir)
    expected = list(zip(range(0, 1000), range(1000, 2000), range(2000, 3000), range(3000, 4000)))
    assert_produces(ds, expected)
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, CPUS)


def test_write_snapshot_shuffle_same_fingerprint(snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testWriteSnapshotShuffleSameFingerprint:
    two unseeded shuffles are one pipeline (one fingerprint), written once."""

    def make_dataset():
        return dp.range(1000).shuffle(1000).snapshot(snapshot_dir)

    assert_produces(make_dataset(), list(range(1000)), unordered=True)
    assert_produces(make_dataset(), list(range(1000)), unordered=True)
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, CPUS)


def test_read_using_flat_map(snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testReadUsingFlatMap."""
    ds = dp.range(1000).snapshot(snapshot_dir)
    assert_produces(ds, list(range(1000)))
    flat_map = dp.from_tensors(ds).flat_map(lambda x: x)
    assert_produces(flat_map, list(range(1000)))
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, CPUS)


def test_read_optimizable_using_flat_map(snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::SnapshotTest.testReadOptimizableUsingFlatMap."""
    ds = dp.range(1000).shuffle(10).repeat(2).snapshot(snapshot_dir)
    assert_produces(ds, 2 * list(range(1000)), unordered=True)
    flat_map = dp.from_tensors(ds).flat_map(lambda x: x)
    assert_produces(flat_map, 2 * list(range(1000)), unordered=True)
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, CPUS)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_write_snapshot_simple_successful(snapshot_dir, compression):
    """experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testWriteSnapshotSimpleSuccessful."""
    assert_produces(dp.range(1000).snapshot(snapshot_dir, compression), list(range(1000)))
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, CPUS)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_write_snapshot_repeat_afterwards(snapshot_dir, compression):
    """experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testWriteSnapshotRepeatAfterwards
    (each epoch after the first reads the snapshot; one run)."""
    ds = dp.range(10).snapshot(snapshot_dir, compression).repeat(10)
    assert_produces(ds, list(range(10)) * 10)
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, min(CPUS, 10))


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_write_snapshot_mix_types(snapshot_dir, compression):
    """experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testWriteSnapshotMixTypes
    (``string_ops.as_string`` is ``str``)."""
    ds = dp.range(10).map(lambda x: (x, str(int(x)), str(int(2 * x)), 2 * x))
    ds = ds.snapshot(snapshot_dir, compression).repeat(10)
    expected = [(i, str(i), str(2 * i), 2 * i) for i in range(10)]
    assert_produces(ds, expected * 10)
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, min(CPUS, 10))


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_read_snapshot_back_after_write(tmp_path, snapshot_dir, compression):
    """experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testReadSnapshotBackAfterWrite."""
    filenames = _create_tf_records(tmp_path, 10, 10)
    expected = _expected_records(10, 10)
    assert_produces(dp.TFRecordDataset(filenames).snapshot(snapshot_dir, compression), expected)
    _remove(filenames)
    assert_produces(dp.TFRecordDataset(filenames).snapshot(snapshot_dir, compression), expected)


def test_same_fingerprint_with_different_initialization_order(snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testSameFingerprintWithDifferentInitializationOrder."""
    d1, d2, d3 = dp.range(0, 100), dp.range(100, 200), dp.range(200, 300)
    ds = d1.concatenate(d2).concatenate(d3).snapshot(snapshot_dir)
    assert_produces(ds, list(range(300)))
    d4, d5, d6 = dp.range(200, 300), dp.range(100, 200), dp.range(0, 100)
    ds = d6.concatenate(d5).concatenate(d4).snapshot(snapshot_dir)
    assert_produces(ds, list(range(300)))
    assert_snapshot_directory_contains(snapshot_dir, 1, 1, CPUS)


def test_additional_operations_after_read_back(tmp_path, snapshot_dir):
    """experimental/kernel_tests/snapshot_test.py::LegacySnapshotTest.testAdditionalOperationsAfterReadBack
    (``substr_v2(x, 2, 1000)`` is ``x[2:1002]``)."""
    filenames = _create_tf_records(tmp_path, 10, 10)
    expected = _expected_records(10, 10)
    assert_produces(dp.TFRecordDataset(filenames).snapshot(snapshot_dir), expected)
    _remove(filenames)
    assert_produces(dp.TFRecordDataset(filenames).snapshot(snapshot_dir), expected)
    expected_after = [b"cord %d of file %d" % (r, f) for f in range(10) for r in range(10)]
    ds3 = dp.TFRecordDataset(filenames).snapshot(snapshot_dir).map(lambda x: x[2:1002])
    assert_produces(ds3, expected_after)


class _Checkpoints:
    """``checkpoint_test_base.gen_outputs``: run an iterator of a freshly built dataset
    (restored from the last saved checkpoint when ``ckpt_saved``), saving a checkpoint
    and restoring from it at each break point, and at the end when asked."""

    def __init__(self, ds_fn: Callable[[], dp.Dataset]):
        self.ds_fn = ds_fn
        self.saved = None

    def _restored(self):
        it = iter(self.ds_fn())
        it.set_state(self.saved)
        return it

    def gen_outputs(
        self,
        break_points,
        num_outputs,
        ckpt_saved=False,
        verify_exhausted=True,
        save_checkpoint_at_end=True,
    ):
        it = self._restored() if ckpt_saved else iter(self.ds_fn())
        outputs = []
        for i in range(num_outputs):
            if i in break_points:
                self.saved = state_copy(it)
                it = self._restored()
            outputs.append(int(as_value(next(it))))
        if save_checkpoint_at_end:
            self.saved = state_copy(it)
        if verify_exhausted:
            with pytest.raises(StopIteration):
                next(it)
        it.close()
        return outputs


def _build_snapshot_dataset(tmp_path, repeat=False):
    def ds_fn():
        ds = dp.range(100).snapshot(str(tmp_path / "snapshot"))
        return ds.repeat(2) if repeat else ds

    return _Checkpoints(ds_fn)


def test_checkpoint_before_epoch_end_no_repeat(tmp_path):
    """experimental/kernel_tests/snapshot_test.py::SnapshotCheckpointTest.testCheckpointBeforeEpochEndNoRepeat."""
    ckpt = _build_snapshot_dataset(tmp_path, repeat=False)
    outputs = ckpt.gen_outputs([], 50, verify_exhausted=False)
    assert outputs == list(range(50))
    outputs += ckpt.gen_outputs([], 50, ckpt_saved=True, verify_exhausted=True)
    assert outputs == list(range(100))


def test_checkpoint_before_one_epoch_with_reading(tmp_path):
    """experimental/kernel_tests/snapshot_test.py::SnapshotCheckpointTest.testCheckpointBeforeOneEpochWithReading."""
    ckpt = _build_snapshot_dataset(tmp_path, repeat=True)
    outputs = ckpt.gen_outputs([], 50, verify_exhausted=False)
    assert outputs == list(range(50))
    outputs += ckpt.gen_outputs([], 150, ckpt_saved=True, verify_exhausted=True)
    assert outputs == list(range(50)) + list(range(50, 100)) + list(range(100))


def test_checkpoint_before_one_epoch_then_run_a_few_steps(tmp_path):
    """experimental/kernel_tests/snapshot_test.py::SnapshotCheckpointTest.testCheckpointBeforeOneEpochThenRunAFewSteps."""
    ckpt = _build_snapshot_dataset(tmp_path, repeat=False)
    outputs = ckpt.gen_outputs([10], 20, verify_exhausted=False, save_checkpoint_at_end=False)
    assert outputs == list(range(20))
    outputs = outputs[:10]
    outputs += ckpt.gen_outputs([], 90, ckpt_saved=True, verify_exhausted=True)
    assert outputs == list(range(100))


def test_checkpoint_after_one_epoch(tmp_path):
    """experimental/kernel_tests/snapshot_test.py::SnapshotCheckpointTest.testCheckpointAfterOneEpoch."""
    ckpt = _build_snapshot_dataset(tmp_path, repeat=True)
    outputs = ckpt.gen_outputs([], 110, verify_exhausted=False)
    assert outputs == list(range(100)) + list(range(10))
    outputs += ckpt.gen_outputs([], 90, ckpt_saved=True, verify_exhausted=True)
    assert outputs == list(range(100)) + list(range(10)) + list(range(10, 100))


def test_checkpoint_after_one_epoch_run_few_steps(tmp_path):
    """experimental/kernel_tests/snapshot_test.py::SnapshotCheckpointTest.testCheckpointAfterOneEpochRunFewSteps."""
    ckpt = _build_snapshot_dataset(tmp_path, repeat=True)
    outputs = ckpt.gen_outputs([110], 120, verify_exhausted=False, save_checkpoint_at_end=False)
    assert outputs == list(range(100)) + list(range(20))
    outputs = outputs[:110]
    outputs += ckpt.gen_outputs([], 90, ckpt_saved=True, verify_exhausted=True)
    assert outputs == list(range(100)) + list(range(10)) + list(range(10, 100))


@pytest.mark.parametrize("break_at", [None, 100], ids=["epoch_end", "few_steps"])
def test_legacy_checkpoint_before_one_epoch(tmp_path, break_at):
    """experimental/kernel_tests/snapshot_test.py::LegacySnapshotCheckpointTest.testSnapshotBeforeEpochEnd,
    LegacySnapshotCheckpointTest.testCheckpointBeforeOneEpochThenRunFewSteps,
    LegacySnapshotCheckpointTest.testCheckpointBeforeOneEpochThenRunFewStepsMultipleThreads
    (``range(1000)``; their expiry and thread arguments are ``legacy_snapshot``'s)."""
    ckpt = _Checkpoints(lambda: dp.range(1000).snapshot(str(tmp_path / "snapshot")))
    if break_at is None:
        outputs = ckpt.gen_outputs([], 100, verify_exhausted=False)
        assert outputs == list(range(100))
    else:
        outputs = ckpt.gen_outputs([100], 200, verify_exhausted=False, save_checkpoint_at_end=False)
        assert outputs == list(range(200))
        outputs = outputs[:100]
    outputs += ckpt.gen_outputs([], 900, ckpt_saved=True, verify_exhausted=True)
    assert outputs == list(range(1000))
