"""Keras 3's ``mel_spectrogram_test.py`` (keras/src/layers/preprocessing/), translated."""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp


def test_invalid_fft_length_raises():
    """mel_spectrogram_test.py::test_invalid_fft_length_raises."""
    with pytest.raises(ValueError, match="fft_length must be >= sequence_length"):
        pp.MelSpectrogram(fft_length=256, sequence_stride=256, sequence_length=512, num_mel_bins=80)


@pytest.mark.parametrize("shape,expected", [((2, 16000), (2, 80, 126)), ((16000,), (80, 126))])
def test_mel_spectrogram_basics(shape, expected):
    """mel_spectrogram_test.py::test_mel_spectrogram_basics: shapes, no weights."""
    layer = pp.MelSpectrogram(
        num_mel_bins=80, sampling_rate=8000, sequence_stride=128, fft_length=2048
    )
    out = layer(torch.rand(shape))
    assert tuple(out.shape) == expected
    assert list(layer.parameters()) == [] and list(layer.state_dict()) == []


@pytest.mark.parametrize(
    "shape,bins,stride,fft,rate,zeros",
    [
        ((2, 16000), 80, 128, 2048, 8000, False),
        ((16000,), 80, 128, 2048, 8000, False),
        ((2, 16001), 80, 128, 2048, 16000, False),
        ((16001,), 80, 128, 2048, 8000, False),
        ((2, 8000), 128, 64, 512, 32000, False),
        ((8000,), 128, 64, 512, 32000, False),
        ((2, 8000), 128, 64, 512, 32000, True),
        ((8000,), 128, 64, 512, 32000, True),
    ],
)
def test_output_shape(shape, bins, stride, fft, rate, zeros):
    """mel_spectrogram_test.py::test_output_shape: (..., bins, (t + stride + 1) // stride);
    all-zero audio gives the floor everywhere (finite)."""
    audio = np.zeros(shape) if zeros else np.random.default_rng(0).random(shape)
    layer = pp.MelSpectrogram(
        num_mel_bins=bins, sequence_stride=stride, fft_length=fft, sampling_rate=rate
    )
    out = layer(audio)
    assert tuple(out.shape) == (*shape[:-1], bins, (shape[-1] + stride + 1) // stride)
    assert torch.isfinite(out).all()
    if zeros:  # power 0 -> min_power 1e-10 -> -100 dB everywhere
        assert torch.allclose(out, torch.full_like(out, -100.0))


def test_tf_data_compatibility():
    """mel_spectrogram_test.py::test_tf_data_compatibility: in a pipeline's map."""
    layer = pp.MelSpectrogram(
        num_mel_bins=80, sampling_rate=8000, sequence_stride=128, fft_length=2048
    )
    audio = np.random.default_rng(1).random((2, 16000))
    out = next(iter(dp.from_tensor_slices(audio).batch(2).map(layer)))
    assert tuple(out.shape) == (2, 80, 126)
