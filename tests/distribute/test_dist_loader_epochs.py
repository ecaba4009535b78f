"""Loader workers and epochs (issue 32, item 4) and spawn/forkserver workers (item 6):
each new pass over ``as_torch_dataset()`` in loader workers is the next epoch, with no
``set_epoch`` call, the same orders on every run; pipelines with lambdas and closures run
in spawn and forkserver loader workers."""

from __future__ import annotations

import pytest
from _dist_helpers import worker_options
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

import datapipe as dp

pytestmark = pytest.mark.usefixtures("clean_env")

N = 24


def pipeline() -> dp.Dataset:
    return dp.range(N).shuffle(N, seed=3).map(lambda x: x + 100)


def expected_epoch(ds: dp.Dataset, epoch: int, workers: int = 2) -> list[int]:
    """What a loader with ``workers`` workers yields in ``epoch`` (batch_size=None): the
    workers' shares interleaved one element each, as torch's in-order loader yields them."""
    shares = [
        [int(x) for x in ds.with_options(worker_options(workers, w))._build_iterator((epoch,))]
        for w in range(workers)
    ]
    assert len({len(s) for s in shares}) == 1
    return [x for group in zip(*shares) for x in group]


def passes(loader, n: int) -> list[list[int]]:
    return [[int(x) for x in loader] for _ in range(n)]


@pytest.mark.parametrize(
    "loader_cls, persistent",
    [
        (DataLoader, False),
        (DataLoader, True),
        (StatefulDataLoader, False),
        (StatefulDataLoader, True),
    ],
)
def test_each_pass_of_loader_workers_is_the_next_epoch(loader_cls, persistent):
    ds = pipeline()
    want = [expected_epoch(ds, e) for e in range(3)]
    assert want[0] != want[1] != want[2] and sorted(want[2]) == list(range(100, 100 + N))
    loader = loader_cls(
        ds.as_torch_dataset(), batch_size=None, num_workers=2, persistent_workers=persistent
    )
    assert passes(loader, 3) == want
    # the same seed gives the same orders in a new run (a fresh object)
    again = loader_cls(
        ds.as_torch_dataset(), batch_size=None, num_workers=2, persistent_workers=persistent
    )
    assert passes(again, 2) == want[:2]


@pytest.mark.parametrize("persistent", [False, True])
def test_set_epoch_still_sets_the_next_pass(persistent):
    ds = pipeline()
    tds = ds.as_torch_dataset()
    loader = DataLoader(tds, batch_size=None, num_workers=2, persistent_workers=persistent)
    first = passes(loader, 2)
    tds.set_epoch(0)  # replays epoch 0, then goes on from there
    assert passes(loader, 2) == first
    tds.set_epoch(5)
    assert passes(loader, 1) == [expected_epoch(ds, 5)]


def test_a_pass_after_a_break_is_still_the_next_epoch():
    ds = pipeline()
    loader = DataLoader(ds.as_torch_dataset(), batch_size=None, num_workers=2)
    it = iter(loader)
    head = [int(next(it)) for _ in range(3)]
    del it  # the workers are shut down mid-epoch
    assert head == expected_epoch(ds, 0)[:3]
    assert passes(loader, 1) == [expected_epoch(ds, 1)]


def test_stateful_loader_resume_carries_the_epoch():
    ds = pipeline()
    loader = StatefulDataLoader(ds.as_torch_dataset(), batch_size=None, num_workers=2)
    passes(loader, 1)  # epoch 0
    it = iter(loader)  # epoch 1
    head = [int(next(it)) for _ in range(6)]
    state = loader.state_dict()
    del it
    resumed = StatefulDataLoader(pipeline().as_torch_dataset(), batch_size=None, num_workers=2)
    resumed.load_state_dict(state)
    rest = [int(x) for x in resumed]
    assert head + rest == expected_epoch(ds, 1)
    assert passes(resumed, 1) == [expected_epoch(ds, 2)]


def _closure_pipeline() -> dp.Dataset:
    offset = 1000

    def add(x):  # a closure: the standard pickler cannot send it
        return x + offset

    return dp.range(12).map(add).map(lambda x: x * 2).shuffle(12, seed=1)


def test_the_standard_pickler_sends_lambdas_and_closures():
    import pickle

    ds = _closure_pipeline()
    copy = pickle.loads(pickle.dumps(ds.as_torch_dataset()))  # what spawn's pickler does
    assert [int(x) for x in copy] == [int(x) for x in ds]


# Real spawn/forkserver workers import torch in each worker: tens of seconds on a busy
# 2-core machine, so slow; the pickling they rely on is tested just above.
@pytest.mark.slow
@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_spawn_and_forkserver_loader_workers_take_lambdas_and_closures(context):
    ds = _closure_pipeline()
    loader = DataLoader(
        ds.as_torch_dataset(),
        batch_size=None,
        num_workers=2,
        multiprocessing_context=context,
        persistent_workers=True,
    )
    got = passes(loader, 2)
    assert got == [expected_epoch(ds, 0), expected_epoch(ds, 1)]
    assert sorted(got[0]) == [2 * (x + 1000) for x in range(12)]


@pytest.mark.slow  # new spawned workers each pass
def test_spawned_workers_fresh_each_pass_get_the_next_epoch():
    ds = _closure_pipeline()
    loader = DataLoader(
        ds.as_torch_dataset(), batch_size=None, num_workers=2, multiprocessing_context="spawn"
    )
    assert passes(loader, 2) == [expected_epoch(ds, 0), expected_epoch(ds, 1)]


def test_resume_after_an_ended_epoch_goes_on_with_persistent_workers():
    ds = pipeline()
    loader = StatefulDataLoader(ds.as_torch_dataset(), batch_size=None, num_workers=2)
    passes(loader, 1)  # epoch 0, to its end
    state = loader.state_dict()
    resumed = StatefulDataLoader(
        pipeline().as_torch_dataset(), batch_size=None, num_workers=2, persistent_workers=True
    )
    resumed.load_state_dict(state)
    assert passes(resumed, 2) == [expected_epoch(ds, 1), expected_epoch(ds, 2)]


def test_a_loaded_state_is_resumed_by_one_pass_of_fresh_workers_only():
    ds = pipeline()
    tds = ds.as_torch_dataset()
    [int(x) for x in tds]  # epoch 0 in this process, to its end
    resumed = pipeline().as_torch_dataset()
    resumed.load_state_dict(tds.state_dict())  # the parent's object holds the loaded state
    loader = DataLoader(resumed, batch_size=None, num_workers=2)  # a copy per pass
    assert passes(loader, 2) == [expected_epoch(ds, 1), expected_epoch(ds, 2)]
