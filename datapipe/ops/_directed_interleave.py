"""The engine shared by ``sample_from_datasets`` and ``choose_from_datasets``.

tf.data builds both on one kernel (``DirectedInterleaveDataset``): a *selector* says, for
each output position, which input to read next. Here the selector hands out whole chunks of
decisions, the engine reads from each input exactly the number of elements the chunk asks
of it, and only when an input turns out to be exhausted does it re-decide the positions
from there on. Every decision uses its own draw, so outputs do not depend on chunk sizes
(the outer iterator's, or those after a ``set_state``).
"""

from __future__ import annotations

import numpy as np

from datapipe._functions import raise_pending
from datapipe._iterator import OpIterator
from datapipe._positions import (
    buffer_from_state,
    buffer_to_state,
    error_from_state,
    error_to_state,
    first_failure,
    read_positions,
)


class Selector:
    """Decides input indices for output positions.

    ``draw(n)`` prepares up to ``n`` positions and returns how many (0 ends the stream
    unless ``pop_error`` then returns an exception); ``choices(start, active)`` gives the
    input index for positions ``start..`` (``-1`` where no input can be chosen: the stream
    ends there); ``pop_error()`` returns the exception to raise after the drawn positions
    (a bad choice value), once; ``on_exhausted(pos, i)`` is told the chosen input ``i`` was
    empty at ``pos`` and returns True to retry ``pos`` (a new draw), False to drop it.
    """

    def draw(self, n: int) -> int:
        raise NotImplementedError

    def choices(self, start: int, active: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def pop_error(self) -> BaseException | None:
        return None

    def on_exhausted(self, pos: int, i: int) -> bool:
        raise NotImplementedError

    def get_state(self) -> dict:
        raise NotImplementedError

    def set_state(self, state: dict) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class DirectedInterleaveIterator(OpIterator):
    """Reads ``inners[choice]`` for each position the selector decides.

    With ``stop_on_empty`` the stream ends the first time a chosen input is empty;
    otherwise the selector is told and decides again (or skips), as tf.data does.
    Elements read past an exhaustion point stay in ``pending`` (part of the state) and are
    the next ones delivered from their input.

    A failing element of an input keeps its position (``datapipe._positions``): the
    position chosen for it is used up, its error is raised after the elements before it,
    and the elements already read for the positions after it wait in ``ready`` (part of
    the state), so the sequence of choices does not depend on where failures fall.
    """

    def __init__(self, inners: list, selector: Selector, stop_on_empty: bool, op_name: str):
        super().__init__(inners)
        self.inners, self.sel, self.stop, self.op_name = inners, selector, stop_on_empty, op_name
        k = len(inners)
        self.active = np.ones(k, dtype=bool)  # not yet found empty when chosen
        self.ended = [False] * k  # returned fewer than asked: never read again
        self.pending: list[list] = [[] for _ in range(k)]
        self.ready: list = []  # decided and read, not yet delivered (Failed entries too)
        self.done = False
        self.error: BaseException | None = None

    def _take(self, i: int, count: int) -> list:
        got, self.pending[i] = self.pending[i][:count], self.pending[i][count:]
        if len(got) < count and not self.ended[i]:
            more, _ = read_positions(self.inners[i], got, count, exact=True)
            self.ended[i] = not more
        return got

    def next_chunk(self, n: int) -> list:
        while True:
            if self.ready:
                return self._deliver(n)
            raise_pending(self, "error")
            if self.done:
                self._ask_for_ends()
                return []
            # Nothing this round (every position skipped): draw again, or end, or raise.
            self.ready = self._chunk(n)

    def _ask_for_ends(self) -> None:
        """The stream has ended: ask each input not known to have ended (and with nothing
        read ahead) once more, so an input that was read to its last element sees its end
        (a ``cache()`` on it completes), as ``zip`` does. What a longer input returns is
        kept in ``pending``; a failure there is not part of the output."""
        for i, it in enumerate(self.inners):
            if self.ended[i] or self.pending[i]:
                continue
            try:
                got = it.next_chunk(1)
            except Exception:  # noqa: BLE001 - past the output's end
                continue
            self.ended[i] = not got
            self.pending[i] = list(got)

    def _deliver(self, n: int) -> list:
        """Up to ``n`` ready elements, stopping before a failure; one at the head is raised."""
        f = first_failure(self.ready[:n])
        if f == 0:
            self.error = self.ready.pop(0).error
            raise_pending(self, "error")
        out, self.ready = self.ready[:f], self.ready[f:]
        return out

    def _chunk(self, n: int) -> list:
        m = self.sel.draw(n)
        out: list = []
        pos = 0
        while m and not self.done:
            ch = self.sel.choices(pos, self.active)
            if not len(ch):
                break
            stop_at = np.flatnonzero(ch < 0)
            if stop_at.size:  # no input left to choose from
                ch, self.done = ch[: stop_at[0]], True
            p = self._emit(ch, out)
            if p == len(ch):
                break
            i = int(ch[p])
            self.active[i] = False
            if self.stop:
                self.done = True
                break
            retry = self.sel.on_exhausted(pos + p, i)
            pos += p if retry else p + 1
        err = self.sel.pop_error()
        if err is not None and not self.done:
            self.error = err  # raised after the elements before it are delivered
        elif m == 0:
            self.done = True
        return out

    def _emit(self, ch: np.ndarray, out: list) -> int:
        """Append the elements for ``ch`` up to the first position whose input is empty;
        returns that position (``len(ch)`` when none is)."""
        counts = np.bincount(ch, minlength=len(self.inners)) if len(ch) else ()
        lists, p = {}, len(ch)
        for i, c in enumerate(counts):
            if c:
                lists[i] = self._take(i, int(c))
                if len(lists[i]) < c:
                    p = min(p, int(np.flatnonzero(ch == i)[len(lists[i])]))
        cursor = dict.fromkeys(lists, 0)
        for i in ch[:p].tolist():
            out.append(lists[i][cursor[i]])
            cursor[i] += 1
        for i, vals in lists.items():  # read past the exhaustion point: kept for later
            if cursor[i] < len(vals):
                self.pending[i] = vals[cursor[i] :] + self.pending[i]
        return p

    def get_state(self) -> dict:
        return {
            "active": self.active.tolist(),
            "ended": list(self.ended),
            "pending": [buffer_to_state(p) for p in self.pending],
            "ready": buffer_to_state(self.ready),
            "error": error_to_state(self.error),
            "done": self.done,
            "selector": self.sel.get_state(),
            "inputs": [it.get_state() for it in self.inners],
        }

    def set_state(self, state: dict) -> None:
        self.active = np.asarray(state["active"], dtype=bool)
        self.ended = [bool(e) for e in state["ended"]]
        self.pending = [buffer_from_state(p, self.op_name) for p in state["pending"]]
        self.ready = buffer_from_state(state.get("ready", []), self.op_name)
        self.done = bool(state["done"])
        self.error = error_from_state(state.get("error"), self.op_name)
        self.sel.set_state(state["selector"])
        for it, s in zip(self.inners, state["inputs"]):
            it.set_state(s)

    def close(self) -> None:
        if not self.closed:
            self.sel.close()
        super().close()
