"""datapipe.service without a Ray cluster: argument checks, split layouts, the dispatcher's
bookkeeping, a worker's split chains (resumed across "workers"), and how auto-sharding
treats a pipeline with ``distribute``. (The tests that start Ray: test_service_ray.py.)"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import cloudpickle  # what distribute sends
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import datapipe as dp
from datapipe._context import walk
from datapipe.distribute.shard_point import _Cut
from datapipe.distribute.share import share_from_state
from datapipe.service.jobs import JobTable, Record
from datapipe.service.layout import (
    INFINITE,
    ParallelSlots,
    PoolSplits,
    layout_from_state,
    layout_to_state,
)
from datapipe.service.op import ServiceDataset, distribute
from datapipe.service.ray_service import RayService, parse_address
from datapipe.service.worker import Packed, WorkerCore, build_split_chain, elements_of, pack

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def svc(k: int = 2, **kw) -> RayService:
    return RayService(num_workers=k, **kw)


def dist(ds, mode="distributed_epoch", k=2, **kw):
    split = kw.pop("split_size", None)
    return ds.apply(distribute(mode, svc(k, split_size=split), **kw))


# ---- import and construction ---------------------------------------------------------------
def test_import_does_not_import_ray():
    with socket.socket() as sock:  # a free port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code = (
        "import sys, datapipe as dp\n"
        "s = dp.service.RayService(num_workers=2)\n"
        "ds = dp.range(10).apply(dp.service.distribute('distributed_epoch', s))\n"
        "it = iter(ds)\n"  # iterators join the service lazily, at the first element
        "assert ds.cardinality() == 10\n"
        f"bad = dp.service.RayService(num_workers=2, address='127.0.0.1:{port}')\n"
        "try:\n"
        "    next(iter(dp.range(3).apply(dp.service.distribute('parallel_epochs', bad))))\n"
        "except ValueError as e:\n"
        "    assert 'no Ray cluster reachable' in str(e)\n"
        "else:\n"
        "    raise SystemExit('no ValueError for a refused address')\n"
        "print('ray' in sys.modules)\n"  # the bad address failed before Ray was imported
    )
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"processing_mode": "one_epoch"}, ValueError, "processing_mode must be one of"),
        ({"service": "grpc://localhost:5000"}, TypeError, "RayService"),
        ({"job_name": ""}, ValueError, "job_name must be a non-empty str"),
        ({"job_name": 3}, ValueError, "job_name must be a non-empty str"),
        ({"consumer_index": 0}, ValueError, "set both consumer_index and num_consumers"),
        ({"num_consumers": 2}, ValueError, "set both consumer_index and num_consumers"),
        ({"consumer_index": 0, "num_consumers": 2}, ValueError, "needs a job_name"),
        ({"consumer_index": 2, "num_consumers": 2, "job_name": "j"}, ValueError, r"\[0, num_"),
        ({"consumer_index": 1.0, "num_consumers": 2, "job_name": "j"}, TypeError, "an int"),
        ({"max_outstanding_requests": 0}, ValueError, "max_outstanding_requests must be >= 1"),
        ({"max_outstanding_requests": "4"}, TypeError, "max_outstanding_requests"),
    ],
)
def test_distribute_arguments(kwargs, error, match):
    args = {"processing_mode": "distributed_epoch", "service": svc(), **kwargs}
    with pytest.raises(error, match=match):
        distribute(**args)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"num_workers": 0}, ValueError, "num_workers must be >= 1"),
        ({"num_workers": "2"}, TypeError, "num_workers must be an int"),
        ({"num_workers": 2, "num_cpus_per_worker": 0}, ValueError, "num_cpus_per_worker"),
        ({"num_workers": 2, "address": "localhost"}, ValueError, "is not None, 'auto'"),
        ({"num_workers": 2, "address": "host:99999"}, ValueError, "is not None, 'auto'"),
        ({"num_workers": 2, "address": 6379}, TypeError, "address must be a str"),
        ({"num_workers": 2, "name": "a b"}, ValueError, "name must be"),
        ({"num_workers": 2, "split_size": 0}, ValueError, "split_size must be >= 1"),
        ({"num_workers": 2, "connect_timeout_s": 0}, ValueError, "connect_timeout_s"),
    ],
)
def test_ray_service_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        RayService(**kwargs)


def test_parse_address_forms():
    assert parse_address(None) == ("process", None, None)
    assert parse_address("auto") == ("auto", None, None)
    assert parse_address("10.0.0.5:6379") == ("gcs", "10.0.0.5", 6379)
    assert parse_address("ray://head:10001") == ("client", "head", 10001)
    assert parse_address("[::1]:6379") == ("gcs", "::1", 6379)


@pytest.mark.timeout(30)
def test_refused_address_fails_fast_with_a_clear_message():
    pytest.importorskip("ray")
    import ray

    if ray.is_initialized():
        pytest.skip("Ray is initialised in this process")
    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    service = RayService(num_workers=2, address=f"127.0.0.1:{port}", connect_timeout_s=1.0)
    ds = dp.range(10).apply(distribute("distributed_epoch", service))
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=rf"no Ray cluster reachable at '127.0.0.1:{port}'"):
        next(iter(ds))
    assert time.monotonic() - t0 < 10  # 10x the probe's 1 s, not Ray's minute of retries
    assert not ray.is_initialized()


# ---- what the service can split --------------------------------------------------------------
def _gen():
    yield from range(5)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: dp.from_generator(_gen, dp.TensorSpec((), "int64")), "cannot split the stream"),
        (lambda: dp.range(10).scan(0, lambda s, x: (s + x, s)), "cannot split the stream"),
        (lambda: dp.range(10).repeat(2), "'repeat' before distribute"),
        (lambda: dp.range(10).shard(2, 0), "remove the explicit 'shard'"),
        (lambda: dp.range(10).cache(), "'cache' does not pickle"),
        (
            lambda: dp.range(10).with_options(
                dp.Options(
                    distribute=dp.DistributeOptions(auto_shard_policy=dp.AutoShardPolicy.OFF)
                )
            ),
            "auto_shard_policy is OFF",
        ),
    ],
)
def test_distributed_epoch_refuses_what_it_cannot_split(build, match):
    with pytest.raises(ValueError, match=match):
        dist(build())


def test_parallel_epochs_takes_any_pipeline():
    ds = dist(dp.from_generator(_gen, dp.TensorSpec((), "int64")), "parallel_epochs", k=3)
    assert ds.splitting.policy is None and ds.layout() == ParallelSlots(3, None)
    assert dist(dp.range(10), "parallel_epochs", k=3).cardinality() == 30


def test_plans_and_cardinality():
    ds = dist(dp.range(100).map(lambda x: x + 1))
    assert (ds.splitting.policy, ds.splitting.pools, ds.splitting.elementwise) == (
        "DATA",
        (100,),
        True,
    )
    assert ds.cardinality() == 100 and len(ds) == 100
    # ceil(100 / (8 splits x 2 workers)) = 7, raised towards a full reply (512 elements)
    # while each worker keeps two splits: ceil(100 / (2 x 2)) = 25 (issue 25)
    assert ds.layout().split_size == 25
    assert dist(dp.range(100).batch(10)).cardinality() == dp.UNKNOWN_CARDINALITY
    shared = dict(job_name="j", consumer_index=1, num_consumers=3)
    assert dist(dp.range(10), **shared).cardinality() == 3  # uneven="drop": 10 // 3
    allow = dp.Options(distribute=dp.DistributeOptions(uneven="allow"))
    assert dist(dp.range(10).with_options(allow), **shared).cardinality() == 3
    shared0 = dict(shared, consumer_index=0)
    assert dist(dp.range(10).with_options(allow), **shared0).cardinality() == 4
    assert dist(dp.range(10), job_name="j").cardinality() == dp.UNKNOWN_CARDINALITY


def test_file_sources_split_by_file(tmp_path):
    for i in range(3):
        (tmp_path / f"f{i}.txt").write_text("".join(f"{i}-{j}\n" for j in range(4)))
    files = sorted(str(p) for p in tmp_path.iterdir())
    ds = dist(dp.TextLineDataset(files))
    assert (ds.splitting.policy, ds.splitting.pools, ds.splitting.units) == ("FILE", (3,), True)
    assert ds.layout().split_size == 1
    ds = dist(dp.list_files(str(tmp_path / "*.txt"), shuffle=False).interleave(dp.TextLineDataset))
    assert (ds.splitting.policy, ds.splitting.pools) == ("FILE", (3,))


def test_spec_inference_runs_locally(monkeypatch):
    def no_service(self):
        raise AssertionError("element_spec inference started the service")

    monkeypatch.setattr(RayService, "_ray", no_service)
    ds = dist(dp.range(10)).map(lambda x: np.float32(x) / 2)
    assert ds.element_spec.dtype == np.float32


# ---- split layouts ----------------------------------------------------------------------------
def _positions(layout) -> dict:
    """(cut, owner) -> the pool positions the layout's splits read, in split order."""
    out: dict = {}
    count = layout.count()
    for sid in range(count):
        spec = layout.spec(sid)
        for c, doc in enumerate(spec.shares):
            share = share_from_state(doc)
            pos = [int(p) for seg in share.segments for p in seg.positions(0, len(seg))]
            out.setdefault((c, layout.owner(sid)), []).extend(pos)
            assert spec.size == len(pos) or len(layout.pools) > 1
    return out


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(0, 300),
    size=st.integers(1, 40),
    consumers=st.one_of(st.none(), st.integers(1, 6)),
    uneven=st.sampled_from(["drop", "pad", "allow"]),
)
def test_pool_splits_cover_the_pool(n, size, consumers, uneven):
    layout = PoolSplits((n,), size, consumers, uneven)
    got = _positions(layout)
    if consumers is None or uneven == "allow":
        every = sorted(p for pos in got.values() for p in pos)
        assert every == list(range(n))  # every position exactly once
        if consumers is not None:
            counts = [len(got.get((0, c), [])) for c in range(consumers)]
            assert max(counts) - min(counts) <= 1
        return
    counts = [len(got.get((0, c), [])) for c in range(consumers)]
    assert len(set(counts)) == 1  # every consumer reads as many
    distinct = {p for pos in got.values() for p in pos}
    assert distinct <= set(range(n))
    if uneven == "drop":
        assert sum(counts) == len(distinct) >= n - (consumers - 1)
    else:
        assert distinct == set(range(n)) and sum(counts) - n <= consumers - 1


