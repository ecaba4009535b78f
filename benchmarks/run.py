"""Side-by-side benchmarks W1-W4, W6, W7 (W5 is bench_parquet.py): datapipe vs tf.data
vs torch's DataLoader (vs Grain), in one run.

    .venv/bin/python benchmarks/run.py                 # all workloads (~15 min on 2 cores)
    .venv/bin/python benchmarks/run.py --only W1,W3    # a subset
    .venv/bin/python benchmarks/run.py --quick         # small sizes, one repetition
    .venv/bin/python benchmarks/run.py --no-tf         # without tensorflow

Every system's output is checked (count and checksum) before its figures are printed;
rates are medians of ``--repeats`` runs, the systems taking turns round by round; "peak MB"
is the median over runs of how far the RSS of the process (plus DataLoader workers, whose
shared pages count again) rose above its value at the start of the run -- plus, for W3,
the source array, which exists before the run. Ratios are datapipe's rate over each peer's. See
benchmarks/README.md for the workloads, the targets and the recorded figures.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The datapipe next to these benchmarks, not whichever one the environment installed.
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

from workloads import common, w1, w2, w3, w4, w6, w7  # noqa: E402


def _by(results, system):
    return next(r for r in results if r.system == system)


def _target(label: str, value: float, goal: float) -> str:
    verdict = "met" if value >= goal else f"MISSED by {(1 - value / goal):.0%}"
    return f"  target {label}: {value:.2f}x (goal >= {goal}x) -> {verdict}"


def _checked(results, rel_tol=0.0, loose=()) -> None:
    strict = [r for r in results if r.system not in loose]
    problems = common.check_same(strict, rel_tol)
    if loose:
        problems += common.check_same(
            [results[0], *[r for r in results if r.system in loose]], 0.01
        )
    if problems:
        raise SystemExit("output mismatch:\n" + "\n".join(problems))
    print(f"  outputs verified: {results[0].count:,} {results[0].unit} each, checksums equal")


def do_w1(args) -> None:
    print("\nW1 per-element overhead: from_tensor_slices -> map(x*2+1) -> batch(256)")
    res = w1.run(args.quick, args.repeats, not args.no_tf)
    print(common.table(res))
    _checked(res)
    ours = res[0].rate
    print(
        _target(
            "vs DataLoader(num_workers=0)",
            ours / _by(res, "torch DataLoader num_workers=0").rate,
            2.5,
        )
    )
    # Runs of ~0.3 s: the AUTOTUNE targets are judged on per-round (paired) ratios.
    for name, label in [
        ("datapipe map(AUTOTUNE)", "map(AUTOTUNE) vs sequential, median of per-round ratios"),
        (
            "datapipe map(AUTOTUNE) .prefetch(AUTOTUNE)",
            "map(AUTOTUNE).prefetch(AUTOTUNE) vs sequential, median of per-round ratios",
        ),
    ]:
        print(_target(label, common.paired_ratio(_by(res, name), res[0]), 0.95))
    if not args.no_tf:
        print(_target("vs tf.data", ours / _by(res, "tf.data map(numpy_function)").rate, 20))


def do_w2(args) -> None:
    print(
        "\nW2 JPEG decode: list files -> read -> decode (ISLOW DCT) -> resize 224x224 bilinear"
        " (half-pixel centres, no antialias, rounded) -> random flip -> uint8 HWC -> batch 64"
        " -> prefetch"
    )
    res = w2.run(args.quick, args.repeats, not args.no_tf)
    print(common.table(res))
    ours = [r for r in res if not r.system.startswith("tf.data")]
    problems = common.check_same(ours)
    if not args.no_tf:
        problems += common.check_same([res[0], _by(res, w2.TF)], 1e-5)
        problems += common.check_same([res[0], _by(res, w2.TF_DEFAULT_DCT)], 0.01)
    if problems:
        raise SystemExit("output mismatch:\n" + "\n".join(problems))
    print(
        f"  outputs verified: {res[0].count:,} images each; checksums equal (tf.data within"
        " 1e-5: same decode, resize rounding near .5; its default DCT within 1%)"
    )
    dl2 = _by(res, "torch DataLoader num_workers=2")
    per_round = "median of per-round ratios"
    print(
        _target(f"vs DataLoader(num_workers=2), {per_round}", common.paired_ratio(res[0], dl2), 1.2)
    )
    if not args.no_tf:
        tf = common.paired_ratio(res[0], _by(res, w2.TF))
        print(_target(f"vs tf.data AUTOTUNE, {per_round}", tf, 1.0))


def do_w3(args) -> None:
    print("\nW3 shuffle memory: rows of 3 KiB float32 -> shuffle(10_000) -> batch(128)")
    res, _, nbytes = w3.run(args.quick, args.repeats, not args.no_tf)
    print(common.table(res, nbytes))
    _checked(res, 1e-9)
    ours = res[0]
    limit = nbytes + 1.5 * w3.BUFFER * w3.WIDTH * 4
    used = nbytes + ours.peak_growth
    print(
        f"  memory = source {nbytes / 2**20:,.0f} MB + peak growth during the run; datapipe"
        f" {used / 2**20:,.0f} MB (goal <= {limit / 2**20:,.0f} MB) -> "
        + ("met" if used <= limit else f"MISSED by {(used - limit) / 2**20:,.0f} MB")
    )
    if not args.no_tf:
        print(_target("vs tf.data rows/s", ours.rate / _by(res, "tf.data shuffle(10k)").rate, 1.5))


def do_w4(args) -> None:
    print("\nW4 AUTOTUNE quality: AUTOTUNE vs the best fixed num_parallel_calls")
    rows = w4.run(args.quick, args.repeats)
    text, _ = w4.report(rows)
    print(text)
    for name, _, _, _, ratio, _ in rows:
        print(
            f"  target {name}: {ratio:.1%} of best fixed, median of per-round ratios"
            " (goal >= 95%) -> "
            + ("met" if ratio >= 0.95 else f"MISSED by {(0.95 - ratio) * 100:.1f} points")
        )


def do_w6(args) -> None:
    print(
        f"\nW6 GIL-bound map: {w6.N:,} ints -> map(pure-Python f, {w6.STEPS:,} steps) -> "
        f"batch({w6.BATCH})"
    )
    res = w6.run(args.quick, args.repeats)
    print(common.table(res))
    _checked(res)
    per = 1e6 / _by(res, "datapipe map (sequential)").rate
    print(f"  f costs {per:.0f} µs per element here (sequential map)")
    # Targets of issue 21, on per-round ratios (the systems take turns within a round).
    per_round = "median of per-round ratios"
    dl2 = _by(res, "torch DataLoader num_workers=2")
    procs, auto = (
        _by(res, "datapipe map(2, executor='process')"),
        _by(res, "datapipe map(AUTOTUNE)"),
    )
    peers = [(dl2, "DataLoader(num_workers=2)", 1.15)]
    if w6.grain_available():
        peers.append((_by(res, "Grain mp_prefetch(num_workers=2)"), "Grain", 1.5))
    else:
        print("  (grain is not installed: no Grain row)")
    for peer, label, goal in peers:
        print(_target(f"executor='process' vs {label}, {per_round}",
                      common.paired_ratio(procs, peer), goal))  # fmt: skip
    fixed = [_by(res, n) for n in ("datapipe map (sequential)", procs.system,
                                   "datapipe map(2 threads)")]  # fmt: skip
    best = max(fixed, key=lambda r: r.rate)
    print(_target(f"map(AUTOTUNE) vs the best fixed executor ({best.system}), {per_round}",
                  common.paired_ratio(auto, best), 0.9))  # fmt: skip


def do_w7(args) -> None:
    print("\nW7 process-worker memory on W2 (peak PSS of the process tree)")
    rows = w7.run(args.quick, args.repeats)
    print(w7.table(rows))
    sums = {(r["count"], r["checksum"]) for r in rows}
    if len(sums) != 1:
        raise SystemExit(f"output mismatch: {sums}")
    ours = next(r for r in rows if "process" in r["system"])
    dl = next(r for r in rows if "DataLoader" in r["system"])
    ratio = ours["peak"] / dl["peak"]
    print(
        f"  target peak PSS vs DataLoader(num_workers=2): {ratio:.2f}x (goal <= 1.2x) -> "
        + ("met" if ratio <= 1.2 else f"MISSED by {ratio - 1.2:.2f}x")
    )


WORKLOADS = {"W1": do_w1, "W2": do_w2, "W3": do_w3, "W4": do_w4, "W6": do_w6, "W7": do_w7}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--only", default="W1,W2,W3,W4,W6,W7", help="comma-separated workloads")
    ap.add_argument("--quick", action="store_true", help="small sizes, one repetition")
    ap.add_argument("--repeats", type=int, default=None, help="runs per measurement (default 3)")
    ap.add_argument("--no-tf", action="store_true", help="skip tensorflow")
    args = ap.parse_args()
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    chosen = [w.strip().upper() for w in args.only.split(",") if w.strip()]
    for w in chosen:
        if w not in WORKLOADS:
            raise SystemExit(f"unknown workload {w!r}; choose from {', '.join(WORKLOADS)}")
    import numpy
    import torch

    import datapipe

    print(
        f"python {platform.python_version()}, numpy {numpy.__version__}, torch {torch.__version__},"
        f" datapipe {datapipe.__version__}, cores available: {len(os.sched_getaffinity(0))}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    if not args.no_tf:
        import tensorflow as tf

        print(f"tensorflow {tf.__version__}")
    t0 = time.perf_counter()
    for w in chosen:
        WORKLOADS[w](args)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s; load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
