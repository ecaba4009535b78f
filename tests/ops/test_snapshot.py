"""``snapshot``: tf.data's semantics (its kernel_tests/snapshot_test.py, translated): written
on the first pass, read after; one directory per pipeline fingerprint, one run per writing
pass, ``%08d.shard`` directories; custom shard and reader functions; resumable while
writing and while reading; bounds and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from harness import py, values

import datapipe as dp
from datapipe.distribute import load_state, save_state
from datapipe.errors import FileReadError
from datapipe.ops import snapshot as snap

CPUS = os.cpu_count() or 1


def runs_and_shards(root: str) -> dict:
    """{fingerprint: {run: sorted shard directory names}} (the metadata file aside), and
    which fingerprints have a metadata file."""
    out = {}
    for fp in sorted(os.listdir(root)):
        entries = sorted(os.listdir(os.path.join(root, fp)))
        assert entries[-1] == snap.METADATA or snap.METADATA not in entries
        out[fp] = {
            r: sorted(os.listdir(os.path.join(root, fp, r))) for r in entries if r != snap.METADATA
        }
    return out


def counted(n: int, calls: list) -> dp.Dataset:
    return dp.range(n).map(lambda x: calls.append(1) or x)


def test_written_on_the_first_pass_and_read_after(tmp_path):
    calls: list = []
    ds = counted(1000, calls).snapshot(str(tmp_path))
    assert [int(x) for x in ds] == list(range(1000))
    computed = len(calls)
    assert [int(x) for x in ds] == list(range(1000))  # read: the map does not run again
    assert len(calls) == computed
    layout = runs_and_shards(str(tmp_path))
    (runs,) = layout.values()
    (shards,) = runs.values()  # one fingerprint, one run, the default shards
    assert shards == [f"{i:08d}.shard" for i in range(min(CPUS, 1000))]


def test_read_back_after_the_source_files_are_gone(tmp_path):
    files = []
    for f in range(4):
        p = tmp_path / f"f{f}.txt"
        p.write_text("".join(f"record {r} of file {f}\n" for r in range(25)))
        files.append(str(p))
    want = [f"record {r} of file {f}" for f in range(4) for r in range(25)]
    out = str(tmp_path / "snap")
    assert values(dp.TextLineDataset(files).snapshot(out)) == want
    for p in files:
        os.remove(p)
    assert values(dp.TextLineDataset(files).snapshot(out)) == want  # in the original order


def test_one_fingerprint_per_pipeline_one_run_per_complete_pass(tmp_path):
    root = str(tmp_path)
    assert values(dp.range(1000).snapshot(root)) == list(range(1000))
    assert values(dp.range(2000).snapshot(root)) == list(range(2000))
    assert values(dp.range(1000).snapshot(root)) == list(range(1000))  # built again: read
    layout = runs_and_shards(root)
    assert len(layout) == 2 and all(len(runs) == 1 for runs in layout.values())


def test_two_incomplete_passes_write_two_runs(tmp_path):
    it1 = iter(dp.range(1000).snapshot(str(tmp_path)))
    assert [int(next(it1)) for _ in range(500)] == list(range(500))
    it2 = iter(dp.range(1000).snapshot(str(tmp_path)))
    assert [int(next(it2)) for _ in range(500)] == list(range(500))
    for i in range(500, 1000):
        assert int(next(it1)) == i and int(next(it2)) == i
    (runs,) = runs_and_shards(str(tmp_path)).values()
    assert len(runs) == 2
    meta = snap.read_metadata(os.path.join(str(tmp_path), os.listdir(str(tmp_path))[0]))
    assert meta["run"] in runs and meta["num_elements"] == 1000


def test_a_pass_that_stops_early_is_never_read(tmp_path):
    calls: list = []
    ds = counted(100, calls).snapshot(str(tmp_path))
    it = iter(ds)
    [next(it) for _ in range(10)]
    it.close()
    for fp in os.listdir(str(tmp_path)):  # nothing flushed yet may mean no directory at all
        assert snap.read_metadata(os.path.join(str(tmp_path), fp)) is None
    before = len(calls)
    assert values(ds) == list(range(100)) and len(calls) == before + 100  # written anew


def test_custom_shard_func_and_reading_with_another_one(tmp_path):
    ds = dp.range(1000).enumerate().snapshot(str(tmp_path), shard_func=lambda i, _: i % 2)
    assert [int(v) for _, v in ds] == list(range(1000))
    (runs,) = runs_and_shards(str(tmp_path)).values()
    assert list(runs.values()) == [["00000000.shard", "00000001.shard"]]
    again = dp.range(1000).enumerate().snapshot(str(tmp_path), shard_func=lambda i, _: 0)
    assert [int(v) for _, v in again] == list(range(1000))  # read: the same fingerprint

    one = str(tmp_path / "one")
    assert values(dp.range(50).snapshot(one, shard_func=lambda _: np.int64(0))) == list(range(50))
    (runs,) = runs_and_shards(one).values()
    assert list(runs.values()) == [["00000000.shard"]]


def test_custom_reader_func(tmp_path):
    def reader(shards):
        return shards.interleave(lambda x: x, cycle_length=4, num_parallel_calls=4)

    ds = dp.range(200).snapshot(str(tmp_path), reader_func=reader)
    assert values(ds) == list(range(200))  # the first pass is the input's order
    got = values(ds)
    assert sorted(got) == list(range(200))
    # one element of each shard in turn: shard s holds s, s + k, ... (k shards)
    k = min(CPUS, 200)
    assert got[: min(k, 4)] == list(range(min(k, 4)))


def test_bad_shard_and_reader_functions(tmp_path):
    ds = dp.range(10).snapshot(str(tmp_path / "a"), shard_func=lambda _: "invalid_fn")
    with pytest.raises(TypeError, match=r"shard_func must return an int in \[0, 65536\)"):
        list(ds)
    dp.range(10).snapshot(str(tmp_path / "b")).take(100).reduce(0, lambda a, b: a)  # written
    bad_reader = dp.range(10).snapshot(str(tmp_path / "b"), reader_func=lambda x: x + 1)
    with pytest.raises(TypeError):
        list(bad_reader)
    not_a_dataset = dp.range(10).snapshot(str(tmp_path / "b"), reader_func=lambda x: [1])
    with pytest.raises(TypeError, match="reader_func must return a Dataset, got list"):
        list(not_a_dataset)
    with pytest.raises(TypeError, match="shard_func must be callable"):
        dp.range(3).snapshot(str(tmp_path), shard_func=3)
    with pytest.raises(ValueError, match="compression must be one of"):
        dp.range(3).snapshot(str(tmp_path), compression="BROTLI")
    with pytest.raises(ValueError, match="path must be a local directory"):
        dp.range(3).snapshot("memory://snap")


def test_empty_input(tmp_path):
    ds = dp.range(0).snapshot(str(tmp_path))
    assert values(ds) == [] and values(ds) == []
    (runs,) = runs_and_shards(str(tmp_path)).values()
    assert list(runs.values()) == [[]]  # one run of no shards


def test_unseeded_shuffle_snapshots_to_one_fingerprint(tmp_path):
    def make():
        return dp.range(300).shuffle(300).snapshot(str(tmp_path))

    first = values(make())
    assert sorted(first) == list(range(300))
    assert values(make()) == first  # the snapshot's order: what the first pass wrote
    assert len(runs_and_shards(str(tmp_path))) == 1


def test_repeat_after_the_snapshot_writes_once(tmp_path):
    ds = dp.range(10).snapshot(str(tmp_path)).repeat(10)
    assert values(ds) == list(range(10)) * 10
    (runs,) = runs_and_shards(str(tmp_path)).values()
    assert len(runs) == 1


@pytest.mark.parametrize("compression", ["AUTO", "GZIP", "SNAPPY", None])
def test_nested_mixed_elements_and_compressions(tmp_path, compression):
    def fn(x):
        return (x, str(x), {"twice": np.full((2,), 2 * x, np.float32)})

    ds = dp.range(10).map(fn).snapshot(str(tmp_path), compression=compression)
    want = [(i, str(i), {"twice": [2.0 * i] * 2}) for i in range(10)]
    assert values(ds) == want
    read = dp.range(10).map(fn).snapshot(str(tmp_path), compression="SNAPPY")
    assert values(read) == want and values(read.repeat(2)) == want * 2


def _through_file(state, tmp_path, name):
    path = str(tmp_path / name)
    save_state(state, path)
    return load_state(path)


def test_checkpoint_while_writing_resumes_in_a_new_process(tmp_path):
    root = str(tmp_path / "s")
    calls: list = []
    it = iter(counted(3000, calls).snapshot(root))
    head = [int(next(it)) for _ in range(1700)]  # past a flush
    state = _through_file(it.state_dict(), tmp_path, "w.state")
    assert state["root"]["mode"] == "write" and state["root"]["flushed"] >= snap.FLUSH_ELEMENTS
    it.close()
    fresh: list = []
    ds = counted(3000, fresh).snapshot(root)
    again = iter(ds)
    again.load_state_dict(state)
    # the input was restored to the last flush: it recomputed what was not yet written
    assert len(fresh) <= 3000 - state["root"]["flushed"] + 1
    rest = [int(v) for v in again]
    assert head + rest == list(range(3000))
    calls_after = len(fresh)
    assert values(ds) == list(range(3000)) and len(fresh) == calls_after  # read back
    # the same checkpoint once more: another copy of the run, complete and exact too
    third = iter(counted(3000, []).snapshot(root))
    third.load_state_dict(state)
    assert [int(v) for v in third] == rest


@pytest.mark.parametrize("cut", [0, 50, 99, 100])
def test_checkpoint_while_reading(tmp_path, cut):
    root = str(tmp_path)
    assert values(dp.range(100).snapshot(root)) == list(range(100))
    it = iter(dp.range(100).snapshot(root))
    head = [int(next(it)) for _ in range(cut)]
    state = _through_file(it.state_dict(), tmp_path, "r.state")
    assert state["root"]["mode"] == "read"
    again = iter(dp.range(100).snapshot(root))
    again.load_state_dict(state)
    assert head + [int(v) for v in again] == list(range(100))


def test_checkpoints_across_a_repeat_tf_cases(tmp_path):
    # tf.data's SnapshotCheckpointTest: range(100).snapshot().repeat(2)
    root = str(tmp_path)

    def make():
        return dp.range(100).snapshot(root).repeat(2)

    for cut, total in ((50, 200), (110, 200)):
        it = iter(make())
        head = [int(next(it)) for _ in range(cut)]
        state = _through_file(it.state_dict(), tmp_path, f"c{cut}.state")
        again = iter(make())
        again.load_state_dict(state)
        got = head + [int(v) for v in again]
        assert got == list(range(100)) * 2 and len(got) == total


def test_a_read_checkpoint_of_another_run_is_refused(tmp_path):
    root = str(tmp_path)
    values(dp.range(20).snapshot(root))
    it = iter(dp.range(20).snapshot(root))
    next(it)
    state = it.state_dict()
    state["root"]["run"] = "0" * 16
    with pytest.raises(ValueError, match="checkpoint was reading run '0000000000000000'"):
        iter(dp.range(20).snapshot(root)).load_state_dict(state)


def test_metadata_is_checked_before_it_is_read(tmp_path, monkeypatch):
    root = str(tmp_path)
    values(dp.range(20).snapshot(root))
    (fp,) = os.listdir(root)
    path = os.path.join(root, fp, snap.METADATA)
    monkeypatch.setattr(snap, "MAX_METADATA_BYTES", 16)
    with pytest.raises(FileReadError, match=r"snapshot.metadata holds \d+ bytes, over 16"):
        list(dp.range(20).snapshot(root))
    monkeypatch.undo()
    meta = json.loads(open(path).read())
    for bad, message in (
        ({**meta, "shards": {"x": [1]}}, "shard 'x': expected a list of positive row counts"),
        ({**meta, "run": "../escape"}, "'run' must name the run's directory"),
        ({**meta, "format": "other"}, "not a snapshot record"),
    ):
        with open(path, "w") as f:
            json.dump(bad, f)
        with pytest.raises(FileReadError, match=message) as info:
            list(dp.range(20).snapshot(root))
        assert path in str(info.value)
    with open(path, "w") as f:  # a snapshot of other elements under this fingerprint
        other = {"shape": [], "dtype": "float32", "torch": False}
        json.dump({**meta, "element_spec": other}, f)
    with pytest.raises(ValueError, match="holds elements of spec .*float32.*delete the dir"):
        list(dp.range(20).snapshot(root))


def test_each_worker_snapshots_its_own_share(tmp_path):
    root = str(tmp_path)

    def on(worker):
        opts = dp.Options(distribute=dp.DistributeOptions(num_workers=2, worker_index=worker))
        return dp.range(40).map(lambda x: x * 3).snapshot(root).with_options(opts)

    shares = [values(on(w)) for w in (0, 1)]
    assert sorted(shares[0] + shares[1]) == [3 * i for i in range(40)]
    assert not set(shares[0]) & set(shares[1])
    assert len(os.listdir(root)) == 2  # a fingerprint per worker
    assert [values(on(w)) for w in (0, 1)] == shares  # read back, each its own


def test_the_fingerprint_follows_the_code_and_not_the_process(tmp_path):
    from datapipe.ops._graph_fingerprint import fingerprint

    a = dp.range(5).map(lambda x: x + 1)
    b = dp.range(5).map(lambda x: x + 2)
    assert fingerprint(a) != fingerprint(b)
    assert fingerprint(a) == fingerprint(dp.range(5).map(lambda x: x + 1))
    arrays = [dp.from_tensor_slices(np.arange(4) + k) for k in (0, 0, 1)]
    assert fingerprint(arrays[0]) == fingerprint(arrays[1]) != fingerprint(arrays[2])
    code = (
        "import datapipe as dp, numpy as np\n"
        "from datapipe.ops._graph_fingerprint import fingerprint\n"
        "SCALE = {'k': frozenset({'a', 'b', 'c'})}\n"
        "ds = dp.from_tensor_slices(np.arange(6)).map(lambda x: (x, SCALE)).shuffle(4)\n"
        "print(fingerprint(ds))\n"
    )
    got = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout.strip()
        for seed in (1, 2)
    }
    assert len(got) == 1 and len(got.pop()) == 32


def test_cardinality_and_spec_are_the_inputs(tmp_path):
    ds = dp.range(7).map(lambda x: np.full((2,), x)).snapshot(str(tmp_path))
    assert ds.cardinality() == 7 and ds.element_spec == dp.TensorSpec((2,), "int64")
    assert py(next(iter(ds))) == [0, 0]


def test_close_and_a_broken_loop_stop_the_input_and_reader_threads(tmp_path, threads):
    ds = dp.range(400).map(lambda x: x * 2, num_parallel_calls=2).prefetch(2)
    snapped = ds.snapshot(str(tmp_path), reader_func=lambda s: s.interleave(
        lambda x: x, cycle_length=2, num_parallel_calls=2))  # fmt: skip
    it = iter(snapped)
    assert [int(next(it)) for _ in range(3)] == [0, 2, 4]
    assert threads.names()  # the writing pass runs the parallel input
    it.close()
    assert threads.settle() == []
    assert sorted(values(snapped)) == [2 * i for i in range(400)]
    for _ in snapped:  # a reading pass, broken out of
        break
    assert threads.settle() == []


def test_the_guide_s_snapshot_example_runs():
    # docs/guides/files-formats.md shows snapshot in a training loop: it runs as written.
    from pathlib import Path

    page = Path(__file__).resolve().parents[2] / "docs" / "guides" / "files-formats.md"
    (code,) = [b for b in page.read_text().split("```python\n")[1:] if ".snapshot(" in b]
    scope: dict = {}
    exec(compile(code.split("```")[0], str(page), "exec"), scope)
    assert len(list(scope["ds"])) == 1000 // 32 + 1


def test_the_fingerprint_sees_partial_arguments_slots_and_not_drawn_seeds():
    """A ``functools.partial``'s arguments and a slotted callable's state are part of the
    pipeline (both hashed as their class only before: two pipelines shared one snapshot);
    an unseeded shuffle's drawn entropy is not (one fingerprint per pipeline)."""
    import functools

    from datapipe.ops._graph_fingerprint import fingerprint

    def add(x, k):
        return x + k

    one, two = (dp.range(5).map(functools.partial(add, k=k)) for k in (1, 2))
    assert fingerprint(one) != fingerprint(two)
    assert fingerprint(one) == fingerprint(dp.range(5).map(functools.partial(add, k=1)))

    class Slotted:
        __slots__ = ("k",)

        def __init__(self, k):
            self.k = k

        def __call__(self, x):
            return x + self.k

    assert fingerprint(dp.range(5).map(Slotted(1))) != fingerprint(dp.range(5).map(Slotted(2)))
    shuffled = dp.range(5).shuffle(5)
    before = fingerprint(shuffled)
    list(shuffled)  # draws the unseeded shuffle's entropy
    assert fingerprint(shuffled) == before == fingerprint(dp.range(5).shuffle(5))
