"""Process workers for map / random_map (issue 10): shared-memory transport, cloudpickled
functions, lifetime across repeat epochs, order, random_map values, exact checkpoints,
error positions, killed workers, a killed parent, and nothing left behind; races between a
restore or a repeat epoch and work still in flight in the workers; ``StopIteration`` in the
function; shared memory that has no room (segments over the size limit, a full mount)."""

from __future__ import annotations

import gc
import json
import mmap
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from harness import iterate_until_interrupted, own_shm_segments, settle_processes, worker_processes
from hypothesis import given, settings
from hypothesis import strategies as st

import datapipe as dp
from datapipe.errors import WorkerDiedError
from datapipe.parallel import shm

pytestmark = pytest.mark.timeout(120)


ROOT = Path(__file__).parents[2]


# ---- the transport ------------------------------------------------------------------------
def _backed_by_shared_memory(a: np.ndarray) -> bool:
    base = a
    while isinstance(base, np.ndarray):
        base = base.base
    # a view of the segment's mapping (mmap.mmap, or shm.map_shared's libc mapping)
    return isinstance(base, memoryview) and (
        isinstance(base.obj, mmap.mmap) or hasattr(base.obj, "_mapping")
    )


BIG = 300_000  # characters: a string travels inside the pickle, past a pipe's 64 KiB buffer


def _big_string(i):
    return "a" * BIG + str(int(i))


def _slow_append(s):
    time.sleep(0.2)  # still computing when the restore (or the epoch's end) comes
    return s + "!"


def _stops_at_2(x):
    if int(x) == 2:
        raise StopIteration  # e.g. next() on an exhausted iterator inside the function
    return int(x)


def _pid_now(x):
    return os.getpid()


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


def test_large_arrays_travel_out_of_band():
    big = {"x": np.arange(250_000, dtype=np.float32), "t": torch.ones(64, 64), "n": 3}
    name = f"{shm.SHM_PREFIX}{os.getpid()}-unit"
    data, seg, layout = shm.dumps([big, (big["x"][::2], "s")], name)
    try:
        assert seg == name and len(layout) == 3  # the array, the tensor, the strided view
        assert len(data) < 2_000  # the pickle holds the structure, not the 1.5 MB of data
        out = shm.loads(data, seg, layout)
    finally:
        shm.discard(seg)
    assert own_shm_segments() == []  # the receiver removed the segment's name at once
    x, t = out[0]["x"], out[0]["t"]
    assert np.array_equal(x, big["x"]) and _backed_by_shared_memory(x) and x.flags.writeable
    assert isinstance(t, torch.Tensor) and t.dtype == torch.float32 and torch.equal(t, big["t"])
    assert np.array_equal(out[1][0], big["x"][::2]) and out[1][1] == "s" and out[0]["n"] == 3
    small = shm.dumps([np.arange(3), 7], name)  # small values go by pickle alone
    assert small[1] is None and shm.loads(*small)[0].tolist() == [0, 1, 2]


def test_results_are_views_of_shared_memory_and_scalars_are_pickled(clean):
    k = 3  # a closure over a local: cloudpickle sends it

    def make(x):
        return {"img": np.full((96, 96, 3), int(x) * k, np.uint8), "t": torch.full((2048,), x),
                "label": int(x), "name": f"e{int(x)}"}  # fmt: skip

    out = list(dp.range(40).map(make, num_parallel_calls=2, executor="process"))
    assert [e["label"] for e in out] == list(range(40))
    assert all(e["img"].shape == (96, 96, 3) and e["img"].dtype == np.uint8 for e in out)
    assert [int(e["img"][0, 0, 0]) for e in out] == [3 * i % 256 for i in range(40)]
    assert all(_backed_by_shared_memory(e["img"]) for e in out)
    assert all(isinstance(e["t"], torch.Tensor) and e["t"].dtype == torch.int64 for e in out)
    assert out[7]["name"] == "e7" and out[7]["t"][0].item() == 7


def test_lambdas_closures_and_large_inputs(clean):
    offset = np.arange(20_000, dtype=np.float64)  # captured by the lambda
    src = dp.from_tensor_slices(np.ones((12, 20_000)))  # rows of 160 KB go to the workers too
    out = list(src.map(lambda r: float((r + offset).sum()), 2, executor="process"))
    assert out == [float(offset.sum() + 20_000)] * 12


# ---- lifetime ------------------------------------------------------------------------------
def _pid(x):
    time.sleep(0.002)
    return os.getpid()


