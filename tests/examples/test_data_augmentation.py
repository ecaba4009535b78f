"""The migrated "Data augmentation" tutorial (examples/data_augmentation.py) runs with
datapipe.image where the original used tf.image, and its pipeline gives what the model
takes (issue 33, "Done when")."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest
import torch
from harness import load_script

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "data_augmentation.py"


def _load():
    return load_script(EXAMPLE, "data_augmentation_example")


def test_single_image_ops_print_the_tutorials_steps(capsys):
    module = _load()
    img = module.tinted(module.load_digits_arrays()["train_images"][:1], 0)[0]
    assert img.shape == (8, 8, 3) and img.dtype == np.uint8
    module.single_image_ops(img)
    lines = capsys.readouterr().out.splitlines()
    shapes = [
        re.match(r"^(\S+): shape (\([0-9, ]+\)), float32, mean -?[0-9.]+$", s) for s in lines[:7]
    ]
    assert [(m.group(1), m.group(2)) for m in shapes] == [
        ("original", "(8, 8, 3)"), ("flip_left_right", "(8, 8, 3)"),
        ("rgb_to_grayscale", "(8, 8, 1)"), ("adjust_saturation(3)", "(8, 8, 3)"),
        ("adjust_brightness(0.4)", "(8, 8, 3)"), ("central_crop(0.5)", "(4, 4, 3)"),
        ("rot90", "(8, 8, 3)"),
    ]  # fmt: skip
    assert len(lines) == 10
    assert all(s.endswith("crop (6, 6, 3) repeats: True") for s in lines[7:])


def test_augmented_pipeline_gives_chw_batches_in_range_and_the_same_per_seed():
    module = _load()
    train, test = module.pipelines(seed=0, batch_size=16)
    x, y = next(iter(train))
    assert x.shape == (16, 3, 16, 16) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert float(x.min()) >= 0.0 and float(x.max()) <= 1.0
    xt, yt = next(iter(test))
    assert xt.shape == (360, 3, 16, 16) and yt.shape == (360,)
    arrays = module.load_digits_arrays()
    one = (module.tinted(arrays["train_images"][:1], 0)[0], arrays["train_labels"][0])
    a, b = module.augment(one, np.int64(5), 0), module.augment(one, np.int64(5), 0)
    assert a[0].shape == (3, 16, 16) and (a[0] == b[0]).all()  # the seed pair fixes it
    assert not (module.augment(one, np.int64(6), 0)[0] == a[0]).all()


@pytest.mark.slow
def test_short_training_run_learns(capsys):
    assert _load().main(["--epochs", "2", "--seed", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    epochs = [
        re.match(r"^epoch (\d)/2: loss ([0-9.]+), test accuracy ([0-9.]+)$", s) for s in out[10:]
    ]
    assert len(epochs) == 2 and all(epochs)
    assert float(epochs[1].group(2)) < float(epochs[0].group(2))
    assert float(epochs[1].group(3)) > 0.2  # 10 classes: above chance after two epochs