def test_pool_splits_round_robin_and_several_pools():
    layout = PoolSplits((10, 7), 2, 2, "allow")
    assert [layout.owner(s) for s in range(4)] == [0, 1, 0, 1]
    got = _positions(layout)
    assert got[(0, 0)] + got[(0, 1)] == [0, 1, 4, 5, 8, 2, 3, 6, 7, 9]
    assert sorted(got[(1, 0)] + got[(1, 1)]) == list(range(7))  # the shorter pool, clipped
    infinite = PoolSplits((INFINITE,), 5)
    assert infinite.count() is None
    assert share_from_state(infinite.spec(3).shares[0]).segments[0].positions(0, 5).tolist() == [
        15, 16, 17, 18, 19,
    ]  # fmt: skip
    for layout in (PoolSplits((9,), 4, 3, "pad"), ParallelSlots(3, 2), ParallelSlots(2, None)):
        assert layout_from_state(layout_to_state(layout)) == layout
    with pytest.raises(ValueError, match="malformed"):
        layout_from_state({"kind": "pool"})


# ---- the dispatcher's bookkeeping --------------------------------------------------------------
def _table(layout, workers=2):
    table = JobTable(workers)
    return table, ("job", (0,), "")


def test_job_table_hands_every_split_once_and_requeues_released_ones():
    layout = PoolSplits((10,), 3)
    table, key = _table(layout)
    a = table.join(key, "fp", layout, 7, "blob", None)
    b = table.join(key, "fp", layout, 99, "blob", None)
    assert a.seed == b.seed == 7  # the first joiner's seed
    got_a = [table.next_split(key, a.token, 0).spec.sid, table.next_split(key, a.token, 1).spec.sid]
    got_b = table.next_split(key, b.token, 0)
    assert got_a == [0, 1] and got_b.spec.sid == 2
    table.release(key, a.token, [Record(1, {"items": [4], "failed": []}, {"pos": 1})], [0])
    again = table.next_split(key, b.token, 1, [2])
    assert again.spec.sid == 1 and again.record.state == {"pos": 1}  # 0 was never read
    assert table.next_split(key, b.token, 0, [1]).spec.sid == 3
    assert table.next_split(key, b.token, 0, [3]) is None
    assert key not in table.jobs and key in table.finished  # a named job: a tombstone
    late = table.join(key, "fp", layout, 0, "blob", None)
    assert late.finished
    with pytest.raises(ValueError, match="already runs another pipeline"):
        table.join(key, "other", layout, 0, "blob", None)
    assert table.stats["splits_done"] == 4 and table.stats["splits_released"] == 1


