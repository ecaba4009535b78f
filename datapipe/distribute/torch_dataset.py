"""``TorchIterableDataset``: a datapipe ``Dataset`` as a ``torch.utils.data.IterableDataset``.

Each ``__iter__`` (in the main process with ``num_workers=0``, or in each DataLoader
worker) builds the pipeline's iterator for this worker: ranks x loader workers form one
index space and the auto-shard rewrite gives each its own share, so no sharding code and
no ``DistributedSampler`` are needed.
"""

from __future__ import annotations

import multiprocessing.context
import secrets
import sys
from collections.abc import Iterator as PyIterator
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from datapipe import _structure as nest
from datapipe._iterator import check_state_dict
from datapipe.distribute import loader_epochs
from datapipe.distribute.context import accelerate_owner, outer_sharder, resolve_process
from datapipe.distribute.state_io import state_from_bytes, state_to_bytes
from datapipe.errors import AutoShardError
from datapipe.options import DistributeOptions, Options


class TorchIterableDataset(IterableDataset):
    """A torch ``IterableDataset`` over a datapipe ``Dataset`` (``Dataset.as_torch_dataset``).

    Works with ``DataLoader(num_workers=0..N, persistent_workers=..., pin_memory=...)``:
    each loader worker reads a disjoint share (see ``datapipe.distribute.auto_shard`` for
    the policies and ``Options.distribute.uneven`` for even ends). Elements are yielded as
    the pipeline produces them (numpy or torch; a read-only numpy array, as
    ``from_tensor_slices`` and ``cache`` give, as a writable copy); the DataLoader's
    collate turns numpy into tensors. Pass ``batch_size=None`` to the DataLoader when the
    pipeline batches itself.

    Epochs: the k-th pass is epoch ``k`` (``reshuffle_each_iteration`` reshuffles, so each
    epoch has a new order, as tf.data's default), the same order for the same seed on every
    run. This holds without any call in every loader layout: ``num_workers=0`` (the k-th
    ``iter()``), and loader workers, fresh each epoch (``persistent_workers=False``) or
    kept (``True``), under fork, spawn or forkserver, with ``DataLoader`` or
    ``StatefulDataLoader``. A fresh worker cannot count the passes before it, so the
    workers of one pass (they share torch's per-pass base seed, ``get_worker_info().seed -
    id``) agree on its number through a small block of shared memory this object keeps:
    the first pass of a new base seed is the epoch after the last one recorded. (As with
    torch's ``RandomSampler``, re-seeding torch with ``torch.manual_seed`` before each epoch
    gives every pass the same base seed, hence the same epoch and order.) ``set_epoch(e)``
    makes the next pass epoch ``e`` (persistent workers included) and is what
    ``DistributedSampler`` users, Accelerate and Lightning call; a loaded checkpoint carries
    its epoch (``load_state_dict``).

    Checkpoints: ``state_dict()`` / ``load_state_dict()`` save and restore the position
    within the epoch (exactly: elements already yielded are not yielded again). The state
    holds only ints, bools and a ``uint8`` tensor (an ``.npz`` archive of JSON plus numpy
    arrays), so ``torch.load(..., weights_only=True)`` reads it. It describes the iterator
    of *this* process; with ``num_workers > 0`` the iterators live in the loader workers,
    where ``torchdata.stateful_dataloader.StatefulDataLoader`` calls these methods (see
    the README's "Distributed training").

    Elastic resume: ``load_state_dict([sd_0, ..., sd_n-1])`` with the ``state_dict()`` of
    every rank of a run resumes that epoch on this run's ranks, however many there are;
    the rest of the epoch is delivered exactly once across them
    (``datapipe.distribute.elastic``).

    Pickling: torch sends this object to ``spawn`` and ``forkserver`` loader workers with
    the standard pickler; the pipeline inside travels with cloudpickle, so lambdas and
    closures work there as in datapipe's own process workers.

    Raises:
        WorkerContextError: (at ``iter()``) malformed or contradictory worker settings.

    Example:
        >>> import datapipe as dp, torch
        >>> tds = dp.range(6).map(lambda x: x * 10).as_torch_dataset()
        >>> [int(x) for x in torch.utils.data.DataLoader(tds, batch_size=None)]
        [0, 10, 20, 30, 40, 50]
    """

    def __init__(self, dataset: Any):
        super().__init__()
        self.dataset = dataset
        self._epoch_base = 0  # set_epoch's value
        self._local_iters = 0  # iter() calls since set_epoch in this process
        self._iterator: Any = None
        self._epoch: int | None = None
        self._done = False
        self._final_state: Any = None  # the iterator's state when its generator closed
        self._pending: dict | None = None  # loaded state, applied by the next iter()
        self._process: tuple | None = None  # (rank, world, source) seen by the parent
        self._epochs: Any = loader_epochs.new_block()  # the passes of loader workers
        self._owner: str | None = None  # who shards by rank instead of datapipe, if any

    # ---- epochs ------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` for the next ``iter()`` (and ``epoch + k`` for the k-th after it).

        A state loaded with ``load_state_dict`` for another epoch is discarded."""
        self._epoch_base, self._local_iters = int(epoch), 0
        self._owner = self._owner or outer_sharder(4)  # Accelerate's IterableDatasetShard
        if self._epochs is not None and get_worker_info() is None:
            loader_epochs.set_next(self._epochs, int(epoch))
        if self._pending is not None and self._pending["epoch"] != int(epoch):
            self._pending = None

    def _start(self) -> tuple[int, Any]:
        pending, self._pending = self._pending, None
        info = get_worker_info()
        shared = self._epochs if info is not None else None
        if pending is not None and shared is not None:
            # Fresh workers get a copy of the parent's object at every pass, loaded state
            # included: only the first pass resumes it, later passes go on from there.
            if not loader_epochs.claim(shared, info, pending.setdefault("token", _token())):
                pending = None
        if pending is not None and not pending["done"]:
            self._epoch_base, self._local_iters = pending["epoch"], 1
            if shared is not None:
                loader_epochs.record(shared, info, pending["epoch"])
            return pending["epoch"], pending["iterator"]
        if pending is not None:  # the saved epoch had ended: go on with the next one
            self._epoch_base, self._local_iters = pending["epoch"] + 1, 0
            if shared is not None:  # recorded, not set_next: that would erase the others'
                loader_epochs.record(shared, info, pending["epoch"] + 1)
                self._local_iters = 1
                return pending["epoch"] + 1, None
        if shared is not None:  # a loader worker: the pass's number is shared
            epoch = loader_epochs.pass_epoch(shared, info)
            self._epoch_base, self._local_iters = epoch, 1
            return epoch, None
        epoch = self._epoch_base + self._local_iters
        self._local_iters += 1
        return epoch, None

    def __iter__(self) -> PyIterator:
        epoch, state = self._start()
        owner = self._owner or outer_sharder() or accelerate_owner(self)
        if owner is not None:  # another owner shards by rank: datapipe steps aside
            self._owner = owner
            _check_same_stream_on_every_rank(self.dataset, owner)
            p_index, p_count, source = 0, 1, "sampler"
        else:
            p_index, p_count, source = self._process or resolve_process(self.dataset.options)
        # The process part is fixed here (the rank the parent saw, when this is a copy
        # sent to a loader worker); the rewrite multiplies it by the loader workers. A
        # plain process (no context at all) is left alone: nothing to shard or record.
        ds = self.dataset
        if source != "default" or p_count > 1:
            place = DistributeOptions(num_workers=p_count, worker_index=p_index)
            ds = ds.with_options(Options(distribute=place))
        it = ds._build_iterator((epoch,))
        if state is not None:
            it.load_state_dict(state)
        self._iterator, self._epoch, self._done, self._final_state = it, epoch, False, None
        return self._generate(it)

    # ``finalizing`` is bound here: at exit the module's globals (``sys``) may be None.
    def _generate(self, it: Any, finalizing: Any = sys.is_finalizing) -> PyIterator:
        try:
            # Not `yield from`: it would close `it` on GeneratorExit before the position
            # is read below.
            for x in it:  # noqa: UP028
                # read-only arrays (from_tensor_slices, cache) copied: the DataLoader's
                # collate makes tensors of them, and torch has no read-only tensors
                yield nest.writable(x)
            self._done = True
        finally:
            # Kept when done too: an elastic resume needs what every worker consumed. Not
            # at interpreter exit (the collector closes this generator after the modules
            # are torn down: reading the state would import, and no one can read it then).
            if it is self._iterator and not finalizing():
                self._final_state = it.state_dict()
            it.close()

    # ---- length ------------------------------------------------------------------------
    def __len__(self) -> int:
        """What a loader over this dataset really yields, exactly (issue 32).

        Called by a ``DataLoader`` (its ``len()``, which Lightning reads as
        ``num_training_batches`` and progress totals use), the dataset reads the loader's
        ``num_workers``, ``batch_size`` and ``drop_last``. Loader workers split the
        elements before the loader batches them (and a pipeline that batches itself is
        batched per worker share): ``dp.range(100).batch(8)`` over 2 workers yields
        ``2 * 7 = 14`` batches, not 13. The number returned is one that torch's length
        arithmetic (``ceil(n / batch_size)``, or ``n // batch_size`` with ``drop_last``)
        turns into that exact batch count: the element count when it already does, else
        ``batches * batch_size``. Called from anything else (``len(tds)``), it is the number
        of elements ``iter()`` yields in this process: this rank's share (the whole
        stream when Accelerate's ``IterableDatasetShard`` asks, as it shards itself).

        Raises:
            TypeError: the pipeline's cardinality is unknown or infinite (torch's answer for
                an ``IterableDataset`` without a length).

        Example:
            >>> import datapipe as dp, torch
            >>> tds = dp.range(100).batch(8).as_torch_dataset()
            >>> loader = torch.utils.data.DataLoader(tds, batch_size=None, num_workers=2)
            >>> len(tds), len(loader)
            (13, 14)
        """
        loader = _calling_loader()
        owner = self._owner or outer_sharder(4)
        p_index, p_count = (0, 1) if owner else self._process_part()
        workers = 1 if loader is None else max(1, int(loader.num_workers))
        shares = [self._share(p_count * workers, p_index * workers + w) for w in range(workers)]
        total = sum(shares)
        size = None if loader is None else loader.batch_size
        if size is None:
            return total
        drop = bool(loader.drop_last)
        batches = sum(n // size if drop else -(-n // size) for n in shares)
        as_torch = total // size if drop else -(-total // size)
        return total if as_torch == batches else batches * size

    def _process_part(self) -> tuple[int, int]:
        p_index, p_count, _ = self._process or resolve_process(self.dataset.options)
        return p_index, p_count

    def _share(self, count: int, index: int) -> int:
        place = Options(distribute=DistributeOptions(num_workers=count, worker_index=index))
        n = int(self.dataset.with_options(place).cardinality())
        if n < 0:
            what = "infinite" if n == -1 else "unknown"  # INFINITE_CARDINALITY is -1
            raise TypeError(
                f"TorchIterableDataset: the pipeline's length is {what} (cardinality() == "
                f"{n}), so a loader over it has no len(); use assert_cardinality(n) where the "
                "count is known, or take(n)"
            )
        return n

    # ---- checkpoints -------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"epoch": int, "done": bool, "iterator": uint8 tensor | None}``: the position
        after the elements yielded so far in this process (see the class docstring)."""
        if self._pending is not None:
            p = self._pending
            return {"epoch": p["epoch"], "done": p["done"], "iterator": _pack(p["iterator"])}
        if self._iterator is None:
            return {"epoch": self._epoch_base + self._local_iters, "done": False, "iterator": None}
        state = self._final_state
        if state is None:
            state = self._iterator.state_dict()
        return {"epoch": self._epoch, "done": self._done, "iterator": _pack(state)}

    def load_state_dict(self, state_dict: dict[str, Any] | list[dict[str, Any]]) -> None:
        """Resume from ``state_dict()``'s output: the next ``iter()`` continues that epoch
        where it stopped (or starts the following epoch if it had ended), and the ``iter()``
        after it is the following epoch (the state carries the epoch). A list of the
        ``state_dict()`` of every rank of a run resumes on this run's ranks (elastic).

        Raises:
            ValueError: a dict lacks ``epoch``/``done``/``iterator``, an archive is bad, or
                the list mixes epochs.
        """
        if isinstance(state_dict, (list, tuple)):
            self._pending = _load_all(list(state_dict))
            self._pending["token"] = _token()
            return
        _check_keys(state_dict)
        packed = state_dict["iterator"]
        self._pending = {
            "token": _token(),  # which load this is (loader_epochs.claim)
            "epoch": int(state_dict["epoch"]),
            "done": bool(state_dict["done"]),
            "iterator": None if packed is None else _unpack(packed),
        }

    def __getstate__(self) -> dict[str, Any]:
        # Sent to a loader worker (spawn/forkserver): record the rank the parent sees, as a
        # worker process may have no process group of its own. torch pickles with the
        # standard pickler: the pipeline (lambdas, closures) goes as cloudpickle bytes.
        import cloudpickle

        d = dict(self.__dict__)
        d["_iterator"], d["_final_state"] = None, None
        d["dataset"] = cloudpickle.dumps(self.dataset)
        if d["_process"] is None and get_worker_info() is None:
            d["_process"] = resolve_process(self.dataset.options)
            d["_owner"] = self._owner or accelerate_owner(self)
        if multiprocessing.context.get_spawning_popen() is None:
            d["_epochs"] = None  # shared memory goes to a worker being started only
        return d

    def __setstate__(self, state: dict[str, Any]) -> None:
        import cloudpickle

        state = dict(state)
        if isinstance(state["dataset"], bytes):
            state["dataset"] = cloudpickle.loads(state["dataset"])
        self.__dict__.update(state)
        if self._epochs is None and get_worker_info() is None:
            self._epochs = loader_epochs.new_block()  # a copy in a parent: its own passes


