"""Adversarial review of the engine (issue 10): races between a restore or a repeat epoch
and work still in flight in worker processes, and what they leave behind."""

from __future__ import annotations

import gc
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import datapipe as dp
from datapipe.parallel import shm

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).parents[2]


def ours() -> list[str]:
    mine = f"{shm.SHM_PREFIX}{os.getpid()}-"
    return sorted(f for f in os.listdir(shm.SHM_DIR) if f.startswith(mine))


def worker_processes() -> list:
    return [p for p in multiprocessing.active_children() if p.name.startswith("datapipe-")]


def settle_processes(deadline_s: float = 2.0) -> list:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and worker_processes():
        time.sleep(0.02)
    return worker_processes()


@pytest.fixture
def clean(threads):
    assert settle_processes() == []
    yield threads
    gc.collect()
    assert threads.settle(2.0) == []
    assert settle_processes() == []
    assert ours() == []


BIG = 300_000  # characters: a string travels inside the pickle, past a pipe's 64 KiB buffer


def _big(i):
    return "a" * BIG + str(int(i))


def _slow_append(s):
    time.sleep(0.2)  # still computing when the restore (or the epoch's end) comes
    return s + "!"


def test_restore_while_a_worker_process_computes_large_in_band_results(clean):
    # The abandoned task's large result and the next task's large input met in the pipe:
    # the parent blocked sending, the worker blocked sending back, and the consumer waited
    # forever.
    ds = dp.range(12).map(_big).map(_slow_append, 2, executor="process")
    it = iter(ds)
    assert next(it) == _big(0) + "!"
    state = it.get_state()
    it.set_state(state)  # the workers' second chunks are still being computed
    rest = list(it)
    assert rest == [_big(i) + "!" for i in range(1, 12)]
    it.close()


def test_repeat_reuses_workers_with_a_task_in_flight(clean):
    # take() closes the map stage mid-flight each epoch; repeat parks its processes for the
    # next epoch, whose first task must not collide with the abandoned one.
    ds = dp.range(12).map(_big).map(_slow_append, 2, executor="process").take(1).repeat(3)
    with iter(ds) as it:
        assert list(it) == [_big(0) + "!"] * 3


def _stops_at_2(x):
    if int(x) == 2:
        raise StopIteration  # e.g. next() on an exhausted iterator inside the function
    return int(x)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"num_parallel_calls": 2},
        {"num_parallel_calls": dp.AUTOTUNE},
        {"num_parallel_calls": 2, "executor": "process"},
    ],
    ids=["sequential", "threads", "autotune", "processes"],
)
def test_stop_iteration_in_the_function_is_an_error_at_its_position(kw, clean):
    # list.extend(map(fn, ...)) took the StopIteration for the end of the chunk: the worker
    # retried the same element for ever and the consumer waited.
    it = iter(dp.range(6).map(_stops_at_2, **kw))
    assert [next(it), next(it)] == [0, 1]
    with pytest.raises(dp.PipelineError) as info:
        next(it)
    assert (info.value.op, info.value.index) == ("map", 2)
    assert isinstance(info.value.cause, StopIteration)
    assert list(it) == [3, 4, 5]
    it.close()


def test_stop_iteration_in_random_map_and_batch_on_threads(clean):
    def draw(x, rng):
        return _stops_at_2(x)

    it = iter(dp.range(5).random_map(draw, seed=1, num_parallel_calls=2))
    with pytest.raises(dp.PipelineError, match="random_map at element 2: StopIteration"):
        list(it)
    assert list(it) == [3, 4]
    it.close()


def _pid(x):
    return os.getpid()


@pytest.mark.parametrize("op", ["map", "random_map"])
def test_executor_process_without_num_parallel_calls_runs_in_a_worker_process(op, clean):
    # executor="process" was ignored without num_parallel_calls: the function ran inline.
    ds = dp.range(6)
    if op == "map":
        ds = ds.map(_pid, executor="process")
    else:
        ds = ds.random_map(lambda x, rng: os.getpid(), seed=1, executor="process")
    with iter(ds) as it:
        pids = {int(p) for p in it}
    assert len(pids) == 1 and os.getpid() not in pids