def test_job_table_requeues_a_split_given_back_unstarted_as_it_was_handed_out():
    # A consumer that stops while a split given back by another consumer (with what that
    # one had received) waits in its prefetch, or whose assignment is still on its way,
    # names it in no record: the split goes back with the record it was handed out with,
    # not from its start (which would read the elements the first consumer delivered
    # again). The same for a split a resumed consumer adopted and had not started.
    layout = PoolSplits((10,), 5)
    table, key = _table(layout)
    a = table.join(key, "fp", layout, 7, "blob", None)
    assert table.next_split(key, a.token, 0).spec.sid == 0
    carry = {"items": [3, 4], "failed": []}
    table.release(key, a.token, [Record(0, carry, {"pos": 5})], [])
    b = table.join(key, "fp", layout, 7, "blob", None)
    handed = table.next_split(key, b.token, 0)
    assert handed.spec.sid == 0 and handed.record.carry == carry
    table.release(key, b.token, [], [])  # b never started it
    c = table.join(key, "fp", layout, 7, "blob", None)
    again = table.next_split(key, c.token, 0)
    assert again.spec.sid == 0
    assert (again.record.carry, again.record.state) == (carry, {"pos": 5})
    assert table.next_split(key, c.token, 0).record is None  # split 1: from its start
    table.release(key, c.token, [], [])
    assert {sid: rec.state for sid, rec in table.jobs[key].requeued.items()} == {
        0: {"pos": 5},
        1: None,
    }
    # adopted from a checkpoint, then given back unstarted: with the checkpoint's record
    saved = {"consumer": None, "done": [], "records": [
        {"sid": 1, "carry": carry, "state": {"pos": 8}, "finished": False}]}  # fmt: skip
    other, key2 = _table(layout)
    d = other.join(key2, "fp", layout, 7, "blob", None, [saved], "ckpt")
    assert d.adopted["records"][0]["sid"] == 1
    other.release(key2, d.token, [], [])
    rec = other.jobs[key2].requeued[1]
    assert (rec.carry, rec.state, rec.finished) == (carry, {"pos": 8}, False)


