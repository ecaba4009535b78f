"""AUTOTUNE's executor choice never breaks a working pipeline, and a broken stage stops all
of its workers (issue 21): elements, results or functions that cannot cross a process
boundary, fork after torch's intra-op pool started, a worker process that dies while the
error is still referenced."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from harness import own_shm_segments, settle_processes, spin, worker_processes

import datapipe as dp
from datapipe.errors import WorkerDiedError

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).parents[2]
N = 6000


def _with_lock(x):
    return {"lock": threading.Lock(), "x": int(x)}


def _spin_element(e):
    return spin(e["x"])


def _spin_with_lock(x):
    return {"lock": threading.Lock(), "v": spin(x)}


def _auto_options() -> dp.Options:
    opts = dp.Options()
    opts.autotune.cpu_budget = 2  # threads do not scale a GIL-bound function: processes next
    return opts


def _executor_path(it) -> list:
    return [e[2:] for e in it.root.autotune_events if e[1] == "executor"]


def test_explicit_process_executor_keeps_its_named_error(clean):
    # Only AUTOTUNE's own choice steps back; executor="process" says what went wrong.
    it = iter(dp.range(10).map(_with_lock).map(_spin_element, 2, executor="process"))
    with pytest.raises(dp.PipelineError, match="map at element 0: TypeError: the element can"):
        next(it)
    it.close()


# ---- (a) a working map that AUTOTUNE would move to processes --------------------------------
def test_autotune_keeps_elements_that_cannot_be_pickled_working(clean):
    # Each element holds a lock (made in the parent by a sequential map): fine on threads.
    # AUTOTUNE moved the stage to processes ~0.3 s in, and every later element failed with
    # "the element cannot be sent to a worker process".
    ds = dp.range(N).map(_with_lock).map(_spin_element, dp.AUTOTUNE).with_options(_auto_options())
    it = iter(ds)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the sampled inputs kept processes off: no warning
        got = [int(x) for x in it]
    assert got == [spin(i) for i in range(N)]
    assert "process" not in [new for _, new in _executor_path(it)]
    it.close()


def test_autotune_keeps_results_that_cannot_be_pickled_working(clean):
    ds = dp.range(N).map(_spin_with_lock, dp.AUTOTUNE).with_options(_auto_options())
    it = iter(ds.map(lambda e: e["v"]))
    got = [int(x) for x in it]
    assert got == [spin(i) for i in range(N)]
    it.close()


def test_autotune_keeps_a_function_holding_a_large_object_in_this_process(clean, monkeypatch):
    # A function reading a table from its closure: each worker process unpickled its own
    # copy (800 MB became 3.2 GB in the parent and 4.8 GB in two workers). Above the bound
    # AUTOTUNE does not try processes; the same function with a small table still may.
    from datapipe.parallel import executors

    monkeypatch.setattr(executors, "AUTOTUNE_FUNCTION_BYTES", 1 << 20)
    table = np.arange(1 << 18, dtype=np.float64)  # 2 MiB

    def lookup(x):
        return spin(x) + int(table[int(x) % 1000])

    it = iter(dp.range(N).map(lookup, dp.AUTOTUNE).with_options(_auto_options()))
    assert [int(x) for x in it] == [spin(i) + i % 1000 for i in range(N)]
    assert "process" not in {new for _, new in _executor_path(it)}
    it.close()


def test_a_function_s_pickled_size_is_bounded_without_copying_it():
    from datapipe.parallel import shm

    big = np.zeros(1 << 21, dtype=np.uint8)  # 2 MiB, written as one view

    def holds(x):
        return x + int(big[0])

    assert shm.function_exceeds(holds, 1 << 20)
    assert not shm.function_exceeds(holds, 4 << 20)
    assert not shm.function_exceeds(spin, 1 << 20)
    lock = threading.Lock()
    # one that does not pickle is not "too large" (set_function names why it cannot go)
    assert not shm.function_exceeds(lambda x: lock, 1 << 20)


def test_element_that_cannot_cross_later_is_computed_in_the_parent(clean):
    # The first elements pickle, so AUTOTUNE may choose processes; once it has, every
    # element carries a lock. Those are computed in the parent and the stage goes back to
    # threads, with one warning, never an error.
    holder: dict = {}

    def make(x):
        it = holder.get("it")
        if it is not None and it.root.executor == "process":
            holder["locked"] = holder.get("locked", 0) + 1
            return {"lock": threading.Lock(), "x": int(x)}
        return {"x": int(x)}

    ds = dp.range(N).map(make).map(_spin_element, dp.AUTOTUNE).with_options(_auto_options())
    it = holder["it"] = iter(ds)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [int(x) for x in it]
    assert got == [spin(i) for i in range(N)]
    path = _executor_path(it)
    if "process" not in [new for _, new in path]:  # after inline, or after threads
        it.close()
        pytest.skip(f"AUTOTUNE did not choose processes on this machine (path {path})")
    assert holder["locked"] >= 1
    mine = [w for w in caught if "cannot be sent to a worker process" in str(w.message)]
    assert len(mine) == 1, [str(w.message) for w in caught]
    assert issubclass(mine[0].category, RuntimeWarning)
    assert "map" in str(mine[0].message) and "thread" in str(mine[0].message)
    assert path[-1] == ("process", "thread") and it.root.executor == "thread"
    it.close()


# ---- (b) fork after torch's intra-op pool started ---------------------------------------------
FORK_AFTER_TORCH = """
import torch
import datapipe as dp


