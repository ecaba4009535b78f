"""Exact resume with DataLoader workers: ``as_torch_dataset()`` under torchdata's
``StatefulDataLoader`` (optional extra ``datapipe-torch[torchdata]``), which saves and restores
each loader worker's ``state_dict()``."""

from __future__ import annotations

import pytest

import datapipe as dp

stateful = pytest.importorskip("torchdata.stateful_dataloader")

pytestmark = pytest.mark.usefixtures("clean_env")


def make():
    return dp.range(40).shuffle(8, seed=1).map(lambda x: x * 3).as_torch_dataset()


@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")
@pytest.mark.parametrize("num_workers", [0, 2])
def test_stateful_dataloader_resumes_exactly(num_workers):
    loader = stateful.StatefulDataLoader(make(), batch_size=None, num_workers=num_workers)
    it = iter(loader)
    head = [int(next(it)) for _ in range(7)]
    state = loader.state_dict()
    rest = [int(x) for x in it]
    assert sorted(head + rest) == [3 * x for x in range(40)]  # the loader workers' shares
    again = stateful.StatefulDataLoader(make(), batch_size=None, num_workers=num_workers)
    again.load_state_dict(state)
    assert [int(x) for x in again] == rest  # the same elements, in the same order
