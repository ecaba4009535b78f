"""The consumer side of ``distribute``: read a job's splits from the workers.

``ServiceIterator`` joins the job (creating it when it is the first consumer), then
runs *feeds* (a feed: one stream of a worker's replies to this consumer): a feed asks the
dispatcher for a split, reads it from a worker in replies (at most
``max_outstanding_requests / feeds per worker`` requests in flight: the prefetch and the
backpressure), and moves on to its next split when the last reply says the split ended.
``distributed_epoch`` runs two feeds per worker, so a worker always has a queued request
while a feed opens its next split; ``parallel_epochs`` one feed per slot.
Nothing here starts a thread: requests are Ray ObjectRefs, and ``next_chunk`` waits on
them.

Split prefetch: as soon as a feed starts reading a split it asks the dispatcher for the
one after it (``_WorkerFeed.next``), so at the split's end the next assignment is already
here instead of a dispatcher round trip away (and, in the fixed rotation, a turn away).
When the split's size is known (an element-wise pipeline over one pool: ``spec.size`` elements),
the feed also opens the next split on its worker before the current one ends: once the
requests in flight cover the current split's rest, its next request is the next split's
first (``_WorkerFeed.ahead``), so the worker goes from one split to the next without
waiting for a request, and the reply that holds a split's last element says it ended
(the worker is told how many it has left), so no request is spent finding the end. A feed
thus holds at most two splits, and at most ``per_feed`` requests in flight in all. The
prefetched split becomes the feed's current one where the current one ends, so the
delivery order is the same as without the prefetch.

Exactly once (see also ``datapipe.service.jobs``):

- replies of a split are taken strictly in order, and each carries the split chain's state
  after its elements; the consumer keeps the state of the last reply it took;
- when a worker dies, every request in flight to it is dropped (none of their elements was
  taken), the dispatcher replaces the worker, and each split this consumer was reading on
  it is opened again on the new worker *from the kept state*, so it continues with the
  element after the last one taken: nothing is lost, nothing read twice (the chain state
  is exact: ``get_state``/``set_state`` of every op);
- a split is reported done only once all its elements were delivered to this consumer's
  caller, and a consumer's checkpoint records, for each split in progress, the elements
  received but not delivered and the state after them;
- none of a prefetched split's elements is taken before its feed starts it: when its
  worker dies (opened ahead there or not) it is read on the replacement from where it was
  handed out; a checkpoint lists it as a split to read from there, and a consumer that
  stops gives it back so (the dispatcher requeues it as it handed it out:
  ``jobs.Job.handed``).
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections import deque
from typing import Any

from datapipe._functions import raise_pending
from datapipe._iterator import OpIterator
from datapipe._positions import Failed, buffer_from_state, buffer_to_state
from datapipe.errors import PipelineBrokenError, WorkerDiedError
from datapipe.service.jobs import Assignment, Record
from datapipe.service.layout import layout_from_state, layout_to_state
from datapipe.service.state import check_consumer_states, own_part
from datapipe.service.worker import (
    REPLY_BYTES,
    REPLY_ELEMENTS,
    REPLY_MIN_ELEMENTS,
    REPLY_SECONDS,
    elements_of,
    encode_request,
    writable,
)

# Worker deaths one split may see before the consumer gives up with WorkerDiedError.
MAX_ATTEMPTS = 3
# How long a dead worker's replacement may take to start (Ray places it where a CPU is free).
REPLACE_TIMEOUT_S = 120.0
# The split prefetch (module docstring), read at call time; False: a feed asks for its next
# split when its split ended, as before issue 25 (benchmarks/bench_service.py compares).
SPLIT_PREFETCH = True


def reading_workers(node: Any, k: int) -> list[int]:
    """The worker slots this consumer runs feeds on. Every consumer reading from every
    worker makes ``consumers x workers x 2`` feeds, each holding a split and asking the
    dispatcher for the next one: at 1,000 workers x 64 consumers, 128,000 feeds would
    need 128,000 splits in progress and ~88 s of dispatcher calls before the last feed
    got one (``benchmarks/sim_service_scale.py``). So a ``"distributed_epoch"`` consumer
    that knows its place (``consumer_index`` of ``num_consumers``: its splits are its own,
    ``layout.PoolSplits``) reads from the workers ``w`` with ``w % num_consumers ==
    consumer_index`` once there are at least two such workers for each consumer; else
    from all of them."""
    n, c = node.num_consumers, node.consumer_index
    if node.processing_mode != "distributed_epoch" or n is None or c is None or k < 2 * n:
        return list(range(k))
    return list(range(c, k, n))


class _SplitProgress:
    """A split this consumer reads: where it is (``state`` after the last reply taken),
    whether every element was received, and how many received ones are not delivered."""

    __slots__ = ("spec", "state", "finished", "undelivered")

    def __init__(self, spec: Any, record: Record | None):
        self.spec = spec
        self.state = None if record is None else record.state
        self.finished = False if record is None else record.finished
        self.undelivered = 0


class _Run:
    """A split being read on one worker: the stream key, the requests in flight, and how
    many elements are left to receive when the split's size says so (None: unknown)."""

    __slots__ = ("sid", "worker", "key", "seq", "opened", "refs", "attempt", "left", "spec",
                 "start", "per_reply")  # fmt: skip

    def __init__(self, a: Assignment, stem: tuple, sized: bool):
        self.sid, self.worker, self.attempt = a.spec.sid, a.worker, 0
        self.spec = a.spec
        self.start = None if a.record is None else a.record.state  # where it was handed out
        self.key = (*stem, self.sid, 0)
        self.seq, self.opened = 0, False
        self.refs: deque = deque()  # Ray object refs of the requests in flight
        # Elements left: known for a fresh split of an element-wise pipeline over one pool
        # (``spec.size`` elements); a split handed out mid-way does not say how far it is.
        self.left = a.spec.size if sized and a.record is None else None
        self.per_reply = min(REPLY_ELEMENTS, REPLY_MIN_ELEMENTS)  # the last reply's size

    def reopen(self, worker: int) -> None:
        self.attempt += 1
        self.worker = worker
        self.key = (*self.key[:-1], self.attempt)
        self.seq, self.opened = 0, False
        self.refs.clear()