def _token() -> int:
    return secrets.randbits(62) + 1


def _calling_loader() -> Any:
    """The ``DataLoader`` whose ``__len__`` called ``len(dataset)``, if that is the caller."""
    frame = sys._getframe(2)
    obj = frame.f_locals.get("self") if frame is not None else None
    return obj if isinstance(obj, DataLoader) else None


def _check_same_stream_on_every_rank(dataset: Any, owner: str) -> None:
    """Accelerate's ``IterableDatasetShard`` has every rank read the whole stream and keep
    its slice of each batch: the ranks' streams must be one stream. A random op without a
    seed (no op seed, no ``Options.seed``) draws its entropy per process, so it is refused."""
    if owner != "accelerate.IterableDatasetShard" or dataset.options.seed is not None:
        return
    from datapipe._context import walk

    for node in walk(dataset):
        if node.uses_randomness and node.op_seed is None:
            raise AutoShardError(
                f"{owner} (Accelerate's prepare with dispatch_batches=False) has every rank "
                "read the whole stream and keep its slice, so every rank must draw the same "
                f"order, but op '{node._name}' has no seed: set one (dp.Options(seed=...) "
                "through with_options, or the op's seed=)"
            )


_WHERE = "TorchIterableDataset.load_state_dict"


def _check_keys(state_dict: Any) -> None:
    check_state_dict(state_dict, ("epoch", "done", "iterator"), _WHERE)


