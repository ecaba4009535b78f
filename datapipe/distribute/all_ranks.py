"""``AllRanksState``: a torch dataset whose ``state_dict()`` holds the position of every rank.

Lightning writes a checkpoint from rank 0 alone, with rank 0's loader state in it, and
Accelerate's ``save_state`` writes every rank's loader state to one and the same file
(``dl_state_dict.bin``). A per-rank position (what ``TorchIterableDataset.state_dict()``
gives) cannot survive either: on resume every rank would get one rank's position, which
datapipe refuses ("the state was saved by worker 0 of 2 but this iterator is worker 1 of
2"). This wrapper gathers the positions of all ranks at ``state_dict()`` time (one
``all_gather_object`` over the live process group), so the one state that gets saved is
complete, and ``load_state_dict`` hands the list to ``TorchIterableDataset``'s elastic
resume: the rest of the epoch exactly once across the ranks, on the same number of ranks
or another one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch.distributed as dist
from torch.utils.data import IterableDataset, get_worker_info

from datapipe._iterator import check_state_dict
from datapipe.distribute.torch_dataset import TorchIterableDataset

_WHERE = "AllRanksState"


class AllRanksState(IterableDataset):
    """A ``TorchIterableDataset`` (``Dataset.as_torch_dataset()``) whose checkpoint state
    holds every rank's position, for trainers that save one state for all ranks.

    Iteration, ``len()`` and ``set_epoch`` are the wrapped dataset's. ``state_dict()`` is
    ``{"ranks": [state_0, ..., state_n-1]}``, the wrapped dataset's ``state_dict()`` on
    each rank of the live ``torch.distributed`` process group (one rank's own state without
    one), in rank order; ``load_state_dict`` resumes from it on any number of ranks
    (``TorchIterableDataset.load_state_dict`` with a list: elastic resume).

    ``state_dict()`` is a collective: every rank calls it at the same point, as Lightning's
    checkpointing (``Trainer.save_checkpoint``, ``ModelCheckpoint``) and Accelerate's
    prepared loaders (``use_stateful_dataloader=True``) do. Use it with
    ``DataLoader``/``StatefulDataLoader(num_workers=0)``: the pipeline runs its own
    parallel stages, and a loader worker process holds no process group to gather over.

    Anchors: Lightning's ``_Stateful`` loader protocol (``state_dict`` /
    ``load_state_dict``, saved in the fit loop's ``combined_loader`` state) and torchdata's
    ``StatefulDataLoader``, which calls these methods of its dataset.

    Args:
        dataset: a datapipe ``Dataset`` (wrapped with ``as_torch_dataset()``) or a
            ``TorchIterableDataset``.

    Raises:
        TypeError: ``dataset`` is neither.
        RuntimeError: (``state_dict``) called in a DataLoader worker process.
        ValueError: (``load_state_dict``) a state that is not ``{"ranks": [...]}`` of
            ``TorchIterableDataset`` states.

    Example:
        >>> import datapipe as dp
        >>> from datapipe.distribute import AllRanksState
        >>> ds = AllRanksState(dp.range(6).batch(2))
        >>> it = iter(ds)
        >>> [int(x) for x in next(it)]
        [0, 1]
        >>> state = ds.state_dict()  # one process: one rank's position in the list
        >>> len(state["ranks"]), state["ranks"][0]["epoch"]
        (1, 0)
        >>> again = AllRanksState(dp.range(6).batch(2))
        >>> again.load_state_dict(state)
        >>> [[int(x) for x in b] for b in again]
        [[2, 3], [4, 5]]
    """

    def __init__(self, dataset: Any):
        super().__init__()
        if not isinstance(dataset, TorchIterableDataset):
            if not hasattr(dataset, "as_torch_dataset"):
                raise TypeError(
                    f"{_WHERE}: expected a datapipe Dataset or a TorchIterableDataset, got "
                    f"{type(dataset).__name__}"
                )
            dataset = dataset.as_torch_dataset()
        self.dataset: TorchIterableDataset = dataset

    def __iter__(self) -> Iterator[Any]:
        return iter(self.dataset)

    def __len__(self) -> int:
        # Asked through this wrapper, the wrapped dataset sees no DataLoader as its caller:
        # its len is the elements this process yields (TypeError where the count is unknown,
        # torch's rule). With num_workers=0 the loader's own arithmetic on it (ceil(n / b),
        # or n // b with drop_last) is then the batches it really yields.
        return len(self.dataset)

    def set_epoch(self, epoch: int) -> None:
        """``TorchIterableDataset.set_epoch``."""
        self.dataset.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """``{"ranks": [...]}``: every rank's position (a collective; see the class doc)."""
        if get_worker_info() is not None:
            raise RuntimeError(
                f"{_WHERE}.state_dict: called in a DataLoader worker process, which holds no "
                "process group to gather the ranks' positions over; use num_workers=0 (the "
                "pipeline's own num_parallel_calls and prefetch do the parallel work)"
            )
        own = self.dataset.state_dict()
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return {"ranks": [own]}
        states: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(states, own)
        return {"ranks": states}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume from ``state_dict()``'s output, on any number of ranks.

        Raises:
            ValueError: not ``{"ranks": [state, ...]}``, or a state
                ``TorchIterableDataset.load_state_dict`` refuses.
        """
        check_state_dict(state_dict, ("ranks",), f"{_WHERE}.load_state_dict")
        ranks = state_dict["ranks"]
        if not isinstance(ranks, (list, tuple)) or not ranks:
            raise ValueError(
                f"{_WHERE}.load_state_dict: 'ranks' must be the non-empty list of every "
                f"rank's state that state_dict() wrote, got {type(ranks).__name__}"
            )
        self.dataset.load_state_dict(list(ranks) if len(ranks) > 1 else ranks[0])