def test_job_table_round_robin_consumers_and_their_restores():
    layout = PoolSplits((12,), 2, 2, "drop")
    table, key = _table(layout)
    c0 = table.join(key, "fp", layout, 1, "blob", 0)
    c1 = table.join(key, "fp", layout, 1, "blob", 1)
    with pytest.raises(ValueError, match="consumer_index=1 already reads"):
        table.join(key, "fp", layout, 1, "blob", 1)
    assert [table.next_split(key, c0.token, 0).spec.sid for _ in range(3)] == [0, 2, 4]
    assert table.next_split(key, c0.token, 0) is None
    assert table.next_split(key, c1.token, 0).spec.sid == 1
    # consumer 1 restarts from its checkpoint: split 3 done, split 1 half read
    table.release(key, c1.token, [])
    rec = {"sid": 1, "carry": {"items": [], "failed": []}, "state": "s", "finished": False}
    state = {"consumer": 1, "done": [3], "records": [rec]}
    other = {"consumer": 0, "done": [0, 2], "records": []}
    c1 = table.join(key, "fp", layout, 1, "blob", 1, [other, state], "r")
    assert c1.adopted == {"done": [3], "records": [rec]}  # its own, to read and keep
    assert table.next_split(key, c1.token, 0).spec.sid == 5  # 1 is its own, 3 is done
    assert table.next_split(key, c1.token, 0, [1, 5]) is None
    assert {1, 3, 5} <= table.jobs[key].done