def f(x):
    t = torch.ones(256, 256)
    return float((t @ t)[0, 0]) + int(x)


if __name__ == "__main__":  # forkserver's workers import this module (as spawn's do)
    torch.set_num_threads(2)
    a = torch.randn(512, 512)
    for _ in range(3):
        a @ a  # torch's OpenMP intra-op pool starts in this (the parent) process
    opts = dp.Options()
    opts.threading.max_intra_op_parallelism = 2
    ds = dp.range(8).map(f, num_parallel_calls=2, executor="process").with_options(opts)
    it = iter(ds)
    out = [float(x) for x in it]
    print(out, it.root.start_method, flush=True)
"""


def _run_script(script: Any, code: str, timeout: float, what: str) -> str:
    """Run ``code`` as a script in a fresh interpreter (torch's pools as a user's script
    starts them) and return its stdout. It runs in a session of its own: on a hang the
    whole group is killed, the worker processes it forked included (killing the script
    alone left them running)."""
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OMP_NUM_THREADS", None)
    proc = subprocess.Popen([sys.executable, str(script)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"the {what} hung (no result in {timeout} s)")
    assert proc.returncode == 0, err[-3000:]
    return out


def test_process_map_after_torch_threads_does_not_hang(tmp_path):
    # Under fork, a child inherits the parent's OpenMP pool as dead threads: with 2 intra-op
    # threads its first matmul waited for ever, alive, so WorkerDiedError never fired.
    stdout = _run_script(tmp_path / "fork_after_torch.py", FORK_AFTER_TORCH, 60, "process map")
    values, method = stdout.strip().rsplit(" ", 1)
    assert values == str([256.0 + i for i in range(8)])
    assert method == "forkserver"


FORK_THEN_MORE_THREADS = """
import datapipe as dp
import torch


def f(x):
    torch.set_num_threads(2)  # the function raises torch's threads itself
    t = torch.ones(256, 256)
    return float((t @ t)[0, 0]) + int(x)


torch.set_num_threads(2)
a = torch.randn(512, 512)
for _ in range(3):
    a @ a  # torch's OpenMP intra-op pool starts in this (the parent) process
it = iter(dp.range(8).map(f, num_parallel_calls=2, executor="process"))
out = [float(x) for x in it]
print(out, it.root.start_method, flush=True)
"""


def test_a_forked_workers_function_raising_torchs_threads_does_not_hang(tmp_path):
    # breaker: with the default max_intra_op_parallelism (1) the workers fork, and a
    # function that called torch.set_num_threads(2) waited for ever on the pool the
    # parent's matmuls had started (no WorkerDiedError: the worker was alive). Such a call
    # is held at the stage's intra-op threads in the worker, with a warning there.
    stdout = _run_script(tmp_path / "fork_then_threads.py", FORK_THEN_MORE_THREADS, 60, "map")
    values, method = stdout.strip().rsplit(" ", 1)
    assert values == str([256.0 + i for i in range(8)]) and method == "fork"


FORK_AFTER_OPENCV = """
import cv2
import numpy as np

import datapipe as dp

cv2.GaussianBlur(np.zeros((512, 512, 3), np.uint8), (7, 7), 0)  # OpenCV's pool runs here


def blur(x):
    return int(cv2.GaussianBlur(np.full((64, 64, 3), int(x), np.uint8), (3, 3), 0)[0, 0, 0])


it = iter(dp.range(8).map(blur, 2, executor="process"))
print([int(x) for x in it], it.root.start_method, flush=True)
"""


def test_a_process_map_after_opencv_ran_here_does_not_hang(tmp_path):
    # breaker4: one cv2 call in this process, then any process map: every forked worker
    # hung in its start-up cv2.setNumThreads(1), waiting for the pool it was forked with.
    pytest.importorskip("cv2")
    stdout = _run_script(tmp_path / "fork_after_cv2.py", FORK_AFTER_OPENCV, 60, "map")
    values, method = stdout.strip().rsplit(" ", 1)
    assert values == str(list(range(8))) and method == "fork"


FORK_AFTER_TORCH_AUTOTUNE = """
import datapipe as dp
import torch  # after datapipe: its pool's threads are counted as new ones

torch.set_num_threads(2)
a = torch.randn(512, 512)
for _ in range(3):
    a @ a  # torch's OpenMP intra-op pool starts in this process


def f(x):  # pure Python (threads do not scale it), and a torch op on 2 intra-op threads
    s = int(x)
    for i in range(2000):
        s = (s * 31 + i) % 1000003
    t = torch.ones(256, 256)
    return s + int((t @ t)[0, 0])


