"""The auto-shard rewrite: where shards go, even ends, FILE sharding, errors; a cache above
a shard point holds one worker's share; per-process file orders (default shuffles)."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
from _dist_helpers import FakeFiles, op_names, per_worker, rewritten, worker_options
from PIL import Image

import datapipe as dp
from datapipe._context import walk
from datapipe.distribute.auto_shard import AutoShardError, replace_inputs

DATA, FILE, AUTO = dp.AutoShardPolicy.DATA, dp.AutoShardPolicy.FILE, dp.AutoShardPolicy.AUTO


names_after_rewrite = op_names


pytestmark = pytest.mark.usefixtures("clean_env")


def shares(make, count, **kw):
    """Each worker's elements as ints, every worker building its own pipeline (as ranks do)."""
    return [
        [int(x) for x in make().with_options(worker_options(count, i, uneven="allow", **kw))]
        for i in range(count)
    ]


@pytest.fixture
def image_dir(tmp_path):
    for c, base in (("a", 0), ("b", 100)):
        os.makedirs(tmp_path / c)
        for j in range(5):
            img = np.full((2, 2, 3), base + 10 * j, np.uint8)
            Image.fromarray(img).save(tmp_path / c / f"{j}.png")
    return str(tmp_path)


# ---- where the shard goes ---------------------------------------------------------------
def test_shard_sinks_below_map_and_batch():
    ds = dp.range(12).map(lambda x: x * 2).batch(2)
    assert names_after_rewrite(ds) == ["range", "auto_shard", "map", "batch"]
    assert per_worker(ds, 3) == [[[0, 6], [12, 18]], [[2, 8], [14, 20]], [[4, 10], [16, 22]]]


def test_shard_stays_above_take_so_take_counts_all_workers():
    ds = dp.range(10).take(7)
    assert names_after_rewrite(ds) == ["range", "take", "auto_shard"]  # evened inside
    assert per_worker(ds, 3, uneven="allow") == [[0, 3, 6], [1, 4], [2, 5]]
    assert per_worker(ds, 3) == [[0, 3], [1, 4], [2, 5]]


def test_unseeded_shuffle_below_take_raises_naming_both_ops():
    ds = dp.range(10).shuffle(10).take(5)
    with pytest.raises(AutoShardError) as info:
        iter(ds.with_options(worker_options(2, 0)))
    msg = str(info.value)
    assert "'take' needs the same element order on every worker" in msg
    assert "'shuffle' below it is not deterministic across workers" in msg
    # With a seed, every worker sees the same order: the take's 5 elements are split.
    got = per_worker(dp.range(10).shuffle(10, seed=3).take(5), 2, uneven="allow")
    whole = [int(x) for x in dp.range(10).shuffle(10, seed=3).take(5)]
    assert got == [whole[0::2], whole[1::2]]


def test_unseeded_shuffle_shards_below_and_stays_disjoint():
    ds = dp.range(20).shuffle(8).map(lambda x: x + 100)
    assert names_after_rewrite(ds) == ["range", "auto_shard", "shuffle", "map"]
    parts = per_worker(ds, 4)
    assert sorted(sum(parts, [])) == list(range(100, 120))
    assert [sorted(p) for p in parts] == [list(range(100 + i, 120, 4)) for i in range(4)]


def test_seeded_random_map_keeps_global_indices():
    def jitter(x, rng):
        return int(x) * 1000 + int(rng.integers(0, 1000))

    ds = dp.range(12).random_map(jitter, seed=11).batch(2)
    # The shard point goes above the seeded random_map (global indices), then moves below
    # it so that it runs as an iterator: its draws still use the source's indices.
    assert names_after_rewrite(ds) == ["range", "auto_shard", "random_map", "batch"]
    whole = [int(v) for b in dp.range(12).random_map(jitter, seed=11) for v in np.atleast_1d(b)]
    for k in (2, 3, 4):
        parts = per_worker(dp.range(12).random_map(jitter, seed=11), k)
        assert parts == [whole[i::k] for i in range(k)]  # independent of the worker count


