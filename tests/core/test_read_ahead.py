"""No read-ahead without a buffer (issue 10): with no prefetch or parallel stage, the outer
iterator asks a generator source for nothing before the consumer needs it, and computes no
costly element ahead of it."""

from __future__ import annotations

import queue
import time

import pytest

import datapipe as dp

pytestmark = pytest.mark.timeout(60)

INT = dp.TensorSpec((), "int64")


def _fed_by(q: queue.Queue):
    def gen():
        while True:
            # A read ahead would block here until the timeout: the test then fails with
            # queue.Empty instead of hanging.
            item = q.get(timeout=3)
            if item is None:
                return
            yield item

    return gen


@pytest.mark.parametrize(
    "build",
    [
        lambda ds: ds.map(lambda x: x * 10),
        lambda ds: ds.map(lambda x: x * 10).filter(lambda x: x >= 0).take(1000),
        lambda ds: ds.enumerate().map(lambda i, x: x * 10),
        lambda ds: ds.map(lambda x: x * 5).repeat(2).map(lambda x: x * 2),
    ],
)
def test_generator_fed_by_the_consumer_never_deadlocks(build):
    q: queue.Queue = queue.Queue()
    it = iter(build(dp.from_generator(_fed_by(q), INT)))
    got = []
    for i in range(200):
        q.put(i)  # the training loop feeds one element, then asks for one
        got.append(int(next(it)))
    assert got == [10 * i for i in range(200)]
    it.close()


def test_generator_batches_ask_for_exactly_one_batch():
    q: queue.Queue = queue.Queue()
    it = iter(dp.from_generator(_fed_by(q), INT).batch(3))
    for b in range(50):
        for k in range(3):
            q.put(3 * b + k)
        assert next(it).tolist() == [3 * b, 3 * b + 1, 3 * b + 2]


def test_a_prefetch_is_a_buffer_the_user_asked_for():
    from datapipe.parallel.plan import read_ahead_allowed

    gen = dp.from_generator(lambda: iter(range(3)), INT)
    assert not read_ahead_allowed(gen.map(lambda x: x))
    assert read_ahead_allowed(gen.prefetch(2).map(lambda x: x))
    assert read_ahead_allowed(gen.map(lambda x: x, num_parallel_calls=2))
    assert not read_ahead_allowed(gen.prefetch(0))
    assert not read_ahead_allowed(dp.range(3).concatenate(gen))
    assert read_ahead_allowed(dp.range(3).map(lambda x: x))


def test_costly_elements_are_not_computed_ahead():
    calls = []

    def costly(x):
        time.sleep(0.002)  # over the ~1 ms an element may cost to be computed ahead
        calls.append(int(x))
        return x

    it = iter(dp.range(1000).map(costly))
    for k in range(1, 60):
        next(it)
        assert len(calls) == k  # exactly the elements asked for, never one more
    it.close()


def test_cheap_elements_still_travel_in_chunks():
    # What keeps W1 fast: a chain of cheap ops is called once per chunk, not per element.
    calls = []

    def cheap(x):
        calls.append(int(x))
        return x

    it = iter(dp.range(100_000).map(cheap))
    for _ in range(2000):
        next(it)
    assert len(calls) > 2000  # read ahead in chunks
    assert len(calls) < 2000 + 64  # by at most one chunk
    it.close()
