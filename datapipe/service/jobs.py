"""The dispatcher's bookkeeping: jobs, their splits, who reads which (no Ray in here).

The dispatcher actor (``datapipe.service.actors.Dispatcher``) wraps one ``JobTable``; every
call is short and runs to completion before the next (a Ray actor runs one call at a
time), so nothing here locks.

Exactly once, by construction:

- A split is handed to one consumer at a time (``assigned``); it is handed out again only
  when that consumer gives it back (``release``, with where it stopped) -- never because
  of a timeout, so two consumers never read one split.
- A split is ``done`` when its consumer reports that it *received* its last element
  (``next_split(finished=...)``); a worker that dies before that does not make it done:
  the consumer resumes the split on another worker from the chain state after the last
  element it received (``datapipe.service.consumer``).
- A consumer asks for each feed's next split while the feed still reads its current one
  (the split prefetch); a split it gives back unstarted, or whose assignment it never
  saw, is requeued as it was handed out (``handed``: from its start, or with the record
  it came with), so a prefetched split is neither lost nor read twice.
- A checkpoint (each consumer's ``get_state``) names the splits whose elements were all
  *delivered* and, for the others, the elements received but not delivered plus the chain
  state after them; resuming registers them here (``_restore``) before any split is handed
  out, and one consumer adopts them as its own (reads the splits in progress, keeps the
  done ones in its later checkpoints), so a resumed job reads the rest, nothing twice,
  however many times it is checkpointed and resumed.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from datapipe.service.layout import Layout, SplitSpec

# Finished named jobs kept so that a consumer arriving late gets the end of input at once
# (tf.data's rule for a job name used again) instead of a fresh job reading it all again.
MAX_FINISHED_JOBS = 10_000


@dataclass
class Record:
    """A split that a consumer gave back, or that a checkpoint names as in progress.

    Attributes:
        sid: the split.
        carry: elements received and not delivered (delivered first by the next reader),
            as ``datapipe._positions.buffer_to_state`` writes them (failures as messages).
        state: the split chain's state after the last received element (None: read the
            split from its start).
        finished: every element was received (nothing more to read from a worker).
    """

    sid: int
    carry: Any = None
    state: Any = None
    finished: bool = False


@dataclass
class Assignment:
    """A split for a consumer: its description, the worker slot to read it on, and where
    to start (a ``Record`` when the split was read before, else None)."""

    spec: SplitSpec
    worker: int
    record: Record | None = None


@dataclass
class JobInfo:
    """What a consumer needs to read a job it joined; ``adopted``: the checkpointed
    progress it resumes (``{"done": [...], "records": [...]}``), see ``JobTable._restore``."""

    key: tuple
    token: int
    seed: int
    layout: Layout
    blob: Any
    finished: bool = False
    adopted: dict | None = None


@dataclass
class Job:
    key: tuple
    fingerprint: str
    layout: Layout
    seed: int
    blob: Any
    done: set = field(default_factory=set)
    assigned: dict = field(default_factory=dict)  # sid -> consumer token
    # sid -> the Record an assigned split was handed out (or restored) with: what a
    # consumer that gives it back unread (a prefetched split) gives back
    handed: dict = field(default_factory=dict)
    requeued: OrderedDict = field(default_factory=OrderedDict)  # sid -> Record
    cursors: dict = field(default_factory=dict)  # owner (None: any) -> place in its order
    consumers: dict = field(default_factory=dict)  # token -> consumer index (None: any)
    restored_from: str | None = None

    def finished(self) -> bool:
        """Every split done (False while one is unbounded)."""
        count = self.layout.count()
        return count is not None and len(self.done) >= count and not self.requeued


class JobTable:
    """Jobs by key (see the module docstring). ``workers``: the number of worker slots."""

    def __init__(self, workers: int):
        self.workers = workers
        self.jobs: dict[tuple, Job] = {}
        self.finished: OrderedDict = OrderedDict()  # key -> fingerprint
        self.tokens = itertools.count(1)
        self.stats = {"splits_assigned": 0, "splits_done": 0, "splits_released": 0,
                      "splits_resumed": 0, "workers_replaced": 0, "jobs": 0}  # fmt: skip

    # ---- joining -------------------------------------------------------------------------
    def join(
        self,
        key: tuple,
        fingerprint: str,
        layout: Layout,
        seed: int,
        blob: Any,
        consumer: int | None,
        restore: list[dict] | None = None,
        restore_id: str | None = None,
    ) -> JobInfo:
        """Join job ``key`` (creating it when new) as consumer ``consumer`` (an index of
        ``num_consumers``, or None: first come, first served). ``restore``: checkpointed
        consumer states (``own_state`` dicts) to resume from.

        Raises:
            ValueError: the job runs another pipeline or split layout (``fingerprint``),
                its consumer index is taken, or it was resumed from another checkpoint.
        """
        if key in self.finished:
            if self.finished[key] != fingerprint:
                raise ValueError(_other_pipeline(key))
            return JobInfo(key, 0, seed, layout, blob, finished=True)
        job = self.jobs.get(key)
        if job is None:
            job = Job(key, fingerprint, layout, seed, blob)
            self.jobs[key] = job
            self.stats["jobs"] += 1
        elif job.fingerprint != fingerprint:
            raise ValueError(_other_pipeline(key))
        if consumer is not None and consumer in job.consumers.values():
            raise ValueError(
                f"distribute: consumer_index={consumer} already reads job {_name(key)}; each "
                "consumer of a shared job needs its own index"
            )
        token = next(self.tokens)
        adopted = None
        if restore is not None:
            adopted = self._restore(job, restore, restore_id, consumer, token)
        job.consumers[token] = consumer
        return JobInfo(key, token, job.seed, job.layout, job.blob, adopted=adopted)

    def _restore(
        self, job: Job, states: list[dict], restore_id: str | None, me: int | None, token: int
    ) -> dict:
        """Adopt checkpointed progress for consumer ``token``, which keeps it as its own (so
        its own later checkpoints carry it on, resume after resume): the done splits, and
        the splits in progress, which it reads itself before any other (they are assigned
        to it here, so no other consumer gets them). With consumer indices each consumer
        adopts the states saved under its index; without, the first joiner adopts them all
        and later joiners must bring the same list (and adopt nothing)."""
        if me is None:
            if job.restored_from is not None:
                if job.restored_from != restore_id:
                    raise ValueError(
                        f"distribute: job {_name(job.key)} was already resumed from another "
                        "checkpoint in this service; pass the same list of all consumers' "
                        "states to every consumer"
                    )
                return {"done": [], "records": []}
            if job.assigned or job.done or job.cursors:
                raise ValueError(
                    f"distribute: job {_name(job.key)} has started; resume it before any "
                    "consumer reads from it"
                )
            job.restored_from = restore_id
            mine = states
        else:
            mine = [s for s in states if s.get("consumer") == me]
            self._forget_owner(job, me)
        done: set[int] = set()
        records: dict[int, dict] = {}
        for s in mine:
            done.update(int(sid) for sid in s["done"])
            records.update((int(rec["sid"]), rec) for rec in s["records"])
        job.done |= done
        for sid, rec in records.items():
            job.assigned[sid] = token
            job.handed[sid] = Record(sid, rec["carry"], rec["state"], bool(rec["finished"]))
        self.stats["splits_resumed"] += len(records)
        return {"done": sorted(done), "records": list(records.values())}

    def _forget_owner(self, job: Job, owner: int) -> None:
        """Drop what the job knows of consumer ``owner``'s splits (it restores them)."""
        layout = job.layout
        job.done = {sid for sid in job.done if layout.owner(sid) != owner}
        for table in (job.assigned, job.requeued, job.handed):
            for sid in [sid for sid in table if layout.owner(sid) == owner]:
                del table[sid]
        job.cursors.pop(owner, None)

    # ---- reading -------------------------------------------------------------------------
    def next_split(
        self, key: tuple, token: int, worker: int, finished: Sequence[int] = ()
    ) -> Assignment | None:
        """Mark ``finished`` done (every element delivered by this consumer) and hand this
        consumer its next split, to read on worker slot ``worker`` (``parallel_epochs``:
        on the split's own slot); None at the end of its input."""
        job = self.jobs.get(key)
        if job is None:
            return None
        self._finish(job, token, finished)
        owner = job.consumers.get(token)
        got = self._requeued(job, owner)
        if got is None:
            got = self._fresh(job, owner)
        if got is None:
            self._maybe_finish(job)
            return None
        spec, record = got
        job.assigned[spec.sid] = token
        self.stats["splits_assigned"] += 1
        if record is not None:
            job.handed[spec.sid] = record
            self.stats["splits_resumed"] += 1
        return Assignment(spec, self._slot(job, spec, worker), record)

    def _finish(self, job: Job, token: int, sids: Sequence[int]) -> None:
        for sid in sids:
            if job.assigned.get(sid) == token:
                del job.assigned[sid]
                job.handed.pop(sid, None)
                job.done.add(sid)
                self.stats["splits_done"] += 1

    def _slot(self, job: Job, spec: SplitSpec, worker: int) -> int:
        if spec.epoch_extra:  # parallel_epochs: the slot's own worker
            return spec.epoch_extra[0] % self.workers
        return worker % self.workers

    def _requeued(self, job: Job, owner: int | None) -> tuple | None:
        for sid, rec in job.requeued.items():
            if owner is None or job.layout.owner(sid) == owner:
                del job.requeued[sid]
                return job.layout.spec(sid), rec
        return None

    def _fresh(self, job: Job, owner: int | None) -> tuple | None:
        """The next split of ``owner``'s sequence (``layout.order``) that is neither done,
        handed out nor given back; empty splits are marked done on the way."""
        layout = job.layout
        i = job.cursors.get(owner, 0)
        seed = hash((job.seed, tuple(job.key[1])))  # a new order each iteration (epoch)
        while True:
            sid = layout.order(i, owner, seed)
            if sid is None:
                job.cursors[owner] = i
                return None
            i += 1
            if sid in job.done or sid in job.assigned or sid in job.requeued:
                continue
            spec = layout.spec(sid)
            if spec.size == 0:
                job.done.add(sid)  # an empty split (the last round's): nothing to read
                continue
            job.cursors[owner] = i
            return spec, None

    def release(
        self, key: tuple, token: int, records: list[Record], finished: Sequence[int] = ()
    ) -> None:
        """A consumer stops (its input ended, or ``close``): ``finished`` are done, and it
        gives back its splits in progress with what it had received and not delivered
        (``records``); others (or a later joiner) finish them."""
        job = self.jobs.get(key)
        if job is None:
            return
        self._finish(job, token, finished)
        for rec in records:
            if job.assigned.get(rec.sid) == token:
                del job.assigned[rec.sid]
                job.handed.pop(rec.sid, None)
                job.requeued[rec.sid] = rec
                self.stats["splits_released"] += 1
        for sid in [sid for sid, t in job.assigned.items() if t == token]:
            # assigned but never started (a prefetched split, or one whose assignment was
            # still on its way): from where it was handed out -- its start, or the record
            # it came with (elements another consumer received, and the state after them)
            del job.assigned[sid]
            job.requeued[sid] = job.handed.pop(sid, None) or Record(sid)
        job.consumers.pop(token, None)
        self._maybe_finish(job)

    def _maybe_finish(self, job: Job) -> None:
        if job.finished() and not job.assigned:
            del self.jobs[job.key]
            if job.key[0] is not None:  # a named job: late joiners get the end at once
                self.finished[job.key] = job.fingerprint
                while len(self.finished) > MAX_FINISHED_JOBS:
                    self.finished.popitem(last=False)
        elif not job.consumers and job.key[0] is None:
            del self.jobs[job.key]  # an anonymous job nobody reads any more


def _name(key: tuple) -> str:
    return repr(key[0]) if key[0] is not None else "(anonymous)"


def _other_pipeline(key: tuple) -> str:
    return (
        f"distribute: job_name {key[0]!r} (iteration {list(key[1])}) already runs another "
        "pipeline, processing mode or split layout in this service; use a job name per "
        "training job"
    )
