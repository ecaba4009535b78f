"""Every thread a pipeline starts stops within 1 s: break, close, del + gc, exceptions,
KeyboardInterrupt, a pipeline error (without waiting for the GC); closing nested blocked
stages takes about one second."""

from __future__ import annotations

import gc
import signal
import time

import pytest
from harness import iterate_until_interrupted

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


def _fail_at(k: int):
    def f(x):
        if int(x) == k:
            raise ValueError(f"bad {k}")
        return x

    return f


def _consume_until_error(ds: dp.Dataset) -> str:
    try:
        for _ in ds:
            pass
    except dp.PipelineError as e:  # leaving the block drops the user's only reference
        return str(e)
    return ""


FAILING_PIPELINES = {
    "map": lambda: dp.range(10**6).map(_fail_at(5), 2),
    "batch": lambda: dp.range(10**6).map(_fail_at(5)).batch(2, num_parallel_calls=2),
    "prefetch": lambda: dp.range(10**6).map(_fail_at(5)).prefetch(2),
    "interleave": lambda: dp.range(10).interleave(
        lambda i: dp.range(10**6).map(_fail_at(5)), cycle_length=2, num_parallel_calls=2
    ),
    "seq_batch_after_map": lambda: dp.range(10**6).map(_fail_at(5), 2).batch(2),
    "seq_map_after_map": lambda: dp.range(10**6).map(lambda x: x, 2).map(_fail_at(5)),
    "generator_prefetch": lambda: dp.Dataset.from_generator(
        lambda: (_fail_at(5)(i) for i in range(10**6)), dp.TensorSpec((), "int64")
    ).prefetch(2),
}


CLOSE_PIPELINES = {
    "map_prefetch": lambda f: dp.range(100).map(f, 2).prefetch(2),
    "map_batch_prefetch": lambda f: (
        dp.range(100).map(f, 2).batch(2, num_parallel_calls=2).prefetch(2)
    ),
    "interleave_of_maps": lambda f: dp.range(3).interleave(
        lambda i: dp.range(100).map(f, 2), cycle_length=3, num_parallel_calls=3
    ),
}


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
    def very_slow(x):
        time.sleep(0.5)
        return x

    it = iter(dp.range(100).map(very_slow, num_parallel_calls=2))
    iterate_until_interrupted(it)  # at 0.2 s: inside the consumer's wait
    assert threads.settle(1.0) == []


def test_keyboard_interrupt_arrives_when_the_shell_ignored_sigint(threads):
    # A test run started in the background (``nohup ... &``) inherits SIGINT as ignored;
    # the Ctrl-C tests install Python's handler themselves (issue 33 item 7).
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        it = iter(dp.range(100).map(lambda x: time.sleep(0.5) or x, num_parallel_calls=2))
        iterate_until_interrupted(it)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # given back as found
    finally:
        signal.signal(signal.SIGINT, previous)
    assert threads.settle(1.0) == []


def test_exhausted_pipeline_leaves_no_threads(threads):
    ds = dp.range(20).interleave(
        lambda n: dp.range(30).map(_slow), cycle_length=3, num_parallel_calls=3
    )
    assert len(list(ds.map(_slow, num_parallel_calls=2).prefetch(2))) == 600
    assert threads.settle(1.0) == []


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", sorted(FAILING_PIPELINES))
def test_pipeline_error_stops_threads_without_gc(name, threads):
    # The exception raised to the consumer must not sit in a reference cycle with the
    # pipeline (error -> traceback -> op frame -> error): the threads would then run until
    # the cyclic garbage collector happens to run, not "within 1 s of the exception".
    gc.collect()
    gc.disable()
    try:
        msg = _consume_until_error(FAILING_PIPELINES[name]())
        assert "bad 5" in msg
        assert threads.settle(1.0) == []
    finally:
        gc.enable()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", sorted(CLOSE_PIPELINES))
def test_close_of_nested_blocked_stages_takes_about_one_second(name, threads):
    # Every stage waited up to 1 s for its own threads, one stage after the other: closing
    # (or a KeyboardInterrupt) with user functions blocked took ~1 s per stage.
    import threading
    import time

    release = threading.Event()

    def blocked(x):
        release.wait(10)
        return x

    it = iter(CLOSE_PIPELINES[name](blocked))
    consumer = threading.Thread(target=lambda: next(it, None), daemon=True)
    consumer.start()
    time.sleep(0.3)  # the workers are inside the user function
    t0 = time.monotonic()
    it.close()
    took = time.monotonic() - t0
    release.set()
    consumer.join(2)
    assert took < 1.7, took  # was ~1 s per blocked stage (2-3 s here)
    assert not consumer.is_alive()
    assert threads.settle(2.0) == []  # the blocked threads exit once the function returns
