"""Review of the distribution layer: defects found by using it as a torchrun user would."""

from __future__ import annotations

import io
import os
import zipfile

import numpy as np
import pytest
from PIL import Image

import datapipe as dp
from datapipe.distribute import load_state, save_state
from tests.distribute._dist_helpers import worker_options

ENV_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def shares(make, count, **kw):
    """Each worker's elements as ints, every worker building its own pipeline (as ranks do)."""
    return [
        [int(x) for x in make().with_options(worker_options(count, i, uneven="allow", **kw))]
        for i in range(count)
    ]


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
@pytest.fixture
def image_dir(tmp_path):
    for c, base in (("a", 0), ("b", 100)):
        os.makedirs(tmp_path / c)
        for j in range(5):
            img = np.full((2, 2, 3), base + 10 * j, np.uint8)
            Image.fromarray(img).save(tmp_path / c / f"{j}.png")
    return str(tmp_path)


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


# ---- iterator state and the worker context ---------------------------------------------
def _advanced(ds, count, index, steps=2):
    it = iter(ds.with_options(worker_options(count, index)))
    for _ in range(steps):
        next(it)
    return it.state_dict()


@pytest.mark.parametrize("other", [(3, 0), (2, 1), (1, 0)])
def test_state_restored_in_another_worker_context_raises(other):
    ds = dp.range(24).shuffle(6, seed=1).batch(2)
    state = _advanced(ds, 2, 0)
    it = iter(ds.with_options(worker_options(*other)))
    with pytest.raises(ValueError) as info:
        it.load_state_dict(state)
    msg = str(info.value)
    assert "worker 0 of 2" in msg and f"worker {other[1]} of {other[0]}" in msg


def test_state_restored_in_the_same_context_still_resumes():
    ds = dp.range(24).shuffle(6, seed=1).batch(2)
    it = iter(ds.with_options(worker_options(2, 1)))
    first = [next(it).tolist() for _ in range(2)]
    state = it.state_dict()
    rest = [b.tolist() for b in it]
    it2 = iter(ds.with_options(worker_options(2, 1)))
    it2.load_state_dict(state)
    assert [b.tolist() for b in it2] == rest and len(first + rest) == 6


def test_torch_dataset_state_restored_in_another_world_raises():
    ds = dp.range(24).batch(2)
    tds = ds.with_options(worker_options(2, 0)).as_torch_dataset()
    g = iter(tds)
    next(g)
    state = tds.state_dict()
    other = ds.with_options(worker_options(3, 0)).as_torch_dataset()
    other.load_state_dict(state)
    with pytest.raises(ValueError, match="worker 0 of 2"):
        next(iter(other))


# ---- tampered state files -----------------------------------------------------------------
class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def _write(path, **entries):
    buf = io.BytesIO()
    np.savez(buf, **entries)
    path.write_bytes(buf.getvalue())


@pytest.mark.parametrize(
    "kind",
    ["garbage", "pickle_entry", "bad_json", "missing_ref", "not_a_dict"],
)
def test_tampered_state_file_gives_a_clear_value_error(tmp_path, kind):
    path = tmp_path / "s.state"
    fmt = '{"format": "datapipe-state-1", "state": %s}'
    if kind == "garbage":
        path.write_bytes(b"hello, not an archive")
    elif kind == "pickle_entry":
        import pickle

        with zipfile.ZipFile(path, "w") as z:
            z.writestr("__json__.npy", pickle.dumps(_Evil()))
    elif kind == "bad_json":
        _write(path, __json__=np.array("{not json"))
    elif kind == "missing_ref":
        _write(path, __json__=np.array(fmt % '{"__dp__": "ndarray", "ref": "a7"}'))
    else:
        _write(path, __json__=np.array("[1, 2]"))
    with pytest.raises(ValueError) as info:
        load_state(path)
    assert "load_state" in str(info.value) and str(path) in str(info.value)


def test_good_state_file_still_loads(tmp_path):
    state = _advanced(dp.range(10).shuffle(4, seed=2), 2, 1)
    save_state(state, tmp_path / "ok.state")
    loaded = load_state(tmp_path / "ok.state")
    assert loaded["epoch"] == state["epoch"] and loaded["root"] == state["root"]


# ---- examples/train_ddp.py ---------------------------------------------------------------
def test_train_ddp_refuses_checkpoints_with_loader_workers(capsys, monkeypatch):
    import sys

    examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
    monkeypatch.syspath_prepend(os.path.abspath(examples))
    import train_ddp

    assert train_ddp.parse_args(["--checkpoint", "c"]).loader_workers == 0
    with pytest.raises(SystemExit):
        train_ddp.parse_args(["--checkpoint", "c", "--loader-workers", "2"])
    assert "--checkpoint needs --loader-workers 0" in capsys.readouterr().err
    sys.modules.pop("train_ddp", None)
