"""File lists at ImageNet's size: a shuffled, auto-sharded ``list_files`` of 1.28M paths
keeps a checkpoint of a few hundred bytes and resumes exactly (its order is a seeded
permutation, ``datapipe.distribute.share.SeededOrder``); the list itself is held in
numpy buffers (``PathList``). No file is touched: the paths only need to be listed."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import datapipe as dp
from datapipe.distribute.share import SeededOrder, share_from_state
from datapipe.io._path_list import PathList, PathListBuilder
from datapipe.io.files import FileListDataset

N_CLASSES, PER_CLASS = 1000, 1280  # 1.28M


def imagenet_paths() -> PathList:
    b = PathListBuilder()
    for c in range(N_CLASSES):
        names = [f"n{c:08d}_{j:06d}.JPEG" for j in range(PER_CLASS)]
        b.add(f"/data/train/n{c:08d}/", names, is_sorted=True)
    return b.build()


@pytest.fixture(scope="module")
def paths() -> PathList:
    return imagenet_paths()


def rank(ds: dp.Dataset, index: int) -> dp.Dataset:
    options = dp.Options(seed=0, distribute=dp.DistributeOptions(num_workers=2, worker_index=index))
    return ds.with_options(options)


def test_the_list_holds_under_40_bytes_a_file(paths):
    assert len(paths) == N_CLASSES * PER_CLASS
    assert paths.nbytes / len(paths) < 40
    labels = np.repeat(np.arange(N_CLASSES, dtype=np.int32), PER_CLASS)
    ds = FileListDataset(paths, labels, shuffle=True, seed=1)
    assert ds.files is paths  # no copy into Python strings


def test_a_sharded_shuffled_checkpoint_is_a_few_hundred_bytes_and_exact(paths):
    labels = np.repeat(np.arange(N_CLASSES, dtype=np.int32), PER_CLASS)
    ds = rank(FileListDataset(paths, labels, shuffle=True, seed=1), 0)
    it = iter(ds)
    head = [next(it) for _ in range(5)]
    state = pickle.dumps(it.get_state())
    # Before: the share's order was a 640,000-entry list in the state (~3 MB pickled).
    assert len(state) < 2000
    rest = [next(it) for _ in range(5)]
    fresh = iter(ds)
    fresh.set_state(pickle.loads(state))
    assert [next(fresh) for _ in range(5)] == rest
    files = [p for p, _ in head + rest]
    assert all(p.startswith("/data/train/n") for p in files) and len(set(files)) == 10
    assert [int(y) for _, y in head] == [int(p.split("/")[3][1:]) for p, _ in head]
    other = iter(rank(FileListDataset(paths, labels, shuffle=True, seed=1), 1))
    assert not {next(other)[0] for _ in range(200)} & set(files)  # disjoint shares


def test_a_seeded_order_state_is_checked_before_it_is_drawn():
    order = SeededOrder([1, 2, 3], 10, 4)
    assert len(order) == 4 and sorted(np.asarray(SeededOrder([1, 2, 3], 10))) == list(range(10))
    assert order.prefix(2).to_state() == {"entropy": [1, 2, 3], "n": 10, "limit": 2}
    seg = {"split": [0, 1], "count": 10, "base": [0, []], "seeded_order": order.to_state()}
    assert share_from_state([seg]).segments[0].order == order
    seg["seeded_order"] = {"entropy": [1], "n": 2**40, "limit": None}
    with pytest.raises(ValueError, match=r"a seeded order of 1099511627776 elements for a "):
        share_from_state([seg])
