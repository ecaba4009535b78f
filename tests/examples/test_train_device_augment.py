"""The device-augmentation example runs on the CPU (``--device cpu``), learns, and names the
device clearly when it is absent."""

from __future__ import annotations

import pathlib
import re

import pytest
import torch
from harness import load_script

import datapipe as dp

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_device_augment.py"
LINE = re.compile(
    r"^epoch (\d+)/(\d+): loss ([0-9.]+), test accuracy ([0-9.]+), input-bound ([0-9.]+)% on (\S+)$"
)


def _load():
    return load_script(EXAMPLE, "train_device_augment_example")


def test_runs_on_cpu_and_learns(capsys):
    threads = torch.get_num_threads()
    try:  # one intra-op thread: a loaded 2-core machine makes more of them spin
        args = ["--device", "cpu", "--epochs", "2", "--seed", "0", "--threads", "1"]
        assert _load().main(args) == 0
    finally:
        torch.set_num_threads(threads)
    lines = [LINE.match(x) for x in capsys.readouterr().out.splitlines()]
    assert all(lines) and [int(m.group(1)) for m in lines] == [1, 2]
    losses = [float(m.group(3)) for m in lines]
    assert losses[1] < losses[0]
    assert float(lines[-1].group(4)) >= 0.8
    assert {m.group(6) for m in lines} == {"cpu"}
    assert all(0.0 <= float(m.group(5)) <= 100.0 for m in lines)


def test_batches_reach_the_layers_as_uint8_tensors_and_eval_is_the_identity():
    example = _load()
    train, test = example.make_pipelines(32, 0, "cpu")
    x, y = next(iter(train))
    assert x.dtype == torch.uint8 and tuple(x.shape) == (32, 1, 8, 8) and y.dtype == torch.int64
    model = example.make_augmented_model(0)
    rescale, augment = model[0], model[1]
    augment.eval()
    assert torch.equal(augment(rescale(x)), x.float() / 16)
    augment.train()
    assert not torch.equal(augment(rescale(x)), x.float() / 16)  # augmented in training


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_an_absent_device_is_named():
    with pytest.raises(dp.DeviceUnavailableError, match="device 'cuda' is not available"):
        _load().main(["--device", "cuda", "--epochs", "1"])
