"""Remote at scale: listing 100,000 objects on a local S3 server, then reading them with
20 ms of latency per request (issue 25, item 2).

The server: moto's S3 (its WSGI app, in a threaded werkzeug server on 127.0.0.1, a free
port) behind a middleware that sleeps ``--latency-ms`` (20) before each request; the
bucket is filled in-process through moto's backend (``--objects`` objects of
``--bytes`` bytes, keys ``train/000000.bin`` ...), not through 100,000 PUTs. s3fs reaches
it through ``AWS_ENDPOINT_URL_S3`` with dummy credentials; its listing cache is cleared
before every run.

Listing (``--list-rounds``, the systems alternating): datapipe ``list_files("s3://bench/train/*.bin")``
against s3fs's own ``find`` and boto3's ``list_objects_v2`` paginator. S3 lists 1,000 keys
per request, one page after the other, so the latency-bound limit is
``ceil(objects / 1000) x latency``.

Reading: ``map(read_file, num_parallel_calls=P)`` over a file list of the first
``--read`` objects, for P in ``--parallelism`` (4, 8): a remote ``read_file`` costs two
requests (the ``info`` whose size is checked against the limit, then one ranged GET), so
with ``P`` threads the latency-bound limit is ``P / (2 x latency)`` objects/s; the steady
rate is the second half's. Beside it, the peer: a ``ThreadPoolExecutor(P)`` over s3fs's
whole-object ``cat_file`` (which asks for the size first too: two requests, the same
limit). The server runs in a child process. The requests the server saw and
this process's CPU seconds per object are printed, to tell a latency bound from a CPU
bound on a shared 2-core machine, and the time moto itself spends per request (measured
in the server: a request then takes latency + that, so the limit with the server's time is
printed beside the pure latency bound). ``--autotune`` adds ``num_parallel_calls=AUTOTUNE``
with the time it took to reach 90% of its final rate::

    .venv/bin/python benchmarks/bench_s3_scale.py     # --objects 100000 --read 4000
"""

from __future__ import annotations

import argparse
import concurrent.futures
import math
import os
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

_S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


