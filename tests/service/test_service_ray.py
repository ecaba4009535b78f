"""datapipe.service on a local Ray (num_cpus=2, no dashboard, every server on 127.0.0.1):
exactly once in distributed_epoch, whole copies in parallel_epochs, shared jobs, a worker
killed mid-epoch, checkpoints, errors, backpressure. One module-scoped Ray instance; one
short test in the default run, the rest marked slow."""

from __future__ import annotations

import collections
import json
import os
import sys
import time

import cloudpickle
import numpy as np
import pytest
from harness import values

import datapipe as dp
from datapipe.service import RayService, distribute

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.timeout(240)
# The workers cannot import this test module: its functions travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    saved = {k: os.environ.get(k) for k in ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "PYTHONPATH")}
    # Ray binds its servers to the node address; this makes it 127.0.0.1 (Ray's own switch)
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray._private.ray_constants.ENABLE_RAY_CLUSTER = False
    # the workers import the datapipe under test
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, saved["PYTHONPATH"]) if p)
    if ray.is_initialized():
        pytest.skip("Ray is already initialised in this process")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")
        yield ray
    finally:
        RayService(num_workers=2, name="test").shutdown()
        ray.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def service(split_size=None) -> RayService:
    return RayService(num_workers=2, name="test", split_size=split_size)


def slow_double(x):
    time.sleep(0.002)
    return x * 2


def test_distributed_and_parallel_epochs(ray_local, threads):
    before = service().stats()["splits_done"]
    base = dp.range(60).map(lambda x: x * 3)
    once = base.apply(distribute("distributed_epoch", service(split_size=7)))
    got = values(once)
    assert sorted(got) == [3 * i for i in range(60)]
    assert len(once) == 60
    twice = base.apply(distribute("parallel_epochs", service()))
    got = values(twice)
    assert collections.Counter(got) == {3 * i: 2 for i in range(60)}
    stats = service().stats()
    assert stats["splits_done"] - before == 9 + 2  # ceil(60 / 7) splits, then two copies
    assert stats["live_jobs"] == 0 and threads.settle() == []


def test_the_address_probe_accepts_a_real_gcs(ray_local):
    from datapipe.service.ray_service import probe

    address = ray_local.get_runtime_context().gcs_address
    host, port = address.rsplit(":", 1)
    t0 = time.monotonic()
    probe(host, int(port), 5.0, address)  # the HTTP/2 handshake and a GCS call answer
    assert time.monotonic() - t0 < 5.0


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["distributed_epoch", "parallel_epochs"])
@pytest.mark.parametrize("deterministic", [True, False])
def test_worker_killed_mid_epoch_loses_and_repeats_nothing(ray_local, mode, deterministic):
    svc = service(split_size=40)
    before = svc.stats()["workers_replaced"]
    opts = dp.Options(deterministic=deterministic)
    n = 800 if mode == "distributed_epoch" else 300
    ds = dp.range(n).map(slow_double).apply(distribute(mode, svc)).with_options(opts)
    it = iter(ds)
    got = [int(next(it)) for _ in range(100)]
    if mode == "distributed_epoch":  # each feed holds its next split (the prefetch)
        assert all(f.next is not None for f in it.root.feeds if f.run is not None)
    ray_local.kill(svc.workers()[0])
    got += [int(x) for x in it]
    copies = 1 if mode == "distributed_epoch" else 2
    assert collections.Counter(got) == {2 * i: copies for i in range(n)}
    assert svc.stats()["workers_replaced"] == before + 1
    assert it.root.counts["resumed"] >= 1  # splits continued from their last reply
    assert collections.Counter(values(ds)) == {2 * i: copies for i in range(n)}  # new worker


@pytest.mark.slow
def test_a_ranks_worker_context_does_not_shard_the_job_again(ray_local):
    # rank 1 of 2 without job_name: its own job, the whole dataset (tf.data's rule); the
    # service's splits are the only sharding, on the consumer and on the workers
    rank = dp.Options(distribute=dp.DistributeOptions(num_workers=2, worker_index=1))
    ds = dp.range(50).with_options(rank).apply(distribute("distributed_epoch", service()))
    ds = ds.map(lambda x: x + 1).with_options(rank)
    assert len(ds) == 50
    assert sorted(values(ds)) == list(range(1, 51))


