"""The model travels: torch.export in eval mode, loaded without this library; compile.

The exported programs of the tests below are loaded and run in one fresh interpreter that
cannot import this library (the ``exported`` fixture: one interpreter start instead of one
per program)."""

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


def run_exported_elsewhere(folder, models):
    """Export each ``{name: (model, args)}``, load and run the programs in one fresh
    interpreter that cannot import this library, and return ``{name: its outputs}``."""
    for name, (model, args) in models.items():
        torch.export.save(torch.export.export(model, args), str(folder / f"{name}.pt2"))
        torch.save(args, folder / f"{name}.x.pt")
    code = (
        "import sys, torch\n"
        f"for name in {sorted(models)!r}:\n"
        f"    m = torch.export.load({str(folder)!r} + f'/{{name}}.pt2').module()\n"
        f"    x = torch.load({str(folder)!r} + f'/{{name}}.x.pt')\n"
        f"    torch.save(m(*x), {str(folder)!r} + f'/{{name}}.y.pt')\n"
        "assert 'datapipe' not in sys.modules and 'preprocessing' not in sys.modules\n"
    )
    # -I: isolated mode, so neither the cwd nor PYTHONPATH can make the library importable.
    subprocess.run([sys.executable, "-I", "-c", code], check=True, cwd=folder, timeout=120)
    return {name: torch.load(folder / f"{name}.y.pt") for name in models}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """``{name: (model, args, outputs of its exported program run elsewhere)}`` for the
    models of the tests below (built and exported once, in eval mode)."""
    g = torch.Generator().manual_seed(0)
    models = {
        "geometric": (make_model().eval(), (torch.rand(2, 3, 16, 16, generator=g) * 255,)),
        "photometric": (
            photometric_model().eval(),
            (torch.rand(2, 3, 16, 16, generator=g) * 100 + 50,),
        ),
        "features": (
            FeatureModel().eval(),
            (
                torch.tensor([3, 4, 11, 0, 25]),
                torch.randn(5, 3, generator=g),
                torch.randn(2, 256, generator=g),
            ),
        ),  # fmt: skip
        "erasing_mixing": (
            torch.nn.Sequential(
                pp.RandomErasing(value_range=(0, 255), seed=1),
                pp.MixUp(seed=2),
                pp.CutMix(seed=3),
                torch.nn.Conv2d(3, 2, 3),
            ).eval(),
            (torch.rand(2, 3, 10, 10, generator=g) * 255,),
        ),
    }
    got = run_exported_elsewhere(tmp_path_factory.mktemp("exported"), models)
    return {name: (model, args, got[name]) for name, (model, args) in models.items()}


def test_export_save_and_load_in_process_without_library(exported):
    model, (x,), got = exported["geometric"]
    expected = model(x)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)


def photometric_model():
    """Every photometric layer and RandAugment / AugMix (issue 13b): in eval() all are the
    identity but AutoContrast, which Keras applies at inference too."""
    kw = dict(value_range=(0, 255))
    return torch.nn.Sequential(
        pp.RandomColorJitter(brightness_factor=0.2, hue_factor=0.2, seed=0, **kw),
        pp.RandomColorDegeneration(0.5, seed=1, **kw),
        pp.RandomGrayscale(0.3, seed=2),
        pp.RandomInvert(seed=3, **kw),
        pp.RandomHue(0.3, seed=4, **kw),
        pp.RandomSaturation(0.7, seed=5, **kw),
        pp.RandomSharpness(0.7, seed=6, **kw),
        pp.RandomPosterization(6, seed=7, **kw),
        pp.Solarization(0.2, 0.9, seed=8, **kw),
        pp.Equalization(**kw),
        pp.RandomGaussianBlur(seed=9, **kw),
        pp.RandAugment(seed=10, **kw),
        pp.AugMix(seed=11, **kw),
        pp.AutoContrast(value_range=(0, 1)),
    )


def test_photometric_layers_export_and_load_without_library(exported):
    model, (x,), got = exported["photometric"]
    expected = model(x)
    low = x.amin(dim=(2, 3), keepdim=True)
    torch.testing.assert_close(expected, (x - low) / (x.amax(dim=(2, 3), keepdim=True) - low))
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)


class FeatureModel(torch.nn.Module):
    """The numeric feature layers (adapted ones included) in one exported program."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.lookup = pp.IntegerLookup(num_oov_indices=2, output_mode="one_hot")
        self.lookup.adapt(rng.integers(0, 20, size=(64, 3)))
        self.hashed_oov = pp.IntegerLookup(
            vocabulary=[3, 5, 7, 11], num_oov_indices=3, oov_method="farmhash", salt=5
        )
        self.counts = pp.CategoryEncoding(num_tokens=32, output_mode="count")
        self.bins = pp.Discretization(num_bins=4, output_mode="one_hot")
        self.bins.adapt(rng.normal(size=(200, 3)))
        self.hashing = pp.Hashing(num_bins=16, mask_value=0)
        self.salted = pp.Hashing(num_bins=16, salt=[1, 2], output_mode="multi_hot")
        self.cross = pp.HashedCrossing(num_bins=10)
        self.norm = pp.Normalization()
        self.norm.adapt(rng.normal(size=(100, 3)) * 5 + 2)
        self.mel = pp.MelSpectrogram(
            fft_length=64, sequence_stride=32, num_mel_bins=8, sampling_rate=8000
        )
        self.stft = pp.STFTSpectrogram(frame_length=32, frame_step=16)

    def forward(self, ints, floats, audio):
        return (
            self.lookup(ints),
            self.hashed_oov(ints),
            self.counts(ints),
            self.bins(floats),
            self.hashing(ints),
            self.salted(ints),
            self.cross((ints, ints + 1)),
            self.norm(floats),
            self.mel(audio),
            self.stft(audio.unsqueeze(1)),
        )


def test_feature_layers_export_and_load_without_library(exported):
    model, args, got = exported["features"]
    expected = model(*args)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)
    # The hashed OOV buckets and hash bins are the same in the exported program.
    assert torch.equal(got[1], expected[1]) and torch.equal(got[4], expected[4])


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


def test_erasing_and_mixing_layers_export_as_eval_identity(exported):
    # In eval() they are the identity (Keras's training=False); the exported program holds
    # no draw, and the model around them runs as without them.
    model, (x,), got = exported["erasing_mixing"]
    torch.testing.assert_close(got, model[3](x), atol=1e-6, rtol=1e-6)
