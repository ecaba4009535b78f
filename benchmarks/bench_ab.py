"""A/B: datapipe's rows of a workload under two checkouts, alternating, in one run.

    .venv/bin/python benchmarks/bench_ab.py --base /path/to/other/checkout [--workload W2]
        [--rounds 6] [--only process]

Each round runs every datapipe system of the workload once under this checkout ("ours")
and once under ``--base`` (e.g. ``git worktree add ../base main``), each in a fresh
process whose ``sys.path`` puts that checkout's ``datapipe`` first (the workload code is
this checkout's, so both run the same pipeline); which one goes first alternates by
round, so a change of load on a shared machine hits both alike. Printed: the median rate
of each, and the median of the per-round ratios ours / base, with the load average at
the start and the end. W2 sets torch's and OpenCV's intra-op threads to 1, as ``run.py``
does, and LAYERS (random layers in ``map``: ``workloads/layers.py``) torch's; W3 is
``shuffle(10_000) -> batch(128)`` over 200,000 rows of 3 KiB. Outputs are
checked (count, checksum) to be equal between the two (LAYERS: the count; its pixels
depend on how a checkout keys the layers' draws).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OURS = os.path.dirname(HERE)

# One round of a workload's datapipe systems, in a fresh interpreter: prints
# {system: [seconds, count, checksum]} as JSON on its last line.
CHILD = r"""
import json, sys, time
sys.path[:0] = [{bench!r}, {root!r}]
import datapipe as dp
assert dp.__file__.startswith({root!r}), dp.__file__
from workloads import layers, w1, w2, w3, w6
kind = {workload!r}
if kind == "LAYERS":
    import torch
    torch.set_num_threads(1)
    systems = {{
        "map(layers) (sequential)": layers.run_datapipe(None),
        "map(layers, 2 threads)": layers.run_datapipe(2),
    }}
elif kind == "W2":
    import cv2, torch
    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    folder = w2.make_photos(w2.N_IMAGES)
    systems = {{
        "random_map(AUTOTUNE)": w2.run_datapipe(folder, dp.AUTOTUNE),
        "random_map(2 threads)": w2.run_datapipe(folder, 2),
        "random_map(2, executor='process')": w2.run_datapipe(folder, 2, "process"),
        "random_map (sequential)": w2.run_datapipe(folder, None),
    }}
elif kind == "W3":
    import numpy as np
    data = np.random.default_rng(0).random((w3.ROWS, w3.WIDTH), dtype=np.float32)
    systems = {{"shuffle(10_000).batch(128)": w3.run_datapipe(data)}}
elif kind == "W6":
    systems = {{
        "map(AUTOTUNE)": w6.run_datapipe(w6.N, dp.AUTOTUNE),
        "map(2, executor='process')": w6.run_datapipe(w6.N, 2, "process"),
        "map(2 threads)": w6.run_datapipe(w6.N, 2, "thread"),
    }}
else:
    import numpy as np
    data = np.arange(w1.N, dtype=np.int64)
    systems = {{
        "map (sequential)": w1.run_datapipe(data),
        "map(AUTOTUNE)": w1.run_datapipe(data, autotune=True),
    }}
out = {{}}
only = {only!r}
for name, run in systems.items():
    if only and only not in name:
        continue
    t0 = time.perf_counter()
    count, checksum = run()
    out[name] = [time.perf_counter() - t0, count, checksum]
print(json.dumps(out))
"""


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _round(root: str, workload: str, only: str) -> dict:
    code = CHILD.format(bench=HERE, root=root, workload=workload, only=only)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=root, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"{root}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--base", required=True, help="the other checkout's root")
    ap.add_argument("--workload", default="W2", choices=["W1", "W2", "W3", "W6", "LAYERS"])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--only", default="", help="only the systems whose name contains this")
    args = ap.parse_args()
    base = os.path.abspath(args.base)
    print(f"{args.workload}: ours {OURS} vs base {base}, {args.rounds} rounds; load {_load()}")
    runs: dict[str, list[dict]] = {"ours": [], "base": []}
    for r in range(args.rounds):
        order = [("ours", OURS), ("base", base)]
        for name, root in order if r % 2 == 0 else order[::-1]:
            runs[name].append(_round(root, args.workload, args.only))
        print(f"  round {r + 1}: load {_load()}", flush=True)
    print(f"{'system':36} {'ours /s':>10} {'base /s':>10} {'ours/base':>10}")
    for system in runs["ours"][0]:
        o = [x[system] for x in runs["ours"]]
        b = [x[system] for x in runs["base"]]
        # LAYERS: the checksum depends on the draws, which two checkouts may key differently
        same = (lambda x: x[1]) if args.workload == "LAYERS" else (lambda x: (x[1], round(x[2], 6)))
        if {same(x) for x in o + b} != {same(o[0])}:
            raise SystemExit(f"{system}: outputs differ between the checkouts or the rounds")
        count = o[0][1]
        ratio = statistics.median(bb[0] / oo[0] for oo, bb in zip(o, b))
        rate_o = count / statistics.median(x[0] for x in o)
        rate_b = count / statistics.median(x[0] for x in b)
        print(f"{system:36} {rate_o:10,.0f} {rate_b:10,.0f} {ratio:9.2f}x")
    print(f"load at the end: {_load()}")


if __name__ == "__main__":
    main()