def test_workers_start_once_and_survive_repeat_epochs(clean):
    ds = dp.range(30).map(_pid, num_parallel_calls=2, executor="process").repeat(3)
    it = iter(ds)
    pids = [int(x) for x in it]
    assert len(pids) == 90 and os.getpid() not in pids
    per_epoch = [set(pids[30 * e : 30 * e + 30]) for e in range(3)]
    assert set.union(*per_epoch) <= {p.pid for p in worker_processes()} | set(pids)
    assert len(set(pids)) <= 2  # the same two processes served all three epochs
    assert per_epoch[0] & per_epoch[2]
    it.close()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_start_methods(method, clean):
    opts = dp.Options()
    opts.threading.process_start_method = method
    ds = dp.range(50).map(lambda x: int(x) ** 2, 2, executor="process").with_options(opts)
    with iter(ds) as it:
        assert [int(x) for x in it] == [i * i for i in range(50)]


def _intra_op_threads(x):
    import cv2

    return torch.get_num_threads(), cv2.getNumThreads()


@pytest.mark.parametrize("intra_op", [None, 2])
def test_workers_run_torch_on_max_intra_op_threads(intra_op, clean):
    # Two workers on two cores, each with the parent's pools of 3 threads, ran 6 intra-op
    # threads on 2 cores (issue 27, item 7): a worker runs torch's on
    # max_intra_op_parallelism (default 1), as DataLoader workers run torch; the
    # parent's own settings stay as they were. OpenCV, imported here before the fork,
    # keeps the setting it was forked with: cv2.setNumThreads in a forked child of a
    # process whose OpenCV pool ran waits for ever (test_executor_safety's cv2 test).
    cv2 = pytest.importorskip("cv2")
    before = torch.get_num_threads(), cv2.getNumThreads()
    torch.set_num_threads(3)
    cv2.setNumThreads(3)
    try:
        opts = dp.Options()
        opts.threading.max_intra_op_parallelism = intra_op
        opts.threading.process_start_method = "fork"  # inherits the parent's settings
        ds = dp.range(8).map(_intra_op_threads, 2, executor="process").with_options(opts)
        with iter(ds) as it:
            seen = {tuple(int(v) for v in x) for x in it}
        assert seen == {(intra_op or 1, 3)}
        assert (torch.get_num_threads(), cv2.getNumThreads()) == (3, 3)
    finally:
        torch.set_num_threads(before[0])
        cv2.setNumThreads(before[1])


def _global_draws(x):
    import torch

    return int(np.random.randint(1 << 30)), int(torch.randint(1 << 30, ())), random.random()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_global_generators_are_seeded_apart(method, clean):
    # Forked workers repeated the parent's numpy/torch/random streams and each other's
    # (263 of 400 numpy draws distinct after np.random.seed(0)); DataLoader seeds each
    # worker. A spawned worker that imports torch in the function is seeded too.
    import torch

    np.random.seed(0)
    torch.manual_seed(0)
    random.seed(0)
    opts = dp.Options()
    opts.threading.process_start_method = method
    ds = dp.range(400).map(_global_draws, 2, executor="process").with_options(opts)
    with iter(ds) as it:
        out = [tuple(x) for x in it]
    assert len(out) == 400
    for k in range(3):
        assert len({row[k] for row in out}) == 400, k


# ---- order, values, checkpoints -------------------------------------------------------------
def _jitter(x):
    time.sleep(random.random() * 0.001)
    return int(x) * 10


def test_same_order_as_threads(clean):
    def build(executor):
        return dp.range(300).map(_jitter, num_parallel_calls=3, executor=executor).batch(7)

    threads = [b.tolist() for b in build("thread")]
    procs = [b.tolist() for b in build("process")]
    assert procs == threads == [b.tolist() for b in dp.range(300).map(_jitter).batch(7)]


def _draw(x, rng):
    return int(x) * 1000 + int(rng.integers(0, 1000)), rng.normal(size=3).tolist()


def test_random_map_draws_the_same_values_everywhere(clean):
    def run(**kw):
        ds = dp.range(200).shard(2, 1).random_map(_draw, seed=11, **kw).repeat(2)
        return [(a, b) for a, b in ds]

    inline = run()
    assert run(num_parallel_calls=3) == inline
    assert run(num_parallel_calls=2, executor="process") == inline
    assert len(inline) == 200 and inline[:100] != inline[100:]  # epochs draw anew


