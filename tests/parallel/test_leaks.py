"""Nothing leaks (issue 21): after ``break`` + garbage collection, ``close()``, ``del``,
``KeyboardInterrupt`` or a dead worker process, no thread, worker process, shared-memory
segment or open file descriptor that the pipeline started is left, for every kind of
parallel stage and executor."""

from __future__ import annotations

import gc
import os
import signal
import threading
import time

import numpy as np
import pytest
from harness import iterate_until_interrupted, own_shm_segments, settle_processes, worker_processes

import datapipe as dp
from datapipe.errors import WorkerDiedError

pytestmark = pytest.mark.timeout(60)


def _slow(x):
    time.sleep(0.002)
    return x


def _array(x):
    time.sleep(0.002)
    return np.full(8192, int(x), np.float32)  # 32 KB: through shared memory with processes


def _pipelines() -> dict:
    auto_threads = dp.Options(threading=dp.ThreadingOptions(executor="thread"))
    return {
        "map_threads": lambda: dp.range(10**6).map(_slow, num_parallel_calls=2),
        "map_autotune": lambda: dp.range(10**6).map(_slow, num_parallel_calls=dp.AUTOTUNE)
        .with_options(auto_threads),
        "map_processes": lambda: dp.range(10**6).map(_array, 2, executor="process"),
        "random_map_processes": lambda: dp.range(10**6).random_map(
            lambda x, rng: _array(x), seed=1, num_parallel_calls=2, executor="process"),
        "batch": lambda: dp.range(10**6).map(_slow).batch(4, num_parallel_calls=2),
        "prefetch": lambda: dp.range(10**6).map(_slow).prefetch(8),
        "interleave": lambda: dp.range(100).interleave(
            lambda n: dp.range(10**4).map(_slow), cycle_length=3, num_parallel_calls=2),
        "prefetch_to_device": lambda: dp.range(10**6).map(_slow).batch(2)
        .prefetch_to_device("cpu", buffer_size=2),
        "nested_processes": lambda: dp.range(10**6).map(_array, 2, executor="process")
        .prefetch(4).map(_slow, 2),
    }  # fmt: skip


PIPELINES = _pipelines()
# The default run covers each kind of stage wiring once (processes, a nested stage, slot
# lanes, a device stage); every pipeline runs with ``-m slow``.
DEFAULT = {"map_processes", "nested_processes", "interleave", "prefetch_to_device"}
NAMES = [n if n in DEFAULT else pytest.param(n, marks=pytest.mark.slow) for n in sorted(PIPELINES)]
PROCESS_NAMES = [n for n in sorted(PIPELINES) if "processes" in n]


def _fds() -> set[str]:
    """This process's open file descriptors, as ``fd -> target`` strings."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.add(f"{fd}->{os.readlink(f'/proc/self/fd/{fd}')}")
        except OSError:  # the listing's own descriptor, closed meanwhile
            pass
    return out


def _datapipe_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("datapipe-"))


@pytest.fixture
def before(clean):
    """What was open before the test (after a warm-up that imports and starts what a
    first pipeline starts once per interpreter); the test checks that nothing was added."""
    warm = iter(dp.range(8).map(_array, 2, executor="process"))
    list(warm)
    warm.close()
    assert settle_processes() == []
    gc.collect()
    return _fds()


def _nothing_left(before: set[str]) -> None:
    gc.collect()
    end = time.monotonic() + 3
    while time.monotonic() < end and (_datapipe_threads() or worker_processes()):
        time.sleep(0.02)
    assert _datapipe_threads() == []
    assert settle_processes(0.5) == []
    assert own_shm_segments() == []
    gc.collect()
    assert sorted(_fds() - before) == []


def _started(name: str):
    it = iter(PIPELINES[name]())
    for _ in range(5):
        next(it)
    return it


@pytest.mark.parametrize("name", NAMES)
def test_close(name, before):
    it = _started(name)
    it.close()
    _nothing_left(before)


@pytest.mark.parametrize("name", NAMES)
def test_break_and_gc(name, before):
    for i, _ in enumerate(PIPELINES[name]()):
        if i == 5:
            break
    _nothing_left(before)


@pytest.mark.parametrize("name", NAMES)
def test_del(name, before):
    it = _started(name)
    del it
    _nothing_left(before)


@pytest.mark.parametrize("name", NAMES)
def test_keyboard_interrupt(name, before):
    it = _started(name)
    iterate_until_interrupted(it)
    _nothing_left(before)  # the iterator closed the pipeline itself
    assert list(it) == []


@pytest.mark.parametrize("name", PROCESS_NAMES)
def test_dead_worker(name, before):
    it = _started(name)
    os.kill(worker_processes()[0].pid, signal.SIGKILL)
    with pytest.raises(WorkerDiedError) as info:
        for _ in it:
            pass
    err = info.value  # still referenced, as a notebook keeps the last error
    _nothing_left(before)
    assert "was killed by signal SIGKILL" in str(err)


def test_results_kept_from_many_chunks_hold_no_descriptors(before, monkeypatch):
    # Each chunk's results are views of one shared-memory mapping, and Python's mmap kept a
    # duplicate of the segment's descriptor open for as long as the mapping lived: a
    # list(ds) of a long process map ran out of descriptors (EMFILE) at ~1,000 chunks.
    from datapipe.parallel.pool import ChunkSizer

    monkeypatch.setattr(ChunkSizer, "next_size", lambda self, limit=None: 1)  # 1 per chunk
    it = iter(dp.range(300).map(_array, 2, executor="process"))
    kept = list(it)  # 300 chunks' results, all still referenced
    assert [int(a[0]) for a in kept] == list(range(300))
    assert all(a.shape == (8192,) and a.dtype == np.float32 for a in kept)
    it.close()
    added = _fds() - before
    assert len(added) < 10, sorted(added)[:5]
    kept[7][:] = 1.0  # the views are still valid (writable) memory
    assert float(kept[7].sum()) == 8192.0
    del kept
    _nothing_left(before)