def test_seeded_global_shuffle_is_one_permutation_split():
    whole = [int(x) for x in dp.range(15).global_shuffle(seed=4)]
    ds = dp.range(15).global_shuffle(seed=4).map(lambda x: x)
    assert names_after_rewrite(ds, 3) == ["range", "global_shuffle", "auto_shard", "map"]
    assert per_worker(ds, 3) == [whole[i::3] for i in range(3)]


def test_global_seed_counts_as_a_seed():
    whole = [int(x) for x in dp.range(9).global_shuffle().with_options(dp.Options(seed=5))]
    assert per_worker(dp.range(9).global_shuffle(), 3, seed=5) == [whole[i::3] for i in range(3)]


def test_unseeded_global_shuffle_shards_below_it():
    ds = dp.range(16).global_shuffle()
    assert names_after_rewrite(ds, 4) == ["range", "auto_shard", "global_shuffle"]
    parts = per_worker(ds, 4)
    assert [sorted(p) for p in parts] == [list(range(i, 16, 4)) for i in range(4)]


def test_zip_shards_each_input_and_keeps_pairs_aligned():
    a = dp.range(10)
    b = dp.range(10).map(lambda x: x * 10)
    parts = per_worker(dp.zip(a, b), 2, uneven="allow")
    assert parts == [[(i, 10 * i) for i in range(w, 10, 2)] for w in range(2)]


def test_rewrite_leaves_the_original_graph_untouched():
    ds = dp.range(6).map(lambda x: x + 1)
    before = [n for n in walk(ds)]
    worker1 = rewritten(ds, 2, 1)
    assert [n for n in walk(ds)] == before and worker1 is not ds
    assert [int(x) for x in ds] == [1, 2, 3, 4, 5, 6]
    assert [int(x) for x in worker1] == [2, 4, 6]


def test_replace_inputs_updates_structures_holding_inputs():
    a, b, c = dp.range(2), dp.range(3), dp.range(4)
    z = dp.zip({"x": a, "y": b})
    z2 = replace_inputs(z, [a, c])
    assert z2._structure == {"x": a, "y": c} and z._structure == {"x": a, "y": b}
    assert [sorted((k, int(v)) for k, v in e.items()) for e in z2] == [
        [("x", 0), ("y", 0)],
        [("x", 1), ("y", 1)],
    ]


def test_off_or_no_worker_context_is_unchanged():
    ds = dp.range(5)
    from datapipe.dataset_ops import _rewritten

    assert _rewritten(ds) is ds  # no worker context at all
    off = ds.with_options(worker_options(3, 1, policy=dp.AutoShardPolicy.OFF))
    assert _rewritten(off) is off
    # One worker of one: a shard point over the whole pool (so a checkpoint can resume on
    # more workers), reading everything.
    assert names_after_rewrite(ds, 1, 0) == ["range", "auto_shard"]
    assert [int(x) for x in ds.with_options(worker_options(1, 0))] == [0, 1, 2, 3, 4]


def test_spec_inference_is_not_sharded():
    # An unseeded shuffle below take would fail under DATA; spec inference must not.
    ds = dp.range(10).with_options(worker_options(2, 1)).shuffle(10).map(lambda x: x * 1.5)
    assert ds.element_spec == dp.TensorSpec((), np.dtype("float64"))


# ---- even ends -------------------------------------------------------------------------
def test_uneven_drop_pad_allow():
    ds = dp.range(10)
    assert per_worker(ds, 3) == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    assert per_worker(ds, 3, uneven="pad") == [[0, 3, 6, 9], [1, 4, 7, 1], [2, 5, 8, 2]]
    assert per_worker(ds, 3, uneven="allow") == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]


def test_pad_with_an_empty_shard_uses_the_input_start():
    assert per_worker(dp.range(2), 3, uneven="pad") == [[0], [1], [0]]
    assert per_worker(dp.range(2), 3) == [[], [], []]


