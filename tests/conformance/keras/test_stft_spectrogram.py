"""Keras 3's ``stft_spectrogram_test.py`` (keras/src/layers/preprocessing/), translated.

Upstream compares with ``scipy.signal.spectrogram``; the reference here is that function's
formula in numpy (frames every ``frame_step`` samples, the window, an ``fft_length``-point
real FFT, ``density`` scaling ``1 / sum(w**2)``, ``spectrum`` ``1 / sum(w)**2``, the
one-sided PSD doubled away from DC and Nyquist, magnitude and angle from the unscaled
square root), so no scipy is needed. Window names are ``"hann"`` / ``"hamming"``;
Keras's other scipy names (``"blackman"``, ``"tukey"``) are given as explicit values
(D-K-6). The kernels are fixed buffers here, not trainable weights (D-K-7).
"""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_values


def _window(name, n, periodic):
    """scipy.signal.get_window(name, n, fftbins=periodic), for the four names upstream uses."""
    m = n if periodic else n - 1
    k = np.arange(n)
    if name == "hann":
        return 0.5 - 0.5 * np.cos(2 * np.pi * k / m)
    if name == "hamming":
        return 0.54 - 0.46 * np.cos(2 * np.pi * k / m)
    if name == "blackman":
        return 0.42 - 0.5 * np.cos(2 * np.pi * k / m) + 0.08 * np.cos(4 * np.pi * k / m)
    assert name == "tukey"  # alpha = 0.5, scipy's default
    width = int(np.floor(0.5 * m / 2.0))
    w = np.ones(n)
    w[: width + 1] = 0.5 * (1 + np.cos(np.pi * (-1 + 2.0 * k[: width + 1] / 0.5 / m)))
    w[n - width - 1 :] = w[: width + 1][::-1]
    return w


def _scipy_spectrogram(x, mode, scaling, window, frame_length, frame_step, fft_length):
    """``scipy.signal.spectrogram(x, window, nperseg, noverlap, nfft, detrend=False,
    scaling, mode)`` transposed to (batch, frames, bins), in float64."""
    n = (x.shape[-1] - frame_length) // frame_step + 1
    idx = np.arange(frame_length)[None, :] + frame_step * np.arange(n)[:, None]
    spec = np.fft.rfft(x[:, idx] * window, n=fft_length, axis=-1)
    scale = 1.0 / (window**2).sum() if scaling == "density" else 1.0 / window.sum() ** 2
    if mode == "psd":
        out = (spec.conj() * spec).real * scale
        last = -1 if fft_length % 2 == 0 else None
        out[..., 1:last] *= 2
        return out
    spec = spec * np.sqrt(scale)
    return np.abs(spec) if mode == "magnitude" else np.angle(spec)


ERROR_CASES = [
    ("density", "hann", False, 512, 256, 1024),
    ("spectrum", "blackman", True, 512, 32, 1024),
    ("spectrum", "hamming", True, 256, 192, 512),
    ("spectrum", "tukey", False, 512, 128, 512),
    ("density", "hamming", True, 256, 256, 256),
    ("density", "hann", True, 256, 128, 256),
]


@pytest.mark.parametrize("mode", ["magnitude", "psd", "angle"])
@pytest.mark.parametrize("scaling,window,periodic,length,step,fft", ERROR_CASES)
def test_spectrogram_error(scaling, window, periodic, length, step, fft, mode):
    """stft_spectrogram_test.py::test_spectrogram_error: every (scaling, window, periodic,
    frame_length, frame_step, fft_length) case, magnitude / psd within upstream's float32
    tolerance (atol 5e-4, rtol 1e-6), angle as upstream checks it (equal, modulo 2 pi, or
    in its cosine or sine, for all but 2e-4 of the values). A 16000-sample signal stands for
    upstream's 160000 (uniform noise either way)."""
    x = np.random.RandomState(41).uniform(-1, 1, size=(4, 16000)).astype("float32")
    values = _window(window, length, periodic)
    by_name = window in ("hann", "hamming")
    layer = pp.STFTSpectrogram(
        mode=mode,
        frame_length=length,
        frame_step=step,
        fft_length=fft,
        window=window if by_name else values.tolist(),
        periodic=periodic,
        scaling=scaling,
        data_format="channels_last",
        dtype="float32",
    )
    y = layer(torch.from_numpy(x[..., None])).numpy()
    y_true = _scipy_spectrogram(x.astype(np.float64), mode, scaling, values, length, step, fft)
    assert y.shape == y_true.shape
    if mode != "angle":
        np.testing.assert_allclose(y, y_true, atol=5e-4, rtol=1e-6)
        return
    tol = dict(atol=5e-4, rtol=1e-6)
    close = np.isclose(y, y_true, **tol)
    for shift in (2 * np.pi, -2 * np.pi):
        close |= np.isclose(y + shift, y_true, **tol)
    close |= np.isclose(np.cos(y), np.cos(y_true), **tol)
    close |= np.isclose(np.sin(y), np.sin(y_true), **tol)
    assert np.mean(~close) < 2e-4


def test_spectrogram_channels_broadcasting():
    """stft_spectrogram_test.py::test_spectrogram_channels_broadcasting: 7 channels give
    each channel's own spectrogram, concatenated (or stacked with expand_dims)."""
    audio = np.random.RandomState(41).uniform(-1, 1, size=(3, 16000, 7)).astype("float32")
    kwargs = dict(mode="psd", dtype="float32", data_format="channels_last")
    last = pp.STFTSpectrogram(**kwargs)(audio)
    expanded = pp.STFTSpectrogram(**kwargs, expand_dims=True)(audio)
    single = pp.STFTSpectrogram(**kwargs)
    singles = [single(audio[..., i : i + 1]) for i in range(7)]
    assert_values(last, torch.cat(singles, dim=-1), atol=1e-6, rtol=1e-6)
    assert_values(expanded, torch.stack(singles, dim=-1), atol=1e-6, rtol=1e-6)


