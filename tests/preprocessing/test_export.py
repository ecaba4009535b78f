"""The model travels: torch.export in eval mode, loaded without this library; compile."""

import subprocess
import sys

import numpy as np
import pytest
import torch

import preprocessing as pp


def make_model():
    torch.manual_seed(0)
    norm = pp.Normalization()
    norm.adapt(np.random.default_rng(0).random((16, 3, 16, 16)) * 255)
    return torch.nn.Sequential(
        norm,
        pp.RandomFlip("horizontal", seed=1),
        pp.RandomRotation(0.1, seed=2),
        pp.RandomZoom(0.2, seed=3),
        pp.RandomShear(0.2, 0.1, seed=4),
        pp.RandomPerspective(seed=5),
        pp.RandomElasticTransform(seed=6),
        pp.RandomResizedCrop(12, 10, seed=7),  # eval: the centred 6:5 window, resized
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(4, 2),
    )


def test_export_save_and_load_in_process_without_library(tmp_path):
    model = make_model().eval()
    x = torch.rand(2, 3, 16, 16) * 255
    expected = model(x)
    program = torch.export.export(model, (x,))
    path = tmp_path / "model.pt2"
    torch.export.save(program, str(path))
    torch.save(x, tmp_path / "x.pt")
    code = (
        "import sys, torch\n"
        f"m = torch.export.load({str(path)!r}).module()\n"
        f"x = torch.load({str(tmp_path / 'x.pt')!r})\n"
        f"torch.save(m(x), {str(tmp_path / 'y.pt')!r})\n"
        "assert 'datapipe' not in sys.modules and 'preprocessing' not in sys.modules\n"
    )
    # -I: isolated mode, so neither the cwd nor PYTHONPATH can make the library importable.
    subprocess.run([sys.executable, "-I", "-c", code], check=True, cwd=tmp_path, timeout=120)
    got = torch.load(tmp_path / "y.pt")
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)


def test_state_dict_round_trip_of_model():
    model, other = make_model(), make_model()
    other[0].load_state_dict(
        {
            "mean": torch.zeros(3, 1, 1, dtype=torch.float64),
            "variance": torch.ones(3, 1, 1, dtype=torch.float64),
        }
    )
    other.load_state_dict(model.state_dict())
    x = torch.rand(1, 3, 16, 16)
    torch.testing.assert_close(other.eval()(x), model.eval()(x))


@pytest.mark.slow
def test_trains_under_torch_compile():
    model = make_model().train()
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.rand(8, 3, 16, 16) * 255, torch.randint(0, 2, (8,))
    losses = []
    for _ in range(3):
        loss = torch.nn.functional.cross_entropy(compiled(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert all(np.isfinite(losses))