@pytest.mark.slow
def test_round_robin_consumers_share_one_job(ray_local):
    svc = service(split_size=5)
    allow = dp.Options(distribute=dp.DistributeOptions(uneven="allow"))
    base = dp.range(53).with_options(allow)
    its = [iter(base.apply(distribute("distributed_epoch", svc, "rr", c, 2))) for c in range(2)]
    got: list[list[int]] = [[], []]
    live = [0, 1]
    while live:  # the consumers take turns, as DDP ranks step together
        for c in list(live):
            try:
                got[c].append(int(next(its[c])))
            except StopIteration:
                live.remove(c)
    assert sorted(got[0] + got[1]) == list(range(53))
    assert (len(got[0]), len(got[1])) == (27, 26)
    assert got[0][:5] == [0, 1, 2, 3, 4] and got[1][:5] == [5, 6, 7, 8, 9]  # splits 0, 1
    dropped = [values(dp.range(53).apply(distribute("distributed_epoch", svc, "rr2", c, 2)))
               for c in range(2)]  # fmt: skip
    assert len(dropped[0]) == len(dropped[1]) == 26  # uneven="drop"
    # parallel_epochs: each consumer reads its round-robin share of every worker's copy
    dealt = [values(dp.range(41).with_options(allow).apply(
        distribute("parallel_epochs", svc, "rr3", c, 2))) for c in range(2)]  # fmt: skip
    assert collections.Counter(dealt[0] + dealt[1]) == {i: 2 for i in range(41)}
    assert sorted(dealt[0]) == sorted(2 * [i for i in range(0, 41, 2)])


@pytest.mark.slow
def test_first_come_consumers_and_a_consumer_that_stops_early(ray_local):
    svc = service(split_size=10)

    def make():  # each process (rank) builds its pipeline; iteration 0 of each is one job
        return dp.range(300).map(slow_double).apply(distribute("distributed_epoch", svc, "fc"))

    a, b = iter(make()), iter(make())
    a_got: list[int] = []
    while len(a_got) < 25:  # what the op passed on (the public iterator reads ahead)
        a_got += [int(x) for x in a.root.next_chunk(25 - len(a_got))]
    a.close()  # gives back its splits in progress, with what it received and did not pass on
    b_got = [int(x) for x in b]
    assert collections.Counter(a_got + b_got) == {2 * i: 1 for i in range(300)}
    assert values(make()) == []  # a finished job of that name: nothing (tf.data's rule)
    assert service().stats()["splits_released"] >= 1


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["distributed_epoch", "parallel_epochs"])
def test_checkpoint_resumes_the_job(ray_local, tmp_path, mode):
    svc = service(split_size=30)
    base = dp.range(240).shuffle(50, seed=4).map(slow_double)
    ds = base.apply(distribute(mode, svc)).batch(4)
    it = iter(ds)
    seen = [b.tolist() for b in (next(it) for _ in range(20))]
    for cycle in range(2):  # checkpoint, stop, resume -- twice (resume after resume)
        dp.save_state(it.get_state(), tmp_path / f"ckpt{cycle}.state")
        it.close()
        it = iter(ds)
        it.set_state(dp.load_state(tmp_path / f"ckpt{cycle}.state"))
        if cycle == 0:
            seen += [b.tolist() for b in (next(it) for _ in range(15))]
    seen += [b.tolist() for b in it]
    flat = [x for b in seen for x in b]
    copies = 2 if mode == "parallel_epochs" else 1
    assert collections.Counter(flat) == {2 * i: copies for i in range(240)}


@pytest.mark.slow
def test_checkpoint_of_round_robin_consumers(ray_local):
    svc = service(split_size=8)
    make = lambda c: dp.range(96).apply(distribute("distributed_epoch", svc, "ck", c, 2))  # noqa: E731
    its = [iter(make(c)) for c in range(2)]
    seen = [[int(next(its[c])) for _ in range(13)] for c in range(2)]
    states = [it.get_state() for it in its]
    for it in its:
        it.close()
    again = [iter(make(c)) for c in range(2)]
    for c, it in enumerate(again):
        it.set_state(states[c])  # with consumer indices each consumer's own state suffices
    rest = [values(it) for it in again]
    assert sorted(seen[0] + seen[1] + rest[0] + rest[1]) == list(range(96))
    assert len(seen[0] + rest[0]) == len(seen[1] + rest[1]) == 48


