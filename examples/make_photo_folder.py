"""Write a folder of JPEG photos, one subfolder per class, to try the "your own data"
walkthrough (docs/guides/your-own-data.md) without downloading anything.

The photos are made from the handwritten digits shipped with datapipe: each digit is
drawn in a light colour of its own on a dark background of its own, enlarged to a random
size between 40 and 64 pixels and saved as a JPEG in ``<folder>/<digit's name>/``, so the
folder looks like a small photo collection (different sizes, JPEG artefacts, ten
classes).

    python examples/make_photo_folder.py photos
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from PIL import Image

from datapipe.datasets.digits import load_digits_arrays

NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def write_photos(folder: str, seed: int = 0, count: int | None = None) -> int:
    """Write the first ``count`` digits (default: all 1,797) as
    ``folder/<name>/<index>.jpg``; returns how many."""
    arrays = load_digits_arrays()
    images = np.concatenate([arrays["train_images"], arrays["test_images"]])[:count]
    labels = np.concatenate([arrays["train_labels"], arrays["test_labels"]])[:count]
    rng = np.random.default_rng(seed)
    for name in NAMES:
        os.makedirs(os.path.join(folder, name), exist_ok=True)
    for i, (digit, label) in enumerate(zip(images, labels)):
        ink = (digit.astype(np.float32) / 16.0)[..., None]  # 8x8 in [0, 1]
        back, fore = rng.integers(0, 96, 3), rng.integers(160, 256, 3)  # dark and light
        rgb = (back * (1 - ink) + fore * ink).round().astype(np.uint8)
        size = int(rng.integers(40, 65))
        photo = Image.fromarray(rgb).resize((size, size), Image.BICUBIC)
        photo.save(os.path.join(folder, NAMES[int(label)], f"{i:04d}.jpg"), quality=90)
    return len(images)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="where to write the class folders")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=None, help="how many (default: all)")
    args = parser.parse_args(argv)
    n = write_photos(args.folder, args.seed, args.count)
    print(f"wrote {n} JPEGs in {len(NAMES)} class folders under {args.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
