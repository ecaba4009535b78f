"""W8: an ImageNet-shaped directory -- listing, first batch, memory per file, throughput.

The directory: ``--classes`` class folders holding ``--files`` JPEGs in all (ImageNet's
train split: 1,000 folders, 1,281,167 files; here 1,000 x 1,280 = 1.28M, and 200 x 1,000 =
200k), every file a hard link to one of W2's 2,000 photos (~256x256, ``workloads/w2.py``),
so the disk holds only directory entries. ``build`` makes it (under ``--root``, default
``/work/scratch-scale``, which must be on the same file system as W2's photos), ``clean``
removes it.

Each system runs in a fresh child process, rank 0 of 2 (shuffled, sharded between two
ranks), in alternating order round by round; measured inside the child:

- **list**: building the dataset (walking the folders, the file list, the labels);
- **first batch**: from the start of the listing to the first batch of 64 images
  (224x224, decoded and resized) in hand (includes the listing);
- **bytes per file**: the rise of RSS from before the listing to after the first batch,
  over the files listed (the decoders' and threads' own few MB are included: at 200k
  files 2 MB of them is 10 bytes a file), and peak RSS;
- **steady**: images/s over the next ``--batches`` batches.

Systems:

- datapipe: ``image_dataset_from_directory(dir, image_size=(224, 224), batch_size=64,
  shuffle=True, seed=0)`` with ``Options.distribute`` = rank 0 of 2 (auto-sharding:
  FILE, a per-epoch permutation of its share);
- Keras 3 (TensorFlow): ``keras.utils.image_dataset_from_directory`` with the same
  arguments (a tf.data pipeline; it does not shard: the ``.shard(2, 0)`` of tf.data would
  only skip every other batch after reading it, so it reads all files -- noted);
- torch: a ``DataLoader(num_workers=2, batch_size=64)`` with a
  ``DistributedSampler(num_replicas=2, rank=0, shuffle=True, seed=0)`` over an
  ``ImageFolder`` written as torchvision's ``DatasetFolder`` is (a list of
  ``(path, class_index)`` tuples from ``os.scandir``/``os.walk``; torchvision itself does
  not load beside the CPU torch build here), whose ``__getitem__`` runs datapipe's loader
  (the same decode and resize: the pipelines are compared, not the kernels).

The state rows (datapipe only) give the size of a pickled checkpoint taken after the
first batch, and the time to restore it. Commands::

    .venv/bin/python benchmarks/bench_w8.py build --files 200000 --classes 200
    .venv/bin/python benchmarks/bench_w8.py run --files 200000 --classes 200 --rounds 3
    .venv/bin/python benchmarks/bench_w8.py clean
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

BATCH, SIZE = 64, 224
SYSTEMS = ("datapipe", "keras", "torch")


def tree(root: str, files: int, classes: int) -> str:
    return os.path.join(root, f"w8-{classes}x{files // classes}")


def build(root: str, files: int, classes: int) -> str:
    from workloads.w2 import make_photos

    photos_dir = make_photos()
    photos = sorted(os.path.join(photos_dir, p) for p in os.listdir(photos_dir))
    top = tree(root, files, classes)
    per = files // classes
    done = top + ".complete"
    if os.path.exists(done):
        return top
    t0 = time.perf_counter()
    k = 0
    for c in range(classes):
        d = os.path.join(top, f"n{c:08d}")
        os.makedirs(d, exist_ok=True)
        for j in range(per):
            dst = os.path.join(d, f"n{c:08d}_{j:06d}.JPEG")
            if not os.path.exists(dst):
                os.link(photos[k % len(photos)], dst)
            k += 1
    open(done, "w").close()
    print(f"built {top}: {classes} x {per} hard links in {time.perf_counter() - t0:.1f} s")
    return top


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _datapipe(top: str) -> dict:
    import pickle

    import datapipe as dp

    t0, m0 = time.perf_counter(), rss()
    ds = dp.image_dataset_from_directory(
        top, image_size=(SIZE, SIZE), batch_size=BATCH, shuffle=True, seed=0, verbose=False
    )
    files = len(ds.file_paths)
    options = dp.Options(distribute=dp.DistributeOptions(num_workers=2, worker_index=0))
    ds = ds.with_options(options)
    t_list, m_list = time.perf_counter() - t0, rss() - m0
    it = iter(ds)
    first = next(it)
    out = {"list_s": t_list, "first_s": time.perf_counter() - t0, "rss_first": rss() - m0}
    out["rss_list"] = m_list
    t1 = time.perf_counter()
    state = pickle.dumps(it.get_state())
    out["state_bytes"] = len(state)
    out["state_get_s"] = time.perf_counter() - t1
    out["files"] = files
    out["first_shape"] = list(first[0].shape)
    out["first_labels"] = [int(v) for v in first[1][:8]]
    out["steady"] = _steady(it)
    it.close()
    t2 = time.perf_counter()
    again = iter(ds)
    again.set_state(pickle.loads(state))
    next(again)
    out["restore_s"] = time.perf_counter() - t2
    again.close()
    return out


def _keras(top: str) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras  # noqa: F401 - imported before the clock: its import is not listing

    t0, m0 = time.perf_counter(), rss()
    ds = keras.utils.image_dataset_from_directory(
        top, image_size=(SIZE, SIZE), batch_size=BATCH, shuffle=True, seed=0, verbose=False
    )
    t_list, m_list = time.perf_counter() - t0, rss() - m0
    it = iter(ds)
    first = next(it)
    out = {"list_s": t_list, "first_s": time.perf_counter() - t0, "rss_first": rss() - m0}
    out["rss_list"] = m_list
    out["files"] = len(ds.file_paths)
    out["first_shape"] = list(first[0].shape)
    out["steady"] = _steady(it)
    return out


class ImageFolder:
    """torchvision's ``DatasetFolder`` as it is written: classes from ``os.scandir``,
    samples a list of ``(path, class_index)`` from ``os.walk`` (sorted)."""

    def __init__(self, root: str, loader):
        classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
        self.class_to_idx = {c: i for i, c in enumerate(classes)}
        self.samples = []
        for c in classes:
            for dirpath, _, names in sorted(os.walk(os.path.join(root, c), followlinks=True)):
                for name in sorted(names):
                    if name.lower().endswith((".jpg", ".jpeg", ".png")):
                        self.samples.append((os.path.join(dirpath, name), self.class_to_idx[c]))
        self.loader = loader

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        path, target = self.samples[i]
        return self.loader.image(path), target


def _torch(top: str) -> dict:
    import torch
    from torch.utils.data import DataLoader, DistributedSampler

    from datapipe.io.image_folder import ImageFolderLoader

    torch.set_num_threads(1)
    loader = ImageFolderLoader(
        (SIZE, SIZE), 3, "bilinear", False, False, "channels_first", "int", 0
    )
    t0, m0 = time.perf_counter(), rss()
    folder = ImageFolder(top, loader)
    sampler = DistributedSampler(folder, num_replicas=2, rank=0, shuffle=True, seed=0)
    dl = DataLoader(folder, batch_size=BATCH, sampler=sampler, num_workers=2)
    t_list, m_list = time.perf_counter() - t0, rss() - m0
    it = iter(dl)
    first = next(it)
    out = {"list_s": t_list, "first_s": time.perf_counter() - t0, "rss_first": rss() - m0}
    out["rss_list"] = m_list
    out["files"] = len(folder)
    out["first_shape"] = list(first[0].shape)
    out["steady"] = _steady(it)
    return out


def _steady(it, batches: int | None = None) -> float:
    batches = int(os.environ.get("W8_BATCHES", "30")) if batches is None else batches
    t0 = time.perf_counter()
    n = 0
    for _ in range(batches):
        n += len(next(it)[0])
    return n / (time.perf_counter() - t0)


def _warm_up(top: str) -> None:
    """Load the decoders and decode one image before the clock and the memory baseline,
    so that the figures are the pipeline's (the first image's imports cost ~30 MB)."""
    import cv2

    from datapipe.io.image_folder import ImageFolderLoader

    cv2.setNumThreads(1)
    first_class = sorted(d for d in os.listdir(top) if not d.startswith("."))[0]
    photo = os.path.join(top, first_class, sorted(os.listdir(os.path.join(top, first_class)))[0])
    loader = ImageFolderLoader(
        (SIZE, SIZE), 3, "bilinear", False, False, "channels_first", "int", 0
    )
    loader.image(photo)


def child(system: str, top: str) -> None:
    _warm_up(top)
    out = {"datapipe": _datapipe, "keras": _keras, "torch": _torch}[system](top)
    out["peak_rss"] = peak_rss()
    print("W8-RESULT " + json.dumps(out))


def run(top: str, rounds: int, systems: list[str]) -> dict:
    results: dict = {s: [] for s in systems}
    for r in range(rounds):
        order = systems[r % len(systems) :] + systems[: r % len(systems)]
        for s in order:
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path[:1]))
            proc = subprocess.run(
                [sys.executable, __file__, "child", s, top],
                capture_output=True,
                text=True,
                env=env,
                timeout=1800,
            )
            line = [x for x in proc.stdout.splitlines() if x.startswith("W8-RESULT ")]
            if proc.returncode or not line:
                raise RuntimeError(f"{s} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
            results[s].append(json.loads(line[0][len("W8-RESULT ") :]))
            print(f"  round {r} {s}: {results[s][-1]}", flush=True)
    return results


def report(results: dict, load: tuple) -> None:
    print(f"load average (1, 5, 15 min): start {load[0]}, end {load[1]}")
    head = f"{'system':10s} {'files':>9s} {'list s':>8s} {'first batch s':>14s} "
    head += f"{'list B/file':>11s} {'B/file@1st':>11s} {'peak MB':>8s} {'steady img/s':>13s}"
    print(head)
    med = {}
    for s, runs in results.items():
        m = {k: statistics.median(r[k] for r in runs) for k in ("list_s", "first_s", "steady")}
        m["bpf"] = statistics.median(r["rss_first"] / r["files"] for r in runs)
        m["lbpf"] = statistics.median(r["rss_list"] / r["files"] for r in runs)
        m["peak"] = statistics.median(r["peak_rss"] for r in runs) / 2**20
        med[s] = m
        print(
            f"{s:10s} {runs[0]['files']:>9,d} {m['list_s']:>8.2f} {m['first_s']:>14.2f} "
            f"{m['lbpf']:>11.0f} {m['bpf']:>11.0f} {m['peak']:>8.0f} {m['steady']:>13,.0f}"
        )
        if "state_bytes" in runs[0]:
            print(
                f"{'':10s} checkpoint after the first batch: {runs[0]['state_bytes']:,d} bytes "
                f"pickled; restore + next batch "
                f"{statistics.median(r['restore_s'] for r in runs):.2f} s"
            )
    for s in med:
        if s != "datapipe" and "datapipe" in med:
            d, o = med["datapipe"], med[s]
            print(
                f"datapipe vs {s}: first batch {o['first_s'] / d['first_s']:.2f}x sooner, "
                f"list bytes/file {d['lbpf'] / o['lbpf']:.2f}x, at the first batch "
                f"{d['bpf'] / o['bpf']:.2f}x, steady {d['steady'] / o['steady']:.2f}x"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["build", "run", "clean", "child"])
    parser.add_argument("args", nargs="*")
    parser.add_argument("--root", default="/work/scratch-scale")
    parser.add_argument("--files", type=int, default=200_000)
    parser.add_argument("--classes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    a = parser.parse_args(argv)
    if a.command == "child":
        child(a.args[0], a.args[1])
        return 0
    if a.command == "clean":
        shutil.rmtree(a.root, ignore_errors=True)
        return 0
    top = build(a.root, a.files, a.classes)
    if a.command == "run":
        start = os.getloadavg()
        results = run(top, a.rounds, a.systems.split(","))
        report(results, (start, os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