# No `if __name__ == "__main__":` here: this script worked under fork, and a start method
# that imports the main module in each worker would run it again there.
opts = dp.Options()
opts.threading.max_intra_op_parallelism = 2
opts.autotune.cpu_budget = 2
it = iter(dp.range(3000).map(f, num_parallel_calls=dp.AUTOTUNE).with_options(opts))
out = [int(x) for x in it]
path = [e[2:] for e in it.root.autotune_events if e[1] == "executor"]
print(sum(out), path, flush=True)
"""


def _spin_256(x) -> int:
    return spin(x) + 256


@pytest.mark.slow  # a subprocess importing torch; the rule itself is tested just below
def test_autotune_never_chooses_processes_that_could_hang_or_rerun_the_script(tmp_path):
    # AUTOTUNE moved such a stage to forked processes, whose first matmul waited for ever on
    # the pool inherited from the parent. Forkserver would not hang, but it imports the main
    # module in each worker: this unguarded script would run again in each of them.
    script = tmp_path / "autotune_after_torch.py"
    stdout = _run_script(script, FORK_AFTER_TORCH_AUTOTUNE, 90, "AUTOTUNE map")
    total, path = stdout.strip().split(" ", 1)
    assert int(total) == sum(_spin_256(i) for i in range(3000))
    assert "process" not in path  # it stayed in this process


def test_start_method_rule(monkeypatch):
    from datapipe.parallel import processes

    pool = [None]
    monkeypatch.setattr(processes, "_pool_may_have_started", lambda: pool[0])
    assert processes.choose_start_method("spawn", 2) == (
        "spawn", "set in Options.threading.process_start_method")  # fmt: skip
    assert processes.choose_start_method(None, 2)[0] == "fork"  # no pool started
    pool[0] = "torch's pool started"
    method, why = processes.choose_start_method(None, 2)
    assert method == "forkserver" and "2 intra-op threads and torch's pool started" in why
    # one intra-op thread: the workers never enter the inherited pool
    assert processes.choose_start_method(None, 1)[0] == "fork"
    # AUTOTUNE tries processes only where they fork (or a start method was set)
    assert not processes.fork_is_chosen(None, 2)
    assert processes.fork_is_chosen(None, 1) and processes.fork_is_chosen("forkserver", 2)


def test_a_pool_started_after_import_is_seen(monkeypatch):
    # native threads that started after datapipe's import count; one seen in only one of
    # two samples (a Python thread starting or ending: not yet or no longer on Python's
    # list) does not, nor does one that was there at import (numpy's OpenBLAS pool)
    import datapipe.parallel as par
    from datapipe.parallel import processes

    monkeypatch.setattr(par, "TORCH_BEFORE_IMPORT", False)
    monkeypatch.setattr(par, "IMPORT_THREADS", {1})
    samples = iter([{1, 2, 3}, {1, 2}, {1}, {1}, {1, 3}, {1}])
    monkeypatch.setattr(par, "native_threads", lambda: next(samples))
    assert "1 native thread(s)" in (processes._pool_may_have_started() or "")  # 2 stayed
    assert processes._pool_may_have_started() is None
    assert processes._pool_may_have_started() is None  # 3 came and went
    monkeypatch.setattr(par, "TORCH_BEFORE_IMPORT", True)  # its pool may predate the count
    assert "imported before datapipe" in (processes._pool_may_have_started() or "")


# ---- (c) a dead worker process stops the whole stage -----------------------------------------
def _slow(x):
    time.sleep(0.01)
    return int(x)


def test_worker_died_stops_every_worker_while_the_error_is_referenced(clean):
    # A notebook keeps the last exception (sys.last_value): its traceback holds the
    # iterator, which kept the stage's other worker process alive.
    it = iter(dp.range(100_000).map(_slow, 2, executor="process"))
    assert int(next(it)) == 0
    victim = worker_processes()[0].pid
    os.kill(victim, signal.SIGKILL)
    err = None
    gc.disable()  # nothing may depend on a collection
    try:
        try:
            for _ in it:
                pass
        except WorkerDiedError as e:
            err = e
        assert err is not None and f"pid {victim}" in str(err)
        assert worker_processes() == []  # stopped before the error reached us
        assert [t.name for t in threading.enumerate() if t.name.startswith("datapipe-map")] == []
        assert own_shm_segments() == []
        with pytest.raises(WorkerDiedError):  # and the stage stays broken
            next(it)
    finally:
        gc.enable()
    del err
    it.close()
    assert settle_processes(1.0) == []


def test_worker_died_in_a_nested_stage_stops_its_workers(clean):
    it = iter(dp.range(100_000).map(_slow, 2, executor="process").prefetch(4).map(_slow, 2))
    assert int(next(it)) == 0
    pids = [p.pid for p in worker_processes()]
    assert len(pids) == 2
    os.kill(pids[1], signal.SIGKILL)
    end = time.monotonic() + 30
    with pytest.raises(WorkerDiedError):
        while time.monotonic() < end:
            next(it)
    assert settle_processes(0.5) == []
    it.close()
