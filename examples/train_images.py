"""Train the digits classifier from a directory of PNG files, as real image data arrives.

The packaged UCI digits are written once as PNG files, one folder per class
(``<cache-dir>/{train,test}/<label>/<index>.png``; reused on later runs), and the model
trains from that directory through ``image_dataset_from_directory``: list the files ->
shuffle every epoch -> ``map(read + decode with Pillow, num_parallel_calls=AUTOTUNE)`` ->
batch -> prefetch -> ``to_torch``. Prints the loss, the held-out accuracy and images/s of
each epoch, then ``final test accuracy: 0.9xxx``.

    python examples/train_images.py --epochs 15 --seed 0
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid

import numpy as np
import torch
from _digits_model import fit, make_model, make_parser
from PIL import Image

import datapipe as dp
from datapipe.datasets.digits import load_digits_arrays

DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "datapipe", "digits_png")


def write_png_tree(cache_dir: str) -> str:
    """Write the digits as PNGs under ``cache_dir`` once; later calls reuse the files.

    The tree is written into a temporary folder and renamed into place, so an interrupted
    first run never leaves a partial tree that a later run would trust.
    """
    if os.path.isfile(os.path.join(cache_dir, "_COMPLETE")):
        return cache_dir
    arrays = load_digits_arrays()
    tmp = f"{cache_dir}.tmp-{uuid.uuid4().hex[:8]}"
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        # pixel counts 0..16 -> 0..255 so the PNGs look like ordinary 8-bit images
        pixels = np.round(images.astype(np.float32) * (255 / 16)).astype(np.uint8)
        for i, (img, label) in enumerate(zip(pixels, labels)):
            folder = os.path.join(tmp, split, str(int(label)))
            os.makedirs(folder, exist_ok=True)
            Image.fromarray(img).save(os.path.join(folder, f"{i:05d}.png"))
    open(os.path.join(tmp, "_COMPLETE"), "w").close()
    os.makedirs(os.path.dirname(os.path.abspath(cache_dir)), exist_ok=True)
    try:
        os.replace(tmp, cache_dir)
    except OSError:  # another run finished first (or a stale incomplete tree is there)
        if not os.path.isfile(os.path.join(cache_dir, "_COMPLETE")):
            shutil.rmtree(cache_dir, ignore_errors=True)
            os.replace(tmp, cache_dir)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return cache_dir


def make_pipelines(root: str, batch_size: int, seed: int) -> tuple[dp.Dataset, dp.Dataset]:
    common = dict(
        color_mode="grayscale",
        image_size=(8, 8),
        data_format="channels_first",  # (batch, 1, 8, 8) for Conv2d: the default, made explicit
        verbose=False,
        num_parallel_calls=dp.AUTOTUNE,
    )
    train = dp.image_dataset_from_directory(
        os.path.join(root, "train"), batch_size=batch_size, shuffle=True, seed=seed, **common
    )
    test = dp.image_dataset_from_directory(
        os.path.join(root, "test"), batch_size=360, shuffle=False, **common
    )
    return train.to_torch(), test.to_torch()


def rate(seen: int, elapsed: float, input_time: float) -> str:
    return f"{seen / elapsed:,.0f} images/s"


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__.splitlines()[0], epochs=15)
    parser.add_argument("--cache-dir", default=DEFAULT_CACHE, help="where the PNG tree lives")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    root = write_png_tree(args.cache_dir)
    print(f"PNG files ready in {root} ({time.perf_counter() - t0:.1f} s)", flush=True)
    train, test = make_pipelines(root, args.batch_size, args.seed)
    # The pipeline keeps uint8 pixels 0..255; the training loop divides them by 255.
    fit(make_model(), train, test, args.epochs, rate, scale=255)
    return 0


if __name__ == "__main__":
    sys.exit(main())
