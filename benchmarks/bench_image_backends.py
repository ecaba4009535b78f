"""JPEG decode and bilinear resize backends on W2's photos: speed, GIL release, exactness.

For each backend, over the first ``--images`` of W2's photos (~256 px JPEGs, quality 90,
4:2:0; see ``workloads/w2.py``):

- **ms/img, 1 thread**: the best of ``--rounds`` passes over the images on one thread
  (intra-op threads of torch and OpenCV set to 1, as inside a parallel pipeline);
  **CPU ms/img**: the same passes in the thread's CPU time, which leaves out the time
  other processes held the core (the steadier figure on a shared machine);
- **2 thr / 1 thr**: throughput of two Python threads (each takes half the images) over
  one thread: ~2.0 means the work runs without the GIL on 2 cores, ~1.0 means it holds it;
- **exactness**: max and mean absolute difference per pixel value against a reference --
  decoders against Pillow's decode (libjpeg-turbo, ISLOW DCT, fancy upsampling); resizers
  (256 px -> 224x224, uint8 RGB in) against ``tf.image.resize(method="bilinear",
  antialias=False)`` (two-tap bilinear with half-pixel centres: Keras's ``Resizing`` and
  ``image_dataset_from_directory``) and against the same with ``antialias=True`` (a
  triangle filter widened by the scale factor), both in float32, before any rounding.

::

    .venv/bin/python benchmarks/bench_image_backends.py            # --images 400 --rounds 5

Backends that are not installed are reported as such. PyTurboJPEG needs the libturbojpeg
shared library (Debian: ``libturbojpeg0``; PyTurboJPEG 2.x needs libjpeg-turbo >= 3, so
with Debian 12's 2.1.5 use ``PyTurboJPEG<2``). The load average is printed at the start and
the end: the figures are only comparable within one run on a quiet machine.
"""

from __future__ import annotations

import argparse
import glob
import io
import os
import sys
import threading
import time
from collections.abc import Callable

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
# the workloads, and the datapipe of this checkout (not whichever one is installed)
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SIZE = 224


def _pillow(draft: bool) -> Callable[[bytes], np.ndarray]:
    from PIL import Image

    def decode(data: bytes) -> np.ndarray:
        img = Image.open(io.BytesIO(data))
        if draft:  # DCT-domain downscale to the smallest 1/k scale still >= 224 x 224
            img.draft("RGB", (SIZE, SIZE))
        img.load()
        return np.asarray(img.convert("RGB") if img.mode != "RGB" else img)

    return decode


def decoders() -> dict[str, Callable[[bytes], np.ndarray] | str]:
    out: dict[str, Callable[[bytes], np.ndarray] | str] = {}
    out["Pillow (Image.open + load + asarray)"] = _pillow(False)
    out["Pillow + draft((224, 224))"] = _pillow(True)
    try:
        out["datapipe.io.decode_jpeg(channels=3)"] = _datapipe_decode()
    except ImportError:
        pass
    try:
        import simplejpeg

        out["simplejpeg.decode_jpeg (ISLOW, fancy)"] = lambda b: simplejpeg.decode_jpeg(b, "RGB")
        out["simplejpeg.decode_jpeg (fastdct, fastupsample)"] = lambda b: simplejpeg.decode_jpeg(
            b, "RGB", fastdct=True, fastupsample=True
        )
    except ImportError:
        out["simplejpeg"] = "not installed"
    try:
        import cv2

        flag = cv2.IMREAD_COLOR_RGB if hasattr(cv2, "IMREAD_COLOR_RGB") else None

        def cv2_decode(b: bytes) -> np.ndarray:
            arr = cv2.imdecode(np.frombuffer(b, np.uint8), flag or cv2.IMREAD_COLOR)
            return arr if flag else cv2.cvtColor(arr, cv2.COLOR_BGR2RGB)

        out["cv2.imdecode (IMREAD_COLOR_RGB)"] = cv2_decode
    except ImportError:
        out["opencv-python-headless"] = "not installed"
    out.update(_turbojpeg())
    return out


def _datapipe_decode() -> Callable[[bytes], np.ndarray]:
    from datapipe.io.images import decode_jpeg

    return lambda b: decode_jpeg(b, channels=3)


def _turbojpeg() -> dict:
    try:
        from turbojpeg import TJPF_RGB, TurboJPEG

        jpeg = TurboJPEG()
    except (ImportError, OSError, RuntimeError) as e:
        return {"PyTurboJPEG": f"unavailable ({str(e).splitlines()[0]})"}
    return {"PyTurboJPEG.decode (libturbojpeg)": lambda b: jpeg.decode(b, pixel_format=TJPF_RGB)}