def test_job_table_first_come_restore_needs_the_same_list():
    layout = PoolSplits((6,), 2)
    table, key = _table(layout)
    rec = {"sid": 1, "carry": None, "state": None, "finished": False}
    states = [{"consumer": None, "done": [0], "records": []},
              {"consumer": None, "done": [], "records": [rec]}]  # fmt: skip
    a = table.join(key, "fp", layout, 1, "blob", None, states, "r1")
    b = table.join(key, "fp", layout, 1, "blob", None, states, "r1")
    assert a.adopted == {"done": [0], "records": [rec]}  # the first joiner adopts it all
    assert b.adopted == {"done": [], "records": []}
    with pytest.raises(ValueError, match="already resumed from another checkpoint"):
        table.join(key, "fp", layout, 1, "blob", None, states[:1], "r2")
    assert table.next_split(key, b.token, 0).spec.sid == 2  # 0 done, 1 adopted by a
    table.release(key, a.token, [Record(1, None, "mid")])  # a stops: b finishes its split
    again = table.next_split(key, b.token, 0, [2])
    assert again.spec.sid == 1 and again.record.state == "mid"


# ---- a worker's split chains ------------------------------------------------------------------
def _open(ds, spec, state=None, policy="DATA", epoch=(0,), seed=5):
    return {"policy": policy, "spec": spec.to_state(), "epoch": list(epoch), "seed": seed,
            "state": state}  # fmt: skip


def _slow(x):
    time.sleep(0.001)
    return x


@pytest.mark.parametrize("min_elements, want", [(1, 1), (40, 40)])
def test_a_reply_ends_for_time_only_once_it_holds_min_elements(min_elements, want):
    # Replies were cut at REPLY_SECONDS (20 ms) whatever they held: ~100 elements of
    # W6's 200-us map, and the consumer pays ~1.4 ms of CPU per reply (issue 25).
    ds = dp.range(500).map(_slow)
    spec = PoolSplits((500,), 500).spec(0)
    core = WorkerCore()
    key = ("k", 0, min_elements)
    reply = core.read(key, "b", cloudpickle.dumps(ds), _open(ds, spec), seconds=0.0005,
                      min_elements=min_elements)  # fmt: skip
    assert elements_of(reply) == list(range(want)) and not reply.done
    core.shutdown()


def test_a_reply_that_holds_a_splits_known_last_element_says_it_ended():
    # A 512-element split (the default floor) read in replies of at least 512: the first
    # reply stops as it reaches 512, before it sees the end. Told how many elements the
    # split has left, the worker checks for the end there and says done -- one request
    # per split instead of a second one that only finds the end.
    ds = dp.range(1000)
    blob = cloudpickle.dumps(ds)
    spec = PoolSplits((1000,), 512).spec(0)
    core = WorkerCore()
    first = core.read(("k", 0, 0), "b", blob, _open(ds, spec), seconds=0.0)
    assert elements_of(first) == list(range(512)) and not first.done  # not told
    end = core.read(("k", 0, 0), "b", None, None, seconds=0.0)
    assert elements_of(end) == [] and end.done  # ... a second request finds the end
    told = {**_open(ds, spec), "elements": 512}
    reply = core.read(("k", 0, 1), "b", blob, told, seconds=0.0)
    assert elements_of(reply) == list(range(512)) and reply.done and reply.state is None
    # resumed mid-split with the count left: the same
    mid = core.read(("k", 0, 2), "b", blob, told, limit=100)
    assert elements_of(mid) == list(range(100)) and not mid.done
    again = {**_open(ds, spec, mid.state), "elements": 412}
    rest = core.read(("k", 0, 3), "b", blob, again, seconds=0.0)
    assert elements_of(rest) == list(range(100, 512)) and rest.done
    # a size that undercounts loses nothing: the element past it joins the reply
    short = core.read(("k", 0, 4), "b", blob, {**_open(ds, spec), "elements": 50}, limit=100)
    assert elements_of(short) == list(range(101)) and not short.done
    core.shutdown()


