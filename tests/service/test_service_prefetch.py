"""A service consumer's split prefetch, worker loss and checkpoints, on an in-process
stand-in for Ray (``fake_ray``: the real consumer, ``JobTable`` and ``WorkerServer``; no Ray
started), so the protocol is covered in the default run. The same on a real local Ray:
test_service_ray.py."""

from __future__ import annotations

import collections
import pickle

import pytest
from fake_ray import FakeDispatcher, fake_service

import datapipe as dp
from datapipe.service import RayService, consumer, distribute

N, SPLIT, REPLY = 40, 10, 4  # 4 splits of 10, replies of at most 4 elements


@pytest.fixture(autouse=True)
def small_replies(monkeypatch):
    monkeypatch.setattr(consumer, "REPLY_ELEMENTS", REPLY)  # a split takes 3 replies


class Taken:
    """What the test took from an iterator: the dispatcher's fake reads ``len`` of it."""

    def __init__(self):
        self.items: list[int] = []

    def __len__(self) -> int:
        return len(self.items)

    def take(self, it, k: int | None = None) -> list[int]:
        """``k`` elements (None: the rest) of the op itself, one at a time (the public
        iterator would read ahead in chunks)."""
        got: list[int] = []
        while k is None or len(got) < k:
            chunk = it.root.next_chunk(1)
            if not chunk:
                break
            got.append(int(chunk[0]))
            self.items.append(int(chunk[0]))
        return got


def served(workers: int = 1, deterministic: bool = True, job_name: str | None = None):
    """``(make, dispatcher, fake ray, taken)``: ``make()`` builds the pipeline (each
    process of a shared job builds its own; iteration 0 of each is the job)."""
    taken = Taken()
    svc = RayService(num_workers=workers, split_size=SPLIT)
    disp = FakeDispatcher(workers, lambda: len(taken))
    fake = fake_service(svc, disp)
    opts = dp.Options(deterministic=deterministic)

    def make():
        return dp.range(N).apply(distribute("distributed_epoch", svc, job_name)).with_options(opts)

    return make, disp, fake, taken


def feeds(it) -> list:
    return it.root.feeds


def sid_of(ahead) -> int:
    """The split of a feed's prefetched assignment (a ref of the fake, or ``_Ready``)."""
    return (ahead.assignment if hasattr(ahead, "assignment") else ahead.value).spec.sid


def reads(actor) -> list[int]:
    """The split of each read request sent to a worker, in the order sent."""
    return [pickle.loads(args[0])[0][-2] for name, args, _ in actor.log if name == "read"]


def taken_at_open(actor, sid: int) -> int:
    """How many elements the test had taken when split ``sid``'s first request was sent."""
    return next(n for name, args, n in actor.log if pickle.loads(args[0])[0][-2] == sid)


def test_a_feed_asks_for_its_next_split_before_the_current_one_ends():
    make, disp, _, taken = served()
    got = taken.take(iter(make()))
    assert sorted(got) == list(range(N))
    # two feeds on the one worker, each in a fixed rotation, one reply at a time: split
    # 2 follows split 0 on feed 0, split 3 follows split 1 on feed 1
    assert got == [0, 1, 2, 3, 10, 11, 12, 13, 4, 5, 6, 7, 14, 15, 16, 17, 8, 9, 18, 19,
                   20, 21, 22, 23, 30, 31, 32, 33, 24, 25, 26, 27, 34, 35, 36, 37, 28, 29,
                   38, 39]  # fmt: skip
    # (elements the worker had computed, elements taken) at each next_split call: the
    # requests that got splits 2 and 3 came while splits 0 and 1 were still being read
    # (before their last elements were computed, let alone taken) -- without the
    # prefetch, only once a split's last reply had come
    calls = disp.calls
    assert calls[:4] == [(0, 0), (0, 0), (0, 0), (REPLY, REPLY)]
    assert calls[2][0] < SPLIT and calls[3][0] < 2 * SPLIT
    # the prefetches of splits 2 and 3 found nothing after them; at their ends each feed
    # asked once more (nothing was given back meanwhile) and ended
    assert len(calls) == 2 + 4 + 2
    stats = disp.table.stats
    assert (stats["splits_assigned"], stats["splits_done"], stats["splits_released"]) == (4, 4, 0)
    assert disp.table.jobs == {}
    # The worker's requests, in the order they were sent: a feed keeps 2 in flight; once
    # those cover the rest of its split (8 received: 1 reply of up to 4 in flight for
    # the 2 left), its next request opens the prefetched split (2 after 0, 3 after 1):
    # the worker has the next split's first request queued before the feed took the
    # current one's last reply (split 2's was sent with 8 elements taken; split 0's last
    # element is the 18th), so it is not left waiting a round trip at the boundary.
    # Exactly 3 requests per split (4 + 4 + 2 elements: the reply that holds a split's
    # last element says it ended), none after an end.
    worker = disp.workers[0]
    assert reads(worker) == [0, 0, 0, 1, 1, 1, 2, 3, 2, 3, 2, 3]
    assert (taken_at_open(worker, 2), got.index(9)) == (8, 17)
    assert (taken_at_open(worker, 3), got.index(19)) == (12, 19)


