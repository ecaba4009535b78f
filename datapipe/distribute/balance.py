"""Balanced division of an elastic resume: the new workers' remaining shares even out.

An old worker's state carries elements read ahead of its checkpoint, of two kinds:

- *held* inside its ops (a shuffle buffer, a partial batch, a parallel map's chunks): only
  the new worker that restores that state can deliver them, so they stay with it;
- *computed ahead* by its public iterator (``pending``: up to a chunk of finished output
  elements, often tens of batches): plain elements, which any new worker can deliver.

The division (``divide``) fills the new workers up to one level, the way water fills
vessels of different heights: what the states hold is the vessels' floors; the computed
elements and the unread rest of the pool (``remainder``) are the water. A worker that
carries nothing gets the rest first; computed elements move from workers that carry more
than the level to those below it. The new workers' remaining shares then differ by at most
two output elements (two batches): one for rounding to whole elements, one for a partial
batch. Only when the held elements alone exceed the level (the rest is too small, near an
epoch's end) can the shares differ more.

Units. Held elements and the rest are counted in pool positions (what a shard point
reads), computed elements in output elements. ``pool_per_element`` converts: the pool's
size over the pipeline's cardinality (``batch(32)``: 32 positions per batch), or, when a
count is unknown (``filter``), what the states took over what they produced. A state's
held count is the positions its shard point took less those of the elements its chain
produced (``state["produced"]``, kept by the public iterator).

Layout of the rest (``level_shares``): worker ``p``'s count ``q_p`` is read as a sequence of
levels, each a ``Split`` of the part of the base set past the levels before it, strided
over the workers that still need more -- level 1 over all ``M`` workers (``Split(p, M,
min q)``, the layout a later resume's accounting starts from), level 2 over those with
more, and so on. Every position of the rest is read by one worker, and the positions in
use stay close to ascending, so a stream pool reads forward.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from datapipe.distribute.share import Base, Pad, Segment, Share, Split


@dataclass
class Carried:
    """What one old worker's state carries (all its chains: drained ones and its own)."""

    held: float  # pool positions inside the ops
    pending: list[tuple[int, int]] = field(default_factory=list)  # (chain, index) computed


def _chains(state: dict) -> list[dict]:
    """The state's chains in the order they deliver: drained ones, then its own."""
    return [*state.get("drains", []), state]


def carried(state: dict, per_element: float) -> Carried:
    """``state``'s held positions (one shard point) and computed elements."""
    held, pending = 0.0, []
    for j, chain in enumerate(_chains(state)):
        taken = chain["cuts"][0].get("taken") or 0
        held += max(0.0, float(taken) - per_element * int(chain["produced"]))
        pending += [(j, i) for i in range(len(chain.get("pending", [])))]
    return Carried(held, pending)


def pool_per_element(pool: int | None, outputs: int | None, states: list[dict]) -> float:
    """Pool positions per output element: ``pool / outputs`` when both counts are known,
    else the states' taken over produced (1 when they produced nothing)."""
    if pool is not None and outputs is not None and pool > 0 and outputs > 0:
        return pool / outputs
    taken = produced = 0
    for state in states:
        for chain in _chains(state):
            taken += int(chain["cuts"][0].get("taken") or 0)
            produced += int(chain["produced"])
    return taken / produced if produced > 0 and taken > 0 else 1.0


def balances(states: list[dict], kinds: Sequence[str]) -> bool:
    """Whether the division applies: one shard point over elements (not file units), and
    every chain of every state counts what it produced (a state of an older version does
    not: its rest is split evenly, as before)."""
    if len(kinds) != 1 or kinds[0] not in ("index", "stream"):
        return False
    return all(
        "produced" in chain and len(chain.get("cuts", [])) == 1
        for state in states
        for chain in _chains(state)
    )


@dataclass
class Division:
    """Worker ``p`` reads ``counts[p]`` positions of the rest, and delivers the computed
    elements ``(old worker, chain, index)`` that ``owner`` maps to it."""

    counts: list[int]
    owner: dict[tuple[int, int, int], int]
    totals: list[float]  # each worker's estimated remaining positions


