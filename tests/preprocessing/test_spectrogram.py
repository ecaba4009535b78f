"""MelSpectrogram and STFTSpectrogram: empty batches, short signals, and against Keras 3
(float32 FFTs: within 1e-4 of the largest magnitude).

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _layer_helpers import keras_outcomes

import preprocessing as pp


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: pp.MelSpectrogram(fft_length=64, sequence_length=128), "fft_length"),
        (lambda: pp.STFTSpectrogram(window="blackman"), "window"),
        (lambda: pp.STFTSpectrogram(frame_length=8, frame_step=9), "frame_step"),
    ],
)
def test_bad_arguments_name_the_argument(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_spectrograms_take_empty_batches_and_name_short_signals():
    mel = pp.MelSpectrogram(
        fft_length=64, sequence_stride=16, sequence_length=64, num_mel_bins=16, sampling_rate=8000
    )
    # A batch of 0 signals failed in the FFT library ("DFTI ERROR") or in amax.
    full = mel(torch.rand(2, 1000))
    assert full.shape == (2, 16, 63)
    empty = mel(torch.rand(0, 1000))
    assert empty.shape == (0, 16, 63) and empty.dtype == torch.float32
    stft = pp.STFTSpectrogram(frame_length=64, frame_step=16)
    assert stft(torch.rand(0, 1, 1000)).shape == (0, 33, 59)
    # A signal shorter than one frame failed inside conv1d, naming no layer.
    with pytest.raises(ValueError, match=r"STFTSpectrogram: input .*at least frame_length=64"):
        stft(torch.rand(2, 1, 10))
    assert pp.STFTSpectrogram(frame_length=64, padding="same")(torch.rand(2, 1, 10)).shape == (
        2,
        33,
        1,
    )


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(
            fft_length=512,
            sequence_stride=128,
            sequence_length=400,
            num_mel_bins=40,
            sampling_rate=8000,
        ),
        dict(fft_length=256, sequence_stride=100, window="hamming", power_to_db=False, mag_exp=1.0),
        dict(
            fft_length=256, window=None, top_db=20.0, ref_power=2.0, min_freq=0.0, max_freq=3000.0
        ),
    ],
)
def test_mel_spectrogram(ref, kw):
    audio = np.random.default_rng(0).normal(size=(2, 2000)).astype(np.float32)
    inputs = [audio, audio[0]]
    theirs = ref(keras_outcomes, "MelSpectrogram", kw, inputs)["outcomes"]
    for x, expected in zip(inputs, theirs, strict=True):
        got = pp.MelSpectrogram(**kw)(torch.from_numpy(x)).numpy()
        assert got.shape == expected.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, expected, atol=1e-4 * np.abs(expected).max(), rtol=0)


@pytest.mark.parametrize("mode", ["log", "magnitude", "psd", "real", "imag", "angle", "stft"])
@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
def test_stft_spectrogram(ref, mode, fmt):
    x = np.random.default_rng(1).normal(size=(1, 300, 2)).astype(np.float32)
    if fmt == "channels_first":
        x = np.ascontiguousarray(x.transpose(0, 2, 1))
    for kw in (
        dict(),
        dict(
            frame_length=64,
            frame_step=16,
            fft_length=128,
            window="hamming",
            periodic=True,
            scaling="spectrum",
            padding="same",
        ),
        dict(frame_length=50, window=None, scaling=None, expand_dims=True),
    ):
        kw = dict(mode=mode, data_format=fmt, **kw)
        expected = ref(keras_outcomes, "STFTSpectrogram", kw, [x])["outcomes"][0]
        got = pp.STFTSpectrogram(**kw)(torch.from_numpy(x)).numpy()
        assert got.shape == expected.shape
        diff = np.abs(got - expected)
        if mode == "angle":  # -pi and pi are one angle
            diff = np.minimum(diff, 2 * np.pi - diff)
        assert diff.max() <= 1e-4 * max(np.abs(expected).max(), 1.0)
