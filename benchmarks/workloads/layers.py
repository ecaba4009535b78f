"""Layers in ``map``: ``from_tensor_slices(2,000 float32 images 3x64x64) -> map(nn.Sequential(
RandomFlip, RandomRotation, RandomContrast), all seeded) -> batch(32)``.

The per-element cost of random layers called in a pipeline stage (a few hundred us per
image on a CPU), where each draw asks the stage for the element's key (``datapipe._draws``).
Checksum: the sum of the pixels; it depends on the draws, so two checkouts that draw
differently (before and after issue 27, item 3) agree on the count only.
"""

from __future__ import annotations

N = 2000
BATCH = 32


def run_datapipe(parallel, executor: str | None = None):
    import numpy as np
    import torch

    import datapipe as dp
    import preprocessing as pp

    images = torch.rand(N, 3, 64, 64, generator=torch.Generator().manual_seed(0))

    def run():
        augment = torch.nn.Sequential(
            pp.RandomFlip("horizontal", seed=1),
            pp.RandomRotation(0.1, seed=2),
            pp.RandomContrast(0.3, value_range=(0, 1), seed=3),
        )
        ds = dp.from_tensor_slices(images).map(augment, num_parallel_calls=parallel,
                                               executor=executor)  # fmt: skip
        count, total = 0, 0.0
        for b in ds.batch(BATCH):
            count += b.shape[0]
            total += float(np.asarray(b, dtype=np.float64).sum())
        return count, total

    return run