def _load_all(state_dicts: list[dict[str, Any]]) -> dict[str, Any]:
    """The pending resume of a list of every rank's ``state_dict()``."""
    for sd in state_dicts:
        _check_keys(sd)
    epochs = {int(sd["epoch"]) for sd in state_dicts}
    if len(epochs) != 1:
        raise ValueError(
            f"TorchIterableDataset.load_state_dict: the states are of epochs {sorted(epochs)}; "
            "pass the state_dict() of every rank of one checkpoint"
        )
    epoch = epochs.pop()
    if all(sd["done"] for sd in state_dicts):  # that epoch had ended everywhere
        return {"epoch": epoch, "done": True, "iterator": None}
    if any(sd["iterator"] is None for sd in state_dicts):
        raise ValueError(
            "TorchIterableDataset.load_state_dict: a state has no iterator position (saved "
            "before its first iter(), or by an older version); resume on the same ranks"
        )
    return {
        "epoch": epoch,
        "done": False,
        "iterator": [_unpack(sd["iterator"]) for sd in state_dicts],
    }


def _pack(state: Any) -> Any:
    if state is None:
        return None
    if isinstance(state, list):  # an elastic resume not yet started: every rank's state
        raise ValueError(
            "TorchIterableDataset.state_dict: a list of states was loaded and no iter() has "
            "run since; iterate once, or save the list you loaded"
        )
    return torch.frombuffer(bytearray(state_to_bytes(state)), dtype=torch.uint8)


def _unpack(packed: Any) -> Any:
    if isinstance(packed, torch.Tensor) and packed.dtype == torch.uint8 and packed.ndim == 1:
        data = packed.detach().cpu().numpy().tobytes()
    elif isinstance(packed, (bytes, bytearray, memoryview)):
        data = bytes(packed)
    else:
        what = type(packed).__name__
        if isinstance(packed, torch.Tensor):
            what = f"a {packed.dtype} tensor of shape {tuple(packed.shape)}"
        raise ValueError(
            f"{_WHERE}: the 'iterator' entry must be the 1-D uint8 tensor (or bytes) that "
            f"state_dict() wrote, or None; got {what}"
        )
    return state_from_bytes(data, "the 'iterator' entry")
