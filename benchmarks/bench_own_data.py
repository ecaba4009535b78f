"""The "your own data" walkthrough's pipeline with per-image augmentation in ``map``:
datapipe's defaults against ``DataLoader(num_workers=2)`` on the same function.

The workload (issue 27, item 7): the walkthrough's photo folder
(``examples/make_photo_folder.py``: 1,797 JPEGs of 40-64 px in ten class folders), and
per image the function a PyTorch user writes for it -- read and decode the JPEG and resize
it to 32x32 with ``image_dataset_from_directory``'s loader (simplejpeg or Pillow,
``tf.image.resize``'s bilinear kernel: OpenCV or torch), then the augmentation layers as
an ``nn.Sequential`` on the image: the issue's ``RandomFlip("horizontal")``,
``RandomRotation`` and ``RandomResizedCrop``, and the walkthrough's ``RandomTranslation``
and ``RandomContrast`` -- then batches of 32.

- **datapipe**: ``from_tensor_slices((paths, labels)).map(fn, num_parallel_calls=AUTOTUNE)
  .batch(32).prefetch(AUTOTUNE)``, no thread settings, no executor named: the library's
  defaults choose.
- **DataLoader**: ``DataLoader(ds, batch_size=32, num_workers=2)`` over a map-style
  ``torch.utils.data.Dataset`` whose ``__getitem__`` calls the same ``fn`` (its workers
  start per epoch, as by default).

All run in this one process, in turn within each round (the order rotates every round),
each round ``--epochs`` epochs (default 1) of every image through each: one pipeline per
round, every epoch a fresh ``iter()`` of it, as a training loop's epochs are (so from the
second epoch on the map starts on what AUTOTUNE settled on in the first:
``datapipe/parallel/remembered.py``). The figure is the median over rounds of the
per-round ratio of each rate to DataLoader's (with ``--epochs`` over 1 also of the first
epoch alone and of the later ones), with the load average printed at the start and the
end, the executor the defaults' map ended on in each round, each contender's CPU time in
this process per image (its workers' not counted), and the machine's ceiling: ``fn`` in a
plain loop in one forked process per core (300 images each, nothing sent back, each
round), over DataLoader's rate: no pipeline of this function can beat DataLoader by more
on this machine. Every pass's outputs are checked
against DataLoader's: the same number of images and batches and the same label checksum
(the augmentation's draws differ between the two, so before the rounds one pass of each
with the layers in ``eval()``, which draws nothing, must give the same pixel sum)::

    .venv/bin/python benchmarks/bench_own_data.py                    # --rounds 7
    .venv/bin/python benchmarks/bench_own_data.py --before --alternatives --epochs 3
    .venv/bin/python benchmarks/bench_own_data.py --workload load --epochs 5

``--before`` adds the defaults without the two rules of issue 27's item 7 (the tuner's
process trial for threads short of cores, and a process trial that lasts while its rate
still rises) and each ``iter()`` searching anew, and the defaults with each ``iter()``
searching anew (no remembered choice), in the same run. ``--alternatives`` adds the
mechanisms measured before choosing them: two threads with torch and OpenCV at their
default intra-op threads, the same with both set to 1 for the epoch (and restored), two
processes; and ``DataLoader(num_workers=2, persistent_workers=True)``, whose workers
outlive an epoch (what a pipeline that kept its processes across ``iter()`` could gain).
``--workload load`` compares the walkthrough's own pipeline instead
(``image_dataset_from_directory(image_size=(32, 32), batch_size=32).to_torch()``, the
augmentation in the model) with a DataLoader over the same decode + resize function.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "examples")]

import datapipe as dp  # noqa: E402
import preprocessing as pp  # noqa: E402
from datapipe.io.image_folder import ImageFolderLoader, index_directory  # noqa: E402

BATCH = 32


class Augment:
    """The per-image function: decode + resize (the walkthrough's loader), then the
    augmentation layers on the CHW float32 tensor. Returns (image, int64 label)."""

    def __init__(self, seed: int = 0):
        # image_dataset_from_directory(image_size=(32, 32))'s map function, channels first
        self.load = ImageFolderLoader(
            (32, 32), 3, "bilinear", False, False, "channels_first", "int", 10
        )
        cf = "channels_first"
        self.layers = nn.Sequential(
            pp.RandomFlip("horizontal", seed=seed, data_format=cf),
            pp.RandomRotation(0.05, seed=seed + 1, data_format=cf),
            pp.RandomTranslation(0.1, 0.1, seed=seed + 2, data_format=cf),
            pp.RandomContrast(0.2, value_range=(0, 255), seed=seed + 3, data_format=cf),
            pp.RandomResizedCrop(32, 32, scale=(0.5, 1.0), seed=seed + 4, data_format=cf),
        )

    def __call__(self, path, label):
        image, y = self.load(path if isinstance(path, str) else path.decode(), label)
        with torch.no_grad():
            out = self.layers(torch.from_numpy(image))
        return out, torch.tensor(int(y), dtype=torch.int64)


class Load(Augment):
    """``--workload load``: the walkthrough's own pipeline (augmentation in the model): the
    decode + resize function alone."""

    def __call__(self, path, label):
        image, y = self.load(path if isinstance(path, str) else path.decode(), label)
        return torch.from_numpy(image), torch.tensor(int(y), dtype=torch.int64)


def walkthrough_pipeline(folder):
    """``--workload load``'s datapipe side: the walkthrough's call (no split or shuffle, so
    that the order is the DataLoader's), its defaults, ``to_torch()``."""
    ds = dp.image_dataset_from_directory(
        folder, image_size=(32, 32), batch_size=BATCH, shuffle=False, verbose=False
    )
    return ds.to_torch()


class TorchDataset(torch.utils.data.Dataset):
    def __init__(self, paths, labels, fn):
        self.paths, self.labels, self.fn = paths, labels, fn

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return self.fn(self.paths[i], int(self.labels[i]))


def datapipe_pipeline(paths, labels, fn, **map_kwargs):
    """The user's pipeline; no arguments: the library's defaults (AUTOTUNE)."""
    ds = dp.from_tensor_slices((np.asarray(paths), labels))
    kwargs = map_kwargs or {"num_parallel_calls": dp.AUTOTUNE}
    return ds.map(fn, **kwargs).batch(BATCH).prefetch(dp.AUTOTUNE)


class OneIntraOpThread:
    """torch's and OpenCV's intra-op threads set to 1 for one epoch, then restored: what a
    user does by hand today (process-wide: it would also slow the training step)."""

    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        import cv2

        old = torch.get_num_threads(), cv2.getNumThreads()
        torch.set_num_threads(1)
        cv2.setNumThreads(1)
        try:
            it = iter(self.batches)
            self.root = it.root
            yield from it
        finally:
            torch.set_num_threads(old[0])
            cv2.setNumThreads(old[1])


def forget_tuning(ds) -> None:
    """Forget what AUTOTUNE settled on in ``ds``'s stages (``parallel/remembered.py``): its
    next ``iter()`` searches from inline again, as every ``iter()`` did before."""
    stack = [ds]
    while stack:
        node = stack.pop()
        req = node.stage_request
        if req is not None:
            req.tuned.put(None)
        stack.extend(node._inputs)


class Retuned:
    """The defaults with every epoch's ``iter()`` searching anew (for ``--before``)."""

    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        forget_tuning(self.batches)
        it = iter(self.batches)
        self.root = it.root
        yield from it


class TunerBefore:
    """The defaults as they were before issue 27's item 7 (for ``--before``): no process
    trial for threads short of cores, process trials judged on their first three windows,
    every ``iter()`` searching anew."""

    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        from datapipe.parallel import autotune

        saved = autotune._short_of_cores, autotune._still_rising
        autotune._short_of_cores = lambda t, s: False
        autotune._still_rising = lambda rates: False
        forget_tuning(self.batches)
        try:
            it = iter(self.batches)
            self.root = it.root
            yield from it
        finally:
            autotune._short_of_cores, autotune._still_rising = saved


def run_epoch(batches) -> tuple[float, int, int, int, str]:
    """(seconds, images, batches, label checksum, the map's executor at the end) of one
    pass; the executor is "" for a DataLoader."""
    t0 = time.perf_counter()
    n = count = check = 0
    it = iter(batches)
    for x, y in it:
        assert x.dtype == torch.float32 and tuple(x.shape[1:]) == (3, 32, 32), x.shape
        n += len(y)
        count += 1
        check += int((torch.as_tensor(y).long() * torch.arange(1, len(y) + 1)).sum())
    root = getattr(it, "root", None) or getattr(batches, "root", None)
    return time.perf_counter() - t0, n, count, check, map_executor(root)


def run_epochs(make, epochs: int) -> tuple:
    """``run_epoch`` over ``epochs`` passes of one pipeline (each a new ``iter()`` of the
    same Dataset, as a training loop's epochs are), summed; the executor of the last, each
    epoch's seconds, and this process's CPU seconds per image (all its threads; not the
    worker processes')."""
    c0 = time.process_time()
    batches = make()
    runs = [run_epoch(batches) for _ in range(epochs)]
    seconds = [r[0] for r in runs]
    images = sum(r[1] for r in runs)
    cpu = (time.process_time() - c0) / max(1, images)
    return (sum(seconds), images, *(sum(r[k] for r in runs) for k in (2, 3)), runs[-1][4],
            seconds, cpu)  # fmt: skip


def _bare_worker(fn, paths, labels) -> None:
    torch.set_num_threads(1)  # as DataLoader's and datapipe's workers run torch
    for path, label in zip(paths, labels):
        fn(path, label)


def bare_processes_rate(fn, paths, labels, n: int = 300) -> float:
    """Images per second of ``fn`` in a plain loop in each of as many forked processes as
    there are cores, ``n`` images each, nothing sent back: what any pipeline of ``fn``
    can reach at most on this machine."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    cores = os.cpu_count() or 1
    shares = [(paths[i * n : (i + 1) * n], labels[i * n : (i + 1) * n]) for i in range(cores)]
    t0 = time.perf_counter()
    procs = [ctx.Process(target=_bare_worker, args=(fn, *share)) for share in shares]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return sum(len(share[0]) for share in shares) / (time.perf_counter() - t0)


def map_executor(root) -> str:
    """The executor the ``map`` stage under a datapipe iterator's ``root`` ran on last ("" if
    none)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        if node.op_name not in ("prefetch", "batch") and hasattr(node, "executor"):
            return str(node.executor)  # the map (image_dataset_from_directory's: load_image)
        stack.extend(node.inputs)
    return ""


def image_checksum(batches) -> tuple[int, float]:
    return sum(len(y) for _, y in batches), float(sum(x.double().sum() for x, _ in batches))


def check_same_images(paths, labels, loader, fn) -> None:
    """With the layers in eval() (the identity, and RandomResizedCrop's centre crop: no
    draws) both pipelines must give the same pixels: the same function on both sides."""
    fn.layers.eval()
    try:
        ours, theirs = image_checksum(datapipe_pipeline(paths, labels, fn)), image_checksum(loader)
    finally:
        fn.layers.train()
    assert ours == theirs, (ours, theirs)
    print(f"same images in eval(): {ours[0]} images, pixel sum {ours[1]:.1f}")


def candidates(paths, labels, fn, loader, alternatives: bool, before: bool,
               folder: str | None = None) -> dict:  # fmt: skip
    """name -> a fresh pipeline (batches of (images, labels)), iterated once per epoch."""
    if folder is not None:  # --workload load: the walkthrough's call itself
        return {
            "datapipe defaults": lambda: walkthrough_pipeline(folder),
            "DataLoader(num_workers=2)": lambda: loader,
        }
    out = {
        "datapipe defaults": lambda: datapipe_pipeline(paths, labels, fn),
        "DataLoader(num_workers=2)": lambda: loader,
    }
    if before:
        out["defaults before item 7"] = lambda: TunerBefore(datapipe_pipeline(paths, labels, fn))
        out["defaults, re-tuned per iter()"] = lambda: Retuned(datapipe_pipeline(paths, labels, fn))
    if alternatives:  # the mechanisms measured before choosing (docs/architecture.md)
        two = {"num_parallel_calls": 2}
        persistent = torch.utils.data.DataLoader(
            loader.dataset, batch_size=BATCH, num_workers=2, persistent_workers=True
        )
        out["threads(2), torch/cv2 defaults"] = lambda: datapipe_pipeline(
            paths, labels, fn, executor="thread", **two
        )
        out["threads(2), 1 intra-op thread"] = lambda: OneIntraOpThread(
            datapipe_pipeline(paths, labels, fn, executor="thread", **two)
        )
        out["processes(2)"] = lambda: datapipe_pipeline(
            paths, labels, fn, executor="process", **two
        )
        out["DataLoader(2, persistent_workers)"] = lambda: persistent
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--folder", default=None, help="an existing photo folder")
    ap.add_argument(
        "--alternatives",
        action="store_true",
        help="also threads (torch/cv2 at their defaults, and at 1 thread) and processes",
    )
    ap.add_argument(
        "--before", action="store_true", help="also the defaults as they were before item 7"
    )
    ap.add_argument("--epochs", type=int, default=1, help="epochs per measured pass")
    ap.add_argument(
        "--workload",
        choices=["augment", "load"],
        default="augment",
        help="augment: decode, resize and five layers per image in map (default); load: "
        "the walkthrough's image_dataset_from_directory itself (augmentation in the model)",
    )
    args = ap.parse_args(argv)
    from make_photo_folder import write_photos

    tmp = tempfile.TemporaryDirectory()
    folder = args.folder or os.path.join(tmp.name, "photos")
    if args.folder is None:
        write_photos(folder)
    paths, labels, _ = index_directory(folder, "inferred", None)
    paths = [str(p) for p in paths]
    labels = np.asarray(labels, dtype=np.int64)
    fn = Augment() if args.workload == "augment" else Load()
    print(f"{len(paths)} JPEGs; torch intra-op threads {torch.get_num_threads()}")
    print(f"load average at start: {os.getloadavg()} (cores: {os.cpu_count()})")
    dataset = TorchDataset(paths, labels, fn)
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=2)
    if args.workload == "augment":
        check_same_images(paths, labels, loader, fn)
        runs = candidates(paths, labels, fn, loader, args.alternatives, args.before)
    else:
        ours, theirs = image_checksum(walkthrough_pipeline(folder)), image_checksum(loader)
        assert ours == theirs, (ours, theirs)
        print(f"same images: {ours[0]} images, pixel sum {ours[1]:.1f}")
        runs = candidates(paths, labels, fn, loader, False, False, folder)
    base = "DataLoader(num_workers=2)"
    ratios: dict[str, list[float]] = {name: [] for name in runs if name != base}
    firsts: dict[str, list[float]] = {name: [] for name in ratios}  # epoch 1's ratios
    cpus: dict[str, list[float]] = {name: [] for name in runs}  # parent CPU s per image
    ceilings: list[float] = []  # fn in a bare process per core, over DataLoader's
    laters: dict[str, list[float]] = {name: [] for name in ratios}  # epochs 2+
    names = list(runs)
    for r in range(args.rounds + 1):
        order = names[r % len(names) :] + names[: r % len(names)]  # rotated every round
        res = {name: run_epochs(runs[name], args.epochs) for name in order}
        for name, out in res.items():  # the same images, batches and labels
            assert out[1:4] == res[base][1:4], (name, out[1:4], res[base][1:4])
        rate = {name: v[1] / v[0] for name, v in res.items()}
        ceiling = bare_processes_rate(fn, paths, labels)
        chosen = res["datapipe defaults"][4]
        line = " ".join(f"{name} {rate[name]:.0f}/s" for name in names)
        line += f" (defaults ended on {chosen})"
        if r == 0:
            print(f"warm-up round (not counted): {line}")
            continue
        for name in runs:
            cpus[name].append(res[name][6])
        ceilings.append(ceiling / rate[base])
        for name in ratios:
            ratios[name].append(rate[name] / rate[base])
            ours, theirs = res[name][5], res[base][5]
            firsts[name].append(theirs[0] / ours[0])
            if args.epochs > 1:
                laters[name].append(sum(theirs[1:]) / sum(ours[1:]))
        print(f"round {r}: {line}; ceiling {ceiling:.0f}/s; load {os.getloadavg()[0]:.2f}",
              flush=True)  # fmt: skip
    print(f"\nmedian of per-round ratios over {base} ({args.rounds} rounds):")
    for name, rs in ratios.items():
        print(f"  {name:32s} {statistics.median(rs):.2f}x  (min {min(rs):.2f}, max {max(rs):.2f})")
    label = "ceiling: fn in bare processes"
    print(f"  {label:32s} {statistics.median(ceilings):.2f}x  (min {min(ceilings):.2f}, "
          f"max {max(ceilings):.2f})")  # fmt: skip
    print("CPU time in this process per image (median over rounds; workers not counted):")
    for name, cs in cpus.items():
        print(f"  {name:32s} {statistics.median(cs) * 1e6:.0f} us")
    if args.epochs > 1:
        for label, table in (("epoch 1", firsts), (f"epochs 2-{args.epochs}", laters)):
            print(f"{label} alone:")
            for name, rs in table.items():
                print(f"  {name:32s} {statistics.median(rs):.2f}x  (min {min(rs):.2f}, "
                      f"max {max(rs):.2f})")  # fmt: skip
    print(f"load average at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
