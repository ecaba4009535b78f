"""Remote reads: does parallelism hide per-request latency? And do local paths pay anything?

``latency`` (default): an HTTP server on 127.0.0.1 (``tests/io/_remote_helpers.FileServer``,
a ``ThreadingHTTPServer`` with byte ranges) sleeps ``--latency-ms`` (20) before answering
each request. Every remote open costs two requests (fsspec's ``info``: a HEAD for the
size checked against the limit; then the ranged GET), so ~2 x latency per file before any
byte arrives. Workloads, each from a fresh iterator and counted to the end:

- R1 ``list_files(http://.../*.bin).map(read_file, num_parallel_calls=...)``: ``--files``
  (1000) objects of 16 KiB, whole-file reads; AUTOTUNE and 16 threads; the sequential
  map (None) reads the first ``--seq-files`` (100) of them (it takes ~2 x latency each).
- R2 ``list_files(http://.../*.tfrecord).interleave(TFRecordDataset, cycle_length=16,
  num_parallel_calls=...)``: ``--shards`` (256) TFRecord files of 40 records of 1 KiB
  (one range request reads a whole shard); AUTOTUNE and 16 threads; sequential over the
  first ``--seq-shards`` (32).

Each line prints the elements, the wall time, elements/s over the whole run and over its
second half (after AUTOTUNE's search), the ratio of the whole-run rate to the sequential
run of the same workload, the requests the server saw, and the load average (1 min)
before and after.

``formats``: local read speed of the sharded formats against the reference readers on the
same files: ``TFRecordDataset`` vs ``tf.data.TFRecordDataset`` (both check the CRCs) over
one file written by tensorflow, and ``WebDataset`` vs webdataset 1.0's ``WebDataset``
(both yielding samples of bytes) over tar shards of 5,000 samples; ``--records`` (20,000)
records of 200-4,000 random bytes, best of ``--rounds`` (3).

``local``: the same local workloads run in child processes on this tree and on a baseline
tree (``--baseline DIR``, e.g. an unpacked ``git archive main``), alternating, ``--rounds``
(5) each; best and median seconds per workload and the ratio new/baseline:
``TextLineDataset`` over 20 files x 50,000 lines; ``list_files`` of a glob matching 5,000
files (build only); ``map(read_file)`` over 5,000 files of 1 KiB; ``map(load_image)`` of
1,000 64x64 PNGs (read + Pillow decode)::

    .venv/bin/python benchmarks/bench_remote.py latency
    .venv/bin/python benchmarks/bench_remote.py formats
    .venv/bin/python benchmarks/bench_remote.py local --baseline /tmp/dp_base
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "io"))


# ---- latency -----------------------------------------------------------------------------------
def _frame(data: bytes) -> bytes:
    from datapipe.io.tfrecord import masked_crc32c

    n = len(data).to_bytes(8, "little")
    crc_n, crc_d = masked_crc32c(n), masked_crc32c(data)
    return n + crc_n.to_bytes(4, "little") + data + crc_d.to_bytes(4, "little")


def make_remote_tree(d: str, files: int, shards: int) -> None:
    for i in range(files):
        with open(os.path.join(d, f"f{i:05d}.bin"), "wb") as f:
            f.write(bytes([i % 256]) * 16384)
    for s in range(shards):
        with open(os.path.join(d, f"s{s:04d}.tfrecord"), "wb") as f:
            f.write(b"".join(_frame(bytes([s % 256, r]) * 512) for r in range(40)))


def timed(ds) -> tuple[int, float, float]:
    """(elements, seconds, rate over the second half of the elements: after the tuner's
    search)."""
    stamps = []
    it = iter(ds)
    t0 = time.perf_counter()
    for _ in it:
        stamps.append(time.perf_counter())
    it.close()
    n = len(stamps)
    half = stamps[n // 2 - 1] if n >= 2 else t0
    late = (n - n // 2) / max(stamps[-1] - half, 1e-9) if n >= 2 else 0.0
    return n, stamps[-1] - t0, late


def run_latency(args) -> None:
    from _remote_helpers import FileServer

    import datapipe as dp

    d = tempfile.mkdtemp(prefix="bench-remote-")
    make_remote_tree(d, args.files, args.shards)
    print(f"# {args.files} x 16 KiB objects, {args.shards} TFRecord shards x 40 x 1 KiB; "
          f"every request sleeps {args.latency_ms} ms; sequential runs read the first "
          f"{args.seq_files} objects / {args.seq_shards} shards")  # fmt: skip
    head = f"{'workload':<52} {'n':>5} {'s':>6} {'el/s':>8} {'2nd half':>8} {'vs seq':>7}"
    print(f"{head} {'requests':>8}  load 1m")
    with FileServer(d, latency_s=args.latency_ms / 1000) as srv:
        files = dp.list_files(srv.url("*.bin"), shuffle=False)
        shards = dp.list_files(srv.url("*.tfrecord"), shuffle=False)
        few_files = files.take(args.seq_files)
        few_shards = shards.take(args.seq_shards)
        cases = [
            ("R1", "map(read_file) sequential", few_files.map(dp.read_file)),
            ("R1", "map(read_file, AUTOTUNE)", files.map(dp.read_file, num_parallel_calls=-1)),
            ("R1", "map(read_file, 16 threads)", files.map(dp.read_file, num_parallel_calls=16)),
            ("R2", "interleave(TFRecordDataset, cycle 16) sequential",
             few_shards.interleave(dp.TFRecordDataset, cycle_length=16)),
            ("R2", "interleave(TFRecordDataset, cycle 16, AUTOTUNE)",
             shards.interleave(dp.TFRecordDataset, cycle_length=16, num_parallel_calls=-1)),
            ("R2", "interleave(TFRecordDataset, cycle 16, 16 threads)",
             shards.interleave(dp.TFRecordDataset, cycle_length=16, num_parallel_calls=16)),
        ]  # fmt: skip
        base: dict[str, float] = {}
        for wl, name, ds in cases:
            load0, before = os.getloadavg()[0], srv.requests
            n, secs, late = timed(ds)
            rate = n / secs
            base.setdefault(wl, rate)
            print(
                f"{wl} {name:<49} {n:5d} {secs:6.2f} {rate:8.1f} {late:8.1f} "
                f"{rate / base[wl]:6.1f}x {srv.requests - before:8d}  "
                f"{load0:.2f} -> {os.getloadavg()[0]:.2f}"
            )


# ---- formats ---------------------------------------------------------------------------------
def run_formats(args) -> None:
    """Local read speed of the sharded formats against the reference readers."""
    import numpy as np

    import datapipe as dp

    d = tempfile.mkdtemp(prefix="bench-formats-")
    rng = np.random.default_rng(0)
    recs = [rng.bytes(int(s)) for s in rng.integers(200, 4000, args.records)]
    mb = sum(map(len, recs)) / 2**20
    import tensorflow as tf

    tfr = os.path.join(d, "r.tfrecord")
    with tf.io.TFRecordWriter(tfr) as w:
        for r in recs:
            w.write(r)
    samples = [{"__key__": f"{i:07d}", "bin": r, "cls": i % 10} for i, r in enumerate(recs)]
    shards = dp.write_webdataset(samples, os.path.join(d, "w-%04d.tar"), max_count=5000)

    def tf_read():
        return sum(int(x.shape == ()) for x in tf.data.TFRecordDataset(tfr))

    def wds_read():
        import webdataset as wds

        return sum(1 for _ in wds.WebDataset(shards, shardshuffle=False, empty_check=False))

    cases = [
        ("TFRecord", "datapipe TFRecordDataset (CRCs checked)",
         lambda: sum(1 for _ in dp.TFRecordDataset(tfr))),
        ("TFRecord", "tf.data TFRecordDataset (CRCs checked)", tf_read),
        ("tar", "datapipe WebDataset (bytes)", lambda: sum(1 for _ in dp.WebDataset(shards))),
        ("tar", "webdataset 1.0 WebDataset (bytes)", wds_read),
    ]  # fmt: skip
    print(f"# {args.records} records of 200-4000 random bytes ({mb:.1f} MiB); tar: "
          f"fields bin + cls, {len(shards)} shards; load {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"{'format':<9} {'reader':<42} {'best s':>7} {'records/s':>10} {'MiB/s':>7}")
    for fmt, name, fn in cases:
        best = float("inf")
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            n = fn()
            best = min(best, time.perf_counter() - t0)
        assert n == args.records, (name, n)
        print(f"{fmt:<9} {name:<42} {best:7.3f} {n / best:10.0f} {mb / best:7.1f}")
    print(f"# load average at the end: {os.getloadavg()[0]:.2f}")


# ---- local -------------------------------------------------------------------------------------
LOCAL_WORKLOADS = ("text_lines", "list_files", "read_file", "load_image")


def make_local_tree(d: str) -> None:
    import numpy as np
    from PIL import Image

    if os.path.exists(os.path.join(d, "done")):
        return
    os.makedirs(os.path.join(d, "text"), exist_ok=True)
    os.makedirs(os.path.join(d, "small"), exist_ok=True)
    os.makedirs(os.path.join(d, "png"), exist_ok=True)
    for i in range(20):
        with open(os.path.join(d, "text", f"t{i:02d}.txt"), "w") as f:
            f.write("".join(f"line {j} of file {i}\n" for j in range(50_000)))
    for i in range(5000):
        with open(os.path.join(d, "small", f"s{i:05d}.bin"), "wb") as f:
            f.write(bytes([i % 256]) * 1024)
    rng = np.random.default_rng(0)
    for i in range(1000):
        arr = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
        Image.fromarray(arr).save(os.path.join(d, "png", f"p{i:04d}.png"))
    open(os.path.join(d, "done"), "w").close()


def one_local(d: str, workload: str) -> float:
    """Seconds for ``workload`` on the datapipe importable here (run in a child process)."""
    import datapipe as dp

    t0 = time.perf_counter()
    if workload == "text_lines":
        paths = sorted(os.path.join(d, "text", f) for f in os.listdir(os.path.join(d, "text")))
        t0 = time.perf_counter()
        n = sum(1 for _ in dp.TextLineDataset(paths))
        assert n == 20 * 50_000
    elif workload == "list_files":
        n = len(dp.list_files(os.path.join(d, "small", "*.bin")))
        assert n == 5000
    elif workload == "read_file":
        files = dp.list_files(os.path.join(d, "small", "*.bin"), shuffle=False)
        t0 = time.perf_counter()
        n = sum(len(b) for b in files.map(dp.read_file))
        assert n == 5000 * 1024
    else:
        files = dp.list_files(os.path.join(d, "png", "*.png"), shuffle=False)
        t0 = time.perf_counter()
        n = sum(x.shape[0] for x in files.map(dp.load_image))
        assert n == 1000 * 64
    return time.perf_counter() - t0


def run_local(args) -> None:
    d = os.path.join(tempfile.gettempdir(), "datapipe-bench-local-paths")
    make_local_tree(d)
    trees = {"baseline": os.path.abspath(args.baseline), "new": ROOT}
    times: dict[tuple[str, str], list[float]] = {}
    print(f"# load average at the start: {os.getloadavg()}")
    for r in range(args.rounds):
        for wl in LOCAL_WORKLOADS:
            for tree in ("baseline", "new") if r % 2 == 0 else ("new", "baseline"):
                code = (
                    f"import sys; sys.path.insert(0, {trees[tree]!r}); "
                    f"sys.path.insert(1, {os.path.dirname(os.path.abspath(__file__))!r}); "
                    f"from bench_remote import one_local; print(one_local({d!r}, {wl!r}))"
                )
                env = {**os.environ, "PYTHONPATH": trees[tree]}
                out = subprocess.run(
                    [sys.executable, "-c", code], env=env, capture_output=True, text=True,
                    timeout=600, cwd=trees[tree], check=True,
                )  # fmt: skip
                times.setdefault((wl, tree), []).append(float(out.stdout.strip().splitlines()[-1]))
    cols = f"{'baseline best/median s':>24} {'new best/median s':>20} {'new/base':>9}"
    print(f"{'workload':<12} {cols}")
    for wl in LOCAL_WORKLOADS:
        b, n = times[(wl, "baseline")], times[(wl, "new")]
        print(
            f"{wl:<12} {min(b):11.3f} / {statistics.median(b):.3f} {min(n):10.3f} / "
            f"{statistics.median(n):.3f} {statistics.median(n) / statistics.median(b):8.3f}x"
        )
    print(f"# load average at the end: {os.getloadavg()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    lat = sub.add_parser("latency")
    lat.add_argument("--latency-ms", type=float, default=20.0)
    lat.add_argument("--files", type=int, default=1000)
    lat.add_argument("--shards", type=int, default=256)
    lat.add_argument("--seq-files", type=int, default=100)
    lat.add_argument("--seq-shards", type=int, default=32)
    fmt = sub.add_parser("formats")
    fmt.add_argument("--records", type=int, default=20000)
    fmt.add_argument("--rounds", type=int, default=3)
    loc = sub.add_parser("local")
    loc.add_argument("--baseline", required=True)
    loc.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if args.cmd == "local":
        run_local(args)
    elif args.cmd == "formats":
        run_formats(args)
    else:
        if args.cmd is None:
            args = lat.parse_args([])
        run_latency(args)


if __name__ == "__main__":
    main()