def test_pad_then_batch_gives_equal_batch_counts():
    parts = per_worker(dp.range(11).map(lambda x: x).batch(2), 4, uneven="pad")
    assert [len(p) for p in parts] == [2, 2, 2, 2]
    assert parts[3] == [[3, 7], [3]]


def test_unknown_cardinality_logs_once_and_does_not_even(caplog):
    ds = dp.range(10).filter(lambda x: x % 3 != 0)
    ds2 = dp.from_generator(lambda: iter(range(7)), dp.TensorSpec((), "int64"))
    with caplog.at_level(logging.WARNING, logger="datapipe.distribute"):
        parts = per_worker(ds2, 2)
        per_worker(ds2, 2)
    assert [len(p) for p in parts] == [4, 3]
    warnings = [r.getMessage() for r in caplog.records if "unknown" in r.getMessage()]
    assert len(warnings) == 1
    assert "'from_generator' is unknown" in warnings[0]
    # filter sits above the shard point, where 10 elements are evened to 3 each; the filter
    # then keeps data-dependent counts (documented: filter voids the equal-count guarantee).
    assert per_worker(ds, 3) == [[], [1, 4, 7], [2, 5, 8]]


def test_state_resumes_a_sharded_padded_iterator():
    ds = dp.range(11).shuffle(5, seed=2).with_options(worker_options(3, 2, uneven="pad"))
    for cut in range(5):
        it = iter(ds)
        head = [int(next(it)) for _ in range(cut)]
        state = it.state_dict()
        rest = [int(x) for x in it]
        assert len(head + rest) == 4 and sorted(set(head + rest)) in ([2, 5, 8], [2, 5, 8, 11])
        it2 = iter(ds)  # another epoch: the state carries its own epoch
        it2.load_state_dict(state)
        assert [int(x) for x in it2] == rest


# ---- FILE ------------------------------------------------------------------------------
def files(sizes, known=True):
    contents, start = {}, 0
    for i, s in enumerate(sizes):
        contents[f"f{i}"] = list(range(start, start + s))
        start += s
    return FakeFiles(contents, known)


def test_file_policy_reads_own_files():
    src = files([2, 2, 2, 2, 2])
    parts = per_worker(src.map(lambda x: x), 2, policy=FILE, uneven="allow")
    assert parts == [[0, 1, 4, 5, 8, 9], [2, 3, 6, 7]]
    root = rewritten(src, 2, 1, policy=FILE)._inputs[0]  # below with_options: the point
    assert root._name == "auto_shard" and root.kind == "units"
    assert root.restricted(root.share).files == ("f1", "f3")
    assert src.files == ("f0", "f1", "f2", "f3", "f4")


def test_file_policy_evens_known_cardinalities():
    src = files([3, 1, 2])
    assert per_worker(src, 3, policy=FILE) == [[0], [3], [4]]
    assert per_worker(src, 3, policy=FILE, uneven="pad") == [
        [0, 1, 2],
        [3, 3, 3],
        [4, 5, 4],
    ]


def test_file_policy_with_too_few_files_names_both_counts():
    with pytest.raises(AutoShardError) as info:
        iter(files([1, 1]).with_options(worker_options(3, 0, policy=FILE)))
    assert "'fake_files' has 2 files but there are 3 workers" in str(info.value)


def test_file_policy_without_file_source():
    with pytest.raises(AutoShardError, match="the graph has no file source to shard"):
        iter(dp.range(4).with_options(worker_options(2, 0, policy=FILE)))


def test_auto_chooses_file_or_falls_back_to_data():
    assert per_worker(files([1, 1, 1, 1]), 2, policy=AUTO) == [[0, 2], [1, 3]]
    assert per_worker(files([4]), 2, policy=AUTO) == [[0, 2], [1, 3]]
    assert names_after_rewrite(files([4]).map(lambda x: x)) == ["fake_files", "auto_shard", "map"]