def test_a_reply_still_ends_after_reply_max_seconds(monkeypatch):
    from datapipe.service import worker

    monkeypatch.setattr(worker, "REPLY_MAX_SECONDS", 0.02)
    ds = dp.range(500).map(_slow)
    spec = PoolSplits((500,), 500).spec(0)
    core = WorkerCore()
    reply = core.read(("k", 0, 9), "b", cloudpickle.dumps(ds), _open(ds, spec), seconds=0.0005,
                      min_elements=400)  # fmt: skip
    assert 1 <= len(elements_of(reply)) < 400  # ~20 of 1-ms elements, far below 400
    core.shutdown()


def test_a_split_resumes_on_another_worker_from_the_last_reply():
    # shuffle + parallel map inside a split: the state after each reply is exact
    ds = dp.range(200).shuffle(16, seed=3).map(lambda x: x * 10, num_parallel_calls=2)
    blob = cloudpickle.dumps(ds)
    layout = PoolSplits((200,), 50)
    spec = layout.spec(1)
    whole = WorkerCore().read(("k", 1, 0), "b", blob, _open(ds, spec), limit=10**6)
    assert whole.done and sorted(elements_of(whole)) == [10 * i for i in range(50, 100)]
    first = WorkerCore()
    got = []
    reply = first.read(("k", 1, 1), "b", blob, _open(ds, spec), limit=7)
    got += elements_of(reply)
    reply = first.read(("k", 1, 1), "b", None, None, limit=7)
    got += elements_of(reply)
    first.shutdown()  # the worker "dies"; another opens the split at the last state
    second = WorkerCore()
    reply = second.read(("k", 1, 2), "b", blob, _open(ds, spec, reply.state), limit=10**6)
    got += elements_of(reply)
    assert reply.done and got == elements_of(whole)


def test_a_split_is_not_sharded_again_on_the_worker(monkeypatch):
    # a launcher's variables inherited by the worker process, and the pipeline's own
    # worker context, must not shard a split a second time
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    own = dp.Options(distribute=dp.DistributeOptions(num_workers=2, worker_index=1))
    ds = dp.range(40).with_options(own).map(lambda x: x + 1)
    spec = PoolSplits((40,), 10).spec(2)
    ctx, root = build_split_chain(ds, _open(ds, spec))
    out = []
    while chunk := root.next_chunk(100):
        out += chunk
    root.close()
    assert out == list(range(21, 31))


def test_element_failures_keep_their_position():
    def f(x):
        if x == 3:
            raise ValueError("bad element")
        return x

    ds = dp.range(6).map(f)
    core = WorkerCore()
    spec = PoolSplits((6,), 6).spec(0)
    reply = core.read(("k", 0, 0), "b", cloudpickle.dumps(ds), _open(ds, spec), limit=100)
    assert elements_of(reply)[:3] == [0, 1, 2] and len(reply.elements) == 4
    assert "bad element" in str(reply.elements[3].error) and not reply.done
    rest = core.read(("k", 0, 0), "b", None, None, limit=100)
    assert elements_of(rest) == [4, 5] and rest.done


def test_parallel_epochs_splits_differ_by_slot_and_deal_among_consumers():
    ds = dp.range(20).shuffle(20, seed=1)
    blob = cloudpickle.dumps(ds)

    def read(spec):
        out = []
        core, key = WorkerCore(), ("k", spec.sid, 0)
        reply = core.read(key, "b", blob, _open(ds, spec, policy=None), limit=1000)
        out += elements_of(reply)
        while not reply.done:
            reply = core.read(key, "b", None, None, limit=1000)
            out += elements_of(reply)
        return out

    slots = ParallelSlots(2)
    a, b = read(slots.spec(0)), read(slots.spec(1))
    assert sorted(a) == sorted(b) == list(range(20)) and a != b  # own epoch per slot
    dealt = ParallelSlots(2, 2)
    c0, c1 = read(dealt.spec(0)), read(dealt.spec(1))  # slot 0, consumers 0 and 1
    assert sorted(c0 + c1) == list(range(20)) and len(c0) == len(c1) == 10


