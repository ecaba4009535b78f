"""CUDA checks of ``prefetch_to_device`` and the ``preprocessing`` layers (issue 14).

Run it on a machine with a CUDA GPU (about a minute on one H200; well under 5 minutes):

    python benchmarks/gpu_check.py [--json out.json]

It prints one PASS / FAIL row per check and exits 0 when all pass, 1 when one fails, 2 at
once when there is no CUDA device. The checks:

1. ``overlap``: a synthetic training step of ~5 ms (fp16 matmuls after reading the whole
   batch as float) on batches of 64x3x224x224 uint8 from
   ``from_tensor_slices(images).repeat().batch(64, drop_remainder=True)``. Passes when
   the step time with ``.prefetch_to_device("cuda")`` is at most 1.1x the step time over
   batches already on the device. The time with a synchronous ``.to("cuda")`` in the loop
   (the copy on the critical path) is printed beside them. Best of 3 runs of 150 steps.
2. ``identical``: every batch delivered on the device (``{"image", "label", "name"}``)
   equals the CPU path's (``device="cpu"``) exactly, in three runs: a consumer faster than
   the copies (a batch read before its copy finished would differ), a consumer that runs
   the step and then overwrites each delivered batch in place (memory given to a later
   copy while the consumer's kernels still use it would differ), and a loop running on a
   non-default stream; and ``ragged_batch`` components (nested tensors).
3. ``memory``: device memory allocated after 1,000 steps (``buffer_size=2``) is at most
   one batch more than after 100 steps (host RSS is printed).
4. ``close``: closing an iterator in the middle gives back its device memory.
5. ``layers``: each ``preprocessing`` layer's CUDA output is within 1e-4 of its CPU output
   (float images in [0, 1]; the random layers draw their parameters from one CPU
   generator for both); the numeric feature layers (lookups, encodings, hashing of
   integers, tabular normalization, spectrograms; relative to the output's range) on
   their own inputs. ``StringLookup`` / ``TextVectorization`` take strings: host only.
6. ``profiler``: under ``torch.profiler`` with CUDA activity the trace holds the
   ``datapipe::`` ranges and CUDA work.
7. ``profile``: ``Dataset.profile(step_fn=...)`` and ``InputBoundTimer`` run on the device
   (the hand-over then waits on the host for each copy: input time).
8. ``absent index``: ``prefetch_to_device("cuda:<device count>")`` raises
   ``DeviceUnavailableError`` at ``iter()``.

``--self-test`` runs the same code with ``device="cpu"`` and small sizes, to check this
script on a machine without a GPU; its figures mean nothing about CUDA.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

# this checkout's datapipe, whatever the environment has installed
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import datapipe as dp  # noqa: E402
import preprocessing as pp  # noqa: E402


@dataclass
class Env:
    device: torch.device
    batch: int = 64
    shape: tuple = (3, 224, 224)
    step_s: float = 0.005
    overlap_steps: int = 150
    memory_steps: int = 1000
    rows: list = field(default_factory=list)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def allocated(self) -> int:
        return torch.cuda.memory_allocated(self.device) if self.cuda else rss_bytes()

    def images(self, n: int, seed: int = 0) -> np.ndarray:
        return np.random.default_rng(seed).integers(0, 256, (n, *self.shape), dtype=np.uint8)

    def row(self, name: str, passed: bool | None, detail: str) -> None:
        self.rows.append((name, passed, detail))
        mark = {True: "PASS", False: "FAIL", None: "INFO"}[passed]
        print(f"{name:14s} {mark:5s} {detail}", flush=True)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# ---- the synthetic training step ------------------------------------------------------------
def make_step(env: Env) -> Callable[[torch.Tensor], torch.Tensor]:
    """A step of ~``env.step_s``: read the whole batch as float, then fp16 matmuls."""
    n = 2048 if env.cuda else 128
    dtype = torch.float16 if env.cuda else torch.float32
    a = torch.randn(n, n, device=env.device, dtype=dtype) / n**0.5
    out = torch.empty_like(a)
    reps = [1]

    def step(batch: torch.Tensor) -> torch.Tensor:
        s = batch.float().mean()
        for _ in range(reps[0]):
            torch.mm(a, a, out=out)
        return s + out[0, 0].float()

    probe = torch.zeros(env.batch, *env.shape, dtype=torch.uint8, device=env.device)
    for _ in range(3):  # warm-up
        step(probe)
    for _ in range(4):  # time 20 steps, scale the matmul count towards the target
        env.sync()
        t0 = time.perf_counter()
        for _ in range(20):
            step(probe)
        env.sync()
        per = (time.perf_counter() - t0) / 20
        reps[0] = max(1, round(reps[0] * env.step_s / per))
    step.reps = reps[0]  # type: ignore[attr-defined]
    return step


def time_steps(env: Env, batches: Any, step: Callable, steps: int, warmup: int = 10) -> float:
    """Seconds per step over ``steps`` steps after ``warmup``."""
    it = iter(batches)
    try:
        for _ in range(warmup):
            step(next(it))
        env.sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            step(next(it))
        env.sync()
        return (time.perf_counter() - t0) / steps
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()


def host_batches(env: Env, images: np.ndarray) -> dp.Dataset:
    return dp.from_tensor_slices(images).repeat().batch(env.batch, drop_remainder=True)


# ---- 1. overlap ---------------------------------------------------------------------------
def check_overlap(env: Env, step: Callable) -> None:
    images = env.images(8 * env.batch)
    resident = [
        torch.from_numpy(images[i : i + env.batch]).to(env.device)
        for i in range(0, len(images), env.batch)
    ]

    def cycle():
        while True:
            yield from resident

    def synchronous():
        for b in host_batches(env, images).prefetch(dp.AUTOTUNE):
            yield torch.from_numpy(b).to(env.device)  # pageable memory, on the loop's stream

    n = env.overlap_steps
    times: dict[str, float] = {}
    for _ in range(3):  # best of 3: other work on the machine only ever adds time
        for name, make in (
            ("resident", cycle),
            (
                "prefetch_to_device",
                lambda: host_batches(env, images).prefetch_to_device(env.device),
            ),
            ("synchronous .to()", synchronous),
        ):
            t = time_steps(env, make(), step, n)
            times[name] = min(times.get(name, t), t)
    ratio = times["prefetch_to_device"] / times["resident"]
    detail = ", ".join(f"{k} {1e3 * v:.2f} ms" for k, v in times.items())
    env.row("overlap", ratio <= 1.1, f"{ratio:.3f}x resident (<= 1.1); per step: {detail}")
    sync_ratio = times["synchronous .to()"] / times["resident"]
    env.row("copy on path", None, f"synchronous .to() in the loop: {sync_ratio:.3f}x resident")


# ---- 2. identical ---------------------------------------------------------------------------
def structured(env: Env, n: int) -> dp.Dataset:
    images = env.images(n, seed=1)
    labels = np.arange(n, dtype=np.int64) * 7
    names = np.array([f"img{i}" for i in range(n)], dtype=object)
    return dp.from_tensor_slices({"image": images, "label": labels, "name": names}).batch(32)


def compare(cpu: list, dev: list) -> str | None:
    """None when equal, else what differs first."""
    if len(cpu) != len(dev):
        return f"{len(dev)} batches on the device, {len(cpu)} on the CPU"
    for i, (c, d) in enumerate(zip(cpu, dev)):
        for k in ("image", "label"):
            if d[k].dtype != c[k].dtype or not torch.equal(d[k].cpu(), c[k]):
                return f"batch {i} {k} differs"
        if list(d["name"]) != list(c["name"]):
            return f"batch {i} names differ"
    return None


def run_device(env: Env, ds: dp.Dataset, step: Callable | None, overwrite: bool) -> list:
    out = []
    for b in ds.prefetch_to_device(env.device, buffer_size=1 if step is None else 3):
        out.append({"image": b["image"].clone(), "label": b["label"].clone(), "name": b["name"]})
        if step is not None:
            step(b["image"])
        if overwrite:  # the consumer writes into the memory it was handed
            b["image"].zero_()
            b["label"].zero_()
    env.sync()
    return out


def compare_ragged(env: Env) -> str | None:
    """A ``ragged_batch`` component: nested tensors on the device equal the CPU path's."""
    rows = [np.arange(n, dtype=np.int64) * 3 for n in (5, 1, 7, 2, 9, 4, 3, 8)]
    spec = dp.TensorSpec((None,), "int64")
    ds = dp.from_generator(lambda: iter(rows), spec).ragged_batch(3)
    cpu = [[r.tolist() for r in b.unbind()] for b in ds.prefetch_to_device("cpu")]
    dev = list(ds.prefetch_to_device(env.device))
    env.sync()
    if not all(b.is_nested and b.device.type == env.device.type for b in dev):
        return "ragged batches are not nested tensors on the device"
    got = [[r.cpu().tolist() for r in b.unbind()] for b in dev]
    return None if got == cpu else "ragged batches differ"


