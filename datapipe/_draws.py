"""Draws keyed by the element, not by the thread that computes it.

Two consumers share one keying: Philox (a counter-based generator, Salmon et al., "Parallel
random numbers: as easy as 1, 2, 3", SC 2011) under a stage's 128-bit key, with the
element's position in the third counter word, so streams of different elements never
overlap:

* ``element_rng(key, index)``: the ``numpy.random.Generator`` that ``random_map`` hands
  its function (the first two counter words count its draws).
* ``element_draw(seed)``: what a random layer (``preprocessing.base.RandomLayer``) draws
  from when it is called inside a ``map`` or ``random_map`` stage: a 64-bit seed for the
  layer's draws of this element, and the draw number within the element.

While a stage computes a chunk (``executors.apply`` on the consumer, a worker thread or a
worker process, ``_functions.apply_chunk`` for a sequential map, random access's
``get_many``), ``scope(fn, out, first, indices)`` makes the chunk's element positions
visible to the code that ``fn`` calls, on this thread only: the element being computed is
the ``len(out)``-th of the chunk, because each of those loops appends the result of
element ``k`` before it calls ``fn`` on element ``k + 1`` (``list.extend`` of an iterator
appends as it goes). So the position costs nothing per element, only per chunk; a stage
whose function never draws pays one small object per chunk.

The key of a stage (``IterContext.stage_draws``) comes from the pipeline's seed rules:
the op's own ``seed`` (``random_map(seed=...)``), else ``Options.seed`` with the stage's
position among the graph's ``map``/``random_map`` nodes, else that position alone; and
the epoch. A position is the element's index in the stage's input stream (the count of
elements taken, part of the iterator state), mapped through ``OpIterator.index_base`` to
the random-access source when a shard sits below (as ``random_map``'s generators are),
so the draws do not depend on ``num_parallel_calls``, the executor, ``deterministic``,
the sharding, or a resume. ``StageDraws`` is picklable: it travels to worker processes
with the function that carries it (``ReturnsElement.stage_draws``,
``RandomCall.stage_draws``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe.errors import DrawKeyError

_RNG_LOCAL = threading.local()  # one reusable Philox per thread for element_rng
_BITS_LOCAL = threading.local()  # and another for element_draw: never re-keys the first
_SCOPE = threading.local()  # the chunk this thread is computing (``scope``)


def _keyed_philox(local: Any, key: np.ndarray, index: int, word1: int = 0,
                  word3: int = 0) -> np.random.Philox:  # fmt: skip
    """``local``'s Philox re-keyed to ``key`` with counter ``(0, word1, index, word3)``.

    Building a ``Philox`` costs ~6 us; re-keying a per-thread one costs < 1 us, so the
    generator is valid only until the same thread asks ``local`` for the next one.
    """
    state = getattr(local, "state", None)
    if state is None:
        local.bg = np.random.Philox(key=np.zeros(2, dtype=np.uint64))
        state = local.state = local.bg.state
        state["state"]["counter"][:] = 0
        state["buffer_pos"] = 4  # Philox buffers 4 outputs: start with it empty
        state["has_uint32"] = 0
        local.key = None
    if local.key is not key:
        state["state"]["key"][:] = key
        local.key = key
    counter = state["state"]["counter"]
    counter[1], counter[2], counter[3] = word1, index, word3
    local.bg.state = state  # copies the values in: the template stays as set here
    return local.bg


def element_rng(key: np.ndarray, index: int) -> np.random.Generator:
    """The generator of element ``index`` under the 128-bit ``key`` (``random_map``'s):
    Philox with the index in the third counter word (the first two count the draws).
    Valid only until the same thread asks for the next one."""
    return np.random.Generator(_keyed_philox(_RNG_LOCAL, key, index))


class StageDraws:
    """The draw key of one ``map``/``random_map`` stage in one epoch (module docstring).

    Attributes:
        key: the stage's 128-bit Philox key (2 x uint64).
        explicit: the key comes from a seed the user set (``Options.seed`` or the op's
            ``seed``); only then do unseeded layers draw from it (else from torch's
            global generator, as outside a stage).
        stride, offset: stream index -> position in the random-access source
            (``OpIterator.index_base``); (1, 0) when none lies below.

        refusal: why the stage's elements have no identity here (``datapipe._identity``):
            a draw then raises ``DrawKeyError`` with it, unless the element's identity was
            set (``set_identity``: a ``key=`` function). None: positions are identities.
    """

    __slots__ = ("key", "explicit", "stride", "offset", "refusal")

    def __init__(self, key: np.ndarray, explicit: bool, base: tuple[int, int] | None = None,
                 refusal: str | None = None):  # fmt: skip
        self.key, self.explicit, self.refusal = key, explicit, refusal
        self.stride, self.offset = base if base is not None else (1, 0)

    def __getstate__(self) -> tuple:
        return (self.key, self.explicit, self.stride, self.offset, self.refusal)

    def __setstate__(self, state: tuple) -> None:
        self.key, self.explicit, self.stride, self.offset, self.refusal = state


class _Scope:
    """One chunk being computed on this thread (see ``scope``)."""

    __slots__ = ("draws", "out", "first", "indices", "prev", "at", "counts", "ident_at",
                 "ident")  # fmt: skip

    def __init__(self, draws: StageDraws, out: list, first: int,
                 indices: Sequence[int] | None, prev: Any):  # fmt: skip
        self.draws, self.out, self.first, self.indices = draws, out, first, indices
        self.prev = prev
        self.at = -1  # len(out) of the element that ``counts`` belong to
        self.counts: dict = {}  # layer seed -> [64 bits, draws taken] for that element
        self.ident_at = -1  # len(out) of the element whose identity ``ident`` was set
        self.ident = 0


def stage_draws_of(fn: Any) -> StageDraws | None:
    draws = getattr(fn, "stage_draws", None)
    return draws if isinstance(draws, StageDraws) else None


def enter(fn: Any, out: list, first: int = 0,
          indices: Sequence[int] | None = None) -> _Scope | None:  # fmt: skip
    """Open the scope of a chunk that ``fn`` computes into ``out`` (appending in order):
    element ``k`` of the chunk is at stream index ``first + k`` (or ``indices[k]``, random
    access). None (and nothing to close) when ``fn`` carries no ``StageDraws``. Pair it
    with ``leave`` in a ``finally``."""
    draws = stage_draws_of(fn)
    if draws is None:
        return None
    s = _Scope(draws, out, first, indices, getattr(_SCOPE, "scope", None))
    _SCOPE.scope = s
    return s


def leave(s: _Scope | None) -> None:
    """Close ``enter``'s scope (a nested stage's chunk restores the outer one's)."""
    if s is not None:
        _SCOPE.scope = s.prev


def set_identity(value: int) -> None:
    """Key the draws of the element this thread is about to compute in a stage by
    ``value`` (an identity in [0, 2**64): ``datapipe._identity``) instead of its position;
    nothing outside a stage."""
    s = getattr(_SCOPE, "scope", None)
    if s is not None:
        s.ident_at, s.ident = len(s.out), value


def position() -> int | None:
    """The position (module docstring) of the element this thread computes in a stage,
    or None outside one and where the stage's elements have no identity
    (``StageDraws.refusal``)."""
    s = getattr(_SCOPE, "scope", None)
    if s is None:
        return None
    k = len(s.out)
    if s.ident_at == k:  # set by the stage's function wrapper (datapipe._identity)
        return s.ident
    if s.draws.refusal is not None:
        return None
    i = s.first + k if s.indices is None else int(s.indices[k])
    return s.draws.offset + s.draws.stride * i


_MASK64 = (1 << 64) - 1


def element_draw(seed: int | None) -> tuple[int, int] | None:
    """(64-bit seed, draw number) for the next draw of a layer with ``seed`` on the element
    this thread computes in a stage; None outside a stage, and for an unseeded layer in a
    stage whose key is not from a user's seed (``StageDraws.explicit``).

    The 64 bits are Philox's first output under the stage's key with counter
    ``(0, 1 if seed is None else 0, position, seed mod 2**64)``: a pure function of (layer
    seed, stage key, element position). The draw number counts this element's draws by
    layers of that seed (0, 1, ...; unseeded layers share one count), in call order, which
    is fixed within an element.
    """
    s = getattr(_SCOPE, "scope", None)
    if s is None or (seed is None and not s.draws.explicit):
        return None
    k = len(s.out)
    if k != s.at:  # the first draw of this element
        s.at, s.counts = k, {}
    entry = s.counts.get(seed)
    if entry is None:
        word1, word3 = (1, 0) if seed is None else (0, int(seed) & _MASK64)
        pos = position()
        if pos is None:  # no identity: drawing by this worker's position would repeat
            raise DrawKeyError(s.draws.refusal)
        bits = int(_keyed_philox(_BITS_LOCAL, s.draws.key, pos, word1, word3).random_raw())
        entry = s.counts[seed] = [bits, 0]
    number = entry[1]
    entry[1] = number + 1
    return entry[0], number