def resizers() -> dict[str, Callable[[np.ndarray], np.ndarray] | str]:
    """uint8 (h, w, 3) -> (224, 224, 3), uint8 or float32 as each backend gives it."""
    from PIL import Image

    out: dict = {
        "Pillow resize(BILINEAR) (antialiases)": lambda a: np.asarray(
            Image.fromarray(a).resize((SIZE, SIZE), Image.Resampling.BILINEAR)
        ),
    }
    out.update(_torch_resizers())
    try:
        import cv2

        for name in ("INTER_LINEAR", "INTER_LINEAR_EXACT", "INTER_AREA"):
            flag = getattr(cv2, name)
            out[f"cv2.resize {name} uint8"] = lambda a, f=flag: cv2.resize(
                a, (SIZE, SIZE), interpolation=f
            )
        out["cv2.resize INTER_LINEAR float32"] = lambda a: cv2.resize(
            a.astype(np.float32), (SIZE, SIZE), interpolation=cv2.INTER_LINEAR
        )
    except ImportError:
        out["opencv-python-headless"] = "not installed"
    out.update(_project_resizers())
    return out


def _torch_resizers() -> dict:
    try:
        import torch
    except ImportError:
        return {"torch": "not installed"}

    def torch_resize(antialias: bool, out_float: bool):
        def resize(a: np.ndarray) -> np.ndarray:
            t = torch.from_numpy(a).permute(2, 0, 1)[None]  # a channels-last NCHW view
            if out_float:
                t = t.float()
            r = torch.nn.functional.interpolate(
                t, size=(SIZE, SIZE), mode="bilinear", align_corners=False, antialias=antialias
            )
            return r[0].permute(1, 2, 0).numpy()

        return resize

    return {
        "torch interpolate uint8, antialias=False": torch_resize(False, False),
        "torch interpolate uint8, antialias=True": torch_resize(True, False),
        "torch interpolate float32, antialias=False": torch_resize(False, True),
        "torch interpolate float32, antialias=True": torch_resize(True, True),
    }


def _lerp(x: np.ndarray, out: int, axis: int) -> np.ndarray:
    """The numpy bilinear (half-pixel centres, two taps) image_folder.py used before
    ``datapipe.io.resize_image``: kept here to measure against."""
    size = x.shape[axis]
    src = (np.arange(out) + 0.5) * (size / out) - 0.5
    lo = np.floor(src)
    frac = (src - lo).astype(np.float32)
    i0 = np.clip(lo, 0, size - 1).astype(np.intp)
    i1 = np.clip(lo + 1, 0, size - 1).astype(np.intp)
    shape = [1] * x.ndim
    shape[axis] = out
    frac = frac.reshape(shape)
    a = np.take(x, i0, axis=axis).astype(np.float32, copy=False)
    b = np.take(x, i1, axis=axis).astype(np.float32, copy=False)
    return a + (b - a) * frac


def _project_resizers() -> dict:
    out: dict = {
        "numpy two-pass lerp (image_folder.py before), float32": lambda a: _lerp(
            _lerp(a, SIZE, 0), SIZE, 1
        )
    }
    try:
        import cv2
    except ImportError:
        cv2 = None
    try:
        from datapipe.io.image_resize import _resize
    except ImportError:  # datapipe (or torch) not importable: only the libraries
        return out
    backends = [("OpenCV", cv2), ("torch", None)] if cv2 is not None else [("torch", None)]
    for backend, cv in backends:
        for label, aa, dtype in [
            ("uint8", False, None),
            ("float32 out", False, np.float32),
            ("antialias=True uint8", True, None),
        ]:
            if cv is not None and aa:
                continue  # OpenCV has no triangle antialias kernel: torch runs it
            name = f"datapipe.io.resize_image [{backend}] {label}"
            out[name] = lambda a, c=cv, aa=aa, dt=dtype: _resize(
                c, a, (SIZE, SIZE), aa, dt, "channels_last"
            )
    return out


def _one_thread(fn: Callable, inputs: list) -> tuple[float, float]:
    """Wall and CPU seconds per image on this thread (CPU time leaves out the time other
    processes took the core: the steadier figure on a shared machine)."""
    t0, c0 = time.perf_counter(), time.thread_time()
    for x in inputs:
        fn(x)
    return (time.perf_counter() - t0) / len(inputs), (time.thread_time() - c0) / len(inputs)


