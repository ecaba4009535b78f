"""Exact checkpoints of a parallel stage's lane: what ``get_state`` records and how
``set_state`` rebuilds the buffer from it.

A lane (``engine.Lane``) takes *chunks* of consecutive elements from its input and hands
their results to the consumer, possibly out of order (``deterministic=False``). Elements
taken from the input but not yet consumed live only in the lane, so a snapshot must say how
to get them back. Two ways, chosen per lane when the stage is built:

* **Replay** (the input's order is reproducible: no ``deterministic=False`` stage below).
  Every chunk records its input's state before it was taken. The snapshot is the input's
  state before the oldest chunk the consumer has not finished, the index of that chunk's
  first element and, for it and every later chunk, ``[size, consumed, input failed]``. A
  restore sets the input's state, re-takes chunks of the same sizes (so they hold the same
  elements) and queues each chunk's unconsumed elements for recomputation. Small (a few
  integers per chunk) and exact for both orders: with ``deterministic=False`` a chunk in
  the middle may be finished while an older one is not; it is re-taken and dropped.

* **Stored** (some stage below delivers in a nondeterministic order). Re-taking chunks of
  the same sizes would not give the same elements, so the snapshot stores them: the
  input's state *now* plus, per unfinished chunk, its remaining input elements (a map's
  inputs, or a prefetch buffer's elements) with the index of the first. This is what
  tf.data's checkpoints always do (they save buffered elements); here only stages above a
  nondeterministic one pay for it.

Version 0.1 kept a growing per-snapshot log of later deliveries instead of storing
elements; a restore then had to force deliveries in the logged order, and a delivery that
could not be matched waited forever (issue 10's hang). Nothing here ever waits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from datapipe._iterator import pull_exactly
from datapipe.errors import PipelineError, annotate


def replayable(ds: Any, ctx: Any) -> bool:
    """Whether iterating ``ds`` gives the same elements in the same order each time
    (given the same seeds): no op below (or at) ``ds`` is a parallel stage with
    ``deterministic=False``. Sub-datasets built at run time by ``interleave`` /
    ``flat_map`` functions are checked when they are opened."""
    from datapipe._context import walk

    det = ctx.deterministic
    # each op's declaration (parallel/request.py) says whether its order may vary
    return not any(n.stage_request is not None and n.stage_request.order_varies(det)
                   for n in walk(ds))  # fmt: skip


def snapshot(lane: Any) -> dict:
    """The lane's state. Called with the lane's input lock and the stage's condition held
    (no chunk is being taken, no result is being stored)."""
    if not lane.replayable:
        return _stored_snapshot(lane)
    # (state before, start, size, consumed, input failed) of every chunk taken and not
    # yet finished by the consumer, in input order; then the chunks a restore re-took
    chunks = list(lane.chunks)
    # Chunks computed inline (no input state kept: see Engine._inline) come first; their
    # remaining elements are stored ("head"), the chunks after them replayed.
    head = []
    while chunks and chunks[0].state_before is None:
        head += _stored_entries([chunks.pop(0)])
    entries = [
        (c.state_before, c.start, c.size, c.skip + c.consumed, c.input_error is not None)
        for c in chunks
    ]
    redo = list(lane.redo)
    while redo and not entries and redo[0][0] is None:
        head += _stored_redo([redo.pop(0)])
    entries += [(r[0], r[1], r[2], r[3], r[5] is not None) for r in redo]
    if not entries:
        entries = [(lane.inner.get_state(), lane.next_index, 0, 0, False)]
    first = entries[0]
    # Untouched chunks at the end are simply taken again, in either order: with
    # deterministic=False too, every chunk the consumer took from (out of order or not)
    # is before them, and the input resumes at their start. (Replaying them instead made
    # an elastic resume count a whole read-ahead as held by the state: unbalanced shares.)
    while entries and entries[-1][3] == 0:
        entries.pop()
    replay = [[size, used, failed] for _, _, size, used, failed in entries]
    state = {"input": first[0], "index": first[1], "replay": replay}
    if head:
        state["head"] = head
    return state


def _stored_snapshot(lane: Any) -> dict:
    stored = _stored_entries(lane.chunks) + _stored_redo(lane.redo)
    return {"input": lane.inner.get_state(), "index": lane.next_index, "stored": stored}


def _stored_entries(chunks: Any) -> list:
    """``[index, remaining input elements, None]`` (or ``[index, None, error text]``) per
    chunk with something left for the consumer."""
    stored: list = []
    for c in chunks:
        at = c.start + c.skip + c.consumed
        if c.input_error is not None:
            if c.consumed == 0:  # the consumer has not seen this failure yet
                stored.append([at, None, c.error_text])
            continue
        rest = c.inputs[c.consumed :]
        if rest:
            stored.append([at, list(rest), None])
    return stored


def _stored_redo(redo: Any) -> list:
    stored: list = []
    for _state, start, _size, _skip, elems, error in redo:
        if error is not None:
            stored.append([start, None, str(error)])
        elif elems:
            stored.append([start, list(elems), None])
    return stored


def restore(lane: Any, state: dict) -> None:
    """Rebuild ``lane`` (emptied, its workers stopped) from ``snapshot``'s result: set the
    input's state and queue the elements to recompute on ``lane.redo``."""
    lane.inner.set_state(state["input"])
    index = int(state["index"])
    _queue_stored(lane, state.get("head", ()))  # inline chunks, before the replayed ones
    if "stored" in state:
        _queue_stored(lane, state["stored"])
        lane.next_index = index
        return
    for size, used, failed in state["replay"]:
        index = _replay_one(lane, index, int(size), int(used), bool(failed))
    lane.next_index = index


def _queue_stored(lane: Any, entries: Any) -> None:
    for at, elems, error in entries:
        if elems is None:
            err = PipelineError(lane.op, int(at), RuntimeError(error))
            lane.redo.append((None, int(at), 0, 0, [], err))
        else:
            lane.redo.append((None, int(at), len(elems), 0, list(elems), None))


def _replay_one(lane: Any, index: int, size: int, used: int, failed: bool) -> int:
    """Re-take one chunk of the input; queue its unconsumed elements for recomputation."""
    inner = lane.inner
    state = inner.get_state()
    if failed:  # the input raised here: raise again, unless the consumer saw it already
        try:
            elems = inner.next_chunk(1)
        except Exception as e:  # noqa: BLE001 - the same failure as before the checkpoint
            if not used:
                lane.redo.append((state, index, 0, 0, [], annotate(lane.op, index, e)))
            return index
        size, used = len(elems), 0  # it did not fail this time: recompute what it gave
        if elems:
            lane.redo.append((state, index, size, 0, elems, None))
        return index + size
    elems = pull_exactly(inner, size)
    if used < len(elems):
        lane.redo.append((state, index, len(elems), used, elems[used:], None))
    return index + len(elems)


def skip_elements(inner: Any, k: int, next_chunk: Callable[[int], list] | None = None) -> None:
    """Consume ``k`` elements of ``inner`` (a failure the consumer saw counts as one)."""
    take = next_chunk or inner.next_chunk
    while k > 0:
        try:
            got = take(k)
        except Exception:  # noqa: BLE001 - already delivered to the consumer before
            k -= 1
            continue
        if not got:
            return
        k -= len(got)