@pytest.mark.parametrize("deterministic", [True, False])
def test_a_lost_workers_prefetched_splits_are_read_once_on_its_replacement(deterministic):
    make, disp, fake, taken = served(deterministic=deterministic)
    it = iter(make())
    while not any(f.ahead for f in feeds(it)):  # until a feed opened its next split ahead
        assert taken.take(it, 1)
    assert sorted(sid_of(f.next) for f in feeds(it) if f.next is not None) == [2, 3]
    reading = {f.run.sid for f in feeds(it) if f.run is not None}
    ahead = {f.ahead.sid for f in feeds(it) if f.ahead is not None}
    assert reading <= {0, 1} and ahead and ahead <= {2, 3}
    assert ahead <= set(reads(disp.workers[0]))  # sent to the worker that dies
    fake.kill(disp.workers[0])
    taken.take(it)
    assert collections.Counter(taken.items) == {i: 1 for i in range(N)}
    replacement = disp.servers[1]
    assert disp.table.stats["workers_replaced"] == 1
    # the splits being read resumed there from their last replies taken; the prefetched
    # ones (opened ahead on the dead worker or not) were read there from their start
    assert {key[-2] for key in replacement.core.ended} == reading | {2, 3}
    assert it.root.counts["resumed"] == len(reading)
    assert disp.table.stats["splits_done"] == 4 and disp.table.jobs == {}


def test_a_checkpoint_names_the_prefetched_splits_and_resumes_exactly():
    make, disp, _, taken = served()
    it = iter(make())
    first = taken.take(it, 6)
    state = it.root.get_state()
    records = {r["sid"]: r for r in state["records"]}
    assert sorted(records) == [0, 1, 2, 3]  # in progress: 0 and 1; prefetched: 2 and 3
    assert records[2]["state"] is None and records[2]["carry"] is None  # from their start
    assert not records[2]["finished"] and not records[3]["finished"]
    assert state["done"] == []
    it.close()
    again = iter(make())
    again.root.set_state(state)
    rest = taken.take(again)
    assert collections.Counter(first + rest) == {i: 1 for i in range(N)}


def test_a_consumer_that_stops_gives_its_prefetched_splits_back_unread():
    make, disp, _, taken = served(job_name="shared")
    a = iter(make())
    a_got = taken.take(a, 5)
    assert sorted(sid_of(f.next) for f in feeds(a)) == [2, 3]
    a.close()  # splits 0 and 1 go back with what it received; 2 and 3 from their start
    job = next(iter(disp.table.jobs.values()))
    assert sorted(job.requeued) == [0, 1, 2, 3] and job.assigned == {}
    assert job.requeued[2].state is None and job.requeued[2].carry is None
    b = iter(make())  # the same job (its name, iteration 0): reads the rest
    b_got = taken.take(b)
    assert collections.Counter(a_got + b_got) == {i: 1 for i in range(N)}
    # all four given back: 0 and 1 with what it had received, 2 and 3 as handed out
    assert disp.table.stats["splits_released"] == 4


def test_parallel_epochs_prefetch_finds_the_end_and_asks_once_more():
    # one feed per slot: each feed's prefetch finds no split left (None), reads its copy
    # to the end, asks once more (a consumer may have given splits back), then ends
    taken = Taken()
    svc = RayService(num_workers=2)
    disp = FakeDispatcher(2, lambda: len(taken))
    fake_service(svc, disp)
    it = iter(dp.range(12).apply(distribute("parallel_epochs", svc)))
    got = taken.take(it)
    assert collections.Counter(got) == {i: 2 for i in range(12)}
    assert len(disp.calls) == 2 + 2 + 2  # first splits, prefetches (None), asks at the ends
    assert disp.table.stats["splits_done"] == 2 and disp.table.jobs == {}
    assert all(f.ended and f.next is None and f.ahead is None for f in feeds(it))


def test_a_replacement_that_died_too_is_replaced_again():
    # breaker3: another consumer had worker 0 replaced, and the replacement died too; this
    # consumer, reporting the handle it saw, got the dead replacement back and failed
    # ("its replacement did not start within 120 s") with most of the job unread.
    make, disp, fake, taken = served()
    it = iter(make())
    first = taken.take(it, 5)
    seen = disp.workers[0]
    fake.kill(seen)
    disp.report_dead(0, [seen])  # another consumer's report: a replacement...
    fake.kill(disp.workers[0])  # ...that dies too
    rest = taken.take(it)
    assert collections.Counter(first + rest) == {i: 1 for i in range(N)}
    assert disp.table.stats["workers_replaced"] == 2 and disp.table.jobs == {}


def test_a_slot_whose_replacements_keep_dying_names_it():
    make, disp, fake, taken = served()
    it = iter(make())
    taken.take(it, 5)
    real = disp.report_dead

    def report_dead(slot, seen):  # each replacement is dead on arrival
        workers = real(slot, seen)
        fake.kill(disp.workers[slot])
        return workers

    disp.report_dead = report_dead
    fake.kill(disp.workers[0])
    with pytest.raises(dp.WorkerDiedError, match=r"worker 0 of service .* died 3 times in a row"):
        taken.take(it)
