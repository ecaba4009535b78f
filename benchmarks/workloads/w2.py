"""W2 JPEG decode: ``list files -> read -> decode (Pillow) -> resize 224x224 -> random
horizontal flip -> batch 64 -> prefetch``, over 2,000 real photos of about 256x256.

The photos are cut from the two real photos scikit-learn ships (``china.jpg``,
``flower.jpg``, 427x640) at different offsets and scales, resized to 256x256 +- 32, and
saved once as JPEG (quality 90) in a cache directory.

datapipe and torch's DataLoader run the same function (``load``: Pillow decode, torch
bilinear resize on uint8, flip), with torch's intra-op threads set to 1 for both (the
DataLoader's workers do that anyway). tf.data runs its own ops (``tf.io.decode_jpeg``,
``tf.image.resize`` bilinear, ``random_flip_left_right``) as a tf.data user would.
Checksum: the sum of all
pixel values (a flip does not change it); the JPEG decoders and resizers differ in
rounding (same resize formula), so tf.data's checksum is compared within 1%, the others
exactly.
"""

from __future__ import annotations

import glob
import os
import tempfile

import numpy as np

from .common import Result, measure_rounds

N_IMAGES = 2000
BATCH = 64
SIZE = 224


def cache_dir() -> str:
    return os.environ.get(
        "DATAPIPE_BENCH_CACHE", os.path.join(tempfile.gettempdir(), "datapipe-bench")
    )


def make_photos(n: int = N_IMAGES) -> str:
    """Write (once) ``n`` JPEGs cut from scikit-learn's sample photos; return the folder."""
    from PIL import Image
    from sklearn.datasets import load_sample_images

    folder = os.path.join(cache_dir(), f"jpeg{n}")
    if len(glob.glob(os.path.join(folder, "*.jpg"))) == n:
        return folder
    os.makedirs(folder, exist_ok=True)
    photos = [Image.fromarray(a) for a in load_sample_images().images]
    rng = np.random.default_rng(0)
    for i in range(n):
        src = photos[i % len(photos)]
        w, h = src.size
        side = int(rng.integers(180, min(w, h) + 1))
        x0, y0 = int(rng.integers(0, w - side + 1)), int(rng.integers(0, h - side + 1))
        out = (int(rng.integers(224, 289)), int(rng.integers(224, 289)))
        img = src.crop((x0, y0, x0 + side, y0 + side)).resize(out, Image.BILINEAR)
        img.save(os.path.join(folder, f"{i:05d}.jpg"), quality=90)
    return folder


def load(path, rng=None) -> np.ndarray:
    """Read, decode (Pillow), resize to 224x224, flip with probability 1/2: uint8 (224, 224, 3).

    The resize is bilinear with half-pixel centres and no antialiasing -- what
    ``tf.image.resize`` (and Keras's ``Resizing``) compute -- done by torch on the uint8
    image in channels-last layout: 2.3x cheaper per image here than Pillow's resize (which
    antialiases), and it releases the GIL.
    """
    import torch
    from PIL import Image

    with open(path, "rb") as f:
        img = Image.open(f)
        img.load()
    if img.mode != "RGB":
        img = img.convert("RGB")
    w, h = img.size
    t = torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8).view(1, h, w, 3)
    t = torch.nn.functional.interpolate(
        t.permute(0, 3, 1, 2), size=(SIZE, SIZE), mode="bilinear", align_corners=False
    )[0].permute(1, 2, 0)
    flip = (rng.random() < 0.5) if rng is not None else (np.random.random() < 0.5)
    return (t.flip(1) if flip else t).numpy()  # torch's flip copies fast; a view would
    # make batching's copy a slow strided one


def _consume(batches) -> tuple[int, float]:
    count, total = 0, 0
    for b in batches:
        a = np.asarray(b)
        count += a.shape[0]
        total += int(a.sum(dtype=np.int64))
    return count, float(total)


def run_datapipe(folder: str, parallel):
    import datapipe as dp

    def run():
        ds = dp.list_files(os.path.join(folder, "*.jpg"), shuffle=False)
        ds = ds.random_map(load, seed=0, num_parallel_calls=parallel)
        return _consume(ds.batch(BATCH).prefetch(dp.AUTOTUNE))

    return run


def run_torch(folder: str, workers: int):
    from torch.utils.data import DataLoader, Dataset

    files = sorted(glob.glob(os.path.join(folder, "*.jpg")))

    class Photos(Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, i):
            return load(files[i])

    def run():
        loader = DataLoader(Photos(), batch_size=BATCH, num_workers=workers)
        return _consume(b.numpy() for b in loader)

    return run


def run_tf(folder: str):
    import tensorflow as tf

    def decode(path):
        img = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        img = tf.image.resize(img, (SIZE, SIZE), method="bilinear")
        img = tf.cast(tf.clip_by_value(tf.round(img), 0, 255), tf.uint8)
        return tf.image.random_flip_left_right(img)

    def run():
        ds = tf.data.Dataset.list_files(os.path.join(folder, "*.jpg"), shuffle=False)
        ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.batch(BATCH).prefetch(tf.data.AUTOTUNE)
        return _consume(b.numpy() for b in ds)

    return run


def run(quick: bool, repeats: int, with_tf: bool = True) -> list[Result]:

    folder = make_photos(N_IMAGES)
    if quick:
        folder_files = sorted(glob.glob(os.path.join(folder, "*.jpg")))[:400]
        folder = os.path.join(cache_dir(), "jpeg-quick")
        os.makedirs(folder, exist_ok=True)
        for p in folder_files:
            dst = os.path.join(folder, os.path.basename(p))
            if not os.path.exists(dst):
                os.symlink(p, dst)
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread per image: parallelism comes from the pipeline
    try:
        return _run_all(folder, repeats, with_tf)
    finally:
        torch.set_num_threads(threads)


def _run_all(folder: str, repeats: int, with_tf: bool) -> list[Result]:
    import datapipe as dp

    systems = [
        ("datapipe random_map(AUTOTUNE)", run_datapipe(folder, dp.AUTOTUNE)),
        ("datapipe random_map(2 threads)", run_datapipe(folder, 2)),
        ("torch DataLoader num_workers=0", run_torch(folder, 0)),
        ("torch DataLoader num_workers=2", run_torch(folder, 2)),
    ]
    if with_tf:
        systems.append(("tf.data map(AUTOTUNE) TF ops", run_tf(folder)))
    return measure_rounds("W2", systems, repeats, "images")