def test_first_auto_sharded_iteration_logs_one_record(caplog):
    ds = files([4]).map(lambda x: x + 1)
    opts = worker_options(2, 1, policy=AUTO)
    with caplog.at_level(logging.INFO, logger="datapipe"):
        for _ in range(3):  # three epochs of one pipeline: one record
            assert [int(x) for x in ds.with_options(opts)] == [2, 4]
    records = [r for r in caplog.records if r.getMessage().startswith("auto-shard: rank")]
    assert len(records) == 1 and records[0].name == "datapipe.distribute"
    assert records[0].levelno == logging.INFO
    assert records[0].getMessage() == (
        "auto-shard: rank 1 of world size 2 (worker 1 of 2, from options): policy DATA "
        "(AUTO fell back to DATA: 'fake_files' has 1 files for 2 workers); this worker reads "
        "2 of 4 elements of 'fake_files', every 2nd from 1"
    )
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="datapipe"):
        [int(x) for x in files([1, 1, 1, 1]).with_options(worker_options(2, 0, policy=AUTO))]
    (msg,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("auto-shard")]
    assert "policy FILE (AUTO: every source reads files, >= 2 each)" in msg
    assert msg.endswith("this worker reads 2 of 4 files of 'fake_files' (f0, f2)")


def test_auto_uses_data_when_other_sources_are_mixed_in():
    mixed = dp.zip(files([1, 1]), dp.range(2))
    assert per_worker(mixed, 2, policy=AUTO) == [[(0, 0)], [(1, 1)]]


@pytest.mark.parametrize(
    "kw, message",
    [
        (
            {"uneven": "bogus"},
            "Options.distribute.uneven='bogus' is not one of ['drop', 'pad', 'allow']",
        ),
        ({"policy": "SOMETIMES"}, "Options.distribute.auto_shard_policy='SOMETIMES' is not one of"),
    ],
)
def test_bad_option_values(kw, message):
    with pytest.raises(AutoShardError) as info:
        iter(dp.range(4).with_options(worker_options(2, 0, **kw)))
    assert message in str(info.value)


def test_file_policy_on_real_text_files(tmp_path):
    paths = []
    for i in range(4):
        p = tmp_path / f"part{i}.txt"
        p.write_text("".join(f"{i}-{j}\n" for j in range(i + 1)))
        paths.append(str(p))
    ds = dp.TextLineDataset(paths).map(lambda s: s.upper())
    # Text files have no known length: FILE cannot even the shares out ("allow" behaviour).
    parts = per_worker(ds, 2, policy=FILE)
    assert parts == [["0-0", "2-0", "2-1", "2-2"], ["1-0", "1-1", "3-0", "3-1", "3-2", "3-3"]]
    files = dp.list_files(str(tmp_path / "*.txt"), shuffle=False)
    lines = files.flat_map(lambda f: dp.TextLineDataset(f))
    assert per_worker(lines, 4, policy=AUTO) == [
        [f"{i}-{j}" for j in range(i + 1)] for i in range(4)
    ]


def test_file_shares_keep_the_sources_order(tmp_path):
    paths = []
    for name in ("c", "a", "d", "b"):  # listed in this order, not sorted
        p = tmp_path / f"{name}.txt"
        p.write_text(f"{name}1\n{name}2\n")
        paths.append(str(p))
    ds = dp.TextLineDataset(paths)
    # The split is by sorted name (a, c to worker 0; b, d to worker 1), read in the
    # source's order; one worker of one reads everything in the source's order.
    assert per_worker(ds, 2, policy=FILE) == [["c1", "c2", "a1", "a2"], ["d1", "d2", "b1", "b2"]]
    assert per_worker(ds, 1, policy=FILE) == [[f"{n}{i}" for n in "cadb" for i in (1, 2)]]