PIPELINES = {
    "map": lambda det: dp.range(150).map(_jitter, 2, det, executor="process"),
    "random_map": lambda det: dp.range(150).random_map(
        lambda x, rng: int(x) * 10 + int(rng.integers(0, 2)) * 0, seed=1, num_parallel_calls=2,
        deterministic=det, executor="process"),
    "map_batch_prefetch": lambda det: dp.range(150).map(_jitter, 2, det, executor="process")
    .batch(4).prefetch(3).unbatch(),
}  # fmt: skip


@settings(max_examples=6, deadline=None)  # -m slow: test_checkpoint's loops go further
@given(name=st.sampled_from(sorted(PIPELINES)), k=st.integers(0, 140), det=st.booleans())
def test_exact_state_at_any_cut(name, k, det):
    ds = PIPELINES[name](det)
    it = iter(ds)
    head = [int(next(it)) for _ in range(k)]
    state = it.get_state()
    tail = [int(x) for x in it]
    it2 = iter(ds)
    it2.set_state(state)
    restored = [int(x) for x in it2]
    if det:
        assert head + restored == head + tail == [10 * i for i in range(150)]
    else:
        assert sorted(head + restored) == sorted(head + tail) == [10 * i for i in range(150)]
    it2.close()
    gc.collect()
    assert own_shm_segments() == []


# ---- errors --------------------------------------------------------------------------------
def _fails_at_37(x):
    if int(x) == 37:
        raise ValueError("bad element 37")
    return int(x)


def test_exception_in_worker_at_its_position_with_traceback(clean):
    it = iter(dp.range(100).map(_fails_at_37, 3, executor="process", name="decode"))
    got = []
    with pytest.raises(dp.PipelineError) as info:
        for x in it:
            got.append(int(x))
    assert got == list(range(37))
    err = info.value
    assert (err.op, err.index) == ("decode", 37)
    assert str(err) == "decode at element 37: ValueError: bad element 37"
    assert isinstance(err.cause, ValueError)
    assert "_fails_at_37" in err.worker_traceback and "raise ValueError" in err.worker_traceback
    assert "worker process datapipe-decode-process-" in "".join(err.__notes__)
    assert [int(x) for x in it] == list(range(38, 100))  # the pipeline goes on
    it.close()