class _WorkerFeed:
    """A feed (module docstring): the worker it reads from, the dispatcher's assignment it
    waits for, the split it reads once assigned, and the assignment asked for ahead."""

    __slots__ = ("worker", "assign", "run", "next", "ahead", "ended")

    def __init__(self, worker: int):
        self.worker, self.ended = worker, False
        self.assign: Any = None  # the dispatcher's reply (ref) for the split asked for
        self.run: _Run | None = None  # the split being read, once assigned
        self.next: Any = None  # the assignment (ref) of the split after ``run`` (prefetch)
        self.ahead: _Run | None = None  # ``next``'s split, opened on its worker already

    def running(self) -> _Run:
        assert self.run is not None, "distribute: a feed without an assignment has a split"
        return self.run

    def head(self) -> Any:
        return self.assign if self.assign is not None else self.running().refs[0]


class ServiceIterator(OpIterator):
    """A consumer of a service job (see the module docstring). State: ``job`` (name, uid,
    epoch, seed, layout, policy), ``consumer``, ``done`` (splits delivered completely) and
    ``records`` (splits in progress: ``sid``, ``carry`` = received and not delivered,
    ``state`` = the chain's state after them, ``finished``)."""

    op_name = "distribute"

    def __init__(self, node: Any, ctx: Any, epoch: tuple):
        super().__init__([])
        self.node, self.ctx = node, ctx
        self.deterministic = bool(ctx.deterministic)
        self.job_epoch = [int(e) for e in epoch]
        self.seed = int(ctx.seed)
        self.layout = node.layout()
        # a split's elements are its pool positions (``spec.size``): the consumer knows
        # when the requests in flight cover the rest of a split (``_submit``)
        splitting = node.splitting
        self.sized = bool(
            node.processing_mode == "distributed_epoch"
            and splitting.elementwise
            and len(splitting.pools) == 1
        )
        self.uid = "" if node.job_name is not None else uuid.uuid4().hex
        self.restore: tuple[list, str] | None = None
        # A parallel stage or prefetch after distribute may pull on its thread while the
        # consumer takes a checkpoint: one at a time.
        self.lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self.info: Any = None  # the joined job (jobs.JobInfo), once _start joined it
        self.exhausted = False
        self.feeds: list[_WorkerFeed] = []
        self.turn = 0
        # [sid, entries, position, failure positions]: received, in delivery order
        self.ready: deque = deque()
        self.splits: dict[int, _SplitProgress] = {}
        self.done: list[int] = []  # splits whose every element was delivered
        self.report: list[int] = []  # ... not yet told to the dispatcher
        self.adopted: deque = deque()  # a checkpoint's splits in progress, read first
        self.error: BaseException | None = None
        self.counts = {"replies": 0, "elements": 0, "resumed": 0}

    # ---- joining -------------------------------------------------------------------------
    def _key(self) -> tuple:
        return (self.node.job_name, tuple(self.job_epoch), self.uid)

    def _start(self) -> None:
        node = self.node
        self.ray = node.service._ray()
        self.dispatcher = node.service._dispatcher()
        restore, restore_id = self.restore if self.restore is not None else (None, None)
        layout = self.layout
        args = (self._key(), node.fingerprint + json.dumps(layout_to_state(layout)), layout,
                self.seed, node.blob_key, node.consumer_index, restore, restore_id)  # fmt: skip
        got = self._call(self.dispatcher.join, *args)
        if got is None:  # the service lacks this pipeline: send it once
            self._call(self.dispatcher.put_pipeline, node.blob_key, node.blob)
            got = self._call(self.dispatcher.join, *args)
        self.info, (self.blob_ref,) = got
        self.seed, self.layout = self.info.seed, self.info.layout
        self.restore = None
        if self.info.adopted is not None:
            self.done = list(self.info.adopted["done"])
            self.adopted = deque(
                Record(int(r["sid"]), r["carry"], r["state"], bool(r["finished"]))
                for r in self.info.adopted["records"]
            )
        if self.info.finished:
            self.exhausted = True
            return
        self.workers = self._call(self.dispatcher.handles)
        per_worker = 1 if node.processing_mode == "parallel_epochs" else 2
        self.per_feed = max(1, node.max_outstanding_requests // per_worker)
        mine = reading_workers(node, len(self.workers))
        self.feeds = [_WorkerFeed(mine[i % len(mine)]) for i in range(per_worker * len(mine))]
        for feed in self.feeds:
            self._ask(feed)

    def _call(self, method: Any, *args: Any) -> Any:
        """A dispatcher call, waited for; a dead dispatcher is a broken pipeline."""
        try:
            return self.ray.get(method.remote(*args))
        except self.ray.exceptions.RayActorError as e:
            raise PipelineBrokenError(
                f"distribute: the service {self.node.service.name!r} is gone (its dispatcher "
                f"died with the process that started it, or was shut down): {e}"
            ) from None

    def _ask(self, feed: _WorkerFeed) -> None:
        """Ask for the feed's next split now (it waits for it in ``feed.assign``)."""
        feed.assign = self._request(feed)

    def _request(self, feed: _WorkerFeed) -> Any:
        """A split for ``feed``: an adopted one (no call, ``_Ready``), else the ref of the
        dispatcher's answer."""
        if self.adopted:
            record = self.adopted.popleft()
            spec = self.layout.spec(record.sid)
            slot = spec.epoch_extra[0] if spec.epoch_extra else feed.worker
            return _Ready(Assignment(spec, slot % len(self.workers), record))
        report, self.report = self.report, []
        info = self.info
        return self.dispatcher.next_split.remote(info.key, info.token, feed.worker, report)

    def _next_split(self, feed: _WorkerFeed) -> None:
        """``feed``'s split ended: start the prefetched one at once -- in the fixed rotation
        always (waiting for it if it is not here yet, so the order does not depend on
        timing), else when it is here (else ``_pick`` waits for it with the rest). A
        prefetch that found nothing left asks once more: a consumer that stopped may have
        given splits back since."""
        ahead, feed.next = feed.next, None
        if ahead is not None and not isinstance(ahead, _Ready):
            if self.deterministic or self.ray.wait([ahead], timeout=0)[0]:
                ahead = _Ready(self._wait(ahead, None))
        if isinstance(ahead, _Ready) and ahead.assignment is None:
            ahead = None
        if isinstance(ahead, _Ready):
            self._assigned(feed, ahead.assignment)
        else:
            feed.assign = ahead if ahead is not None else self._request(feed)

    # ---- reading -------------------------------------------------------------------------
    def next_chunk(self, n: int) -> list:
        with self.lock:
            if self.closed:
                return []
            if self.info is None:
                self._start()
            while not self.ready:
                if self.exhausted or self.closed or not self._pump():
                    self._end()
                    return []
            return self._take(n)

    def _pump(self) -> bool:
        """Take one event (a split assignment or a reply) of one feed; False when every
        feed has ended."""
        feed = self._pick()
        if feed is None:
            return False
        if feed.assign is not None:
            ref, feed.assign = feed.assign, None
            a = ref.assignment if isinstance(ref, _Ready) else self._wait(ref, None)
            self._assigned(feed, a)
            return True
        run = feed.running()
        ref = run.refs.popleft()
        try:
            reply = self._wait(ref, run)
        except _WorkerGone:
            self._worker_failed(run.worker)
            return True
        self._received(feed, run, reply)
        if self.deterministic:
            self.turn += 1
        return True

    def _pick(self) -> _WorkerFeed | None:
        live = [feed for feed in self.feeds if not feed.ended]
        if not live:
            return None
        if self.deterministic:  # a fixed rotation: a reproducible order
            k = len(self.feeds)
            for step in range(k):
                feed = self.feeds[(self.turn + step) % k]
                if not feed.ended:
                    self.turn = (self.turn + step) % k
                    return feed
        for feed in live:
            if isinstance(feed.assign, _Ready):
                return feed
        heads = {feed.head(): feed for feed in live}
        ready, _ = self.ray.wait(list(heads), num_returns=1)
        return heads[ready[0]]

    def _wait(self, ref: Any, run: _Run | None) -> Any:
        ray = self.ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as e:  # a bug in the service code: raise it
            raise e.as_instanceof_cause() from None
        except ray.exceptions.RayActorError as e:
            if run is None:
                raise PipelineBrokenError(
                    f"distribute: the service's dispatcher is gone: {e}"
                ) from None
            raise _WorkerGone() from None
        except ray.exceptions.RayError:  # an object lost with its node: read it again
            if run is None:
                raise
            raise _WorkerGone() from None

    def _assigned(self, feed: _WorkerFeed, a: Any) -> None:
        if a is None:
            feed.ended = True
            return
        sid = a.spec.sid
        split = self.splits[sid] = _SplitProgress(a.spec, a.record)
        if a.record is not None:
            self.counts["resumed"] += 1
            carry = buffer_from_state(a.record.carry, "distribute") if a.record.carry else []
            self._push(sid, carry, last_only=False)
        if split.finished:  # every element came with the record: nothing to read
            self._maybe_done(sid)
            ahead, feed.next = feed.next, None  # (taken at the feed's next turn)
            feed.assign = ahead if ahead is not None else self._request(feed)
            return
        ahead, feed.ahead = feed.ahead, None
        if ahead is not None and ahead.sid == sid:  # opened on its worker already
            feed.run = ahead
        else:
            if ahead is not None and ahead.opened:  # (not expected: close it, not leak it)
                self.workers[ahead.worker].close.remote([ahead.key])
            feed.run = _Run(a, self._stem(), self.sized)
        if feed.next is None and SPLIT_PREFETCH:
            feed.next = self._request(feed)  # the split prefetch (module docstring)
        self._submit(feed)

    def _received(self, feed: _WorkerFeed, run: _Run, reply: Any) -> None:
        split = self.splits[run.sid]
        self.counts["replies"] += 1
        elements = writable(elements_of(reply))
        if elements:
            self.counts["elements"] += len(elements)
            self._push(run.sid, elements)
            run.per_reply = len(elements)
        if run.left is not None:
            run.left -= len(elements)
        if reply.done:
            split.finished, split.state = True, None
            run.refs.clear()  # their replies are empty: the stream ended
            feed.run = None
            self._maybe_done(run.sid)
            self._next_split(feed)
        else:
            split.state = reply.state
            self._submit(feed)

    def _submit(self, feed: _WorkerFeed) -> None:
        """Keep ``per_feed`` requests in flight for the feed: for its split, and once those
        in flight cover the rest of it (its size known), one for the prefetched split
        (``_open_ahead``) -- so the next split's first reply is computed before the feed
        reaches it, and the worker is not left without a request at the boundary."""
        run = feed.running()
        while True:
            room = self.per_feed - len(run.refs) - (feed.ahead is not None)
            if run.refs and room <= 0:
                return
            if run.refs and run.left is not None and run.left <= len(run.refs) * run.per_reply:
                if feed.ahead is None:
                    self._open_ahead(feed)
                return  # (a reply that falls short: the next _submit asks again)
            self._send(run)

    def _open_ahead(self, feed: _WorkerFeed) -> None:
        """Send the first request of ``feed.next``'s split, if its assignment is here."""
        ahead = feed.next
        if ahead is None:
            return
        if not isinstance(ahead, _Ready):
            # asked as the current split started, so almost always here; if not, the
            # next reply's _submit looks again (a ray.wait that does not wait: ~3 us)
            if not self.ray.wait([ahead], timeout=0)[0]:
                return
            ahead = feed.next = _Ready(self._wait(ahead, None))
        a = ahead.assignment
        if a is None or (a.record is not None and a.record.finished):
            return
        feed.ahead = _Run(a, self._stem(), self.sized)
        self._send(feed.ahead)

    def _stem(self) -> tuple:
        """The first part of this consumer's stream keys (its job and its token)."""
        return (self.info.key[2] or self.info.key[0], self.info.token)

    def _send(self, run: _Run) -> None:
        """One read request of ``run`` to its worker (the first one opens the split)."""
        worker = self.workers[run.worker]
        min_elements = REPLY_MIN_ELEMENTS  # batched replies: worker.py (read at call time)
        request = encode_request(run.key, run.seq, self.node.blob_key,
                                 None if run.opened else self._open_args(run),
                                 REPLY_ELEMENTS, REPLY_SECONDS, REPLY_BYTES,
                                 min_elements)  # fmt: skip
        if run.opened:
            ref = worker.read.remote(request)
        else:  # the pipeline's ref travels as its own argument: Ray resolves it there
            ref = worker.read.remote(request, self.blob_ref)
        run.seq += 1
        run.opened = True
        run.refs.append(ref)

    def _open_args(self, run: _Run) -> dict:
        """How a worker opens ``run``'s split: from the state after the last reply taken
        (or where it was handed out, before any); ``elements``: how many it has left,
        when known (the worker then ends the reply that holds the last one)."""
        split = self.splits.get(run.sid)
        return {
            "policy": self.node.splitting.policy,
            "spec": run.spec.to_state(),
            "epoch": self.job_epoch,
            "seed": self.seed,
            "state": split.state if split is not None else run.start,
            "elements": run.left,
        }

    def _replace(self, slot: int) -> None:
        """Have the dispatcher replace worker ``slot`` and wait until the replacement
        answers. Another consumer may have had it replaced already, and that replacement
        may have died too (the dispatcher replaces only the handle it is told of): then
        it is reported in turn, up to ``MAX_ATTEMPTS`` deaths in a row (breaker3: a second
        death failed every consumer, "did not start within 120 s")."""
        name = self.node.service.name
        seen = [self.workers[slot]]
        for _ in range(MAX_ATTEMPTS):
            self.workers = self._call(self.dispatcher.report_dead, slot, seen)
            try:  # a replacement the cluster cannot place would leave us waiting for ever
                self.ray.get(self.workers[slot].pid.remote(), timeout=REPLACE_TIMEOUT_S)
                return
            except Exception as e:  # noqa: BLE001 - not started in time, or died again
                if type(e).__name__ == "GetTimeoutError":
                    raise WorkerDiedError(
                        f"distribute: worker {slot} of service {name!r} died and its "
                        f"replacement did not start within {REPLACE_TIMEOUT_S:g} s; the "
                        "cluster may lack a free CPU for it"
                    ) from None
                seen = [self.workers[slot]]  # the replacement we were given died too
        raise WorkerDiedError(
            f"distribute: worker {slot} of service {name!r} died {MAX_ATTEMPTS} times in a "
            "row, its replacements too; the pipeline before distribute may crash its worker "
            "process (out of memory, a signal)"
        )

    def _worker_failed(self, slot: int) -> None:
        """Worker ``slot`` died: the dispatcher replaces it, and every split this consumer
        read on it continues on the new one from the state after its last reply taken."""
        affected = [
            (feed, run)
            for feed in self.feeds
            for run in (feed.run, feed.ahead)  # a split opened ahead too (from its start)
            if run is not None and run.worker == slot
        ]
        self._replace(slot)
        for feed, run in affected:
            if run.attempt + 1 >= MAX_ATTEMPTS:
                raise WorkerDiedError(
                    f"distribute: split {run.sid} of job {self.node.job_name!r} lost its worker "
                    f"{MAX_ATTEMPTS} times (the last on slot {slot}); the pipeline before "
                    "distribute may crash its worker process (out of memory, a signal)"
                )
            run.reopen(slot)
            if run is feed.ahead:
                self._send(run)
            else:
                self.counts["resumed"] += 1
                self._submit(feed)

    # ---- delivering ----------------------------------------------------------------------
    def _push(self, sid: int, entries: list, last_only: bool = True) -> None:
        """Queue ``entries`` of split ``sid`` for delivery; ``last_only``: a failure can
        only be the last entry (a reply), else anywhere (a checkpoint's carry)."""
        if entries:
            failures = [len(entries) - 1] if type(entries[-1]) is Failed else []
            if not last_only:
                failures = [i for i, x in enumerate(entries) if type(x) is Failed]
            self.ready.append([sid, entries, 0, deque(failures)])
            self.splits[sid].undelivered += len(entries)

    def _take(self, n: int) -> list:
        item = self.ready[0]
        sid, entries, pos, failures = item
        if failures and failures[0] == pos:  # the failure's position: raise, move past it
            failures.popleft()
            self.error = entries[pos].error
            self._advance(item, pos + 1, 1)
            raise_pending(self, "error")
        stop = min(len(entries), pos + n, failures[0] if failures else len(entries))
        out = entries[pos:stop]
        self._advance(item, stop, len(out))
        return out

    def _advance(self, item: list, pos: int, delivered: int) -> None:
        item[2] = pos
        if pos == len(item[1]):
            self.ready.popleft()
        sid = item[0]
        self.splits[sid].undelivered -= delivered
        self._maybe_done(sid)

    def _maybe_done(self, sid: int) -> None:
        split = self.splits[sid]
        if split.finished and split.undelivered == 0:
            del self.splits[sid]
            self.done.append(sid)
            self.report.append(sid)

    def _end(self) -> None:
        """The input ended: tell the dispatcher what was delivered (once)."""
        if not self.exhausted and self.info is not None:
            self._release([])
        self.exhausted = True

    def _release(self, records: list[Record]) -> None:
        report, self.report = self.report, []
        info = self.info
        self.dispatcher.release.remote(info.key, info.token, records, report)

    # ---- state ---------------------------------------------------------------------------
    def _carry(self, sid: int) -> list:
        out: list = []
        for item_sid, entries, pos, _ in self.ready:
            if item_sid == sid:
                out.extend(entries[pos:])
        return out

    def _records(self, resolve: bool = True) -> list[Record]:
        """The splits in progress (with what was received and not delivered), the ones
        assigned to a feed and not started (prefetched: from where they were handed out),
        then the adopted ones not given to a feed yet. ``resolve``: wait for assignments
        still on their way (a checkpoint must name them; a consumer that stops need not:
        the dispatcher requeues what it handed out and was not given back)."""
        reading = [
            Record(sid, buffer_to_state(self._carry(sid)), s.state, s.finished)
            for sid, s in self.splits.items()
        ]
        waiting = []
        for feed in self.feeds:
            for name in ("assign", "next"):
                ahead = getattr(feed, name)
                if ahead is not None and resolve and not isinstance(ahead, _Ready):
                    ahead = _Ready(self._wait(ahead, None))
                    setattr(feed, name, ahead)
                if isinstance(ahead, _Ready) and ahead.assignment is not None:
                    a = ahead.assignment
                    waiting.append(a.record if a.record is not None else Record(a.spec.sid))
        return reading + waiting + list(self.adopted)

    def get_state(self) -> dict:
        with self.lock:
            return self._state()

    def _state(self) -> dict:
        if self.restore is not None:  # restored, not joined yet: the checkpoint it holds
            return self._restored_state()
        key = self._key() if self.info is None else self.info.key
        return {
            "job": {
                "name": key[0],
                "uid": key[2],
                "epoch": list(key[1]),
                "seed": self.seed,
                "mode": self.node.processing_mode,
                "layout": layout_to_state(self.layout),
            },
            "consumer": self.node.consumer_index,
            "done": sorted(self.done),
            "records": [
                {"sid": r.sid, "carry": r.carry, "state": r.state, "finished": r.finished}
                for r in self._records()
            ],
        }

    def _restored_state(self) -> dict:
        me = self.node.consumer_index
        assert self.restore is not None  # called while restoring
        mine = [s for s in self.restore[0] if me is None or s["consumer"] == me]
        records = {int(r["sid"]): r for s in mine for r in s["records"]}
        done = sorted({int(sid) for s in mine for sid in s["done"]})
        return {"job": dict(self.restore_job), "consumer": me, "done": done,
                "records": list(records.values())}  # fmt: skip

    def set_state(self, state: Any) -> None:
        """Resume from this consumer's state, or from the list of all consumers' states of
        a shared job (see ``distribute``); the job is rejoined at the next element."""
        with self.lock:
            self._restore(check_consumer_states(state, self.node))

    def _restore(self, states: list[dict]) -> None:
        job = states[0]["job"]
        layout = layout_from_state(job["layout"])
        me = self.node.consumer_index
        if me is not None and not any(s["consumer"] == me for s in states):
            raise ValueError(
                f"distribute: none of the {len(states)} states was saved by consumer_index={me}"
            )
        ids = [
            [s["consumer"] if s["consumer"] is None else int(s["consumer"]),
             sorted(int(sid) for sid in s["done"]), sorted(int(r["sid"]) for r in s["records"])]
            for s in states
        ]  # fmt: skip
        restore_id = hashlib.sha1(json.dumps(ids).encode()).hexdigest()
        self._leave()
        self._reset()
        self.layout, self.seed = layout, int(job["seed"])
        self.job_epoch = [int(e) for e in job["epoch"]]
        suffix = "resumed" if me is not None else f"resumed-{restore_id[:16]}"
        self.uid = f"{job['uid']}:{suffix}"
        self.restore = ([own_part(s) for s in states], restore_id)
        self.restore_job = job

    # ---- stopping ------------------------------------------------------------------------
    def _leave(self) -> None:
        """Give back the splits in progress (with what was received and not delivered) and
        close this consumer's streams on the workers."""
        if self.info is None or self.exhausted:
            return
        try:
            self._release(self._records(resolve=False))
            for feed in self.feeds:
                for run in (feed.run, feed.ahead):
                    if run is not None and run.opened:
                        self.workers[run.worker].close.remote([run.key])
        except Exception:  # noqa: BLE001 - Ray already shut down (interpreter exit)
            pass
        self.exhausted = True

    def close(self) -> None:
        if self.closed:
            return
        self._leave()
        self.feeds, self.ready = [], deque()
        super().close()


class _Ready:
    """A feed's next split that is here: taken from the adopted ones (no dispatcher call
    to wait for), or the dispatcher's answer already received (None: nothing left)."""

    __slots__ = ("assignment",)

    def __init__(self, assignment: Assignment | None):
        self.assignment = assignment


class _WorkerGone(Exception):
    """A request's worker died (or its reply was lost): read the split elsewhere."""
