"""The identity of an element: what the draws of a ``map``/``random_map`` stage are keyed by.

The rule (docs/architecture.md, "Draws in a stage"), in order:

1. an explicit key: ``map(..., key=f)`` / ``random_map(..., key=f)``: ``f(element)``
   (called as ``map_func`` is: a plain tuple unpacked), an int (taken modulo ``2**64``),
   ``str`` or ``bytes`` (hashed);
2. the element's index in the random-access source below the stage, through ``shard``,
   ``skip``, ``take``, ``map`` and auto-sharding's index shard points
   (``OpIterator.index_base``, or per chunk ``last_ids``);
3. an identity *carried* from below: a buffer ``shuffle``, a streaming ``shard``,
   auto-sharding's shard points and ``map``/``random_map`` stages pass on the identity of
   each element they deliver (``last_ids``): in particular a shuffle passes on the
   identity its input gave the element, so the key is the element's *pre-shuffle*
   identity;
4. where nothing of that is known, the element's position in its stream, when nothing
   below that stream is sharded (no ``shard``, no shard point): that stream is the same
   on every worker, so the position is its position in the unsharded pipeline.

A ``batch`` (and a parallel one) takes its first element's identity; ``prefetch`` passes
them on. Where none applies (a stream produced above a shard, e.g. a ``filter`` or
``interleave`` of a rank's share, files split among workers by auto-sharding's FILE
policy), the elements have
no identity on this worker: a draw then raises ``DrawKeyError`` naming ``key=`` rather
than repeating another worker's draws.

Two workers never share an identity (the shards partition the elements and the
identities come from below the sharding), a worker's identity of an element is the one
the single-process pipeline gives it, and a resume on another layout keeps it.

An iterator that carries identities has ``last_ids()``: the identities (int64 array) of
the chunk its last ``next_chunk`` returned, or None; ``carries_ids()`` says whether it
gives them. Its consumer asks right after ``next_chunk``, on the same thread.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from datapipe._draws import _SCOPE, set_identity
from datapipe._functions import ReturnsElement, call
from datapipe._iterator import OpIterator

_MASK64 = (1 << 64) - 1


def identity_value(value: Any) -> int:
    """A ``key=`` function's result as an identity in [0, 2**64): an int modulo 2**64, a
    ``str`` or ``bytes`` hashed (BLAKE2b, 8 bytes).

    Raises:
        TypeError: anything else (names the type).
    """
    if isinstance(value, str):
        value = value.encode("utf-8")
    if isinstance(value, bytes):
        return int.from_bytes(hashlib.blake2b(value, digest_size=8).digest(), "little")
    try:
        return operator.index(value) & _MASK64
    except TypeError:
        if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
            return int(value) & _MASK64
        raise TypeError(
            f"key= must return an int, str or bytes, got {type(value).__name__}"
        ) from None


def sharded_below(node: Any) -> bool:
    """Whether ``node``'s subtree (``node`` included) shards its data: a ``shard``, an
    auto-sharding shard point, or a ``distribute`` (the tf.data service splits the data)."""
    from datapipe._context import walk
    from datapipe.distribute.shard_point import _Cut
    from datapipe.ops.shard import ShardDataset

    for n in walk(node):
        if isinstance(n, (ShardDataset, _Cut)) or getattr(n, "_name", None) == "distribute":
            return True
    return False


def tracked(ctx: Any) -> bool:
    """Whether the pipeline has a ``map``/``random_map`` stage whose draws could use
    identities: only then do ``shuffle``, ``batch``, ``prefetch`` and ``cache`` carry
    them (W3's ``shuffle -> batch`` pays nothing)."""
    return bool(getattr(ctx, "stage_positions", True))


def identity_base_of(it: Any) -> tuple[int, int] | None:
    """``(stride, offset)``: the identity of ``it``'s k-th element is ``offset + stride *
    k``; an iterator's ``identity_base()`` where it has one (``batch``: its first
    element's; a stage passes its input's on), else its ``index_base()``."""
    f = getattr(it, "identity_base", None)
    return f() if f is not None else it.index_base()


def carries_ids(it: Any) -> bool:
    f = getattr(it, "carries_ids", None)
    return bool(f is not None and f())


def has_identity(it: OpIterator, global_stream: bool) -> bool:
    """Whether ``chunk_ids`` gives identities for ``it``'s chunks."""
    return identity_base_of(it) is not None or carries_ids(it) or global_stream


def chunk_ids(it: OpIterator, first: int, n: int, global_stream: bool) -> np.ndarray | None:
    """Identities of the ``n`` elements ``it.next_chunk`` just returned, the first of them
    at position ``first`` of its stream (rules 2-4 of the module docstring), or None."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if carries_ids(it):
        ids = it.last_ids()  # type: ignore[attr-defined]
        if ids is not None and len(ids) == n:
            return ids
        return None
    base = identity_base_of(it)
    if base is not None:
        stride, offset = base
        return np.arange(first, first + n, dtype=np.int64) * stride + offset
    if global_stream:
        return np.arange(first, first + n, dtype=np.int64)
    return None


def refusal(op: str) -> str:
    """The message of a draw in ``op``'s stage whose elements have no identity."""
    return (
        f"{op}: a random layer drew in this stage, but its elements have no identity on "
        "this worker: its input is produced above a shard (a shard(), auto-sharding's "
        "shard point, or files split among workers) by an op that does not carry the "
        "identity (filter, interleave, flat_map, padded_batch, ...), so drawing by the position "
        "on this worker would repeat the draws of the other ranks or DataLoader workers. "
        "Pass key= to this map (a function of the element giving a unique int, str or "
        "bytes, e.g. a file name or id), move the random layers into a map below that "
        "op, or shard after it"
    )


def draw_plan(node: Any, inner: OpIterator, key: Callable | None) -> tuple[str, Any, Any]:
    """How ``node``'s stage (a ``map``/``random_map`` over ``inner``) keys its draws:
    ``(mode, base, refusal)``, mode one of ``"key"`` (the user's ``key=``), ``"base"``
    (positions through ``base``: ``index_base``, or None for the stream's own positions),
    ``"pairs"`` (identities carried by ``inner``: ``IdentifiedIterator``) and
    ``"refuse"`` (``refusal``: the message a draw raises)."""
    if key is not None:
        return "key", None, None
    base = identity_base_of(inner)
    if base is not None:
        return "base", base, None
    if carries_ids(inner):
        return "pairs", None, None
    if not sharded_below(node._inputs[0]):
        return "base", None, None
    return "refuse", None, refusal(node._name)


def access_plan(node: Any, inner: Any) -> tuple[Any, Any, Any]:
    """``draw_plan`` for random access over the access object ``inner``: ``(base,
    identities, refusal)``; ``identities(indices, epoch)`` where the source indices are
    not linear in the requested ones (an auto-sharding share after an elastic resume)."""
    base = getattr(inner, "index_base", None)
    ids = getattr(inner, "identities", None)
    if base is not None or ids is not None or not sharded_below(node._inputs[0]):
        return base, ids, None
    return None, None, refusal(node._name)


LOST = (
    "a random layer drew in this stage, but the identities of its elements were not in "
    "the checkpoint it resumed from (saved by an earlier version): drawing by the "
    "position would differ from an uninterrupted run. Resume from the epoch's start, or "
    "pass key= to this map"
)


class IdentifiedIterator(OpIterator):
    """``(identity, element)`` pairs of ``inner``'s elements (a stage's input whose
    identities are not a linear function of the position): the stage's function
    (``ByIdentity``) keys its element's draws by the identity and returns
    ``(identity, result)``, and ``Unpaired`` above the stage takes the pairs apart, so
    the identity travels with the element through any executor, out-of-order delivery
    and checkpoint (a stage's stored elements are pairs)."""

    def __init__(self, inner: OpIterator, op: str):
        super().__init__([inner])
        self.inner, self.op_name = inner, op

    def next_chunk(self, n: int) -> list:
        chunk = self.inner.next_chunk(n)
        # ``inner`` carries identities (``draw_plan`` chose pairs for that), so no
        # position is needed: the state stays the input's own (below)
        ids = chunk_ids(self.inner, 0, len(chunk), False)
        if ids is None:  # lost (a state saved without them): a draw refuses (LOST)
            return [(None, x) for x in chunk]
        return list(zip(ids.tolist(), chunk))

    def index_base(self) -> tuple[int, int] | None:
        return None  # the identities are in the pairs

    # The state is the input's: a chain built with or without pairs (an elastic resume
    # may turn an arithmetic share into one that is not) restores the other's state.
    def get_state(self) -> dict:
        return self.inner.get_state()

    def set_state(self, state: dict) -> None:
        self.inner.set_state(state)


class ByIdentity:
    """A stage's function over ``(identity, element)`` pairs: ``fn(element)`` with the
    element's draws keyed by ``identity``, returning ``(identity, result)``. With ``key``
    (the user's ``key=``): called with the element itself, keyed by ``key(element)``,
    returning the result only. ``indexed``: ``fn`` is a ``random_map``'s ``RandomCall``,
    called ``fn(identity, element)`` (its generator keyed by the identity too). Carries
    ``fn``'s ``stage_draws`` (what opens the draw scope); picklable when ``fn`` is."""

    __slots__ = ("fn", "key", "indexed", "stage_draws", "raw")

    def __init__(self, fn: Callable, key: Callable | None = None, indexed: bool = False):
        self.fn, self.key, self.indexed = fn, key, indexed
        self.stage_draws = getattr(fn, "stage_draws", None)
        # a map's own function, called without ReturnsElement's and ``call``'s frames (a
        # Python frame costs more than the rest of a cheap element's step); not when the
        # function must get writable copies of read-only views (ReturnsElement.copies,
        # D-TF-28): those are made in ReturnsElement's call
        self.raw = fn.fn if type(fn) is ReturnsElement and not fn.copies else None

    def __call__(self, *args: Any) -> Any:
        if self.indexed:  # random_map's lanes call fn(stream index, element)
            args = args[1:]
        # the element as it came (a stage's loop unpacks a plain tuple into arguments)
        element = args[0] if len(args) == 1 else args
        if self.key is not None:
            ident = identity_value(call(self.key, element))
            set_identity(ident)
            return self.fn(ident, element) if self.indexed else self.fn(*args)
        ident, element = element
        s = getattr(_SCOPE, "scope", None)  # set_identity, inline (once per element)
        if s is not None and ident is not None:  # None: a draw refuses (LOST)
            s.ident_at, s.ident = len(s.out), ident
        if self.indexed:
            return (ident, self.fn(ident, element))
        raw = self.raw
        if raw is None:
            return (ident, call(self.fn, element))
        out = raw(*element) if type(element) is tuple else raw(element)
        return (ident, tuple(out) if isinstance(out, list) else out)  # ReturnsElement's rule


class Unpaired(OpIterator):
    """The results of a stage over ``IdentifiedIterator`` pairs, without the identities,
    which ``last_ids`` gives the consumer above (rule 3)."""

    def __init__(self, inner: OpIterator, op: str):
        super().__init__([inner])
        self.inner, self.op_name = inner, op
        self._ids: np.ndarray | None = None

    def next_chunk(self, n: int) -> list:
        self._ids = None
        pairs = self.inner.next_chunk(n)
        ids = [p[0] for p in pairs]
        self._ids = None if None in ids else np.asarray(ids, dtype=np.int64)
        return [p[1] for p in pairs]

    def carries_ids(self) -> bool:
        return True

    def last_ids(self) -> np.ndarray | None:
        return self._ids

    def index_base(self) -> tuple[int, int] | None:
        return None

    def identity_base(self) -> tuple[int, int] | None:
        return None  # the identities are per chunk (last_ids)

    def get_state(self) -> dict:
        return self.inner.get_state()

    def set_state(self, state: dict) -> None:
        self.inner.set_state(state)

    def __getattr__(self, name: str) -> Any:
        # the stage's own attributes (its statistics, tuner hooks) stay reachable
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
