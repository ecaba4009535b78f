"""Every thread a pipeline starts stops within 1 s: break, close, del + gc, exceptions,
KeyboardInterrupt."""

from __future__ import annotations

import gc
import time

import pytest

import datapipe as dp

pytestmark = pytest.mark.timeout(30)


def _slow(x):
    time.sleep(0.001)
    return x


def _pipelines():
    return {
        "map": dp.range(10_000).map(_slow, num_parallel_calls=3),
        # AUTOTUNE picking among threads only (with the executor free it runs the first
        # elements inline, so no thread may run yet after five of them)
        "map_auto": dp.range(10_000)
        .map(_slow, num_parallel_calls=dp.AUTOTUNE)
        .with_options(dp.Options(threading=dp.ThreadingOptions(executor="thread"))),
        "batch": dp.range(10_000).map(_slow).batch(4, num_parallel_calls=2),
        "prefetch": dp.range(10_000).map(_slow).prefetch(8),
        "interleave": dp.range(100).interleave(
            lambda n: dp.range(100).map(_slow), cycle_length=3, num_parallel_calls=3
        ),
        "nested": dp.range(10_000)
        .map(_slow, num_parallel_calls=2)
        .batch(2, num_parallel_calls=2)
        .prefetch(dp.AUTOTUNE),
    }


NAMES = sorted(_pipelines())


def _started(it) -> None:
    for _ in range(5):
        next(it)


@pytest.mark.parametrize("name", NAMES)
def test_close_stops_threads(name, threads):
    it = iter(_pipelines()[name])
    _started(it)
    assert threads.names()  # the pipeline runs threads
    it.close()
    assert threads.settle(1.0) == []


@pytest.mark.parametrize("name", NAMES)
def test_break_and_drop_stops_threads(name, threads):
    for i, _ in enumerate(_pipelines()[name]):
        if i == 5:
            break
    # the for loop's iterator is unreachable now; CPython frees it at once
    gc.collect()
    assert threads.settle(1.0) == []


@pytest.mark.parametrize("name", NAMES)
def test_del_and_gc_stops_threads(name, threads):
    it = iter(_pipelines()[name])
    _started(it)
    assert threads.names()
    del it
    gc.collect()
    assert threads.settle(1.0) == []


def test_with_block_stops_threads(threads):
    with iter(_pipelines()["nested"]) as it:
        _started(it)
        assert threads.names()
    assert threads.settle(1.0) == []


def test_exception_in_consumer_stops_threads(threads):
    def consume():
        for i, _ in enumerate(_pipelines()["nested"]):
            if i == 3:
                raise RuntimeError("consumer failed")

    with pytest.raises(RuntimeError, match="consumer failed"):
        consume()
    gc.collect()
    assert threads.settle(1.0) == []


def test_exception_from_worker_then_drop_stops_threads(threads):
    def bad(x):
        if int(x) == 50:
            raise ValueError("boom")
        return x

    caught = None
    try:
        for _ in dp.range(10_000).map(bad, num_parallel_calls=3).prefetch(4):
            pass
    except dp.PipelineError as e:  # as user code would; leaving the block frees the traceback
        caught = str(e)
    assert caught is not None and "boom" in caught
    gc.collect()
    assert threads.settle(1.0) == []


def test_keyboard_interrupt_in_worker_closes_pipeline(threads):
    def interrupt(x):
        if int(x) == 20:
            raise KeyboardInterrupt
        return _slow(x)

    it = iter(dp.range(10_000).map(interrupt, num_parallel_calls=3).prefetch(4))
    with pytest.raises(KeyboardInterrupt):
        for _ in it:
            pass
    # the public iterator closed the pipeline itself: no gc, no close() needed
    assert threads.settle(1.0) == []
    assert list(it) == []


def test_keyboard_interrupt_while_consumer_waits(threads):
    import _thread
    import threading

    def very_slow(x):
        time.sleep(0.5)
        return x

    it = iter(dp.range(100).map(very_slow, num_parallel_calls=2))
    timer = threading.Timer(0.2, _thread.interrupt_main)  # arrives inside the queue wait
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            for _ in it:
                pass
    finally:
        timer.cancel()
    assert threads.settle(1.0) == []


def test_exhausted_pipeline_leaves_no_threads(threads):
    ds = dp.range(20).interleave(
        lambda n: dp.range(30).map(_slow), cycle_length=3, num_parallel_calls=3
    )
    assert len(list(ds.map(_slow, num_parallel_calls=2).prefetch(2))) == 600
    assert threads.settle(1.0) == []
