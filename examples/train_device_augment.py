"""Augment on the accelerator: the pipeline delivers small uint8 batches to the device
(``prefetch_to_device``) and ``preprocessing`` layers augment them there, inside the model.

* CPU side (datapipe): digits -> shuffle -> map (reshape uint8 [8, 8] to [1, 8, 8]; the
  pixels stay one byte each, so the copy to the device is 4x smaller than float32) ->
  batch -> ``prefetch_to_device(device)``, which copies each batch from pinned memory on a
  side stream while the previous step runs.
* Device side (the model): ``Rescaling(1/16)`` -> a ``Pipeline`` of ``RandomRotation``
  and ``RandomTranslation`` (fused into one resampling per batch, drawn on the device) ->
  a small CNN. In ``model.eval()`` the random layers are the identity, so the same model
  evaluates and exports without augmentation.

Each epoch prints its loss, the test accuracy and ``InputBoundTimer``'s share of the
time spent waiting for data (the copy's wait included). The same script runs on a CPU
machine with ``--device cpu`` (then the pipeline is a plain prefetch).

    python examples/train_device_augment.py --epochs 10            # cuda when present
    python examples/train_device_augment.py --device cpu --epochs 3
"""

from __future__ import annotations

import sys

import numpy as np
import torch
from _digits_model import LOSS_FN, make_model, make_parser

import datapipe as dp
import preprocessing as pp
from datapipe.datasets import load_digits
from datapipe.stats import InputBoundTimer


def default_device() -> str:
    acc = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    return "cpu" if acc is None else acc.type


def to_channels_first(image: np.ndarray, label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return image.reshape(1, 8, 8), label  # still uint8 counts 0..16: augmented on the device


def make_pipelines(batch_size: int, seed: int, device: str) -> tuple[dp.Dataset, dp.Dataset]:
    train, test = load_digits()
    train = (
        train.shuffle(len(train))
        .map(to_channels_first)
        .batch(batch_size)
        .prefetch_to_device(device)  # last: batches arrive on the device
        .with_options(dp.Options(seed=seed))
    )
    test = test.map(to_channels_first).batch(360).prefetch_to_device(device)
    return train, test


def make_augmented_model(seed: int) -> torch.nn.Module:
    augment = pp.Pipeline(
        [pp.RandomRotation(0.04, fill_mode="constant", seed=seed),
         pp.RandomTranslation(0.1, 0.1, fill_mode="constant", seed=seed + 1)],
    )  # fmt: skip
    return torch.nn.Sequential(pp.Rescaling(1 / 16), augment, make_model())


def accuracy(model: torch.nn.Module, test: dp.Dataset) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in test:
            correct += int((model(x).argmax(dim=1) == y).sum())
            total += len(y)
    model.train()
    return correct / total


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__.splitlines()[0], epochs=10)
    parser.add_argument("--device", default=default_device(), help="cuda, cuda:1, cpu, ...")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    train, test = make_pipelines(args.batch_size, args.seed, args.device)
    iter(test).close()  # an absent device fails here, by name (DeviceUnavailableError)
    model = make_augmented_model(args.seed).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    # On a device the step's kernels run asynchronously: synchronise so that a step's time
    # is its kernels' time (the wait for a batch's copy is counted as input by the timer).
    sync = None if device.type == "cpu" else (lambda: torch.accelerator.synchronize(device))
    timer = InputBoundTimer(sync=sync)
    for epoch in range(1, args.epochs + 1):
        total, seen = 0.0, 0
        for x, y in timer.epoch(train):
            optimizer.zero_grad()
            loss = LOSS_FN(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(y)
            seen += len(y)
        e = timer.epochs[-1]
        print(
            f"epoch {epoch}/{args.epochs}: loss {total / seen:.4f}, test accuracy "
            f"{accuracy(model, test):.4f}, input-bound {100 * e.input_bound_fraction:.1f}% "
            f"on {device}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