def test_zip_pairs_stay_aligned_below_a_filter():
    a = dp.range(10).filter(lambda x: x % 2 == 0)  # 0, 2, 4, 6, 8
    ds = dp.zip(a, dp.range(5))
    whole = [(0, 0), (2, 1), (4, 2), (6, 3), (8, 4)]
    parts = per_worker(ds, 2, uneven="allow")
    assert sorted(parts[0] + parts[1]) == whole  # the unsharded pairs, each once
    assert names_after_rewrite(ds) == [
        "range",
        "filter",
        "auto_shard",
        "range",
        "auto_shard",
        "zip",
    ]


def test_one_worker_of_one_reads_a_shuffling_file_list_in_its_own_order(tmp_path):
    for i in range(6):
        (tmp_path / f"{i}.txt").write_text("x")
    ds = dp.list_files(str(tmp_path / "*.txt")).with_options(dp.Options(seed=3))
    plain = [str(p) for p in ds]
    assert plain != sorted(plain)  # shuffled
    assert per_worker(ds, 1, policy=FILE) == [plain]  # the same files, the same order
    assert sorted(sum(per_worker(ds, 2, policy=FILE), [])) == sorted(plain)


# ---- cache holds one worker's share ------------------------------------------------------
@pytest.mark.parametrize("k", [2, 3])
def test_in_memory_cache_is_per_worker(k):
    ds = dp.range(23).cache().map(lambda x: x + 1)
    parts = shares(lambda: ds, k)  # one Dataset object iterated as each worker in turn
    assert sorted(x for p in parts for x in p) == list(range(1, 24))


def test_cache_filled_unsharded_is_not_read_by_a_worker():
    # E.g. a pass in the parent process before DataLoader workers fork.
    ds = dp.range(10).cache()
    assert [int(x) for x in ds] == list(range(10))
    assert [int(x) for x in ds.with_options(worker_options(2, 1))] == [1, 3, 5, 7, 9]
    # and each worker's cache is reused by its next epoch
    assert [int(x) for x in ds.with_options(worker_options(2, 1))] == [1, 3, 5, 7, 9]


def test_file_cache_is_per_worker(tmp_path):
    path = str(tmp_path / "c")
    parts = shares(lambda: dp.range(9).cache(path), 2)
    assert sorted(x for p in parts for x in p) == list(range(9))
    # a later run (as every rank restarts) reads its own share back from its own file
    assert shares(lambda: dp.range(9).cache(path), 2) == parts


# ---- per-process file orders -------------------------------------------------------------
@pytest.mark.parametrize("policy", [dp.AutoShardPolicy.FILE, dp.AutoShardPolicy.DATA])
@pytest.mark.parametrize("k", [2, 3])
def test_image_directory_with_default_shuffle_partitions(image_dir, policy, k):
    # shuffle=True, seed=None (Keras's default) orders the files differently in each
    # process; the workers must still read disjoint shares.
    def make():
        ds = dp.image_dataset_from_directory(
            image_dir, image_size=(2, 2), batch_size=None, verbose=False
        )
        return ds.map(lambda x, y: x[0, 0, 0].astype(np.int64))

    parts = shares(make, k, policy=policy)
    expected = sorted(b + 10 * j for b in (0, 100) for j in range(5))
    assert sorted(x for p in parts for x in p) == expected


@pytest.mark.parametrize("k", [2, 3])
def test_list_files_default_shuffle_under_data_policy(tmp_path, k):
    lines = []
    for f in range(5):
        text = [f"f{f}l{j}" for j in range(f + 1)]
        (tmp_path / f"{f}.txt").write_text("\n".join(text) + "\n")
        lines += text

    def make():
        files = dp.list_files(str(tmp_path / "*.txt"))  # shuffle=None: shuffled, unseeded
        return files.interleave(dp.TextLineDataset, cycle_length=2).batch(2)

    got = []
    for i in range(k):
        opts = worker_options(k, i, policy=dp.AutoShardPolicy.DATA, uneven="allow")
        for b in make().with_options(opts):
            got += [x if isinstance(x, str) else x.decode() for x in np.asarray(b).tolist()]
    assert sorted(got) == sorted(lines)
