"""Review of the parallel layer (issue 3): defects found by using it as a tf.data user."""

from __future__ import annotations

import gc

import pytest

import datapipe as dp


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


PIPELINES = {
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


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_pipeline_error_stops_threads_without_gc(name, threads):
    # The exception raised to the consumer must not sit in a reference cycle with the
    # pipeline (error -> traceback -> op frame -> error): the threads would then run until
    # the cyclic garbage collector happens to run, not "within 1 s of the exception".
    gc.collect()
    gc.disable()
    try:
        msg = _consume_until_error(PIPELINES[name]())
        assert "bad 5" in msg
        assert threads.settle(1.0) == []
    finally:
        gc.enable()


@pytest.mark.timeout(30)
def test_nondeterministic_snapshot_is_fixed_when_taken():
    # deterministic=False: 0.1's snapshots kept a log of the deliveries made after them,
    # growing while alive, and a restore forced that order (a delivery it could not match
    # hung the consumer: issue 10). Now a snapshot is fixed when get_state returns it.
    import json
    import threading

    release = threading.Event()

    def f(x):
        if int(x) == 0:  # the first chunk ([0]) finishes after the second ([1])
            release.wait(5)
        return int(x)

    ds = dp.range(40).map(f, num_parallel_calls=2, deterministic=False)
    it = iter(ds)
    state = it.get_state()
    frozen = json.dumps(state)
    first = int(next(it))
    release.set()
    rest = [int(x) for x in it]
    assert first == 1 and sorted([first, *rest]) == list(range(40))
    assert json.dumps(state) == frozen
    it2 = iter(ds)
    it2.set_state(state)
    assert sorted(int(x) for x in it2) == list(range(40))


@pytest.mark.timeout(30)
def test_stage_above_a_nondeterministic_one_stores_its_elements():
    # Replaying the input of a stage above a deterministic=False stage would not give the
    # same elements again, so its snapshot stores the ones it holds (tf.data's way).
    opts = dp.Options(deterministic=False)
    ds = dp.range(100).map(_jitter, num_parallel_calls=2).prefetch(8).with_options(opts)
    it = iter(ds)
    head = [int(next(it)) for _ in range(30)]
    state = it.get_state()
    assert "stored" in state["root"] and "replay" in state["root"]["input"]
    it.close()
    it2 = iter(ds)
    it2.set_state(state)
    assert sorted(head + [int(x) for x in it2]) == list(range(100))


def _jitter(x):
    import random
    import time

    time.sleep(random.random() * 0.0005)
    return int(x)


@pytest.mark.timeout(60)
def test_nondeterministic_nested_parallel_stages_restore_exactly():
    # Options(deterministic=False) with map(AUTOTUNE).map(AUTOTUNE).batch(AUTOTUNE): after a
    # restore, no element may be lost or repeated.
    opts = dp.Options()
    opts.deterministic = False
    auto = dp.AUTOTUNE
    pipelines = [
        dp.range(300)
        .map(_jitter, num_parallel_calls=3)
        .map(lambda x: x + 1, num_parallel_calls=3)
        .batch(3, num_parallel_calls=2)
        .unbatch(),
        dp.range(300)
        .map(_jitter, num_parallel_calls=auto)
        .map(lambda x: x + 1, num_parallel_calls=auto)
        .batch(3, num_parallel_calls=auto)
        .prefetch(auto)
        .unbatch(),
    ]
    for ds in (p.with_options(opts) for p in pipelines):
        for k in range(10, 300, 29):
            it = iter(ds)
            head = [int(next(it)) for _ in range(k)]
            state = it.get_state()
            it.close()
            it2 = iter(ds)
            it2.set_state(state)
            assert sorted(head + [int(x) for x in it2]) == list(range(1, 301)), k


CLOSE_PIPELINES = {
    "map_prefetch": lambda f: dp.range(100).map(f, 2).prefetch(2),
    "map_batch_prefetch": lambda f: (
        dp.range(100).map(f, 2).batch(2, num_parallel_calls=2).prefetch(2)
    ),
    "interleave_of_maps": lambda f: dp.range(3).interleave(
        lambda i: dp.range(100).map(f, 2), cycle_length=3, num_parallel_calls=3
    ),
}


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
