"""The preprocessing service on a local Ray: a GIL-bound pipeline served by K = 1, 2 Ray
workers against the same pipeline in this process, and the costs the service adds.

Workload (W6's function): ``range(N) -> map(f) -> batch(64)``, ``f`` = 2,000 steps of
``s = (s * 31 + i) % 1000003`` in pure Python (~200 µs, holding the GIL). Systems:

* in-process ``map(f)`` (sequential) and ``map(f, num_parallel_calls=2, executor="process")``;
* ``range(N) -> map(f) -> distribute("distributed_epoch", RayService(K)) -> batch(64)`` for
  K = 1, 2 (the map on the workers, the batch here), four consumers alternating round by
  round: the default one, the same with 20-ms replies (before batching), a
  ``deterministic=False`` one, the default one without the split prefetch;
* the same with ``f`` = identity (what the service path costs per element when the work
  is nothing), K = 1.

Then the parts of that cost, measured one by one: an actor call's round trip (sequential
and pipelined), pickling a reply of 100 ints, a split chain's ``get_state`` per reply, a
1 MiB array through the object store, the dispatcher's ``next_split`` (pipelined calls
from one consumer, and the bookkeeping alone), a worker's chain build per split.

Each consumer's CPU per element is measured twice: the whole process (``process_time``)
and its consuming thread alone (``thread_time``: the rest is Ray's background threads),
then, thread by thread by name (``/proc/self/task``), the CPU per second of the threads of
a started service while idle and during a run.

Ray: one local instance (``num_cpus=2``, no dashboard, servers on 127.0.0.1), started
before the clock and warmed (worker actors started, the pipeline loaded) by a small job
per service. Every system's elements are checked (count and sum). ``--json`` writes the
figures for ``sim_service_scale.py``.

Usage: ``python benchmarks/bench_service.py [--n 20000] [--repeats 3] [--json out.json]
[--split-size 512]``
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import cloudpickle  # noqa: E402
from workloads import w6  # noqa: E402

import datapipe as dp  # noqa: E402
from datapipe.service import RayService, distribute  # noqa: E402

cloudpickle.register_pickle_by_value(w6)  # the Ray workers do not have benchmarks/ on path
BATCH = 64


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def identity(x):
    return x


def checksum(batches) -> tuple[int, int]:
    count = total = 0
    for b in batches:
        a = np.asarray(b)
        count += a.shape[0]
        total += int(a.sum())
    return count, total


def thread_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of each live thread of this process, summed by thread
    name (``/proc/self/task/*/stat`` and ``comm``; Linux): Ray's own threads by name."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:  # the thread ended meanwhile
            continue
        name = "main" if int(tid) == os.getpid() else name
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def timed(run, repeats: int) -> tuple[float, tuple, float, float]:
    """Median wall seconds, the result, this process's CPU seconds per run (all its
    threads: Ray's receiving threads in a consumer count), and the consuming thread's own
    CPU seconds per run (``time.thread_time``: the iterator, unbatching, ``batch(64)``,
    the checksum, Ray's client calls made on it)."""
    times, out = [], None
    cpu0, own0 = time.process_time(), time.thread_time()
    for _ in range(repeats):
        t0 = time.perf_counter()
        got = run()
        times.append(time.perf_counter() - t0)
        if out is not None and got != out:
            raise RuntimeError(f"runs disagree: {got} vs {out}")
        out = got
    cpu = (time.process_time() - cpu0) / repeats
    own = (time.thread_time() - own0) / repeats
    return statistics.median(times), out, cpu, own


def start_ray():
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # servers on 127.0.0.1
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    return ray


SPLIT_SIZE: int | None = None  # --split-size (None: the default)


def served(n: int, k: int, fn) -> tuple[RayService, dp.Dataset]:
    svc = RayService(num_workers=k, name=f"bench{k}", split_size=SPLIT_SIZE)
    svc.start()
    warm = dp.range(4 * k).map(fn).apply(distribute("distributed_epoch", svc))
    assert sorted(int(x) for x in warm) == sorted(int(fn(x)) for x in range(4 * k))
    ds = dp.range(n).map(fn).apply(distribute("distributed_epoch", svc)).batch(BATCH)
    return svc, ds


def worker_totals(svc: RayService) -> dict:
    stats = [w for w in svc.stats()["workers"] if w]
    keys = ("replies", "elements", "compute_s", "open_s", "opens")
    return {key: sum(w[key] for w in stats) for key in keys}


def pipeline_rows(n: int, repeats: int) -> list[dict]:
    rows = []

    def add(system, run, note="", repeats=repeats):
        secs, (count, total), cpu, own = timed(run, repeats)
        rows.append({"system": system, "seconds": secs, "count": count, "sum": total,
                     "rate": count / secs, "cpu_s": cpu, "thread_cpu_s": own,
                     "note": note})  # fmt: skip
        print(f"  {system:55s} {count / secs:10,.0f} el/s  ({secs:.2f} s)", flush=True)

    add("in-process map (sequential)", lambda: checksum(dp.range(n).map(w6.f).batch(BATCH)))
    add("in-process map(2, executor='process')",
        lambda: checksum(dp.range(n).map(w6.f, 2, executor="process").batch(BATCH)))  # fmt: skip
    from datapipe.service import consumer

    for k in (1, 2):
        svc, ds = served(n, k, w6.f)
        # Batched replies (>= 512 elements, issue 25) for the default consumer (a fixed
        # rotation over its lanes) and a deterministic=False one, and, alternating in the
        # same run, the default consumer with 20-ms replies (REPLY_MIN_ELEMENTS patched to
        # 1: as before)
        # And the default consumer without the split prefetch (SPLIT_PREFETCH patched:
        # a feed asks for its next split when its split ended, as before).
        free = ds.with_options(dp.Options(deterministic=False))
        batched = consumer.REPLY_MIN_ELEMENTS
        variants = [
            (f"Ray service distributed_epoch, K={k}", ds, batched, True),
            (f"Ray service distributed_epoch, K={k}, 20-ms replies (before)", ds, 1, True),
            (f"Ray service distributed_epoch, K={k}, deterministic=False", free, batched, True),
            (f"Ray service distributed_epoch, K={k}, no split prefetch", ds, batched, False),
        ]  # fmt: skip
        for rnd in range(repeats):
            turn = rnd % len(variants)
            for name, pipeline, min_reply, prefetch in variants[turn:] + variants[:turn]:
                consumer.REPLY_MIN_ELEMENTS = min_reply
                consumer.SPLIT_PREFETCH = prefetch
                before = worker_totals(svc)
                add(name, lambda p=pipeline: checksum(p), repeats=1)
                after = worker_totals(svc)
                rows[-1]["workers"] = {key: after[key] - before[key] for key in after}
        consumer.REPLY_MIN_ELEMENTS = batched
        consumer.SPLIT_PREFETCH = True
        svc.shutdown()
    return merge_rounds(rows)


def merge_rounds(rows: list[dict]) -> list[dict]:
    """One row per system: median seconds and CPU over its rounds, summed worker stats."""
    out: dict[str, dict] = {}
    for r in rows:
        m = out.setdefault(r["system"], {**r, "runs": []})
        m["runs"].append(r)
    for m in out.values():
        runs = m.pop("runs")
        m["seconds"] = statistics.median(r["seconds"] for r in runs)
        m["cpu_s"] = statistics.median(r["cpu_s"] for r in runs)
        m["thread_cpu_s"] = statistics.median(r["thread_cpu_s"] for r in runs)
        per_el = [r["cpu_s"] / r["count"] * 1e6 for r in runs]
        own_el = [r["thread_cpu_s"] / r["count"] * 1e6 for r in runs]
        m["cpu_per_element_us_range"] = [min(per_el), max(per_el)]
        m["thread_cpu_per_element_us_range"] = [min(own_el), max(own_el)]
        # the other threads' CPU per second of the run (Ray's background threads)
        m["other_threads_cpu_per_s"] = statistics.median(
            (r["cpu_s"] - r["thread_cpu_s"]) / r["seconds"] for r in runs
        )
        m["rate"] = m["count"] / m["seconds"]
        if "workers" in runs[0]:
            m["workers"] = {
                k: sum(r["workers"][k] for r in runs) / len(runs) for k in runs[0]["workers"]
            }
        m["consumer_cpu_per_element_us"] = m["cpu_s"] / m["count"] * 1e6
        m["consumer_thread_cpu_per_element_us"] = m["thread_cpu_s"] / m["count"] * 1e6
    return list(out.values())


def overhead_rows(n: int, repeats: int) -> list[dict]:
    svc, ds = served(n, 1, identity)
    before = worker_totals(svc)
    secs, (count, total), cpu, own = timed(lambda: checksum(ds), repeats)
    after = worker_totals(svc)
    svc.shutdown()
    row = {"system": "Ray service, K=1, identity map", "seconds": secs, "count": count,
           "sum": total, "rate": count / secs, "cpu_s": cpu, "thread_cpu_s": own,
           "workers": {key: after[key] - before[key] for key in after}}  # fmt: skip
    print(f"  {row['system']:55s} {count / secs:10,.0f} el/s  ({secs:.2f} s)", flush=True)
    return [row]


def thread_profile(n: int, idle_s: float = 3.0) -> dict:
    """Where this process's CPU goes, thread by thread (``thread_cpu``), with a K=1 service
    started: idle for ``idle_s`` seconds (Ray's background threads alone), then during
    one run of W6's pipeline through it. CPU seconds per second of wall time, by thread
    name, and the consuming (main) thread's CPU per element."""
    svc, ds = served(n, 1, w6.f)
    a = thread_cpu()
    t0 = time.perf_counter()
    time.sleep(idle_s)
    idle_wall = time.perf_counter() - t0
    b = thread_cpu()
    t0 = time.perf_counter()
    count, _ = checksum(ds)
    busy_wall = time.perf_counter() - t0
    c = thread_cpu()
    svc.shutdown()

    def rates(x: dict, y: dict, wall: float) -> dict:
        return {k: (y[k] - x.get(k, 0.0)) / wall for k in y if y[k] - x.get(k, 0.0) > 0}

    idle, busy = rates(a, b, idle_wall), rates(b, c, busy_wall)
    main_busy = busy.get("main", 0.0) * busy_wall
    return {"idle_cpu_per_s": idle, "busy_cpu_per_s": busy, "busy_seconds": busy_wall,
            "elements": count, "rate": count / busy_wall,
            "others_idle_cpu_per_s": sum(v for k, v in idle.items() if k != "main"),
            "others_busy_cpu_per_s": sum(v for k, v in busy.items() if k != "main"),
            "main_cpu_per_element_us": main_busy / count * 1e6}  # fmt: skip


class Echo:
    """An actor that returns what it is sent (a reply's trip alone)."""

    def back(self, x):
        return x


def per_call_us(fn, rounds: int) -> float:
    t0 = time.perf_counter()
    for _ in range(rounds):
        fn()
    return (time.perf_counter() - t0) / rounds * 1e6


def component_costs(ray) -> dict:
    """Each part of the service path, measured alone (µs unless named otherwise)."""
    from datapipe.service.actors import Worker
    from datapipe.service.jobs import JobTable
    from datapipe.service.layout import PoolSplits
    from datapipe.service.worker import Reply, WorkerCore

    out: dict = {}
    w = Worker.options(num_cpus=1).remote(0, 1)
    ray.get(w.pid.remote())
    out["actor_call_rtt_us"] = per_call_us(lambda: ray.get(w.pid.remote()), 500)
    t0 = time.perf_counter()
    ray.get([w.pid.remote() for _ in range(2000)])
    out["actor_call_pipelined_us"] = (time.perf_counter() - t0) / 2000 * 1e6
    reply = Reply(list(range(100)), {"index": 100, "epoch": [0]}, False)
    out["pickle_reply_100_ints_us"] = per_call_us(lambda: pickle.loads(pickle.dumps(reply)), 5000)
    ds = dp.range(10_000).map(w6.f)
    core = WorkerCore()
    spec = PoolSplits((10_000,), 1_000).spec(0).to_state()
    args = {"policy": "DATA", "spec": spec, "epoch": [0], "seed": 1, "state": None}
    blob = cloudpickle.dumps(ds)
    t0 = time.perf_counter()
    core.read(("k", 0, 0), "b", blob, args, limit=1)
    out["open_split_first_us"] = (time.perf_counter() - t0) * 1e6
    opens = []
    for j in range(1, 21):
        t0 = time.perf_counter()
        core.read(("k", j, 0), "b", None, args, limit=1)
        opens.append((time.perf_counter() - t0) * 1e6 - 200)  # minus one f
    out["open_split_us"] = statistics.median(opens)
    stream = core.streams[("k", 1, 0)]
    out["chain_get_state_us"] = per_call_us(stream.root.get_state, 5000)
    arr = np.zeros(1 << 20, dtype=np.uint8)
    out["object_store_1MiB_ms"] = per_call_us(lambda: ray.get(ray.put(arr)), 50) / 1e3
    echo = ray.remote(Echo).options(num_cpus=0).remote()
    ray.get(echo.back.remote(1))
    out["actor_return_1MiB_ms"] = per_call_us(lambda: ray.get(echo.back.remote(arr)), 20) / 1e3
    t0 = time.perf_counter()
    refs = [w.pid.remote() for _ in range(2000)]
    out["consumer_submit_us"] = (time.perf_counter() - t0) / 2000 * 1e6
    ray.get(refs)
    refs = [echo.back.remote(reply) for _ in range(500)]
    ray.wait(refs, num_returns=len(refs))
    t0 = time.perf_counter()
    for ref in refs:
        ray.get(ref)
    out["consumer_get_ready_reply_us"] = (time.perf_counter() - t0) / len(refs) * 1e6
    n = 200_000
    t0 = time.perf_counter()
    checksum(dp.range(n).map(identity).batch(BATCH))
    out["consumer_pipeline_per_element_us"] = (time.perf_counter() - t0) / n * 1e6
    ray.kill(w)
    ray.kill(echo)
    end = time.monotonic() + 20  # its CPU comes back as the process exits
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < end:
        time.sleep(0.05)
    # the dispatcher: one split per call, pipelined from one consumer
    svc = RayService(num_workers=1, name="benchdisp")
    disp = svc._dispatcher()
    layout = PoolSplits((10**7,), 1)
    key = ("disp", (0,), "")
    ray.get(disp.put_pipeline.remote("b", b"x"))
    info, _ = ray.get(disp.join.remote(key, "fp", layout, 1, "b", None, None, None))
    sids = [[]]

    def burst():
        refs = [disp.next_split.remote(key, info.token, 0, sids[0]) for _ in range(2000)]
        got = ray.get(refs)
        sids[0] = [a.spec.sid for a in got[-1:]]

    out["dispatcher_next_split_pipelined_us"] = per_call_us(burst, 1) / 2000
    out["dispatcher_next_split_rtt_us"] = per_call_us(
        lambda: ray.get(disp.next_split.remote(key, info.token, 0, [])), 300
    )
    svc.shutdown()
    table = JobTable(100)
    info = table.join(key, "fp", layout, 1, "b", None)
    out["jobtable_next_split_us"] = per_call_us(
        lambda: table.next_split(key, info.token, 0), 20_000
    )
    return out


def consumer_costs(rows: list[dict], repeats: int) -> dict:
    """The consumer's CPU per reply and per element, from two service runs (K=1): W6's
    (replies of ~100 elements) and the identity map's (replies of ~4,096), each
    ``cpu = replies x per_reply + elements x per_element`` (batch(64) included)."""
    a = next(r for r in rows if r["system"].endswith("K=1, 20-ms replies (before)"))
    b = next(r for r in rows if "identity" in r["system"])
    ra, rb = a["workers"]["replies"], b["workers"]["replies"] / repeats
    ea, eb = a["count"], b["count"]
    per_element = (a["cpu_s"] * rb - b["cpu_s"] * ra) / (ea * rb - eb * ra)
    per_reply = (a["cpu_s"] - ea * per_element) / ra
    return {"consumer_cpu_per_reply_us": per_reply * 1e6,
            "consumer_cpu_per_element_us": per_element * 1e6}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    parser.add_argument("--split-size", type=int, default=None,
                        help="the services' split_size (default: RayService's)")  # fmt: skip
    args = parser.parse_args()
    global SPLIT_SIZE
    SPLIT_SIZE = args.split_size
    start = load()
    print(f"start: {start}", flush=True)
    ray = start_ray()
    print("pipelines (elements/s, median of runs):", flush=True)
    rows = pipeline_rows(args.n, args.repeats)
    rows += overhead_rows(10 * args.n, args.repeats)
    sums = {(r["count"], r["sum"]) for r in rows if "identity" not in r["system"]}
    if len(sums) != 1:
        raise RuntimeError(f"the systems disagree: {sums}")
    print("consumer CPU per element (all of this process, batch(64) and checksum included):")
    for r in rows:
        if "K=" in r["system"]:
            per_reply = r["count"] / max(1, r["workers"]["replies"]) if "workers" in r else 0
            print(f"  {r['system']:55s} {r['cpu_s'] / r['count'] * 1e6:6.2f} us "
                  f"({per_reply:,.0f} elements per reply)", flush=True)  # fmt: skip
    for r in rows:
        if "K=" in r["system"] and "thread_cpu_s" in r:
            lo, hi = r.get("thread_cpu_per_element_us_range", [None, None])
            span = f" [{lo:.2f}-{hi:.2f} over runs]" if lo is not None else ""
            print(f"  {r['system']:55s} consuming thread "
                  f"{r['thread_cpu_s'] / r['count'] * 1e6:6.2f} us/el{span}, other threads "
                  f"{(r['cpu_s'] - r['thread_cpu_s']) / r['seconds']:.3f} CPU-s/s",
                  flush=True)  # fmt: skip
    print("threads (CPU-s per s; idle service, then one K=1 run):", flush=True)
    threads = thread_profile(args.n)
    for phase in ("idle_cpu_per_s", "busy_cpu_per_s"):
        top = sorted(threads[phase].items(), key=lambda kv: -kv[1])[:8]
        print(f"  {phase:16s} " + ", ".join(f"{k} {v:.3f}" for k, v in top), flush=True)
    print(f"  others idle {threads['others_idle_cpu_per_s']:.3f}, busy "
          f"{threads['others_busy_cpu_per_s']:.3f} CPU-s/s; main "
          f"{threads['main_cpu_per_element_us']:.2f} us/el at {threads['rate']:,.0f} el/s",
          flush=True)  # fmt: skip
    print("components:", flush=True)
    parts = component_costs(ray)
    parts.update(consumer_costs(rows, args.repeats))
    for name, v in parts.items():
        print(f"  {name:40s} {v:10.1f}", flush=True)
    ray.shutdown()
    end = load()
    print(f"end: {end}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_start": start, "load_end": end, "n": args.n, "rows": rows,
                       "threads": threads, "components": parts}, f, indent=1)  # fmt: skip


if __name__ == "__main__":
    main()
