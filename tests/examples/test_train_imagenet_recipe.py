"""The ImageNet-style recipe example runs, prints what the README shows, and its
augmentation is the recipe: crops of the uint8 canvases, labels mixed with the pixels,
the centred resize in eval."""

from __future__ import annotations

import importlib.util
import math
import pathlib
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_imagenet_recipe.py"
EPOCH = re.compile(r"^epoch (\d+)/2: loss ([0-9.]+) \(mixed labels\), test accuracy ([0-9.]+)$")


def _load():
    spec = importlib.util.spec_from_file_location("train_imagenet_recipe_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_short_run_prints_what_the_readme_shows(capsys):
    threads = torch.get_num_threads()
    try:  # one intra-op thread: a loaded 2-core machine makes more of them spin
        torch.set_num_threads(1)
        assert _load().main(["--epochs", "2", "--seed", "0", "--limit", "256"]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "images: 256 train / 360 test, 36x36 RGB uint8, crops 32x32"
    epochs = [EPOCH.match(line) for line in out[1:3]]
    assert all(epochs) and [int(m.group(1)) for m in epochs] == [1, 2]
    for m in epochs:  # soft-label cross-entropy of 10 classes, and an accuracy
        assert 0.5 < float(m.group(2)) < 2.6 and 0.0 <= float(m.group(3)) <= 1.0
    assert re.match(r"^trained in \d+ s$", out[3]) and len(out) == 4


def test_images_hold_their_digit_and_augmentation_mixes_labels_with_pixels():
    module = _load()
    arrays = module.load_digits_arrays()
    images = module.make_images(arrays["train_images"][:64], 36, seed=0)
    assert images.shape == (64, 3, 36, 36) and images.dtype == np.uint8
    # light ink on a dark background: the brightest pixels lie where the digit is
    assert (images.max(axis=(1, 2, 3)) >= 150).all()
    augment = module.make_augment(32, seed=0)
    x = torch.from_numpy(images)
    labels = F.one_hot(torch.as_tensor(arrays["train_labels"][:64]), 10).float()
    kinds = set()
    for _ in range(6):
        out = augment({"images": x, "labels": labels})
        assert out["images"].shape == (64, 3, 32, 32) and out["images"].dtype == torch.float32
        y = out["labels"]
        torch.testing.assert_close(y.sum(1), torch.ones(64))
        assert int((y > 0).sum(1).max()) <= 2  # one partner per image
        kinds.add("mixed" if bool(((y > 0) & (y < 1)).any()) else "unmixed")
    assert "mixed" in kinds
    augment.eval()
    out = augment({"images": x, "labels": labels})
    expected = F.interpolate(x.float(), size=(32, 32), mode="bilinear", antialias=True)
    torch.testing.assert_close(out["images"], expected, atol=1e-4, rtol=0)
    assert out["labels"] is labels


def test_mix_switch_picks_both_layers():
    module = _load()
    mix = module.MixUpOrCutMix(seed=0)
    x = torch.arange(8, dtype=torch.float32).view(8, 1, 1, 1).expand(8, 3, 16, 16)
    seen = set()
    for _ in range(20):
        out = mix({"images": x, "labels": torch.eye(8)})["images"]
        per_image = [out[i].unique().numel() for i in range(8)]
        # MixUp: each image one blended value; CutMix: whole values of two images
        whole = bool(torch.equal(out, out.round()))
        seen.add("cutmix" if whole else "mixup")
        assert max(per_image) <= 2
    assert seen == {"cutmix", "mixup"}


@pytest.mark.slow
def test_full_run_learns():
    module = _load()
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert module.main(["--seed", "0"]) == 0
    last = [line for line in buffer.getvalue().splitlines() if line.startswith("epoch")][-1]
    accuracy = float(last.rsplit(" ", 1)[1])
    assert accuracy >= 0.4 and not math.isnan(accuracy)
