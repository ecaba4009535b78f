"""Epoch numbers for the passes of torch ``DataLoader`` workers, with no ``set_epoch`` call.

A loader worker gets a copy of the dataset: forked, or pickled by the parent, at the start
of every pass when ``persistent_workers=False``. The copy cannot count the passes before
it, and the parent is never told that a pass starts (torch calls nothing on an
``IterableDataset`` in the parent). What the workers of one pass do share is torch's base
seed for that pass (``get_worker_info().seed - id``: drawn afresh for each pass, the same
for a persistent worker's later passes). So the dataset keeps a small block of shared
memory (``multiprocessing.RawArray``: inherited by fork, sent to spawn and forkserver
workers with the process's arguments) in which each worker records, in its own slot, the
base seed and epoch of its last pass:

- a slot holding this worker's base seed: a later pass of a persistent worker, the next
  epoch after the slot's;
- otherwise a new pass of fresh workers: one after the highest epoch recorded by another
  pass (a slot of another base seed), or the epoch ``set_epoch`` left (0 at first).

Each worker writes only its own slot, so no lock is needed: the workers of one pass skip
each other's slots (same base seed) and all read the same earlier passes.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

# slot 0: the epoch set_epoch asks for; then (base seed, epoch + 1) per loader worker id;
# then (token, base seed) of the last loaded state a pass resumed (claim)
_WORKERS = 512
_TOKEN = 1 + 2 * _WORKERS
_MASK = (1 << 64) - 1


def new_block() -> Any:
    """A zeroed shared block for one dataset object (created in the parent)."""
    return multiprocessing.RawArray("q", _TOKEN + 2)


def claim(block: Any, info: Any, token: int) -> bool:
    """May this worker's pass resume the loaded state ``token``? Fresh loader workers get a
    copy of the parent's object, loaded state included, at every pass: only the workers of
    the first pass that sees it resume it (they share a base seed); later passes do not,
    or each epoch would replay the resumed one."""
    base = _signed(int(info.seed) - int(info.id))
    if block[_TOKEN] == token and block[_TOKEN + 1] != base:
        return False
    block[_TOKEN], block[_TOKEN + 1] = token, base
    return True


def _signed(x: int) -> int:
    x &= _MASK
    return x - (1 << 64) if x >= 1 << 63 else x


def set_next(block: Any, epoch: int) -> None:
    """``set_epoch``: forget the passes recorded so far; the next pass is ``epoch``."""
    for i in range(1, _TOKEN):
        block[i] = 0
    block[0] = int(epoch)


def pass_epoch(block: Any, info: Any) -> int:
    """The epoch of the pass this loader worker (``get_worker_info()``) is starting, recorded
    in its slot. Called once per pass per worker (torch's fetcher calls ``iter()`` once)."""
    worker = int(info.id)
    if worker >= _WORKERS:
        raise RuntimeError(
            f"TorchIterableDataset: loader worker {worker}: at most {_WORKERS} loader workers "
            "count epochs by themselves; call set_epoch(epoch) before each epoch instead"
        )
    base = _signed(int(info.seed) - worker)
    mine = 1 + 2 * worker
    if block[mine + 1] and block[mine] == base:  # a persistent worker's next pass
        epoch = block[mine + 1]  # stored epoch + 1
    else:
        others = [
            block[1 + 2 * w + 1] - 1
            for w in range(_WORKERS)
            if block[1 + 2 * w + 1] and block[1 + 2 * w] != base
        ]
        epoch = max(others) + 1 if others else block[0]
    record(block, info, epoch)
    return int(epoch)


def record(block: Any, info: Any, epoch: int) -> None:
    """Record that this worker's pass is ``epoch`` (a resumed pass sets it from its state)."""
    mine = 1 + 2 * int(info.id)
    if int(info.id) < _WORKERS:
        block[mine] = _signed(int(info.seed) - int(info.id))
        block[mine + 1] = int(epoch) + 1
