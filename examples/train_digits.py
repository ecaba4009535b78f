"""Train a small classifier on the UCI handwritten digits with a datapipe input pipeline.

The pipeline is tf.data's usual one, in datapipe: ``shuffle -> map (uint8 [8, 8] ->
float32 [1, 8, 8] in [0, 1]) -> batch -> prefetch -> to_torch``; the model is a small CNN
trained on the CPU.
Prints the loss, the held-out accuracy and the input throughput of each epoch, then a
final line ``final test accuracy: 0.97xx``.

    python examples/train_digits.py --epochs 15 --seed 0
"""

from __future__ import annotations

import sys

import torch
from _digits_model import fit, make_model, make_parser, to_features

import datapipe as dp
from datapipe.datasets import load_digits


def make_pipelines(batch_size: int, seed: int) -> tuple[dp.Dataset, dp.Dataset]:
    train, test = load_digits()
    options = dp.Options(seed=seed)
    train = (
        train.shuffle(len(train))  # the whole set fits the buffer: a uniform permutation
        .map(to_features)
        .batch(batch_size)
        .prefetch(2)
        .to_torch()
        .with_options(options)
    )
    test = test.map(to_features).batch(360).to_torch()
    return train, test


def rate(seen: int, elapsed: float, input_time: float) -> str:
    return (
        f"{seen / elapsed:,.0f} elements/s trained "
        f"(input pipeline alone {seen / max(input_time, 1e-9):,.0f} elements/s)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__.splitlines()[0], epochs=15)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train, test = make_pipelines(args.batch_size, args.seed)
    fit(make_model(), train, test, args.epochs, rate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
