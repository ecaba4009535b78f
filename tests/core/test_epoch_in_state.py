"""The epoch travels with an iterator's state (issue 27, item 4): after a restore the
Dataset's next ``iter()`` is the epoch after the restored one, on every path -- the public
``Iterator`` (``load_state_dict`` and its alias ``set_state``), ``to_torch()``,
``as_torch_dataset()`` and an elastic resume. Each "fresh process" is a pipeline built
again from scratch, whose epoch counter starts at 0."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe.distribute import load_state, save_state


def worker_options(count: int, index: int) -> dp.Options:
    return dp.Options(distribute=dp.DistributeOptions(num_workers=count, worker_index=index))


def make(n: int = 24) -> dp.Dataset:
    # reshuffle_each_iteration (the default): every epoch has its own order
    return dp.range(n).shuffle(n, seed=3).batch(4)


def values(batches) -> list[int]:
    return [int(v) for b in batches for v in np.asarray(b).reshape(-1)]


def epochs(ds: dp.Dataset, k: int) -> list[list[int]]:
    return [values(ds) for _ in range(k)]


@pytest.mark.parametrize("method", ["load_state_dict", "set_state"])
def test_the_pass_after_a_restored_epoch_is_the_next_epoch(tmp_path, method):
    want = epochs(make(), 4)
    assert len({tuple(e) for e in want}) == 4  # four different orders
    run = make()
    list(run)  # epoch 0
    it = iter(run)  # epoch 1
    head = values([next(it), next(it)])
    save_state(it.state_dict(), str(tmp_path / "s"))
    assert head == want[1][:8]
    fresh = make()  # a new process: its counter is at 0
    it2 = iter(fresh)
    getattr(it2, method)(load_state(str(tmp_path / "s")))
    assert values(it2) == want[1][8:]
    assert values(fresh) == want[2] and values(fresh) == want[3]


def test_a_restore_into_an_iterator_of_a_later_epoch_goes_back_to_its_epoch():
    want = epochs(make(), 3)
    ds = make()
    it = iter(ds)
    next(it)
    state = it.state_dict()  # epoch 0
    for _ in range(2):
        list(ds)  # the counter is at 3 now
    again = iter(ds)
    again.load_state_dict(state)
    assert values(again) == want[0][4:]
    assert values(ds) == want[1]


def test_to_torch_pipelines_carry_the_epoch():
    want = epochs(make().to_torch(), 3)
    run = make().to_torch()
    list(run)
    it = iter(run)
    next(it)
    state = it.state_dict()
    fresh = make().to_torch()
    it2 = iter(fresh)
    it2.load_state_dict(state)
    assert values(it2) == want[1][4:]
    assert values(fresh) == want[2]


def test_as_torch_dataset_carries_the_epoch():
    torch = pytest.importorskip("torch")
    want = epochs(make(), 4)
    tds = make().as_torch_dataset()
    loader = torch.utils.data.DataLoader(tds, batch_size=None)
    list(loader)  # epoch 0
    it = iter(loader)  # epoch 1
    next(it)
    sd = tds.state_dict()
    fresh = make().as_torch_dataset()
    fresh.load_state_dict(sd)
    loader2 = torch.utils.data.DataLoader(fresh, batch_size=None)
    assert values(loader2) == want[1][4:]
    assert values(loader2) == want[2] and values(loader2) == want[3]


def test_an_elastic_resume_carries_the_epoch():
    ds = make(40)
    whole = [epochs(ds.with_options(worker_options(3, p)), 3) for p in range(3)]
    states = []
    for i in range(2):  # two old workers in epoch 1
        old = ds.with_options(worker_options(2, i))
        list(old)
        it = iter(old)
        next(it)
        states.append(it.state_dict())
    for p in range(3):  # three new workers: the pass after the resumed one is epoch 2
        fresh = ds.with_options(worker_options(3, p))
        it = iter(fresh)
        it.load_state_dict(states)
        list(it)
        assert values(fresh) == whole[p][2]
