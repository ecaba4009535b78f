"""``as_torch_dataset()`` with torch's DataLoader: sharding, epochs, checkpoints."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import datapipe as dp
from datapipe.distribute.torch_dataset import TorchIterableDataset

pytestmark = pytest.mark.usefixtures("clean_env")


def ints(loader):
    out = []
    for b in loader:
        out.extend(np.atleast_1d(b.numpy()).tolist())
    return out


def test_is_a_torch_iterable_dataset():
    tds = dp.range(3).as_torch_dataset()
    assert isinstance(tds, TorchIterableDataset)
    assert isinstance(tds, torch.utils.data.IterableDataset)


@pytest.mark.parametrize(
    "num_workers, persistent, pin",
    [(0, False, False), (2, False, False), (2, True, False), (2, False, True), (3, True, True)],
)
def test_dataloader_workers_read_disjoint_shares(num_workers, persistent, pin):
    ds = dp.range(24).shuffle(6).map(lambda x: x * 2)
    loader = DataLoader(
        ds.as_torch_dataset(),
        batch_size=None,
        num_workers=num_workers,
        persistent_workers=persistent,
        pin_memory=pin,
    )
    for _ in range(2):  # two epochs; persistent workers keep their iterators' objects
        got = ints(loader)
        assert sorted(got) == list(range(0, 48, 2))  # union = input, no duplicate


def test_loader_batches_with_collate_and_equal_counts():
    tds = dp.range(10).map(lambda x: (x, x % 3)).as_torch_dataset()
    loader = DataLoader(tds, batch_size=2, num_workers=2)
    batches = list(loader)
    # uneven="drop": 10 elements over 2 workers -> 5 each -> 3 batches each (2, 2, 1).
    assert [b[0].shape[0] for b in batches] == [2, 2, 2, 2, 1, 1]
    assert all(b[0].dtype == torch.int64 for b in batches)
    assert sorted(v for b in batches for v in b[0].tolist()) == list(range(10))


def test_rank_and_loader_workers_form_one_index_space(clean_env):
    clean_env.setenv("RANK", "1")
    clean_env.setenv("WORLD_SIZE", "2")
    loader = DataLoader(dp.range(16).as_torch_dataset(), batch_size=None, num_workers=2)
    # 2 ranks x 2 workers = 4 shares; rank 1 owns shares 2 and 3.
    assert sorted(ints(loader)) == sorted(list(range(2, 16, 4)) + list(range(3, 16, 4)))


def test_spawned_workers_use_the_rank_the_parent_saw(clean_env):
    tds = dp.range(12).as_torch_dataset()
    clean_env.setenv("RANK", "0")
    clean_env.setenv("WORLD_SIZE", "3")
    state = tds.__getstate__()  # what a spawned worker receives
    assert state["_process"] == (0, 3, "env:torchrun")
    clean_env.delenv("RANK")
    clean_env.delenv("WORLD_SIZE")
    copy = TorchIterableDataset.__new__(TorchIterableDataset)
    copy.__setstate__(state)
    assert [int(x) for x in copy] == [0, 3, 6, 9]


def test_epochs_advance_and_set_epoch_repeats_an_order():
    tds = dp.range(30).shuffle(30, seed=9).as_torch_dataset()
    e0 = [int(x) for x in tds]
    e1 = [int(x) for x in tds]
    assert e0 != e1 and sorted(e0) == sorted(e1) == list(range(30))
    tds.set_epoch(0)
    assert [int(x) for x in tds] == e0
    tds.set_epoch(1)
    assert [int(x) for x in tds] == e1


def test_state_dict_resumes_mid_epoch_through_torch_save():
    ds = dp.range(40).shuffle(8, seed=1).map(lambda x: x + 1000).batch(4)
    tds = ds.as_torch_dataset()
    loader = DataLoader(tds, batch_size=None, num_workers=0)
    it = iter(loader)
    head = [next(it).tolist() for _ in range(3)]
    buf = io.BytesIO()
    torch.save({"data": tds.state_dict()}, buf)
    rest = [b.tolist() for b in it]

    tds2 = ds.as_torch_dataset()
    buf.seek(0)
    tds2.load_state_dict(torch.load(buf, weights_only=True)["data"])
    resumed = [b.tolist() for b in DataLoader(tds2, batch_size=None)]
    assert resumed == rest
    assert sorted(v for b in head + rest for v in b) == list(range(1000, 1040))
    # The epoch after the resumed one is a new order.
    nxt = [v for b in DataLoader(tds2, batch_size=None) for v in b.tolist()]
    assert sorted(nxt) == list(range(1000, 1040)) and nxt != [v for b in head + rest for v in b]


def test_state_after_the_epoch_ended_starts_the_next_epoch():
    tds = dp.range(6).shuffle(6, seed=3).as_torch_dataset()
    first = [int(x) for x in tds]
    sd = tds.state_dict()
    assert sd["epoch"] == 0 and sd["done"] is True
    assert sd["iterator"].dtype == torch.uint8  # the final position (elastic resume reads it)
    second = [int(x) for x in tds]
    tds2 = dp.range(6).shuffle(6, seed=3).as_torch_dataset()
    tds2.load_state_dict(sd)
    assert [int(x) for x in tds2] == second != first


def test_state_dict_before_iteration_and_after_break():
    tds = dp.range(10).as_torch_dataset()
    assert tds.state_dict() == {"epoch": 0, "done": False, "iterator": None}
    for i, _ in enumerate(tds):
        if i == 3:
            break  # the generator closes its iterator; the position is kept
    sd = tds.state_dict()
    tds2 = dp.range(10).as_torch_dataset()
    tds2.load_state_dict(sd)
    assert [int(x) for x in tds2] == [4, 5, 6, 7, 8, 9]


def test_load_state_dict_rejects_other_dicts():
    with pytest.raises(ValueError, match=r"missing keys \['done', 'iterator'\]"):
        dp.range(3).as_torch_dataset().load_state_dict({"epoch": 0})