# ---- shared memory that has no room ------------------------------------------------------
NO_ROOM_SCRIPT = """
import os, resource, sys, warnings
import numpy as np
import datapipe as dp
from datapipe.parallel import shm
if sys.argv[1] != "-":
    shm.SHM_DIR = sys.argv[1]
else:  # segments over this process's file size limit fail like a full /dev/shm
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))
src = dp.from_tensor_slices(np.ones((8, 200_000)))  # 1.6 MB rows: past the room there is
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = list(src.map(lambda r: float(r.sum()) + os.getpid() * 0, 2, executor="process"))
assert out == [200_000.0] * 8, out
assert any("no room for a" in str(w.message) for w in caught), [str(w.message) for w in caught]
left = [f for f in os.listdir(shm.SHM_DIR) if f.startswith(f"datapipe-{os.getpid()}-")]
assert left == [], left
print("ok")
"""


def test_segments_over_the_file_size_limit_go_in_band(tmp_path, clean):
    # The segment could not be created: run() took the OSError for an element that cannot
    # be pickled and recursed until RecursionError.
    script = tmp_path / "no_room.py"
    script.write_text(NO_ROOM_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(script), "-"], env=env, capture_output=True,
                          text=True, timeout=50)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


@pytest.mark.slow  # a subprocess importing torch (~5 s); the file size limit test is the quick one
def test_a_full_shared_memory_mount_is_not_a_bus_error(tmp_path, clean):
    # Docker's /dev/shm is 64 MB by default: writing a segment through its mapping past the
    # room there killed the training process with SIGBUS. A 1 MB tmpfs stands in for it
    # (mounted in a private mount namespace: needs root and unshare).
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to mount a small tmpfs")
    mnt = tmp_path / "shm"
    mnt.mkdir()
    script = tmp_path / "no_room.py"
    script.write_text(NO_ROOM_SCRIPT)
    cmd = (f"mount -t tmpfs -o size=1m tmpfs {mnt} || exit 77; "
           f"exec {sys.executable} {script} {mnt}")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(["unshare", "-m", "sh", "-c", cmd], env=env, capture_output=True,
                          text=True, timeout=50)  # fmt: skip
    if proc.returncode == 77 or "unshare failed" in proc.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr[-300:]}")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (
        proc.returncode,
        proc.stderr[-2000:],
    )


# ---- AUTOTUNE's inline executor and restores ------------------------------------------------
def _half_ms(x):
    time.sleep(0.0005)
    return int(x) * 2


@pytest.mark.parametrize("resume_on", ["fresh", "same"])
def test_inline_stage_restored_from_a_threaded_snapshot(resume_on, clean):
    # AUTOTUNE starts every stage inline. A snapshot taken while the stage ran on threads
    # with a chunk partly consumed queues that chunk for recomputation; inline, no worker
    # ever computed it and the consumer waited for ever.
    ds = dp.range(400).map(_half_ms, num_parallel_calls=dp.AUTOTUNE)
    it = iter(ds)
    stage = it._root.stage
    stage.phase = "done"  # the test's switches, not the tuner's
    assert stage.set_executor("thread", 2)
    got = []
    while not it._root.get_state()["replay"]:  # until the cut falls inside a chunk
        assert len(got) < 300, "the workers' chunks never grew past one element"
        got += it._root.next_chunk(1)  # one at a time: the workers' chunks are left partly read
    state = it.get_state()
    if resume_on == "fresh":
        it.close()
        it = iter(ds)  # a new stage starts inline
    else:
        assert stage.set_executor("inline", 0)
    assert it._root.executor == "inline"
    it.set_state(state)
    assert [int(x) for x in it] == [2 * i for i in range(len(got), 400)]
    it.close()


def test_thread_that_took_a_chunk_before_a_switch_to_fewer_processes(clean):
    # AUTOTUNE moved a stage from 2 threads to 1 process while thread 1 was reading its
    # chunk's input: it then computed "in process 1", which does not exist (IndexError:
    # WorkerDiedError for the whole pipeline).
    import threading

    gate = threading.Event()

    def gated(x):
        gate.wait(10)
        return x

    it = iter(dp.range(40).map(gated).map(_half_ms, num_parallel_calls=dp.AUTOTUNE))
    stage, eng = it._root.stage, it._root._eng
    stage.phase = "done"  # the test's switches, not the tuner's
    assert stage.set_executor("thread", 2)
    eng.start()
    end = time.monotonic() + 10
    while it._root._lane.pending < 2:
        assert time.monotonic() < end, "the two threads never took their chunks"
        time.sleep(0.005)
    assert stage.set_executor("process", 1)  # while both threads wait inside their chunks
    gate.set()
    assert [int(x) for x in it] == [2 * i for i in range(40)]
    it.close()