def _two_threads(fn: Callable, inputs: list) -> float:
    """Seconds per image with two threads, each doing half the inputs."""
    start = threading.Barrier(3)

    def work(part: list) -> None:
        start.wait()
        for x in part:
            fn(x)

    threads = [threading.Thread(target=work, args=(h,)) for h in (inputs[0::2], inputs[1::2])]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return (time.perf_counter() - t0) / len(inputs)


def time_both(fn: Callable, inputs: list, rounds: int) -> tuple[float, float, float]:
    """Best wall and CPU seconds per image on one thread, and best wall seconds per image
    on two, rounds interleaved (a change of load on a shared machine hits all alike)."""
    t1 = c1 = t2 = float("inf")
    for _ in range(rounds):
        wall, cpu = _one_thread(fn, inputs)
        t1, c1 = min(t1, wall), min(c1, cpu)
        t2 = min(t2, _two_threads(fn, inputs))
    return t1, c1, t2


def diff(outs: list[np.ndarray], refs: list[np.ndarray]) -> tuple[float, float]:
    """Max and mean absolute difference over all pixel values of all images."""
    mx, total, n = 0.0, 0.0, 0
    for o, r in zip(outs, refs, strict=True):
        if o.shape != r.shape:
            return float("nan"), float("nan")
        d = np.abs(o.astype(np.float64) - r.astype(np.float64))
        mx, total, n = max(mx, float(d.max())), total + float(d.sum()), n + d.size
    return mx, total / n


def tf_references(images: list[np.ndarray]) -> tuple[list, list] | None:
    try:
        import tensorflow as tf
    except ImportError:
        return None
    plain = [tf.image.resize(a, (SIZE, SIZE), "bilinear").numpy() for a in images]
    aa = [tf.image.resize(a, (SIZE, SIZE), "bilinear", antialias=True).numpy() for a in images]
    return plain, aa


def tf_decode_rows(datas: list[bytes], ref: list[np.ndarray]) -> list[str]:
    try:
        import tensorflow as tf
    except ImportError:
        return []
    rows = []
    for method in ("", "INTEGER_ACCURATE"):
        outs = [tf.io.decode_jpeg(b, channels=3, dct_method=method).numpy() for b in datas]
        mx, mean = diff(outs, ref)
        label = f"tf.io.decode_jpeg(dct_method={method!r})"
        rows.append(f"| {label} | (eager; not timed) | | | {mx:.0f} / {mean:.4f} |")
    return rows


def _row(name: str, fn, inputs: list, rounds: int) -> tuple[str, list]:
    outs = [fn(x) for x in inputs]
    t1, c1, t2 = time_both(fn, inputs, rounds)
    return f"| {name} | {t1 * 1e3:.3f} | {c1 * 1e3:.3f} | {t1 / t2:.2f}x |", outs


def bench_decoders(datas: list[bytes], rounds: int) -> list[np.ndarray]:
    print("\nJPEG decode (bytes -> uint8 RGB HWC), exactness vs Pillow's decode\n")
    print("| decoder | ms/img, 1 thread | CPU ms/img | 2 thr / 1 thr | max / mean abs diff |")
    print("|---|---:|---:|---:|---:|")
    ref = [_pillow(False)(b) for b in datas]
    for name, fn in decoders().items():
        if isinstance(fn, str):
            print(f"| {name} | {fn} | | | |")
            continue
        row, outs = _row(name, fn, datas, rounds)
        mx, mean = diff(outs, ref)
        print(f"{row} {mx:.0f} / {mean:.4f} |", flush=True)
    for row in tf_decode_rows(datas, ref):
        print(row)
    return ref


