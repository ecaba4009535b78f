"""Issue 16: every sequence op shards correctly under a 2-worker context: DATA and FILE
auto-sharding give each worker a share, and the union over workers is the right data."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from _dist_helpers import op_names, worker_options

import datapipe as dp

DATA, FILE = dp.AutoShardPolicy.DATA, dp.AutoShardPolicy.FILE
LENGTHS = [(i * 7) % 9 + 1 for i in range(24)]  # 1..9


def sequences():
    """Sequence i: [100 i + 1, ..., 100 i + length] (no zeros: padding is visible)."""
    return [list(range(100 * i + 1, 100 * i + 1 + n)) for i, n in enumerate(LENGTHS)]


def source():
    seqs = [np.array(s, dtype=np.int64) for s in sequences()]
    return dp.range(len(seqs)).map(lambda i: seqs[int(i)])


def rows_of_padded(batch):
    return [[int(v) for v in row if v != 0] for row in batch]


def rows_of_ragged(batch):
    return [[int(v) for v in row] for row in batch]


def rows_of_packed(row):
    ids, tokens = row["tokens_segment_ids"], row["tokens"]
    return [[int(v) for v in tokens[ids == s]] for s in range(1, int(ids.max()) + 1)]


OPS = {
    "bucket_by_sequence_length": (
        lambda ds: ds.bucket_by_sequence_length(len, [3, 6], [2, 3, 2]),
        rows_of_padded,
    ),
    "bucket_to_boundary_drop": (
        lambda ds: ds.bucket_by_sequence_length(
            len, [4, 10], [1, 1, 1], pad_to_bucket_boundary=True
        ),
        rows_of_padded,
    ),
    "ragged_batch": (lambda ds: ds.ragged_batch(3), rows_of_ragged),
    "rebatch": (lambda ds: ds.ragged_batch(2).rebatch([3, 1]), rows_of_ragged),
    "first_fit_pack": (
        lambda ds: ds.map(lambda s: {"tokens": s}).first_fit_pack({"tokens": 12}, 3, seed=1),
        rows_of_packed,
    ),
    "rejection_resample_all": (
        lambda ds: ds.rejection_resample(lambda s: len(s) % 2, [0.5, 0.5], [0.5, 0.5], seed=1),
        lambda pair: [[int(v) for v in pair[1]]],
    ),
    "assert_cardinality": (
        lambda ds: ds.filter(lambda s: True).assert_cardinality(len(LENGTHS)),
        lambda s: [[int(v) for v in s]],
    ),
}


def worker_rows(ds, op_rows, count, **kw):
    return [
        [r for x in ds.with_options(worker_options(count, i, **kw)) for r in op_rows(x)]
        for i in range(count)
    ]


@pytest.mark.parametrize("op", sorted(OPS))
def test_data_sharding_splits_the_sequences(op):
    make, rows = OPS[op]
    ds = make(source())
    parts = worker_rows(ds, rows, 2, policy=DATA, uneven="allow")
    assert all(parts) and sorted(parts[0] + parts[1]) == sorted(sequences())
    assert not {tuple(r) for r in parts[0]} & {tuple(r) for r in parts[1]}  # disjoint
    assert sorted(r for x in ds for r in rows(x)) == sorted(sequences())  # one worker: all


@pytest.mark.parametrize("op", sorted(OPS))
def test_file_sharding_splits_the_sequences(op, tmp_path):
    files = []
    seqs = sequences()
    for k in range(4):
        files.append(str(tmp_path / f"seq{k}.txt"))
        with open(files[-1], "w") as f:
            f.writelines(" ".join(map(str, s)) + "\n" for s in seqs[k::4])
    parsed = dp.TextLineDataset(files).map(lambda line: np.array(line.split(), dtype=np.int64))
    make, rows = OPS[op]
    if op == "assert_cardinality":  # a count over every file: the shard point stays above
        parts = worker_rows(make(parsed), rows, 2, policy=DATA, uneven="allow")
    else:
        parts = worker_rows(make(parsed), rows, 2, policy=FILE, uneven="allow")
        names = op_names(make(parsed), policy=FILE)
        assert names[:2] == ["text_line", "auto_shard"]  # each worker reads its own files
    assert all(parts) and sorted(parts[0] + parts[1]) == sorted(seqs)


def test_bucketing_and_packing_shard_below_themselves():
    for op in ("bucket_by_sequence_length", "first_fit_pack", "ragged_batch", "rebatch"):
        names = op_names(OPS[op][0](source()), policy=DATA)
        assert names.index("auto_shard") < names.index("map"), (op, names)


def test_group_by_window_is_sharded_above_so_windows_stay_whole():
    ds = dp.range(30).group_by_window(
        lambda x: x % 4, lambda k, w: dp.from_tensors(w.reduce(np.int64(0), lambda s, x: s + x)), 3
    )
    assert op_names(ds, policy=DATA)[-1] == "auto_shard"
    whole = [int(x) for x in ds]
    parts = [
        [int(x) for x in ds.with_options(worker_options(2, i, uneven="allow"))] for i in range(2)
    ]
    assert parts == [whole[0::2], whole[1::2]]


def test_rejection_resample_shards_are_disjoint_and_resampled():
    labels = np.random.default_rng(0).choice(4, size=4000)  # each worker estimates its own
    ds = dp.from_tensor_slices((labels, np.arange(4000))).rejection_resample(
        lambda y, i: y, [0.4, 0.3, 0.2, 0.1], seed=2
    )
    parts = [
        [(int(c), int(i)) for c, (_, i) in ds.with_options(worker_options(2, w, uneven="allow"))]
        for w in range(2)
    ]
    ids = [i for p in parts for _, i in p]
    assert len(ids) == len(set(ids)) and {i % 2 for _, i in parts[0]} == {0}
    freq = np.bincount([c for p in parts for c, _ in p], minlength=4) / len(ids)
    assert np.abs(freq - [0.4, 0.3, 0.2, 0.1]).max() < 0.05


def test_counter_and_random_are_split_among_workers():
    for make in (lambda: dp.Dataset.counter(5, 2), lambda: dp.Dataset.random(seed=9)):
        whole = [int(x) for x in itertools.islice(iter(make()), 20)]
        for w in range(2):
            it = iter(make().with_options(worker_options(2, w)))
            assert [int(x) for x in itertools.islice(it, 10)] == whole[w::2]
    with pytest.raises(
        dp.AutoShardError, match="'random' below it is not deterministic across workers"
    ):
        iter(dp.Dataset.random().take(10).with_options(worker_options(2, 0)))


def test_reduce_and_get_single_element_read_this_workers_share():
    ds = dp.range(11).map(lambda x: x * 3)
    totals = [
        int(ds.with_options(worker_options(2, w, uneven="allow")).reduce(0, lambda s, x: s + x))
        for w in range(2)
    ]
    assert sum(totals) == int(ds.reduce(0, lambda s, x: s + x)) == 165
    one = dp.range(1).map(lambda x: x + 7)
    assert int(one.shard(1, 0).with_options(worker_options(2, 1)).get_single_element()) == 7
    with pytest.raises(
        ValueError,
        match=r"the dataset was empty \(this is worker 1 of 2's share under auto-sharding; "
        r"ds.shard\(1, 0\).get_single_element\(\) reads the whole dataset\)",
    ):
        one.with_options(worker_options(2, 1, uneven="allow")).get_single_element()


def test_assert_cardinality_counts_the_whole_dataset_under_workers():
    ds = dp.range(10).filter(lambda x: x % 2 == 0).assert_cardinality(5)
    assert op_names(ds)[-1] == "auto_shard"
    assert [ds.with_options(worker_options(2, w)).cardinality() for w in range(2)] == [2, 2]
    parts = [
        [int(x) for x in ds.with_options(worker_options(2, w, uneven="allow"))] for w in range(2)
    ]
    assert parts == [[0, 4, 8], [2, 6]]
    # A worker reads the pool as far as its share of the asserted count: a shorter input
    # is noticed (a longer one is not read past that count).
    wrong = dp.range(10).filter(lambda x: x % 2 == 0).assert_cardinality(6)
    with pytest.raises(
        dp.PipelineBrokenError, match="expected to contain 6 elements but contained only 5"
    ):
        list(wrong.with_options(worker_options(2, 1, uneven="allow")))
