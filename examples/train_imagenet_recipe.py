"""An ImageNet-style training recipe on images made from the packaged digits: random
resized crop, horizontal flip, RandAugment, MixUp or CutMix, normalisation.

The images: each 8x8 UCI digit is upscaled (bilinear, to a side of 1/3 to 7/9 of the
canvas) and pasted at a random place on a 36x36 RGB canvas, light ink on a dark
background of random colours, plus a little noise (uint8, like decoded photos). The
recipe is the one of modern ImageNet training (e.g. DeiT, Touvron et al. 2021; timm), at
a smaller size so that it trains in under two minutes on 2 CPU cores: crops of 32x32 from
36x36 images (ImageNet: 224 from ~256; ``--size`` changes it, ``--size 224`` makes
252x252 canvases).

* CPU side (datapipe): ``from_tensor_slices -> shuffle -> batch -> prefetch_to_device``;
  pixels stay uint8, so a batch is a quarter of its float32 bytes on the bus.
* Device side, training only (``augment``): ``RandomResizedCrop(32, 32)`` (scale 0.35-1:
  the digit must stay in view) -> ``RandomFlip("horizontal")`` -> ``RandAugment(num_ops=2,
  factor=0.1)`` (Keras's eleven ops; a small magnitude, since a rotated 6 is a 9;
  Keras's ``Solarization`` at that magnitude inverts most pixels) -> per
  batch ``MixUp(alpha=0.2)`` or ``CutMix()`` with probability 1/2 each (timm's switch),
  on dict batches ``{"images", "labels"}`` with one-hot labels, so each image's label is
  mixed by the same draw as its pixels. In ``eval()`` the crop takes the centred window
  resized to 32x32 and every other layer is the identity.
* The model starts with ``Normalization`` (per-channel mean and variance adapted on the
  training images), then a small CNN; the loss is cross-entropy against the soft labels.

Each epoch prints the training loss against the mixed labels and the test accuracy:

    python examples/train_imagenet_recipe.py --epochs 30 --seed 0
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import datapipe as dp
import preprocessing as pp
from datapipe.datasets.digits import load_digits_arrays

CLASSES = 10


def make_images(digits: np.ndarray, canvas: int, seed: int) -> np.ndarray:
    """(N, 3, canvas, canvas) uint8: each 8x8 digit (counts 0..16) upscaled to a side of
    1/3 to 7/9 of the canvas, in a random light colour, pasted at a random place on a
    random dark colour, plus N(0, 8) noise."""
    rng = np.random.default_rng(seed)
    n = len(digits)
    out = np.empty((n, 3, canvas, canvas), np.uint8)
    ink = torch.from_numpy(digits.astype(np.float32) / 16.0).unsqueeze(1)
    for i in range(n):
        side = int(rng.integers(canvas * 3 // 9, canvas * 7 // 9 + 1))
        glyph = F.interpolate(ink[i : i + 1], size=(side, side), mode="bilinear")[0, 0].numpy()
        back, fore = rng.uniform(0, 110, 3), rng.uniform(150, 255, 3)  # light ink on dark
        image = np.broadcast_to(back[:, None, None], (3, canvas, canvas)).copy()
        y, x = rng.integers(0, canvas - side + 1, 2)
        patch = image[:, y : y + side, x : x + side]
        patch += glyph * (fore - back)[:, None, None]
        image += rng.normal(0, 8, image.shape)
        out[i] = np.clip(image, 0, 255).round().astype(np.uint8)
    return out


class MixUpOrCutMix(torch.nn.Module):
    """MixUp or CutMix, chosen per batch with probability 1/2 each (timm's ``switch_prob``)."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.mixup = pp.MixUp(alpha=0.2, seed=seed)
        self.cutmix = pp.CutMix(factor=1.0, seed=seed + 1)
        self.coin = torch.Generator().manual_seed(seed + 2)

    def forward(self, batch: dict) -> dict:
        pick = float(torch.rand((), generator=self.coin)) < 0.5
        return (self.mixup if pick else self.cutmix)(batch)


def make_augment(size: int, seed: int) -> torch.nn.Module:
    """The training augmentation on dict batches; ``eval()``: centre window resized."""
    geometry_and_colour = pp.Pipeline(
        [
            pp.RandomResizedCrop(size, size, scale=(0.35, 1.0), seed=seed),
            pp.RandomFlip("horizontal", seed=seed + 1),
            pp.RandAugment(value_range=(0, 255), num_ops=2, factor=0.1, seed=seed + 2),
        ]
    )
    return torch.nn.Sequential(geometry_and_colour, MixUpOrCutMix(seed + 3))


def make_model(train_images: np.ndarray) -> torch.nn.Module:
    norm = pp.Normalization()  # per channel, adapted on the (unaugmented) training images
    norm.adapt(train_images.astype(np.float32))

    def block(cin: int, cout: int, stride: int) -> list[torch.nn.Module]:
        conv = torch.nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        return [conv, torch.nn.BatchNorm2d(cout), torch.nn.ReLU()]

    return torch.nn.Sequential(
        norm,
        *block(3, 24, 2),
        *block(24, 48, 2),
        *block(48, 48, 1),
        *block(48, 96, 2),
        *block(96, 96, 1),
        *block(96, 128, 2),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(128, CLASSES),
    )


def make_pipelines(batch_size: int, canvas: int, seed: int, device: str, limit: int | None):
    arrays = load_digits_arrays()
    arrays["train_images"] = arrays["train_images"][:limit]
    arrays["train_labels"] = arrays["train_labels"][:limit]
    train_x = make_images(arrays["train_images"], canvas, seed)
    test_x = make_images(arrays["test_images"], canvas, seed + 1)
    train = (
        dp.from_tensor_slices((train_x, arrays["train_labels"]))
        .shuffle(len(train_x))
        .batch(batch_size, drop_remainder=True)  # MixUp/CutMix pair images of full batches
        .prefetch_to_device(device)
        .with_options(dp.Options(seed=seed))
    )
    test = dp.from_tensor_slices((test_x, arrays["test_labels"])).batch(120)
    return train_x, train, test.prefetch_to_device(device)


def accuracy(augment, model, test) -> float:
    augment.eval()
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in test:
            images = augment({"images": x, "labels": F.one_hot(y, CLASSES).float()})["images"]
            correct += int((model(images).argmax(1) == y).sum())
            total += len(y)
    augment.train()
    model.train()
    return correct / total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--size", type=int, default=32, help="crop size (canvas: size * 9 / 8)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, ...")
    parser.add_argument("--limit", type=int, default=None, help="use the first N training images")
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    canvas = args.size * 9 // 8
    train_x, train, test = make_pipelines(
        args.batch_size, canvas, args.seed, args.device, args.limit
    )
    print(
        f"images: {len(train_x)} train / 360 test, {canvas}x{canvas} RGB uint8, "
        f"crops {args.size}x{args.size}"
    )
    augment = make_augment(args.size, args.seed)  # runs on its input's device
    model = make_model(train_x).to(args.device)
    steps = args.epochs * (len(train_x) // args.batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        total, seen = 0.0, 0
        for x, y in train:
            batch = augment({"images": x, "labels": F.one_hot(y, CLASSES).float()})
            loss = F.cross_entropy(model(batch["images"]), batch["labels"])  # soft labels
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            total, seen = total + loss.item() * len(y), seen + len(y)
        print(
            f"epoch {epoch}/{args.epochs}: loss {total / seen:.3f} (mixed labels), "
            f"test accuracy {accuracy(augment, model, test):.3f}",
            flush=True,
        )
    print(f"trained in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