def check_identical(env: Env, step: Callable) -> None:
    ds = structured(env, 24 * 32)
    cpu = list(ds.prefetch_to_device("cpu"))
    problems = {}
    problems["fast consumer"] = compare(cpu, run_device(env, ds, None, False))
    problems["step, then overwrite"] = compare(cpu, run_device(env, ds, step, True))
    if env.cuda:
        with torch.cuda.stream(torch.cuda.Stream(env.device)):
            got = run_device(env, ds, step, True)
        problems["non-default stream"] = compare(cpu, got)
    problems["ragged (nested tensors)"] = compare_ragged(env)
    bad = {k: v for k, v in problems.items() if v is not None}
    detail = f"{len(cpu)} batches x {len(problems)} runs ({', '.join(problems)})"
    env.row("identical", not bad, detail if not bad else f"{bad}")


# ---- 3. memory, 4. close --------------------------------------------------------------------
def check_memory(env: Env, step: Callable) -> None:
    images = env.images(8 * env.batch)
    n = env.memory_steps
    ds = host_batches(env, images).take(n).prefetch_to_device(env.device, buffer_size=2)
    marks = {}
    rss = {}
    for i, b in enumerate(ds):
        step(b)
        if i + 1 in (n // 10, n):
            env.sync()
            marks[i + 1], rss[i + 1] = env.allocated(), rss_bytes()
    first, last = n // 10, n
    growth = marks[last] - marks[first]
    batch_bytes = env.batch * int(np.prod(env.shape))
    # the CPU self-test can only watch RSS, which moves by more than its tiny batches
    limit = batch_bytes if env.cuda else max(batch_bytes, 16 << 20)
    env.row(
        "memory",
        len(marks) == 2 and growth <= limit,
        f"allocated after {last} steps - after {first}: {growth / 2**20:+.1f} MiB "
        f"(limit {limit / 2**20:.1f} MiB, one batch); host RSS "
        f"{(rss[last] - rss[first]) / 2**20:+.1f} MiB",
    )


def check_close(env: Env, step: Callable) -> None:
    images = env.images(8 * env.batch)
    gc.collect()
    env.sync()
    base = env.allocated()
    it = iter(host_batches(env, images).prefetch_to_device(env.device, buffer_size=4))
    for _ in range(3):
        step(next(it))
    time.sleep(0.3)  # the worker fills its buffer
    env.sync()
    held = env.allocated() - base
    it.close()
    del it
    gc.collect()
    env.sync()
    if env.cuda:  # an allocation lets the allocator process the freed blocks' stream events
        torch.empty(1, device=env.device)
    left = env.allocated() - base
    ok = left <= 2**20 if env.cuda else True  # the CPU's RSS says nothing here
    env.row(
        "close",
        ok and held > 0 if env.cuda else ok,
        f"device memory held before close {held / 2**20:.1f} MiB, after {left / 2**20:.2f} MiB",
    )


# ---- 5. layers --------------------------------------------------------------------------------
def layers() -> list:
    geo = dict(fill_mode="reflect", interpolation="bilinear")
    geo_interp = dict(interpolation="bilinear")
    return [
        pp.Rescaling(0.5, offset=0.25),
        pp.Normalization(mean=[0.5, 0.4, 0.3], variance=[0.1, 0.2, 0.3]),
        pp.Resizing(96, 80, interpolation="bilinear"),
        pp.Resizing(96, 80, interpolation="bicubic", antialias=True),
        pp.Resizing(96, 96, crop_to_aspect_ratio=True),
        pp.CenterCrop(100, 90),
        pp.RandomFlip("horizontal_and_vertical", seed=0),
        pp.RandomRotation(0.2, seed=0, **geo),
        pp.RandomZoom(0.2, 0.3, seed=0, **geo),
        pp.RandomTranslation(0.1, 0.2, seed=0, **geo),
        pp.RandomCrop(100, 90, seed=0),
        pp.RandomBrightness(0.2, value_range=(0, 1), seed=0),
        pp.RandomContrast(0.3, value_range=(0, 1), seed=0),
        pp.RandomShear(0.2, 0.1, seed=0, **geo),
        pp.RandomPerspective(0.5, seed=0),
        pp.RandomElasticTransform(0.5, value_range=(0, 1), seed=0, **geo),
        pp.RandomResizedCrop(96, 80, seed=0),
        pp.RandomColorDegeneration(0.8, value_range=(0, 1), seed=0),
        pp.RandomGrayscale(0.5, seed=0),
        pp.RandomInvert(value_range=(0, 1), seed=0),
        pp.RandomHue(0.5, value_range=(0, 1), seed=0),
        pp.RandomSaturation((0.1, 0.9), value_range=(0, 1), seed=0),
        pp.RandomColorJitter((0, 1), 0.2, 0.3, (0.2, 0.8), 0.3, seed=0),
        pp.RandomSharpness(1.0, value_range=(0, 1), seed=0),
        pp.RandomPosterization((2, 7), value_range=(0, 1), seed=0),
        pp.Solarization(0.3, 0.8, value_range=(0, 1), seed=0),
        pp.AutoContrast(value_range=(0, 1)),
        pp.Equalization(value_range=(0, 1)),
        pp.ContrastLimitedAdaptiveHistogramEqualization(value_range=(0, 1), tile_grid_size=(4, 3)),
        pp.RandomGaussianBlur(0.8, 5, (0.5, 2.0), value_range=(0, 1), seed=0),
        pp.RandAugment(value_range=(0, 1), num_ops=2, factor=0.5, seed=0, **geo_interp),
        pp.AugMix(value_range=(0, 1), seed=0),
        pp.RandomErasing(value_range=(0, 1), seed=0),
        pp.RandomErasing(factor=(1.0, 1.0), fill_value=[0.1, 0.5, 0.9], seed=0),
        pp.MixUp(alpha=0.4, seed=0),
        pp.CutMix(seed=0),
        pp.Pipeline(
            [
                pp.RandomRotation(0.1, **geo),
                pp.RandomZoom(0.1, **geo),
                pp.RandomTranslation(0.1, 0.1, **geo),
            ],
            seed=0,
        ),
    ]


# Feature layers whose input is strings run on the host (numpy) and are not device layers;
# MaxNumBoundingBoxes only pads the boxes of a dict input (no pixels to compare).
HOST_ONLY = {"StringLookup", "TextVectorization", "MaxNumBoundingBoxes"}


def feature_layer_cases() -> list:
    """(layer, input) pairs of the numeric feature layers (issue 16), adapted ones included."""
    g = torch.Generator().manual_seed(0)
    ints = torch.randint(-5, 40, (64, 3), generator=g)
    lookup = pp.IntegerLookup(num_oov_indices=3, oov_method="farmhash", output_mode="tf_idf")
    lookup.adapt(ints[:32].numpy())
    bins = pp.Discretization(num_bins=6, output_mode="count")
    bins.adapt(torch.randn(200, 3, generator=g).numpy())
    norm = pp.Normalization()
    norm.adapt(torch.randn(50, 3, generator=g).numpy())
    audio = torch.randn(4, 2000, generator=g)
    return [
        (lookup, ints),
        (pp.IntegerLookup(vocabulary=[1, 2, 3], invert=True), ints),
        (pp.CategoryEncoding(num_tokens=45, output_mode="multi_hot"), ints + 5),
        (bins, torch.randn(64, 3, generator=g)),
        (pp.Hashing(num_bins=1000, salt=[3, 4], output_mode="one_hot"), ints),
        (pp.HashedCrossing(num_bins=97), (ints[:, 0], ints[:, 1])),
        (norm, torch.randn(64, 3, generator=g)),
        (pp.MelSpectrogram(fft_length=256, sequence_stride=64, num_mel_bins=32), audio),
        (pp.STFTSpectrogram(mode="log", frame_length=64), audio.unsqueeze(1)),
    ]


def _to(x, device):
    return tuple(t.to(device) for t in x) if isinstance(x, tuple) else x.to(device)


def check_layers(env: Env) -> None:
    x = torch.rand(8, 3, 128, 112, generator=torch.Generator().manual_seed(0))
    worst, diffs = 0.0, {}
    for layer, inputs in feature_layer_cases():
        on_dev = copy.deepcopy(layer).to(env.device)
        a, b = layer(inputs), on_dev(_to(inputs, env.device)).cpu()
        d = float((a.double() - b.double()).abs().max()) if a.shape == b.shape else float("inf")
        scale = max(float(a.double().abs().max()), 1.0)  # spectrograms: relative to the range
        name = type(layer).__name__
        diffs[name] = max(diffs.get(name, 0.0), d / scale)
        worst = max(worst, d / scale)
    for layer in layers():
        layer.train()
        on_dev = copy.deepcopy(layer).to(env.device)
        random = isinstance(layer, (pp.RandomLayer, pp.Pipeline))
        kw = (lambda: {"generator": torch.Generator().manual_seed(1)}) if random else dict
        a = layer(x, **kw())
        b = on_dev(x.to(env.device), **kw()).cpu()
        d = float((a - b).abs().max()) if a.shape == b.shape else float("inf")
        name = type(layer).__name__
        diffs[name] = max(diffs.get(name, 0.0), d)
        worst = max(worst, d)
    checked = set(diffs)
    registered = (
        {
            n
            for n in pp.__all__
            if isinstance(getattr(pp, n), type) and issubclass(getattr(pp, n), pp.Layer)
        }
        - {"Layer", "RandomLayer", "AffineLayer", "GeometricLayer"}
        - HOST_ONLY
    )
    bad = {k: f"{v:.2e}" for k, v in diffs.items() if not v <= 1e-4}
    env.row(
        "layers",
        not bad,
        f"max |cuda - cpu| {worst:.2e} over {len(checked)} layer classes"
        + (f"; over 1e-4: {bad}" if bad else ""),
    )
    if registered - checked:
        env.row("layers (new)", None, f"not in this check: {sorted(registered - checked)}")


# ---- 6. profiler, 7. profile, 8. absent index ---------------------------------------------------
def check_profiler(env: Env, step: Callable) -> None:
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if env.cuda else [])
    ds = host_batches(env, env.images(4 * env.batch)).take(12).prefetch_to_device(env.device)
    with profile(activities=acts) as prof:
        for b in ds:
            step(b)
        env.sync()
    names = {e.name for e in prof.events()}
    ours = sorted(n for n in names if n.startswith("datapipe::"))
    gpu = [e for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA")]
    ok = "datapipe::prefetch_to_device" in ours and (bool(gpu) or not env.cuda)
    env.row("profiler", ok, f"ranges {ours}; {len(gpu)} CUDA events in the same trace")


def check_profile(env: Env, step: Callable) -> None:
    ds = host_batches(env, env.images(4 * env.batch)).take(20).prefetch_to_device(env.device)
    report = ds.profile(step_fn=step)
    stage = report.stage("prefetch_to_device")
    timer = dp.stats.InputBoundTimer(sync=env.sync)
    steps = sum(1 for b in timer.epoch(ds) if step(b) is not None)
    ok = report.elements == 20 and stage.elements == 20 and steps == 20
    env.row(
        "profile",
        ok,
        f"profile(): {report.elements} elements, input-bound "
        f"{100 * report.input_bound_fraction:.1f}%; InputBoundTimer: {steps} steps, "
        f"{100 * timer.input_bound_fraction:.1f}% waiting",
    )


def check_absent_index(env: Env) -> None:
    count = torch.cuda.device_count() if env.cuda else 0
    name = f"cuda:{count}"
    try:
        iter(dp.range(4).batch(2).prefetch_to_device(name)).close()
    except dp.DeviceUnavailableError as e:
        env.row("absent index", True, f"{name}: {e}")
        return
    env.row("absent index", False, f"{name}: no DeviceUnavailableError at iter()")


# ---- main ---------------------------------------------------------------------------------------
CHECKS = (
    ("overlap", check_overlap),
    ("identical", check_identical),
    ("memory", check_memory),
    ("close", check_close),
    ("layers", lambda env, step: check_layers(env)),
    ("profiler", check_profiler),
    ("profile", check_profile),
    ("absent index", lambda env, step: check_absent_index(env)),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None, help="also write the rows here")
    parser.add_argument(
        "--self-test",
        action="store_true",
        help="run on the CPU with small sizes (checks this script only)",
    )
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    if args.self_test:
        torch.set_num_threads(1)  # intra-op threads make CPU step times erratic here
        env = Env(
            torch.device("cpu"),
            batch=8,
            shape=(3, 32, 32),
            step_s=0.002,
            overlap_steps=20,
            memory_steps=50,
        )
    elif not torch.cuda.is_available():
        print(
            f"gpu_check: FAIL: no CUDA device (torch {torch.__version__}, "
            "torch.cuda.is_available() is False). This script checks prefetch_to_device on "
            "a CUDA machine; --self-test runs its code on the CPU.",
            file=sys.stderr,
        )
        return 2
    else:
        env = Env(torch.device("cuda", torch.cuda.current_device()))
    where = torch.cuda.get_device_name(env.device) if env.cuda else "CPU (self-test)"
    print(
        f"gpu_check on {where}; torch {torch.__version__}; load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    print(f"{'check':14s} {'result':5s} detail", flush=True)
    t0 = time.perf_counter()
    try:
        step = make_step(env)
        for name, check in CHECKS:
            try:
                check(env, step)
            except Exception as e:  # noqa: BLE001 - a check that crashes is a failed check
                env.row(name, False, f"ERROR {type(e).__name__}: {e}")
    finally:
        torch.set_num_threads(threads)
    failed = [r[0] for r in env.rows if r[1] is False]
    verdict = "PASS" if not failed else f"FAIL ({', '.join(failed)})"
    print(f"gpu_check: {verdict} in {time.perf_counter() - t0:.0f} s", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump([{"check": n, "passed": p, "detail": d} for n, p, d in env.rows], f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