def test_worker_killed_by_a_signal_raises_within_5s(clean):
    def slow(x):
        time.sleep(0.01)
        return int(x)

    it = iter(dp.range(100_000).map(slow, 2, executor="process"))
    assert int(next(it)) == 0
    victim = it.root.worker_pids()[0]
    os.kill(victim, signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(WorkerDiedError, match=rf"pid {victim}\) was killed by signal SIGKILL"):
        for _ in it:
            pass
    assert time.monotonic() - t0 < 5
    with pytest.raises(WorkerDiedError):  # and stays broken: never a wait
        next(it)
    it.close()


def test_workers_exit_when_the_parent_is_killed(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent("""
        import os, sys, time
        import datapipe as dp
        def slow(x):
            time.sleep(0.05)
            return x
        it = iter(dp.range(10**6).map(slow, 2, executor="process"))
        next(it)
        print(*it.root.worker_pids(), flush=True)
        time.sleep(60)
    """)
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2
        prefix = f"{shm.SHM_PREFIX}{parent.pid}-"
        parent.send_signal(signal.SIGKILL)
        parent.wait(5)
        end = time.monotonic() + 5
        while time.monotonic() < end and any(_alive(p) for p in pids):
            time.sleep(0.05)
        assert not any(_alive(p) for p in pids)
        assert [f for f in os.listdir(shm.SHM_DIR) if f.startswith(prefix)] == []
    finally:
        parent.kill()


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for an init that does not reap it counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# ---- nothing leaks -------------------------------------------------------------------------
def _slow_array(x):
    time.sleep(0.002)
    return np.full(8192, int(x), np.float32)  # 32 KB: through shared memory


def _started():
    it = iter(dp.range(10_000).map(_slow_array, 2, executor="process").prefetch(4))
    for _ in range(5):
        next(it)
    assert len(worker_processes()) == 2
    return it


def test_close_stops_processes_and_frees_segments(clean):
    it = _started()
    it.close()
    assert settle_processes(1.5) == []


def test_break_and_gc_stop_processes(clean):
    for i, _ in enumerate(dp.range(10_000).map(_slow_array, 2, executor="process")):
        if i == 5:
            break
    gc.collect()
    assert settle_processes(1.5) == []


def test_del_stops_processes(clean):
    it = _started()
    del it
    gc.collect()
    assert settle_processes(1.5) == []


def test_exception_in_consumer_stops_processes(clean):
    def consume():
        for i, _ in enumerate(dp.range(10_000).map(_slow_array, 2, executor="process")):
            if i == 3:
                raise RuntimeError("consumer failed")

    with pytest.raises(RuntimeError, match="consumer failed"):
        consume()
    gc.collect()
    assert settle_processes(1.5) == []


def test_the_end_of_the_data_stops_the_worker_processes(clean):
    # breaker: after list(it) the 2 worker processes stayed alive until close() or GC (a
    # notebook holding `it` kept them); a repeat(2) left 6. DataLoader's iterator shuts
    # its workers down at the end of the epoch.
    ds = dp.range(200).map(_pid, num_parallel_calls=2, executor="process")
    it = iter(ds)
    assert 1 <= len({int(p) for p in it}) <= 2  # worker processes computed the elements
    assert settle_processes(1.0) == []  # without close() or GC (`it` is still held)
    rest = iter(ds)
    rest.load_state_dict(it.state_dict())  # the end state is still there
    assert list(rest) == [] and settle_processes(1.0) == []
    assert sum(1 for _ in ds.repeat(2)) == 400 and settle_processes(1.0) == []


def _exits_at_30(x):
    if int(x) == 30:
        sys.exit(0)
    return int(x)


def test_sys_exit_in_a_worker_is_that_elements_error_not_the_parents_exit(clean):
    # breaker: sys.exit(0) in a process map reached the parent as SystemExit(0), so a
    # training script ended with status 0 mid-epoch (and left its workers running).
    it = iter(dp.range(100).map(_exits_at_30, num_parallel_calls=2, executor="process"))
    got, errors = [], []
    while True:
        try:
            got.append(next(it))
        except StopIteration:
            break
        except dp.PipelineError as e:
            errors.append(str(e).splitlines()[0])
    assert got == [i for i in range(100) if i != 30]
    assert errors == [
        "map at element 30: RuntimeError: the function raised SystemExit(0) in a worker "
        "process; it ends neither the worker nor the pipeline"
    ]
    it.close()
    assert settle_processes(1.5) == []


def test_keyboard_interrupt_stops_processes(clean):
    it = _started()
    iterate_until_interrupted(it)
    assert settle_processes(1.5) == []  # the iterator closed the pipeline itself
    assert list(it) == []


def test_unpicklable_function_is_a_clear_error(clean):
    import threading

    lock = threading.Lock()
    ds = dp.range(3).map(lambda x: (lock, x)[1], 2, executor="process")
    with pytest.raises(TypeError, match="cannot be sent to worker processes"):
        iter(ds)


# ---- torchrun ------------------------------------------------------------------------------
RANK_SCRIPT = """
import json, os, sys, torch.distributed as dist
import datapipe as dp
dist.init_process_group("gloo")
ds = dp.range(40).map(lambda x: (int(x), os.getpid()), 2, executor="process")
got = list(ds)
json.dump({"elements": [e for e, _ in got], "pids": sorted({p for _, p in got}),
           "me": os.getpid()}, open(sys.argv[1] + f"/rank{dist.get_rank()}.json", "w"))
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_process_workers_inside_torchrun_ranks(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    torchrun = Path(sys.executable).with_name("torchrun")
    cmd = [str(torchrun), "--standalone", "--nproc_per_node=2", "--max-restarts=0",
           str(script), str(tmp_path)]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    a, b = ranks[0]["elements"], ranks[1]["elements"]
    assert sorted(a + b) == list(range(40)) and not set(a) & set(b)  # auto-sharded
    for r in ranks:
        assert len(r["pids"]) <= 2 and r["me"] not in r["pids"]  # computed in its workers


def test_pickled_failure_round_trip():
    from datapipe.parallel.processes import _Failure

    class Odd(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a}-{b}")

    f = pickle.loads(pickle.dumps(_Failure(Odd(1, 2))))
    assert f.exc is None and (f.type_name, f.message) == ("Odd", "1-2")
    g = pickle.loads(pickle.dumps(_Failure(KeyError("k"))))
    assert isinstance(g.exc, KeyError)


# ---- datapipe.stats ------------------------------------------------------------------------
def _busy(x):
    end = time.process_time() + 0.001  # CPU work in the worker process
    while time.process_time() < end:
        pass
    return int(x)


def test_stats_gauges_and_a_trace_track_per_worker(tmp_path, clean):
    path = tmp_path / "p.json"
    ds = dp.range(200).map(_busy, num_parallel_calls=2, executor="process", name="aug")
    report = ds.profile(trace_path=str(path))
    stage = report.stage("aug")
    assert stage.elements == 200 and stage.parallelism == 2
    assert stage.busy_s >= 0.2 and stage.cpu_s >= 0.15  # the workers' time, not the parent's
    doc = json.loads(path.read_text())
    names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}  # fmt: skip
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] == "chunk"]
    tracks = sorted({names[e["tid"]] for e in spans})
    assert tracks == ["aug workers [datapipe-aug-0]", "aug workers [datapipe-aug-1]"]
    assert sum(e["args"]["elements"] for e in spans) == 200
    assert len({e["args"]["pid"] for e in spans}) == 2


def test_switching_executors_mid_stream_keeps_every_element_in_order(clean):
    # What AUTOTUNE does when it moves a stage between inline, threads and processes.
    it = iter(dp.range(2000).map(_jitter, num_parallel_calls=dp.AUTOTUNE))
    knob = it.root.knob
    it.root.tuner.end_search(knob)  # the switches below are the test's, not the tuner's
    got = []
    for kind in ("thread", "process", "inline", "process", "thread"):
        assert knob.set_executor(kind, 2)
        got += [int(next(it)) for _ in range(300)]
        assert it.root.executor == kind
    got += [int(x) for x in it]
    assert got == [10 * i for i in range(2000)]
    assert [e[2:] for e in knob.events if e[1] == "executor"][:2] == [
        ("inline", "thread"), ("thread", "process")]  # fmt: skip
    it.close()


def test_an_element_that_cannot_be_sent_fails_at_its_position(clean):
    import threading

    lock = threading.Lock()
    src = dp.range(10).map(lambda x: lock if int(x) == 4 else int(x))  # made in the parent
    it = iter(src.map(lambda x: x if type(x) is int else 0, 2, executor="process"))
    assert [next(it) for _ in range(4)] == [0, 1, 2, 3]
    with pytest.raises(dp.PipelineError, match="map at element 4: TypeError: the element can"):
        next(it)
    assert list(it) == [5, 6, 7, 8, 9]


def test_inside_dataloader_workers_it_runs_on_threads(clean):
    # A DataLoader worker is a daemonic process, which may not start processes: the stage
    # warns there and runs on threads (same elements), instead of failing.
    from torch.utils.data import DataLoader

    ds = dp.range(40).map(lambda x: int(x) * 2, 2, executor="process")
    loader = DataLoader(ds.as_torch_dataset(), batch_size=None, num_workers=2)
    assert sorted(int(x) for x in loader) == [2 * i for i in range(40)]


# ---- races between a restore or a repeat epoch and work still in flight -----------------
def test_restore_while_a_worker_process_computes_large_in_band_results(clean):
    # The abandoned task's large result and the next task's large input met in the pipe:
    # the parent blocked sending, the worker blocked sending back, and the consumer waited
    # forever.
    ds = dp.range(12).map(_big_string).map(_slow_append, 2, executor="process")
    it = iter(ds)
    assert next(it) == _big_string(0) + "!"
    state = it.get_state()
    it.set_state(state)  # the workers' second chunks are still being computed
    rest = list(it)
    assert rest == [_big_string(i) + "!" for i in range(1, 12)]
    it.close()


def test_repeat_reuses_workers_with_a_task_in_flight(clean):
    # take() closes the map stage mid-flight each epoch; repeat parks its processes for the
    # next epoch, whose first task must not collide with the abandoned one.
    ds = dp.range(12).map(_big_string).map(_slow_append, 2, executor="process").take(1).repeat(3)
    with iter(ds) as it:
        assert list(it) == [_big_string(0) + "!"] * 3


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


@pytest.mark.parametrize("op", ["map", "random_map"])
def test_executor_process_without_num_parallel_calls_runs_in_a_worker_process(op, clean):
    # executor="process" was ignored without num_parallel_calls: the function ran inline.
    ds = dp.range(6)
    if op == "map":
        ds = ds.map(_pid_now, executor="process")
    else:
        ds = ds.random_map(lambda x, rng: os.getpid(), seed=1, executor="process")
    with iter(ds) as it:
        pids = {int(p) for p in it}
    assert len(pids) == 1 and os.getpid() not in pids


# ---- shared memory that has no room ------------------------------------------------------
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