class Server:
    """moto's S3 app behind a latency middleware, in a child process (its request handling
    holds that process's GIL, not ours), counting requests (``GET /__requests``)."""

    def __init__(self, latency: float, objects: int, size: int):
        import subprocess

        self.proc = subprocess.Popen(
            [sys.executable, __file__, "serve", str(latency), str(objects), str(size)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        line = self.proc.stdout.readline()  # the port, once the bucket is filled
        if not line.strip().isdigit():
            raise RuntimeError(f"the S3 server did not start: {line!r}")
        self.endpoint = f"http://127.0.0.1:{int(line)}"
        os.environ.update({**_S3_ENV, "AWS_ENDPOINT_URL_S3": self.endpoint,
                           "AWS_ENDPOINT_URL": self.endpoint})  # fmt: skip

    def counters(self) -> tuple[int, float]:
        """Requests served so far and the seconds moto spent in them."""
        import urllib.request

        with urllib.request.urlopen(self.endpoint + "/__requests", timeout=10) as r:
            n, secs = r.read().split()
        return int(n), float(secs)

    @property
    def requests(self) -> int:
        return self.counters()[0]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def serve(latency: float, objects: int, size: int) -> None:
    """The child: fill the bucket through moto's backend, then serve until terminated."""
    import logging

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    backend.create_bucket("bench", "us-east-1")
    body = b"x" * size
    for i in range(objects):
        backend.put_object("bench", f"train/{i:06d}.bin", body)
    app = DomainDispatcherApplication(create_backend_app)
    count = [0, 0.0]  # requests, seconds inside moto's app
    lock = threading.Lock()

    def slow(environ, start_response):
        if environ.get("PATH_INFO") == "/__requests":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [f"{count[0]} {count[1]}".encode()]
        time.sleep(latency)
        t0 = time.perf_counter()
        out = list(app(environ, start_response))  # moto's own time (GIL waits included)
        with lock:
            count[0] += 1
            count[1] += time.perf_counter() - t0
        return out

    httpd = make_server("127.0.0.1", 0, slow, threaded=True)
    print(httpd.port, flush=True)
    httpd.serve_forever()


def fresh_fs():
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    return s3fs.S3FileSystem()


def list_datapipe() -> int:
    import datapipe as dp

    fresh_fs()
    return len(dp.list_files("s3://bench/train/*.bin", shuffle=False))


def list_s3fs() -> int:
    return len(fresh_fs().find("bench/train"))


def list_boto3() -> int:
    import boto3

    pages = boto3.client("s3").get_paginator("list_objects_v2")
    return sum(len(p.get("Contents", [])) for p in pages.paginate(Bucket="bench", Prefix="train/"))


def timed_listing(server: Server, rounds: int) -> dict:
    systems = {"datapipe list_files": list_datapipe, "s3fs find": list_s3fs,
               "boto3 list_objects_v2": list_boto3}  # fmt: skip
    out: dict = {name: [] for name in systems}
    for r in range(rounds):
        names = list(systems)
        names = names[r % len(names) :] + names[: r % len(names)]
        for name in names:
            before = server.requests
            t0 = time.perf_counter()
            n = systems[name]()
            out[name].append((time.perf_counter() - t0, n, server.requests - before))
    return out


def _rates(stamps: list[float], t0: float) -> tuple[float, float]:
    """Whole-run and second-half rates of completion times ``stamps``."""
    n = len(stamps)
    whole = n / (stamps[-1] - t0)
    half = stamps[n // 2 :]
    return whole, (len(half) - 1) / (half[-1] - half[0])


def read_datapipe(urls, parallel) -> tuple[list[float], float]:
    import datapipe as dp
    from datapipe.io.files import FileListDataset

    fresh_fs()
    ds = FileListDataset(urls).map(dp.read_file, num_parallel_calls=parallel)
    stamps = []
    t0 = time.perf_counter()
    it = iter(ds)
    for x in it:
        assert len(x) > 0
        stamps.append(time.perf_counter())
    TUNED.append(list(it.root.knob.history))  # the worker counts the stage ran at, in order
    it.close()
    return stamps, t0


TUNED: list[list[int]] = []  # per datapipe run: its knob's history


def read_pool(urls, parallel) -> tuple[list[float], float]:
    fs = fresh_fs()
    stamps = []
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
        for data in pool.map(lambda u: fs.cat_file(u), urls):
            assert len(data) > 0
            stamps.append(time.perf_counter())
    return stamps, t0


def ramp_time(stamps: list[float], t0: float, window: float = 0.25) -> float:
    """Seconds until the rate over a ``window`` first reaches 90% of the final rate (the
    second half's)."""
    final = _rates(stamps, t0)[1]
    j = 0
    for i, t in enumerate(stamps):
        while stamps[j] < t - window:
            j += 1
        if t - t0 >= window and (i - j) / window >= 0.9 * final:
            return t - t0
    return float("nan")


def print_listing(args: argparse.Namespace, listing: dict) -> None:
    pages = math.ceil(args.objects / 1000)
    bound = pages * args.latency_ms / 1000
    print(f"listing {args.objects:,} objects (latency-bound limit {bound:.2f} s: "
          f"{pages} pages x {args.latency_ms:g} ms):")  # fmt: skip
    for name, runs in listing.items():
        best = min(s for s, _, _ in runs)
        med = statistics.median(s for s, _, _ in runs)
        n, req = runs[0][1], runs[0][2]
        print(f"  {name:24s} {n:,} objects, {req} requests, best {best:.2f} s, median "
              f"{med:.2f} s, limit/best {bound / best:.2f}", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        serve(float(argv[1]), int(argv[2]), int(argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--bytes", type=int, default=1024)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--read", type=int, default=4000)
    parser.add_argument("--parallelism", default="4,8")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--list-rounds", type=int, default=1)
    parser.add_argument("--autotune", action="store_true")
    args = parser.parse_args(argv)
    latency = args.latency_ms / 1000
    server = Server(latency, args.objects, args.bytes)
    start = os.getloadavg()
    print(f"load average at the start: {start}", flush=True)
    if args.list_rounds:  # 0: reading only (a listing of 100,000 objects takes ~1 min)
        print_listing(args, timed_listing(server, args.list_rounds))
    import datapipe as dp

    urls = [f"s3://bench/train/{i:06d}.bin" for i in range(args.read)]
    systems = []
    for p in (int(x) for x in args.parallelism.split(",")):
        systems.append(
            (f"datapipe map(read_file, {p} threads)", read_datapipe, p, p / (2 * latency))
        )
        systems.append((f"ThreadPoolExecutor({p}) s3fs cat_file", read_pool, p, p / (2 * latency)))
    if args.autotune:
        systems.append(("datapipe map(read_file, AUTOTUNE)", read_datapipe, dp.AUTOTUNE, None))
    print(f"reading {args.read:,} objects of {args.bytes} bytes, {args.rounds} rounds "
          "(steady = second half):", flush=True)  # fmt: skip
    results: dict = {s[0]: [] for s in systems}
    for r in range(args.rounds):
        order = systems[r % len(systems) :] + systems[: r % len(systems)]
        for name, fn, p, _ in order:
            (before, busy0), cpu0 = server.counters(), time.process_time()
            TUNED.clear()
            stamps, t0 = fn(urls, p)
            cpu = (time.process_time() - cpu0) / len(stamps)
            whole, steady = _rates(stamps, t0)
            after, busy1 = server.counters()
            service = (busy1 - busy0) / max(1, after - before)  # moto's seconds per request
            results[name].append((whole, steady, (after - before) / len(stamps),
                                  cpu, ramp_time(stamps, t0), service))  # fmt: skip
            if p == dp.AUTOTUNE:
                print(f"  AUTOTUNE round {r}: workers {TUNED[0]}, 90% after "
                      f"{results[name][-1][4]:.2f} s", flush=True)  # fmt: skip
    for name, _, _, limit in systems:
        runs = results[name]
        steady = statistics.median(x[1] for x in runs)
        whole = statistics.median(x[0] for x in runs)
        cpu_ms = statistics.median(x[3] for x in runs) * 1e3
        line = (f"  {name:40s} steady {steady:8,.0f} obj/s, whole run {whole:8,.0f}, "
                f"{runs[0][2]:.2f} requests/object, CPU {cpu_ms:.2f} ms/object")  # fmt: skip
        service = statistics.median(x[5] for x in runs)
        line += f", server {service * 1e3:.1f} ms/request"
        if limit is not None:
            # the limit with the server's own time per request added to the latency
            served = limit * latency / (latency + service)
            line += f", limit {limit:,.0f}: {steady / limit:.2f}x"
            line += f" (with the server's time: {served:,.0f}: {steady / served:.2f}x)"
        else:
            line += f", 90% of its final rate after {statistics.median(x[4] for x in runs):.2f} s"
        print(line, flush=True)
    print(f"load average at the end: {os.getloadavg()}")
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
