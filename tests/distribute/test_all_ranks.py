"""AllRanksState: every rank's position in the one state a trainer saves (issue 32). The
2-process gather itself runs in tests/examples/test_lightning_recipe.py (Lightning DDP)."""

from __future__ import annotations

import pytest
import torch
from torchdata.stateful_dataloader import StatefulDataLoader

import datapipe as dp
from datapipe.distribute.all_ranks import AllRanksState


def pipeline() -> dp.Dataset:
    return dp.range(24).global_shuffle().batch(4).with_options(dp.Options(seed=5))


def on_rank(rank: int) -> dp.Dataset:
    place = dp.DistributeOptions(num_workers=2, worker_index=rank)
    return pipeline().with_options(dp.Options(distribute=place))


def ints(batches) -> list[int]:
    return [int(v) for b in batches for v in b.reshape(-1).tolist()]


def test_one_process_through_a_stateful_dataloader_resumes_exactly():
    loader = StatefulDataLoader(AllRanksState(pipeline()), batch_size=None)
    it = iter(loader)
    head = ints([next(it), next(it)])
    state = loader.state_dict()
    (own,) = state["dataset_state"]["ranks"]
    assert own["epoch"] == 0 and not own["done"] and own["iterator"].dtype == torch.uint8
    rest = ints(it)
    again = StatefulDataLoader(AllRanksState(pipeline()), batch_size=None)
    again.load_state_dict(state)
    assert ints(again) == rest
    assert sorted(head + rest) == list(range(24))
    assert sorted(ints(again)) == list(range(24))  # the next pass: epoch 1, all of it


def test_the_ranks_list_resumes_the_rest_of_the_epoch_once_on_another_number_of_ranks():
    # Two ranks' states, as AllRanksState.state_dict() gathers them, resumed on 1 process.
    seen, states = [], []
    for rank in (0, 1):
        ds = AllRanksState(on_rank(rank))
        it = iter(ds)
        seen += ints([next(it)])
        states.append(ds.state_dict()["ranks"][0])
    resumed = AllRanksState(pipeline())
    resumed.load_state_dict({"ranks": states})
    rest = ints(resumed)
    assert len(seen) == 8 and len(rest) == 16
    assert sorted(seen + rest) == list(range(24))


def test_bad_inputs_are_refused_with_the_fix():
    with pytest.raises(
        TypeError, match="expected a datapipe Dataset or a TorchIterableDataset, got list"
    ):
        AllRanksState([1, 2, 3])
    ds = AllRanksState(pipeline())
    with pytest.raises(
        ValueError, match=r"AllRanksState.load_state_dict: missing keys \['ranks'\]"
    ):
        ds.load_state_dict({"epoch": 0, "done": False, "iterator": None})
    with pytest.raises(ValueError, match="'ranks' must be the non-empty list .* got list"):
        ds.load_state_dict({"ranks": []})
    with pytest.raises(ValueError, match="AllRanksState.load_state_dict: expected the dict"):
        ds.load_state_dict([{"ranks": []}])  # type: ignore[arg-type]


def test_a_loader_worker_process_is_refused_naming_num_workers_0():
    loader = StatefulDataLoader(AllRanksState(pipeline()), batch_size=None, num_workers=1)
    with pytest.raises(RuntimeError, match="called in a DataLoader worker process.*num_workers=0"):
        ints(loader)