def bench_resizers(images: list[np.ndarray], rounds: int) -> None:
    print(
        "\nResize uint8 RGB ~256 px -> 224x224; exactness vs tf.image.resize bilinear "
        "(float32, unrounded), antialias=False | antialias=True\n"
    )
    print(
        "| resize | ms/img, 1 thread | CPU ms/img | 2 thr / 1 thr | vs tf bilinear: max / mean "
        "| vs tf bilinear antialias: max / mean |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    refs = tf_references(images)
    for name, fn in resizers().items():
        if isinstance(fn, str):
            print(f"| {name} | {fn} | | | | |")
            continue
        row, outs = _row(name, fn, images, rounds)
        if refs is None:
            print(f"{row} (no tensorflow) | |", flush=True)
            continue
        (m1, a1), (m2, a2) = diff(outs, refs[0]), diff(outs, refs[1])
        print(f"{row} {m1:.3f} / {a1:.4f} | {m2:.3f} / {a2:.4f} |", flush=True)


def _per_image(fn: Callable[[], int], rounds: int) -> tuple[float, float]:
    """Best over ``rounds`` of ``fn()``'s wall and CPU (all threads) seconds per image
    (``fn`` returns its count)."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        n = fn()
        best = min(best, (time.perf_counter() - t0) / n)
        best_cpu = min(best_cpu, (time.process_time() - c0) / n)
    return best, best_cpu


def profile_w2(paths: list[str], rounds: int) -> None:
    """Where one thread's time goes in W2: each step of ``w2.load`` alone, the batching
    copy, the harness's checksum, and the sequential pipeline around them."""
    import cv2
    from workloads import w2

    import datapipe as dp
    from datapipe.io import decode_jpeg, resize_image

    datas = [open(p, "rb").read() for p in paths]
    decoded = [decode_jpeg(d, channels=3) for d in datas]
    resized = [resize_image(a, (SIZE, SIZE)) for a in decoded]
    batches = [resized[i : i + w2.BATCH] for i in range(0, len(resized), w2.BATCH)]
    rng = np.random.default_rng(0)

    def pipeline(prefetch: bool) -> int:
        ds = dp.from_tensor_slices(np.array(paths, dtype=object)).random_map(w2.load, seed=0)
        ds = ds.batch(w2.BATCH)
        return w2._consume(ds.prefetch(dp.AUTOTUNE) if prefetch else ds)[0]

    steps = {
        "read (open + read)": lambda: len([open(p, "rb").read() for p in paths]),
        "decode_jpeg(channels=3)": lambda: len([decode_jpeg(d, channels=3) for d in datas]),
        "resize_image to 224x224 (uint8)": lambda: len(
            [resize_image(a, (SIZE, SIZE)) for a in decoded]
        ),
        "cv2.flip, half the images": lambda: 2 * len([cv2.flip(a, 1) for a in resized[::2]]),
        "w2.load (all of the above)": lambda: len([w2.load(p, rng) for p in paths]),
        "batch: np.stack of 64": lambda: sum(len(np.stack(b)) for b in batches),
        "harness checksum (a.sum per batch)": lambda: w2._consume(np.stack(b) for b in batches)[0],
        "pipeline, sequential, no prefetch": lambda: pipeline(False),
        "pipeline, sequential + prefetch(AUTOTUNE)": lambda: pipeline(True),
    }
    print(f"\nW2 on one thread ({len(paths)} images; best of {rounds})\n")
    print("| step | us/img | CPU us/img (all threads) |")
    print("|---|---:|---:|")
    for name, fn in steps.items():
        wall, cpu = _per_image(fn, rounds)
        print(f"| {name} | {wall * 1e6:.0f} | {cpu * 1e6:.0f} |", flush=True)


def _one_intra_op_thread() -> list[str]:
    """One intra-op thread for torch and OpenCV, as inside a parallel pipeline's workers;
    returns the versions of what is installed."""
    import PIL

    versions = [f"Pillow {PIL.__version__}"]
    try:
        import torch

        torch.set_num_threads(1)
        versions.append(f"torch {torch.__version__}")
    except ImportError:
        pass
    try:
        import cv2

        cv2.setNumThreads(1)
        versions.append(f"opencv {cv2.__version__}")
    except ImportError:
        pass
    for mod in ("simplejpeg", "turbojpeg"):
        try:
            versions.append(f"{mod} {__import__(mod).__version__}")
        except (ImportError, AttributeError):
            pass
    return versions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--images", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", choices=("decode", "resize", "profile"), default=None)
    args = ap.parse_args()
    versions = _one_intra_op_thread()
    from workloads import w2

    folder = w2.make_photos()
    paths = sorted(glob.glob(os.path.join(folder, "*.jpg")))[: args.images]
    datas = [open(p, "rb").read() for p in paths]
    print(
        f"{len(datas)} of W2's photos, mean {np.mean([len(d) for d in datas]) / 1024:.1f} KiB; "
        f"load average at start {os.getloadavg()[0]:.2f}"
    )
    print(", ".join(versions))
    images = [_pillow(False)(b) for b in datas]
    if args.only in (None, "decode"):
        bench_decoders(datas, args.rounds)
    if args.only in (None, "resize"):
        bench_resizers(images, args.rounds)
    if args.only in (None, "profile"):
        profile_w2(paths, args.rounds)
    print(f"\nload average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
