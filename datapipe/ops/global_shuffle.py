"""``global_shuffle``: a uniform-looking permutation of a random-access dataset, with no
buffer and an iterator state of one integer (tf.data's ``global_shuffle``, Grain's
``shuffle`` of map-style datasets)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe._validate import check_bool, check_seed
from datapipe.dataset_ops import Dataset, RandomAccessUnaryDataset
from datapipe.errors import RandomAccessError

_ROUNDS = 6  # Luby-Rackoff: 4 rounds already give a pseudorandom permutation
_M1 = np.uint64(0xBF58476D1CE4E5B9)  # splitmix64's multipliers
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a cheap, well-mixing bijection of uint64 (wraps mod 2**64)."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


class FeistelPermutation:
    """A keyed bijection of ``[0, n)`` in O(1) memory.

    A balanced Feistel network permutes ``[0, 4**h)`` (two halves of ``h`` bits, the
    smallest ``4**h >= n``); *cycle walking* re-applies it to values that land in
    ``[n, 4**h)`` until they fall in ``[0, n)``, which keeps it a bijection of ``[0, n)``
    (Black & Rogaway, "Ciphers with arbitrary finite domains", 2002). Since
    ``4**h < 4 n``, fewer than 4 walks are needed on average.

    Args:
        n: domain size.
        keys: ``_ROUNDS`` uint64 round keys.
    """

    def __init__(self, n: int, keys: np.ndarray):
        self.n = int(n)
        bits = max(1, (max(self.n - 1, 1).bit_length() + 1) // 2)
        self.half = np.uint64(bits)
        self.mask = np.uint64((1 << bits) - 1)
        self.keys = np.asarray(keys, dtype=np.uint64)

    def _once(self, x: np.ndarray) -> np.ndarray:
        left, right = x >> self.half, x & self.mask
        for k in self.keys:
            left, right = right, left ^ (_mix(right ^ k) & self.mask)
        return (left << self.half) | right

    def __call__(self, indices: np.ndarray) -> np.ndarray:
        x = self._once(np.asarray(indices, dtype=np.uint64))
        out_of_range = np.flatnonzero(x >= self.n)
        while out_of_range.size:  # cycle walking
            x[out_of_range] = self._once(x[out_of_range])
            out_of_range = out_of_range[x[out_of_range] >= self.n]
        return x.astype(np.int64)


class GlobalShuffleDataset(RandomAccessUnaryDataset):
    """The input's elements in a pseudorandom order over the whole dataset.

    Output position ``k`` reads input index ``perm[k]``, where ``perm`` is a keyed
    bijection of ``[0, n)`` (``FeistelPermutation``) derived from (seed, epoch): no buffer,
    perfect mixing of distant elements, and an iterator state of one integer. Elements are
    fetched in chunks through the input's random access.

    Args:
        seed: op seed; default derives from ``Options.seed`` and the op's position.
        reshuffle_each_iteration: a new permutation per epoch (each ``iter()`` of the same
            dataset object, each ``repeat`` pass), reproducible from the seed; with False
            every epoch has the same order.

    Raises:
        RandomAccessError: at construction, the input chain has no random access; the
            message names the op that broke it (e.g. ``filter``) and suggests
            ``shuffle(buffer_size)``.

    Keeps random access (so ``map``, ``batch``, ``take``, ``skip``, ``shard``, ``zip`` and
    finite ``repeat`` after it do too).

    Example:
        >>> import datapipe as dp
        >>> ds = dp.range(8).global_shuffle(seed=3)
        >>> sorted(int(x) for x in ds)
        [0, 1, 2, 3, 4, 5, 6, 7]
        >>> [int(x) for x in ds] != [int(x) for x in ds]  # a new order per iteration
        True
    """

    _name = "global_shuffle"
    commutes_with_shard = True
    uses_randomness = True

    def __init__(
        self, input_ds: Dataset, seed: int | None = None, reshuffle_each_iteration: bool = True
    ):
        super().__init__(input_ds)
        breaker = input_ds._random_access_breaker()
        if breaker is not None:
            raise RandomAccessError(
                f"global_shuffle: the input lost random access at op {breaker!r}; use "
                f"shuffle(buffer_size) or move global_shuffle before {breaker!r}"
            )
        self._seed = check_seed("global_shuffle", seed)
        self._reshuffle = check_bool(
            "global_shuffle", "reshuffle_each_iteration", reshuffle_each_iteration
        )

    def _make_random_access(self, ctx):
        return _ShuffleAccess(self, ctx, self._inputs[0]._make_random_access(ctx))

    def _make_iterator(self, ctx, epoch):
        return self._ra_iterator(ctx, epoch)


class _ShuffleAccess:
    """Permuted reads. Sequential reads (the common case) come in small contiguous ranges,
    and each Feistel evaluation costs a few dozen numpy calls whatever the batch size, so
    the permutation is computed for aligned blocks of ``_BLOCK`` positions and the last
    block kept: O(1) memory in ``n``, and nothing that the iterator state must hold."""

    _BLOCK = 4096

    def __init__(self, node: GlobalShuffleDataset, ctx: Any, inner: Any):
        self.node, self.ctx, self.inner = node, ctx, inner
        self.n = len(inner)
        self._perms: dict[tuple, FeistelPermutation] = {}
        self._block: tuple | None = None  # (epoch key, block start, permuted positions)

    def __len__(self) -> int:
        return self.n

    def _perm(self, key: tuple) -> FeistelPermutation:
        perm = self._perms.get(key)
        if perm is None:
            seeds = self.ctx.seed_sequence(self.node, key)
            perm = FeistelPermutation(self.n, seeds.generate_state(_ROUNDS, np.uint64))
            if len(self._perms) > 8:  # keys of finished epochs (repeat passes)
                self._perms.clear()
            self._perms[key] = perm
        return perm

    def _permuted(self, indices: Sequence[int], key: tuple) -> list:
        b = self._BLOCK
        if isinstance(indices, range) and indices.step == 1:
            start = indices.start - indices.start % b
            if indices.stop <= start + b:  # within one block: serve from the cache
                cached = self._block
                if cached is None or cached[0] != key or cached[1] != start:
                    block = range(start, min(start + b, self.n))
                    cached = (key, start, self._perm(key)(np.arange(block.start, block.stop)))
                    self._block = cached
                return cached[2][indices.start - start : indices.stop - start].tolist()
        return self._perm(key)(np.asarray(indices, dtype=np.int64)).tolist()

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        if not len(indices):
            return []
        lo, hi = min(indices), max(indices)
        if lo < 0 or hi >= self.n:
            raise IndexError(f"global_shuffle: index out of range for {self.n} elements")
        key = tuple(epoch) if self.node._reshuffle else ()
        return self.inner.get_many(self._permuted(indices, key), epoch)
