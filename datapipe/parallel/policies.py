"""Engine policies: which lane a free worker fills next, and how many elements it takes.

A policy is an object the op names in its ``StageRequest``; the engine asks it, under its
condition, for the next chunk to admit (``admit``), how many worker threads the knob's
value means (``workers``) and what the stage's statistics gauges read (``gauges``).

* ``Map``: one lane, at most two chunks per worker in flight (a map, ``random_map``,
  parallel ``batch``'s stacking); the knob is the worker count.
* ``Buffer``: one lane, at most ``knob.value`` elements buffered, one chunk at a time
  (``prefetch``); the knob is the buffer size, one worker.
* ``Queue``: one lane, one element per chunk, at most ``knob.value`` elements taken and
  not consumed (``prefetch_to_device`` on an accelerator, whose elements become ready one
  by one); one worker.
* ``Slots``: many lanes, the emptiest first, ``block`` elements per visit of a lane
  (``interleave``'s open datasets); the knob is the worker count. Lanes come and go while
  the stage runs, and only threads fill them (``inline_ok`` is False).
"""

from __future__ import annotations

from typing import Any


class Policy:
    """The interface (see the module docstring)."""

    knob_kind = "parallelism"  # what the knob counts: workers, or "buffer" elements
    counts_elements = False  # a partial take makes room (buffers count elements)
    inline_ok = True  # AUTOTUNE may run the stage on the consumer's thread
    lanes_come_and_go = False  # lanes are added while it runs: workers never run out

    def workers(self, value: int) -> int:
        return value

    def admit(self, eng: Any) -> tuple[Any, int] | None:
        raise NotImplementedError

    def gauges(self, eng: Any, lane: Any) -> dict:
        return {}


class Map(Policy):
    def admit(self, eng: Any) -> tuple[Any, int] | None:
        lane = eng.lanes[0]
        if lane.redo:  # re-taken by a restore: bounded by the checkpoint
            return lane, 1
        p = eng.knob.value
        if lane.pending >= 2 * p or lane.input_done:
            return None
        if eng.bytes_per_elem is None:  # element size unknown: one element per worker
            return None if lane.pending >= p else (lane, 1)
        n = eng.fit(eng.sizer.max_chunk, lane.pending > 0)
        return (lane, n) if n else None

    def gauges(self, eng: Any, lane: Any) -> dict:
        """Buffer in chunks (at most two per worker), workers, their wall and CPU time."""
        with eng.cond:
            ready = sum(1 for c in lane.chunks if c.done and c.consumed < len(c.items))
        par = max(1, eng.workers_wanted())
        m = eng.meter
        return {"buffer_size": 2 * par, "buffer_fill": ready, "parallelism": par,
                "busy_s": m.busy_s, "cpu_s": m.cpu_s}  # fmt: skip


class Buffer(Policy):
    knob_kind = "buffer"
    counts_elements = True

    def workers(self, value: int) -> int:
        return 1

    def admit(self, eng: Any) -> tuple[Any, int] | None:
        lane = eng.lanes[0]
        if lane.pending:
            return None  # one chunk at a time: the input is read in order
        if lane.redo:
            return lane, 1
        if lane.input_done:
            return None
        room = eng.knob.value - lane.buffered
        if room <= 0:
            eng.meter.full += 1
            return None
        n = eng.fit(room, lane.buffered > 0)
        return (lane, n) if n else None

    def gauges(self, eng: Any, lane: Any) -> dict:
        """Buffer size and fill in elements; the worker's own time only when it computes
        something (a device copy): reading the input is the stages below's work, counted
        there."""
        g: dict[str, float] = {"buffer_size": eng.knob.value, "buffer_fill": lane.buffered,
                               "parallelism": 1}  # fmt: skip
        if lane.transform is not None:
            g["busy_s"], g["cpu_s"] = eng.meter.busy_s, eng.meter.cpu_s
        return g


class Queue(Buffer):
    inline_ok = False  # each element's copy is started on the stage's own thread

    def admit(self, eng: Any) -> tuple[Any, int] | None:
        # One element per chunk: each is handed over as soon as it is ready, and the worker
        # goes on with the next while the consumer holds earlier ones.
        lane = eng.lanes[0]
        if lane.redo:
            return lane, 1
        if lane.input_done:
            return None
        if lane.pending >= eng.knob.value:
            eng.meter.full += 1
            return None
        n = min(1, eng.fit(1, lane.pending > 0))
        return (lane, n) if n else None


class Slots(Policy):
    inline_ok = False
    lanes_come_and_go = True

    def __init__(self, block: int = 1):
        self.block = block  # interleave's block_length

    def admit(self, eng: Any) -> tuple[Any, int] | None:
        want = max(2 * self.block, eng.sizer.size)
        if eng.ram.free() <= 0:
            want = 1  # over the RAM budget: only lanes with nothing buffered may take more
        best = None
        for lane in eng.lanes:
            if lane.pending:
                continue
            if lane.redo:
                return lane, 1
            if not lane.input_done and lane.buffered < want:
                if best is None or lane.buffered < best.buffered:
                    best = lane
        if best is None:
            return None
        return best, eng.sizer.next_size(limit=max(2 * self.block, 1))


MAP = Map()
BUFFER = Buffer()
QUEUE = Queue()