def test_spectrogram_channels_first():
    """stft_spectrogram_test.py::test_spectrogram_channels_first: channels_first is
    channels_last transposed; plus its shape case (frame 150, step 10, fft 512, same
    padding, expand_dims) on (2, 3, 16000) (upstream 160000; frames = samples // 10)."""
    audio = np.random.RandomState(41).uniform(-1, 1, size=(3, 16000, 7)).astype("float32")
    first = pp.STFTSpectrogram(mode="psd", dtype="float32", data_format="channels_first")
    last = pp.STFTSpectrogram(mode="psd", dtype="float32", data_format="channels_last")
    expand = pp.STFTSpectrogram(
        mode="psd", dtype="float32", data_format="channels_first", expand_dims=True
    )
    single = pp.STFTSpectrogram(mode="psd", dtype="float32", data_format="channels_last")
    singles = [single(audio[..., i : i + 1]) for i in range(7)]
    channels_first = np.transpose(audio, [0, 2, 1])
    y_first = first(channels_first)
    assert_values(y_first.transpose(1, 2), last(audio), atol=1e-6, rtol=1e-6)
    assert_values(expand(channels_first), torch.stack(singles, dim=1), atol=1e-6, rtol=1e-6)
    assert_values(y_first, torch.cat(singles, dim=-1).transpose(1, 2), atol=1e-6, rtol=1e-6)
    layer = pp.STFTSpectrogram(
        frame_length=150,
        frame_step=10,
        fft_length=512,
        trainable=False,
        padding="same",
        expand_dims=True,
        data_format="channels_first",
    )
    assert tuple(layer(torch.rand(2, 3, 16000)).shape) == (2, 3, 16000 // 10, 257)
    assert list(layer.parameters()) == []


BASICS = [  # (kwargs, input shape, output shape); upstream's shapes, 160000 -> 16000
    (
        dict(frame_length=500, frame_step=25, fft_length=1024, mode="stft"),
        (2, 16000, 1),
        (2, 15500 // 25 + 1, 513 * 2),
    ),
    (
        dict(frame_length=150, frame_step=71, fft_length=4096, mode="real"),
        (2, 16000, 1),
        (2, 15850 // 71 + 1, 2049),
    ),
    (
        dict(frame_length=150, frame_step=43, fft_length=512, mode="imag", padding="same"),
        (2, 16000, 1),
        (2, 16000 // 43 + 1, 257),
    ),
    (
        dict(frame_length=150, frame_step=10, fft_length=512, trainable=False, padding="same"),
        (2, 16000, 3),
        (2, 16000 // 10, 257 * 3),
    ),
    (
        dict(
            frame_length=150,
            frame_step=10,
            fft_length=512,
            trainable=False,
            padding="same",
            expand_dims=True,
        ),
        (2, 16000, 3),
        (2, 16000 // 10, 257, 3),
    ),
]


@pytest.mark.parametrize("kwargs,shape,expected", BASICS)
def test_spectrogram_basics(kwargs, shape, expected):
    """stft_spectrogram_test.py::test_spectrogram_basics: output shapes (channels_last);
    the STFT kernels are buffers, not weights (D-K-7)."""
    layer = pp.STFTSpectrogram(**kwargs, data_format="channels_last")
    assert tuple(layer(torch.rand(shape)).shape) == expected
    assert list(layer.parameters()) == [] and list(layer.state_dict()) == []


def test_spectrogram_dynamic_shape():
    """stft_spectrogram_test.py::test_spectrogram_dynamic_shape: one layer, batches of
    different sizes and lengths."""
    layer = pp.STFTSpectrogram(
        frame_length=500, frame_step=25, fft_length=1024, mode="stft", data_format="channels_last"
    )
    assert tuple(layer(torch.rand(2, 16000, 1)).shape) == (2, 621, 1026)
    assert tuple(layer(torch.rand(3, 8000, 1)).shape) == (3, 301, 1026)


def test_tf_data_compatibility():
    """stft_spectrogram_test.py::test_tf_data_compatibility: in a pipeline's map."""
    layer = pp.STFTSpectrogram(
        frame_length=256,
        frame_step=128,
        fft_length=715,
        padding="same",
        scaling=None,
        data_format="channels_last",
    )
    data = np.random.default_rng(0).random((2, 16000, 1)).astype("float32")
    out = next(iter(dp.from_tensor_slices(data).batch(2).map(layer)))
    assert tuple(out.shape) == (2, 16000 // 128, 358)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(frame_length=256, frame_step=1024, fft_length=512),
        dict(frame_length=256, frame_step=0, fft_length=512),
        dict(frame_length=256, frame_step=32, fft_length=128),
        dict(padding="mypadding"),
        dict(scaling="l2"),
        dict(mode="spectrogram"),
        dict(window="unknowable"),
        dict(padding="divide"),
    ],
)
def test_exceptions(kwargs):
    """stft_spectrogram_test.py::test_exceptions: bad arguments."""
    with pytest.raises(ValueError):
        pp.STFTSpectrogram(**kwargs)


def test_exceptions_integer_input():
    """stft_spectrogram_test.py::test_exceptions: integer audio (Keras: TypeError; here a
    ValueError naming the dtype: D-K-3)."""
    with pytest.raises(ValueError, match="must be float16, float32 or float64"):
        pp.STFTSpectrogram()(np.random.default_rng(1).integers(0, 255, size=(2, 16000, 1)))