@pytest.mark.slow
def test_errors_keep_their_position_and_order_is_reproducible(ray_local):
    def f(x):
        if x == 17:
            raise ValueError("seventeen")
        return x

    svc = service(split_size=10)
    ds = dp.range(40).map(f).apply(distribute("distributed_epoch", svc))
    it = iter(ds)
    got = []
    with pytest.raises(dp.PipelineError, match="seventeen"):
        while True:
            got.append(int(next(it)))
    got += [int(x) for x in it]  # the iterator goes on after the failed element
    assert sorted(got) == [x for x in range(40) if x != 17]
    assert sorted(values(ds.ignore_errors())) == [x for x in range(40) if x != 17]

    def seeded():
        ds = dp.range(100).shuffle(100, seed=2).apply(distribute("distributed_epoch", svc))
        return ds.with_options(dp.Options(seed=9))

    first = values(seeded())
    assert sorted(first) == list(range(100)) and first != list(range(100))
    assert values(seeded()) == first  # the feeds' fixed rotation: a reproducible order


@pytest.mark.slow
def test_files_are_the_splits(ray_local, tmp_path):
    for i in range(5):
        (tmp_path / f"part{i}.txt").write_text("".join(f"{i}:{j}\n" for j in range(i + 3)))
    files = dp.list_files(str(tmp_path / "*.txt"), shuffle=False)
    ds = files.interleave(dp.TextLineDataset, cycle_length=2).apply(
        distribute("distributed_epoch", service())
    )
    lines = sorted(x.decode() if isinstance(x, bytes) else str(x) for x in ds)
    assert lines == sorted(f"{i}:{j}" for i in range(5) for j in range(i + 3))
    assert ds.splitting.pools == (5,) and ds.layout().split_size == 1


@pytest.mark.slow
def _produced_ahead(svc, sleep_s: float, deterministic: bool, n: int = 4000) -> int:
    before = sum(w["elements"] for w in svc.stats()["workers"] if w)
    ds = (
        dp.range(n)
        .map(slow_double)
        .apply(distribute("distributed_epoch", svc, max_outstanding_requests=2))
        .with_options(dp.Options(deterministic=deterministic))
    )
    it = iter(ds)
    next(it)
    time.sleep(sleep_s)
    produced = sum(w["elements"] for w in svc.stats()["workers"] if w) - before
    it.close()
    return produced


@pytest.mark.slow  # ~15 s of Ray replies; the local service tests bound replies too
def test_backpressure_bounds_what_workers_compute_ahead(ray_local, monkeypatch):
    from datapipe.service import consumer

    svc = service(split_size=500)
    # 20-ms replies (as before batching): 4 feeds x 1 request in flight (and one reply
    # taken), each ~20 ms of 2 ms elements; unbounded, the two workers would compute
    # ~1,500 elements in the 1.5 s.
    with monkeypatch.context() as m:
        m.setattr(consumer, "REPLY_MIN_ELEMENTS", 1)
        assert _produced_ahead(svc, 1.5, deterministic=True) <= 4 * 2 * 20
    # Batched replies (at most 512 elements once past 20 ms), in either consumer mode:
    # still bounded, by 4 requests in flight + the one taken; unbounded, the two workers
    # would compute ~6,000 elements in the 6 s.
    for deterministic in (True, False):
        assert _produced_ahead(svc, 6.0, deterministic, n=20_000) <= 5 * 512


@pytest.mark.slow
def test_numpy_batches_travel_and_arrays_stay_exact(ray_local):
    x = np.arange(64 * 3, dtype=np.float32).reshape(64, 3)
    ds = dp.from_tensor_slices(x).batch(8).apply(distribute("distributed_epoch", service()))
    batches = list(ds)
    assert all(b.dtype == np.float32 and b.shape[1] == 3 for b in batches)
    assert np.array_equal(np.sort(np.concatenate(batches), axis=0), x)


RANK_SCRIPT = """
import json, sys
import datapipe as dp
from datapipe.service import RayService, distribute

address, rank, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
svc = RayService(num_workers=2, name="test", address=address, split_size=6)
ds = dp.range(100).map(lambda x: x * 5).apply(
    distribute("distributed_epoch", svc, job_name="ddp", consumer_index=rank, num_consumers=2)
)
json.dump([int(x) for x in ds], open(out, "w"))
"""


@pytest.mark.slow
def test_two_processes_share_one_job_as_ranks(ray_local, tmp_path):
    import subprocess

    service().start()  # the service lives with this process; the ranks join it
    address = ray_local.get_runtime_context().gcs_address
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    env = dict(os.environ)  # PYTHONPATH and the loopback switch, from the fixture
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), address, str(r), str(tmp_path / f"r{r}.json")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for r in range(2)
    ]
    for p in procs:
        out, _ = p.communicate(timeout=180)
        assert p.returncode == 0, out[-3000:]
    got = [json.loads((tmp_path / f"r{r}.json").read_text()) for r in range(2)]
    assert sorted(got[0] + got[1]) == [5 * i for i in range(100)]
    assert len(got[0]) == len(got[1]) == 50