def divide(
    held: list[float],
    pending: list[list[tuple[int, int, int]]],
    rest: int,
    per_element: float,
    uneven: str,
) -> Division:
    """Fill the workers to one level (see the module docstring). ``held[p]``: positions
    held by the states worker ``p`` restores; ``pending[p]``: the computed elements of
    those states, in order; ``rest``: positions of the pool no one has read."""
    m = len(held)
    k = per_element
    water = rest + k * sum(len(p) for p in pending)
    level = _level(held, water)
    room = [max(0.0, level - h) for h in held]
    owner, taken = _place_pending(pending, room, k)
    counts = _rest_counts([room[p] - k * taken[p] for p in range(m)], rest)
    totals = [held[p] + k * taken[p] + counts[p] for p in range(m)]
    if uneven == "drop":  # even out by at most one position each (M - 1 in all), as before
        low = min(totals)
        cut = [1 if c > 0 and t - low >= 1 else 0 for c, t in zip(counts, totals)]
        counts = [c - d for c, d in zip(counts, cut)]
        totals = [t - d for t, d in zip(totals, cut)]
    return Division(counts, owner, totals)


def _level(floors: list[float], water: float) -> float:
    """The level ``L`` with ``sum(max(0, L - f)) == water``."""
    order = sorted(floors)
    for i in range(len(order)):
        width = i + 1
        top = order[i + 1] if i + 1 < len(order) else math.inf
        need = sum(top - f for f in order[:width]) if top != math.inf else math.inf
        if need >= water:
            return (water + sum(order[:width])) / width
    return math.inf  # unreachable: the last step's need is infinite


def _place_pending(
    pending: list[list[tuple[int, int, int]]], room: list[float], k: float
) -> tuple[dict[tuple[int, int, int], int], list[int]]:
    """Each worker keeps the first of its own computed elements that fit its room; the
    others go, in order, to the workers with room left (the most room first)."""
    m = len(room)
    owner: dict[tuple[int, int, int], int] = {}
    count = [0] * m
    spill: list[tuple[int, int, int]] = []
    for p in range(m):
        keep = min(len(pending[p]), int(room[p] / k + 0.5))
        for item in pending[p][:keep]:
            owner[item] = p
        count[p] = keep
        spill += pending[p][keep:]
    for item in spill:
        p = max(range(m), key=lambda q: (room[q] - k * count[q], -q))
        owner[item] = p
        count[p] += 1
    return owner, count


def _rest_counts(room: list[float], rest: int) -> list[int]:
    """Whole counts near ``room`` (clipped at 0) that sum to ``rest`` (largest remainders)."""
    want = [max(0.0, r) for r in room]
    scale = rest / sum(want) if sum(want) > 0 else 0.0
    want = [w * scale for w in want] if sum(want) > 0 else [rest / len(room)] * len(room)
    counts = [int(math.floor(w)) for w in want]
    short = rest - sum(counts)
    by_fraction = sorted(range(len(room)), key=lambda p: (counts[p] - want[p], p))
    for p in by_fraction[:short]:
        counts[p] += 1
    return counts


def level_shares(base: Base, counts: list[int], uneven: str, totals: list[float]) -> list[Share]:
    """Each worker's share of the base set's first ``sum(counts)`` positions: levels of
    strided ``Split``s (see the module docstring); with ``uneven="pad"`` a worker below
    the largest estimated total reads its first position again (at most M - 1 in all)."""
    m = len(counts)
    segments: list[list[Segment]] = [[] for _ in range(m)]
    done, start = 0, 0  # positions per worker so far; base index the next level starts at
    for step_count in sorted(set(counts)):  # the first level is every worker's
        group = [p for p in range(m) if counts[p] >= step_count]
        extra = step_count - done
        level_base = _from_index(base, start)
        for j, p in enumerate(group):
            segments[p].append(Split(j, len(group), extra, level_base))
        start += extra * len(group)
        done = step_count
    if uneven == "pad" and sum(counts) > 0:  # (an empty rest has no position to repeat)
        high = max(totals)
        for p in range(m):
            if totals[p] <= high - 1:
                own = _first_position(segments[p])
                again = own if own is not None else _first_position(sum(segments, []))
                if again is not None:
                    segments[p].append(Pad((again,)))
    return [Share(s) for s in segments]


def _from_index(base: Base, index: int) -> Base:
    """The base set's elements from its ``index``-th on, as a base set."""
    if index == 0:
        return base
    start = int(base.at(np.asarray([index]))[0])
    return Base(start, tuple(e for e in base.excluded if e > start))


def _first_position(segments: Sequence[Segment]) -> int | None:
    for seg in segments:
        if isinstance(seg, Split) and seg.bounded and len(seg) > 0:
            return int(seg.positions(0, 1)[0])
    return None