# ---- auto-sharding and the consumer ------------------------------------------------------------
def test_auto_shard_leaves_a_distributed_pipeline_alone():
    ctx_opts = dp.Options(distribute=dp.DistributeOptions(num_workers=2, worker_index=1))
    ds = dist(dp.range(10).map(lambda x: x * 2)).map(lambda x: x + 1).with_options(ctx_opts)
    assert ds.cardinality() == 10  # this worker's view: the whole job, not half of it
    it = iter(ds)  # builds the consumer; nothing joins the service before the first element
    graph = walk(it._ctx.root)
    assert it._ctx.policy is None and not any(isinstance(n, _Cut) for n in graph)
    assert [n._name for n in graph if n.uses_service] == ["distribute"]
    it.close()


def test_distribute_node_traits():
    ds = dist(dp.range(4))
    assert isinstance(ds, ServiceDataset)
    assert ds.uses_service and not ds.elementwise and not ds.commutes_with_shard
    assert not ds.keeps_random_access


def test_shuffling_file_lists_hand_out_splits_in_a_new_order_each_iteration(tmp_path):
    for i in range(12):
        (tmp_path / f"f{i:02d}.txt").write_text("x\n")
    shuffled = dist(dp.list_files(str(tmp_path / "*.txt"), seed=3))
    assert shuffled.splitting.shuffle and shuffled.layout().shuffle
    assert not dist(dp.list_files(str(tmp_path / "*.txt"), shuffle=False)).splitting.shuffle

    def order(layout, epoch, owners=(None,)):
        table = JobTable(2)
        key = ("j", epoch, "")
        tokens = [table.join(key, "fp", layout, 7, "b", o).token for o in owners]
        out = []
        for t in tokens:
            while (a := table.next_split(key, t, 0)) is not None:
                out.append(a.spec.sid)
        return out

    layout = PoolSplits((12,), 1, None, "drop", shuffle=True)
    first, again, other = order(layout, (0,)), order(layout, (0,)), order(layout, (1,))
    assert sorted(first) == list(range(12)) and first != list(range(12))
    assert first == again and first != other  # the seed and the iteration decide it
    dealt = PoolSplits((12,), 1, 3, "drop", shuffle=True)
    got = order(dealt, (0,), owners=(0, 1, 2))
    per = [got[:4], got[4:8], got[8:]]
    assert [sorted(s % 3 for s in p) for p in per] == [[0] * 4, [1] * 4, [2] * 4]
    assert [s // 3 for s in per[0]] == [s // 3 for s in per[1]] != [0, 1, 2, 3]  # rounds


def test_a_restored_consumer_reports_the_checkpoint_until_it_joins():
    ds = dist(dp.range(100), job_name="j", consumer_index=1, num_consumers=2)
    op = iter(ds)._root  # the consumer; nothing joins the service before the first element
    fresh = op.get_state()
    assert (fresh["done"], fresh["records"], fresh["consumer"]) == ([], [], 1)
    rec = {"sid": 1, "carry": {"items": [7], "failed": []}, "state": None, "finished": False}
    other = dict(fresh, consumer=0, done=[0, 2])
    op.set_state([other, dict(fresh, done=[3], records=[rec])])
    again = op.get_state()
    assert (again["done"], again["records"], again["job"]) == ([3], [rec], fresh["job"])
    with pytest.raises(ValueError, match="none of the 1 states was saved by consumer_index=1"):
        op.set_state([other])
    with pytest.raises(ValueError, match="saved with num_consumers=None"):
        op.set_state(iter(dist(dp.range(100)))._root.get_state())
    with pytest.raises(ValueError, match="not a distribute consumer's state"):
        op.set_state({"epoch": [0]})


def test_a_worker_closes_its_least_recently_read_streams_beyond_its_limit(monkeypatch):
    import datapipe.service.worker as worker

    monkeypatch.setattr(worker, "MAX_STREAMS", 2)
    ds = dp.range(30)
    blob = cloudpickle.dumps(ds)
    core = WorkerCore()
    layout = PoolSplits((30,), 10)
    for sid in range(3):  # a third stream closes the first (its consumer went away)
        core.read(("k", sid, 0), "b", blob, _open(ds, layout.spec(sid)), limit=2)
    assert list(core.streams) == [("k", 1, 0), ("k", 2, 0)]
    with pytest.raises(RuntimeError, match="never opened on this worker"):
        core.read(("k", 0, 0), "b", None, None)
    assert elements_of(core.read(("k", 1, 0), "b", None, None, limit=3)) == [12, 13, 14]


def test_numpy_scalars_travel_as_one_array_and_come_back_the_same():
    xs = [np.int64(i) for i in range(5)]
    packed = pack(xs)
    assert isinstance(packed, Packed) and packed.array.dtype == np.int64
    back = cloudpickle.loads(cloudpickle.dumps(packed)).unpack()
    assert back == xs and all(type(x) is np.int64 for x in back)
    mixed = [np.int64(1), np.int32(2)]
    assert pack(mixed) is mixed  # two dtypes: as they are
    assert pack([np.float32(1), 2.0]) == [np.float32(1), 2.0]
    strings = [np.str_("a"), np.str_("bc")]
    assert pack(strings) is strings  # '<U1' and '<U2'


def test_consumers_hand_out_writable_arrays():
    from datapipe.service.worker import writable

    ro = np.arange(6).reshape(2, 3)
    ro.flags.writeable = False
    out = writable([(ro, 1), (ro[::-1], 2)])
    assert all(x[0].flags.writeable for x in out) and out[0][0].tolist() == ro.tolist()
    ok = [np.zeros(3)]
    assert writable(ok) is ok


def test_sharded_record_files_are_split_by_shard(tmp_path):
    samples = [{"__key__": f"s{i:03d}", "txt": f"sample {i}"} for i in range(10)]
    shards = dp.write_webdataset(samples, str(tmp_path / "shard-%03d.tar"), max_count=4)
    ds = dist(dp.WebDataset(shards))
    assert (ds.splitting.policy, ds.splitting.pools, ds.splitting.units) == ("FILE", (3,), True)
    blob = cloudpickle.dumps(ds._inputs[0])
    got = []
    for sid in range(ds.layout().count()):  # each split on its own "worker"
        spec = ds.layout().spec(sid)
        core, key = WorkerCore(), ("k", sid, 0)
        reply = core.read(key, "b", blob, _open(ds, spec, policy="FILE"), limit=100)
        while True:
            got += [x["__key__"] for x in elements_of(reply)]
            if reply.done:
                break
            reply = core.read(key, "b", None, None, limit=100)
    assert sorted(got) == [f"s{i:03d}" for i in range(10)]


def test_auto_split_size_holds_a_full_reply_where_the_pool_allows():
    from datapipe.service.op import auto_split_size

    assert auto_split_size(1_280_000, 1000) == 512  # was ceil(1.28M / 8000) = 160
    assert auto_split_size(20_000, 2) == 1250  # 8 splits per worker already hold 512
    assert auto_split_size(100, 2) == 25  # two splits per worker before 512
    assert auto_split_size(10**9, 2) == 10_000 and auto_split_size(1, 5) == 1
    assert auto_split_size(5, 2, elementwise=False) == 1  # files that expand: as before


def test_a_consumer_with_an_index_reads_from_its_own_workers():
    from types import SimpleNamespace

    from datapipe.service.consumer import reading_workers

    def node(n, c, mode="distributed_epoch"):
        return SimpleNamespace(num_consumers=n, consumer_index=c, processing_mode=mode)

    assert reading_workers(node(64, 5), 1000) == list(range(5, 1000, 64))
    assert reading_workers(node(4, 1), 7) == list(range(7))  # fewer than 2 workers each
    assert reading_workers(node(None, None), 10) == list(range(10))  # no place known
    assert reading_workers(node(2, 0, "parallel_epochs"), 10) == list(range(10))
