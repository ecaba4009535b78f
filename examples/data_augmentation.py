"""tensorflow.org's "Data augmentation" tutorial, its tf.image half, in datapipe.

The tutorial's steps with ``datapipe.image`` in place of ``tf.image`` (the same names and
arguments): single-image ops (flip, grayscale, saturation, brightness, central crop,
rot90), the ``stateless_random_*`` ops with a seed pair, and the augmented training
pipeline -- ``zip`` with a counter for per-element seeds, ``shuffle -> map(augment) ->
batch -> prefetch`` -- feeding a small CNN. The tutorial's tf_flowers photos are replaced
by the packaged UCI digits, tinted (an RGB colour per image) so that saturation and hue
have colour to work on; the images stay channels-last (tf's layout) until the last step
of the map, which hands torch its CHW batch.

    python examples/data_augmentation.py --epochs 3 --seed 0
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch
from torch import nn

import datapipe as dp
from datapipe import image
from datapipe.datasets.digits import load_digits_arrays

IMG_SIZE = 16


def tinted(images: np.ndarray, seed: int) -> np.ndarray:
    """(N, 8, 8) digits (0..16) -> (N, 8, 8, 3) uint8 RGB: the ink in a random hue."""
    grey = image.grayscale_to_rgb((images.astype(np.uint16) * 15).astype(np.uint8)[..., None])
    hues = np.random.default_rng(seed).uniform(0, 1, (len(images), 1, 1, 1))
    tint = image.hsv_to_rgb(np.concatenate([hues, np.full_like(hues, 0.8), np.ones_like(hues)], -1))
    return (grey * tint).astype(np.uint8)


def show(name: str, x: np.ndarray) -> None:
    print(f"{name}: shape {tuple(x.shape)}, {x.dtype}, mean {float(np.mean(x)):.3f}")


def single_image_ops(img: np.ndarray) -> None:
    """The tutorial's "Data augmentation using tf.image" section, on one image."""
    x = image.convert_image_dtype(img, np.float32)
    show("original", x)
    show("flip_left_right", image.flip_left_right(x))
    show("rgb_to_grayscale", image.rgb_to_grayscale(x))
    show("adjust_saturation(3)", image.adjust_saturation(x, 3))
    show("adjust_brightness(0.4)", image.adjust_brightness(x, 0.4))
    show("central_crop(0.5)", image.central_crop(x, central_fraction=0.5))
    show("rot90", image.rot90(x))
    for i in range(3):  # "Randomly transform an image": the same seed pair, the same result
        seed = (i, 0)
        bright = image.stateless_random_brightness(x, max_delta=0.95, seed=seed)
        contrast = image.stateless_random_contrast(x, lower=0.1, upper=0.9, seed=seed)
        crop = image.stateless_random_crop(x, size=[6, 6, 3], seed=seed)
        repeats = bool((crop == image.stateless_random_crop(x, size=[6, 6, 3], seed=seed)).all())
        print(
            f"seed {seed}: brightness mean {float(bright.mean()):.3f}, contrast mean "
            f"{float(contrast.mean()):.3f}, crop {crop.shape} repeats: {repeats}"
        )


def resize_and_rescale(img: np.ndarray, label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    img = image.resize(img, [IMG_SIZE, IMG_SIZE], dtype=np.float32)
    return img / np.float32(255.0), label


def augment(image_label: tuple, index: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The tutorial's ``augment``: pad by 6, random crop back, random brightness, clip;
    each element's seed pair comes from its counter value."""
    img, label = resize_and_rescale(*image_label)
    img = image.resize_with_crop_or_pad(img, IMG_SIZE + 6, IMG_SIZE + 6)
    pair, new_pair = (seed, int(index)), (seed + 1, int(index))  # tf.random.split's role
    img = image.stateless_random_crop(img, size=[IMG_SIZE, IMG_SIZE, 3], seed=pair)
    img = image.stateless_random_brightness(img, max_delta=0.5, seed=new_pair)
    img = np.clip(img, 0, 1)
    return np.ascontiguousarray(img.transpose(2, 0, 1)), label  # torch's CHW, at the end


def to_chw(img: np.ndarray, label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    img, label = resize_and_rescale(img, label)
    return np.ascontiguousarray(img.transpose(2, 0, 1)), label


def pipelines(seed: int, batch_size: int) -> tuple[dp.Dataset, dp.Dataset]:
    arrays = load_digits_arrays()
    train = dp.from_tensor_slices((tinted(arrays["train_images"], seed), arrays["train_labels"]))
    test = dp.from_tensor_slices((tinted(arrays["test_images"], seed + 1), arrays["test_labels"]))
    counter = dp.range(len(train))
    train_ds = (
        dp.Dataset.zip((train, counter))
        .shuffle(1000, seed=seed)
        .map(lambda il, i: augment(il, i, seed), num_parallel_calls=dp.AUTOTUNE)
        .batch(batch_size)
        .prefetch(dp.AUTOTUNE)
        .to_torch()
    )
    test_ds = test.map(to_chw, num_parallel_calls=dp.AUTOTUNE).batch(360).to_torch()
    return train_ds, test_ds


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 16, 64), nn.ReLU(), nn.Linear(64, 10),
    )  # fmt: skip


def accuracy(model: nn.Module, test: dp.Dataset) -> float:
    model.eval()
    right = total = 0
    with torch.no_grad():
        for x, y in test:
            right += int((model(x).argmax(1) == y).sum())
            total += len(y)
    return right / total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    single_image_ops(tinted(load_digits_arrays()["train_images"][:1], args.seed)[0])
    train, test = pipelines(args.seed, args.batch_size)
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(1, args.epochs + 1):
        model.train()
        losses = []
        for x, y in train:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        acc = accuracy(model, test)
        print(f"epoch {epoch}/{args.epochs}: loss {np.mean(losses):.4f}, test accuracy {acc:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
