"""Augmentation throughput: random horizontal flip + random rotation (+-0.1 turn, bilinear,
reflect) + normalization on batches of 64x3x224x224 float32, side by side:

- ours: ``preprocessing.Pipeline`` (flip and rotation fused into one resampling);
- kornia.augmentation (RandomHorizontalFlip + RandomAffine(36 degrees, reflection) +
  Normalize), the closest match;
- torchvision.transforms.v2 (RandomHorizontalFlip + RandomRotation(36) + Normalize;
  torchvision has no reflect fill, so it fills with zeros), when importable;
- a hand-fused reference: one ``affine_grid`` + ``grid_sample`` with the flip folded
  into the matrix, and the normalization.

Usage: python benchmarks/bench_preprocessing.py [--device cpu|cuda] [--iters N]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import preprocessing as pp  # noqa: E402

MEAN = torch.tensor([0.485, 0.456, 0.406])
STD = torch.tensor([0.229, 0.224, 0.225])


def ours(device):
    norm = pp.Normalization(mean=MEAN.tolist(), variance=(STD**2).tolist())
    pipe = pp.Pipeline([pp.RandomFlip("horizontal", seed=0), pp.RandomRotation(0.1, seed=1), norm])
    return pipe.to(device).train()


def kornia_aug(device):
    import kornia.augmentation as K

    return torch.nn.Sequential(
        K.RandomHorizontalFlip(),
        K.RandomAffine(degrees=36.0, padding_mode="reflection", p=1.0),
        K.Normalize(mean=MEAN, std=STD),
    ).to(device)


def torchvision_aug(device):
    from torchvision.transforms import v2

    return v2.Compose(
        [
            v2.RandomHorizontalFlip(),
            v2.RandomRotation(36.0),
            v2.Normalize(MEAN.tolist(), STD.tolist()),
        ]
    )


def fused_reference(device):
    mean, std = MEAN.to(device).view(1, 3, 1, 1), STD.to(device).view(1, 3, 1, 1)

    def run(x):
        b = x.shape[0]
        angle = (torch.rand(b, device=device) * 2 - 1) * (0.1 * 2 * math.pi)
        flip = torch.where(torch.rand(b, device=device) < 0.5, -1.0, 1.0)
        cos, sin = torch.cos(angle), torch.sin(angle)
        theta = torch.zeros(b, 2, 3, device=device)
        theta[:, 0, 0], theta[:, 0, 1] = cos * flip, -sin
        theta[:, 1, 0], theta[:, 1, 1] = sin * flip, cos
        grid = torch.nn.functional.affine_grid(theta, list(x.shape), align_corners=False)
        out = torch.nn.functional.grid_sample(
            x, grid, mode="bilinear", padding_mode="reflection", align_corners=False
        )
        return (out - mean) / std

    return run


def measure(fn, x, iters):
    """Images/s over ``iters`` calls (after the caller's warm-up)."""
    with torch.no_grad():
        if x.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            fn(x)
        if x.is_cuda:
            torch.cuda.synchronize()
    return iters * x.shape[0] / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--iters", type=int, default=4, help="batches per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args()
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device: {name}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(
        f"batch {args.batch}x3x{args.size}x{args.size} float32, "
        f"{args.rounds} rounds x {args.iters} batches, best round"
    )
    x = torch.rand(args.batch, 3, args.size, args.size, device=device)
    builders = {
        "preprocessing.Pipeline (fused)": ours,
        "kornia.augmentation": kornia_aug,
        "torchvision.transforms.v2": torchvision_aug,
        "hand-fused affine_grid+grid_sample": fused_reference,
    }
    fns = {}
    for label, build in builders.items():
        try:
            fns[label] = build(device)
            with torch.no_grad():
                fns[label](x)  # warm-up
        except Exception as exc:  # noqa: BLE001 - report any import/build failure
            print(f"{label:38s} unavailable: {type(exc).__name__}: {exc}")
    # Interleaved rounds, best round kept: other load on the machine hits every
    # contender alike instead of whichever happened to run at that moment.
    rates = {label: 0.0 for label in fns}
    for _ in range(args.rounds):
        for label, fn in fns.items():
            rates[label] = max(rates[label], measure(fn, x, args.iters))
    for label, rate in rates.items():
        print(f"{label:38s} {rate:8.1f} images/s")
    ref = rates.get("preprocessing.Pipeline (fused)")
    if ref:
        for label, rate in rates.items():
            if label != "preprocessing.Pipeline (fused)":
                print(f"ratio ours / {label:30s} {ref / rate:6.2f}x")


if __name__ == "__main__":
    main()
