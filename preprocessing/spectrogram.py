"""MelSpectrogram and STFTSpectrogram (Keras 3's audio layers) in torch.

Both compute in torch from their arguments alone (no state to adapt), run on the input's
device and export with ``torch.export``. Windows: ``"hann"``, ``"hamming"`` (TensorFlow's
and scipy's formulas, which torch's ``hann_window`` / ``hamming_window`` share), None, or
an explicit list of values; Keras's STFTSpectrogram also takes any other scipy window
name, which is not supported here (a ``ValueError`` names the supported ones).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from . import _categorical as cat
from ._targets import as_tensor
from .base import MAX_FFT_LENGTH, MAX_MEL_BINS, MAX_STFT_LENGTH, Layer, check_bool

_MEL_BREAK_FREQUENCY_HERTZ = 700.0
_MEL_HIGH_FREQUENCY_Q = 1127.0
_KERAS_EPSILON = 1e-7  # keras.backend.epsilon()
WINDOWS = ("hann", "hamming")


def make_window(layer: Layer, window: Any, length: int, periodic: bool) -> torch.Tensor | None:
    """float64 window of ``length`` samples (None: no window)."""
    if window is None:
        return None
    if isinstance(window, str):
        if window not in WINDOWS:
            layer._fail("window", f"must be one of {WINDOWS}, None or a list of values", window)
        make = torch.hann_window if window == "hann" else torch.hamming_window
        return make(length, periodic=periodic, dtype=torch.float64)
    values = torch.tensor(cat.finite_floats(layer, "window", window), dtype=torch.float64)
    if values.ndim != 1 or values.numel() != length:
        layer._fail("window", f"must have {length} values", len(values))
    return values


def _hertz_to_mel(hz: torch.Tensor) -> torch.Tensor:
    return _MEL_HIGH_FREQUENCY_Q * torch.log(1.0 + hz / _MEL_BREAK_FREQUENCY_HERTZ)


def linear_to_mel_weight_matrix(
    num_mel_bins: int, num_spectrogram_bins: int, sampling_rate: float, lower: float, upper: float
) -> torch.Tensor:
    """Keras's (and ``tf.signal``'s) HTK mel filterbank ``(spectrogram bins, mel bins)``,
    float32: triangles linear in mel between ``num_mel_bins + 2`` equally spaced edges;
    the DC bin gets no weight."""
    f32 = torch.float32
    nyquist = torch.tensor(sampling_rate, dtype=f32) / 2.0
    linear = torch.linspace(0.0, float(nyquist), num_spectrogram_bins, dtype=f32)[1:]
    bins_mel = _hertz_to_mel(linear).unsqueeze(1)
    edges = torch.linspace(
        float(_hertz_to_mel(torch.tensor(lower, dtype=f32))),
        float(_hertz_to_mel(torch.tensor(upper, dtype=f32))),
        num_mel_bins + 2,
        dtype=f32,
    )
    lower_mel, center, upper_mel = edges[:-2], edges[1:-1], edges[2:]
    lower_slopes = (bins_mel - lower_mel) / (center - lower_mel)
    upper_slopes = (upper_mel - bins_mel) / (upper_mel - center)
    weights = torch.clamp(torch.minimum(lower_slopes, upper_slopes), min=0.0)
    return F.pad(weights, (0, 0, 1, 0))


def _positive_int(layer: Layer, name: str, value: Any, high: int) -> int:
    return cat.check_int(layer, name, value, 1, high=high)


def _positive_float(layer: Layer, name: str, value: Any, allow_zero: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        layer._fail(name, "must be a finite number " + (">= 0" if allow_zero else "> 0"), value)
    return float(value)


class MelSpectrogram(Layer):
    """Mel spectrogram of audio (Keras 3's ``keras.layers.MelSpectrogram``).

    The signal is reflect-padded by ``fft_length // 2`` on both sides, cut into frames of
    ``fft_length`` samples every ``sequence_stride`` samples, windowed (a periodic window
    of ``sequence_length`` samples centred in the frame), Fourier-transformed; the
    magnitude to the power ``mag_exp`` is mapped to ``num_mel_bins`` HTK mel bands and,
    with ``power_to_db``, turned into decibels ``10 log10(max(x, min_power) /
    max(ref_power, min_power))`` floored at ``max - top_db`` (the maximum over the whole
    call's output, batch included, as Keras).

    Args: Keras's, with its defaults: ``fft_length=2048``, ``sequence_stride=512``,
    ``sequence_length=None`` (= ``fft_length``), ``window="hann"``, ``sampling_rate=16000``
    (Hz), ``num_mel_bins=128``, ``min_freq=20.0`` / ``max_freq=None`` (Hz; None: half the
    sampling rate), ``power_to_db=True``, ``top_db=80.0``, ``mag_exp=2.0``,
    ``min_power=1e-10``, ``ref_power=1.0``, ``dtype`` (a dtype policy name: the input is
    cast to its compute dtype first; None: see Output); ``**kwargs``: Keras's base-layer
    arguments (see ``Layer``). Bounds (``preprocessing.base``; Keras has none, and 10**9
    allocated gigabytes before torch failed): ``fft_length``, ``sequence_length`` and
    ``sequence_stride`` at most 65,536 samples (``MAX_FFT_LENGTH``), ``num_mel_bins`` at
    most 1,024 (``MAX_MEL_BINS``).

    Input: float audio ``(time,)`` or ``(batch, time)`` (other dtypes become float32).
    Output: ``(..., num_mel_bins, frames)`` float32 (float64 input stays float64), frames
    ``1 + time // sequence_stride``. Matches Keras's TensorFlow backend within 1e-4 of the
    output's largest magnitude (float32 FFTs round differently; about 1e-3 dB).

    Raises:
        ValueError: bad arguments (named), input of another rank or shorter than
            ``fft_length // 2 + 1`` samples (reflect padding needs them).

    Example:
        >>> layer = MelSpectrogram(fft_length=64, sequence_stride=16, num_mel_bins=8,
        ...                        sampling_rate=8000)
        >>> layer(torch.zeros(2, 160)).shape
        torch.Size([2, 8, 11])
    """

    _image_layer = False  # not a Keras image layer: no bounding_box_format

    _checks_layout = False

    # buffers (register_buffer), declared for type checkers
    _window: torch.Tensor
    _mel: torch.Tensor

    def __init__(
        self,
        fft_length: int = 2048,
        sequence_stride: int = 512,
        sequence_length: int | None = None,
        window: str | list[float] | None = "hann",
        sampling_rate: int = 16000,
        num_mel_bins: int = 128,
        min_freq: float = 20.0,
        max_freq: float | None = None,
        power_to_db: bool = True,
        top_db: float = 80.0,
        mag_exp: float = 2.0,
        min_power: float = 1e-10,
        ref_power: float = 1.0,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype=dtype, **kwargs)
        self.fft_length = _positive_int(self, "fft_length", fft_length, MAX_FFT_LENGTH)
        self.sequence_stride = _positive_int(
            self, "sequence_stride", sequence_stride, MAX_FFT_LENGTH
        )
        self.sequence_length = _positive_int(
            self,
            "sequence_length",
            fft_length if sequence_length is None else sequence_length,
            MAX_FFT_LENGTH,
        )
        if self.sequence_length > self.fft_length:
            self._fail("fft_length", "must be >= sequence_length", (fft_length, sequence_length))
        self.window = window if window is None or isinstance(window, str) else list(window)
        self.sampling_rate = cat.check_int(self, "sampling_rate", sampling_rate, 1)
        self.num_mel_bins = _positive_int(self, "num_mel_bins", num_mel_bins, MAX_MEL_BINS)
        self.min_freq = _positive_float(self, "min_freq", min_freq, allow_zero=True)
        self.max_freq = _positive_float(
            self, "max_freq", int(sampling_rate / 2) if max_freq is None else max_freq
        )
        if self.min_freq >= self.max_freq:
            self._fail("min_freq", "must be below max_freq", (min_freq, self.max_freq))
        self.power_to_db = check_bool(self, "power_to_db", power_to_db)
        self.top_db = _positive_float(self, "top_db", top_db, allow_zero=True)
        self.mag_exp = _positive_float(self, "mag_exp", mag_exp)
        self.min_power = _positive_float(self, "min_power", min_power)
        self.ref_power = float(ref_power)
        win = make_window(self, window, self.sequence_length, periodic=True)
        if win is None:
            win = torch.ones(self.sequence_length, dtype=torch.float64)
        left = (self.fft_length - self.sequence_length) // 2
        win = F.pad(win, (left, self.fft_length - self.sequence_length - left))
        # Derived from the arguments: not state, so not in state_dict.
        self.register_buffer("_window", win.to(torch.float32), persistent=False)
        mel = linear_to_mel_weight_matrix(
            self.num_mel_bins,
            self.fft_length // 2 + 1,
            self.sampling_rate,
            self.min_freq,
            self.max_freq,
        )
        self.register_buffer("_mel", mel, persistent=False)

    def forward(self, inputs: Any) -> torch.Tensor:  # type: ignore[override]  # no generator
        x = as_tensor(inputs)
        if x.ndim not in (1, 2):
            self._fail("input", "must have shape (time,) or (batch, time)", tuple(x.shape))
        if self.compute_dtype is not None:  # a dtype policy: Keras computes in it
            x = x.to(self.compute_dtype)
        elif x.dtype != torch.float64:
            x = x.to(torch.float32)
        pad = self.fft_length // 2
        if x.shape[-1] <= pad:
            self._fail("input", f"needs more than {pad} samples (reflect padding)", x.shape[-1])
        if x.numel() == 0:  # no signal: the FFT library refuses a batch of 0
            n_frames = (x.shape[-1] + 2 * pad - self.fft_length) // self.sequence_stride + 1
            return x.new_zeros(*x.shape[:-1], self.num_mel_bins, n_frames)
        batch = x.reshape(-1, 1, x.shape[-1])
        padded = F.pad(batch, (pad, pad), mode="reflect").squeeze(1)
        frames = padded.unfold(-1, self.fft_length, self.sequence_stride)
        spec = torch.fft.rfft(frames * self._window.to(x.dtype), dim=-1).abs()
        spec = spec.pow(self.mag_exp)
        mel = torch.tensordot(spec, self._mel.to(x.dtype), dims=1)
        if self.power_to_db:
            mel = self._db(mel)
        out = mel.transpose(-1, -2)
        return out.reshape(*x.shape[:-1], *out.shape[-2:])

    def _db(self, power: torch.Tensor) -> torch.Tensor:
        log_spec = 10.0 * torch.log10(power.clamp_min(self.min_power))
        log_spec = log_spec - 10.0 * math.log10(max(abs(self.ref_power), self.min_power))
        return torch.maximum(log_spec, log_spec.amax() - self.top_db)


class STFTSpectrogram(Layer):
    """Short-time Fourier transform of multichannel signals (Keras 3's STFTSpectrogram).

    Frames of ``frame_length`` samples every ``frame_step`` samples are windowed and
    Fourier-transformed with ``fft_length // 2 + 1`` bins, as Keras does: a strided
    convolution with cosine and sine kernels scaled by the window (``scaling="density"``:
    divided by the window's L2 norm, ``"spectrum"``: by its L1 norm, None: unscaled).

    Args: Keras's, with its defaults: ``mode`` (``"log"``: log magnitude, ``"magnitude"``,
    ``"psd"``: power with the non-DC / non-Nyquist bins doubled, ``"real"``, ``"imag"``,
    ``"angle"``, ``"stft"``: real then imaginary bins), ``frame_length=256``,
    ``frame_step=None`` (``frame_length // 2``), ``fft_length=None`` (the next power of
    two), ``window="hann"``, ``periodic=False`` (symmetric window), ``scaling="density"``,
    ``padding="valid"`` or ``"same"`` (TensorFlow's), ``expand_dims=False``,
    ``data_format`` (None: the package default, ``channels_first``), ``dtype`` (a dtype
    policy name: the input is cast to its compute dtype first; None: float dtypes are
    kept); ``**kwargs``: Keras's base-layer arguments (see ``Layer``). Bounds:
    ``frame_length`` and ``fft_length`` at most 8,192 samples
    (``preprocessing.base.MAX_STFT_LENGTH``: the cosine and sine kernels hold ``2 *
    (fft_length // 2 + 1) * frame_length`` float32 values, 268 MiB there; Keras has no
    bound).

    Input: float ``(batch, channels, time)`` (``channels_first``) or
    ``(batch, time, channels)``. Output (``channels_first``): ``(batch, channels * bins,
    frames)``, or ``(batch, channels, frames, bins)`` with ``expand_dims``;
    ``channels_last``: ``(batch, frames, channels * bins)`` or ``(batch, frames, bins,
    channels)``. ``bins`` is ``fft_length // 2 + 1`` (twice that for ``"stft"``). Float
    dtypes are kept. Matches Keras within 1e-4 (relative) on float32.

    Raises:
        ValueError: bad arguments (named: ``frame_step`` above ``frame_length``,
            ``fft_length`` below it, an unknown mode/window/scaling/padding), input of
            another rank, or (``padding="valid"``) fewer samples than ``frame_length``.

    Example:
        >>> layer = STFTSpectrogram(mode="magnitude", frame_length=16, frame_step=8)
        >>> layer(torch.zeros(2, 3, 64)).shape
        torch.Size([2, 27, 7])
    """

    _image_layer = False  # not a Keras image layer: no bounding_box_format

    MODES = ("log", "magnitude", "psd", "real", "imag", "angle", "stft")

    # buffers (register_buffer), declared for type checkers
    _real: torch.Tensor
    _imag: torch.Tensor

    def __init__(
        self,
        mode: str = "log",
        frame_length: int = 256,
        frame_step: int | None = None,
        fft_length: int | None = None,
        window: str | list[float] | None = "hann",
        periodic: bool = False,
        scaling: str | None = "density",
        padding: str = "valid",
        expand_dims: bool = False,
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data_format=data_format, dtype=dtype, **kwargs)
        self.mode = cat.check_choice(self, "mode", mode, self.MODES)
        self.frame_length = _positive_int(self, "frame_length", frame_length, MAX_STFT_LENGTH)
        self.frame_step = cat.check_int(
            self, "frame_step", frame_step, 1, optional=True, high=MAX_STFT_LENGTH
        )
        if frame_step is not None and frame_step > frame_length:
            self._fail("frame_step", "must not exceed frame_length", frame_step)
        self.fft_length = cat.check_int(
            self, "fft_length", fft_length, 1, optional=True, high=MAX_STFT_LENGTH
        )
        if fft_length is not None and fft_length < frame_length:
            self._fail("fft_length", "must be >= frame_length", fft_length)
        self._step = frame_step or self.frame_length // 2
        self._fft = fft_length or 2 ** int(math.ceil(math.log2(frame_length)))
        self.window = window if window is None or isinstance(window, str) else list(window)
        self.periodic = check_bool(self, "periodic", periodic)
        if scaling is not None and scaling not in ("density", "spectrum"):
            self._fail("scaling", "must be 'density', 'spectrum' or None", scaling)
        self.scaling = scaling
        self.padding = cat.check_choice(self, "padding", padding, ("valid", "same"))
        self.expand_dims = check_bool(self, "expand_dims", expand_dims)
        real, imag = self._kernels(make_window(self, window, self.frame_length, self.periodic))
        self.register_buffer("_real", real, persistent=False)
        self.register_buffer("_imag", imag, persistent=False)

    def _kernels(self, win: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Keras's ``initializers.STFT`` kernels as conv1d weights ``(bins, 1, frame)``."""
        bins = self._fft // 2 + 1
        f32 = torch.float32
        freq = torch.arange(bins, dtype=f32).reshape(1, bins) / ((bins - 1) * 2)
        time = torch.arange(self.frame_length, dtype=f32).reshape(-1, 1)
        args = (-2 * time) * freq * torch.arccos(torch.tensor(-1.0, dtype=f32))
        real, imag = torch.cos(args), torch.sin(args)
        if win is not None:
            w = win.to(f32).reshape(-1, 1)
            scale: float | torch.Tensor = 1.0
            if self.scaling == "density":
                scale = w.square().sum().sqrt()
            elif self.scaling == "spectrum":
                scale = w.abs().sum()
            real, imag = real * w / scale, imag * w / scale
        return real.T.unsqueeze(1).contiguous(), imag.T.unsqueeze(1).contiguous()

    def _conv(self, x: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
        """``(batch, channels, time) -> (batch, channels, bins, frames)``."""
        b, c, t = x.shape
        flat = x.reshape(b * c, 1, t)
        if self.padding == "same":  # TensorFlow's: the extra sample goes to the right
            frames = -(-t // self._step)
            total = max((frames - 1) * self._step + self.frame_length - t, 0)
            flat = F.pad(flat, (total // 2, total - total // 2))
        out = F.conv1d(flat, kernel.to(x.dtype), stride=self._step)
        return out.reshape(b, c, out.shape[1], out.shape[2])

    def _layout(self, out: torch.Tensor) -> torch.Tensor:
        b, c, f, t = out.shape
        if self.data_format == "channels_last":
            if self.expand_dims:
                return out.permute(0, 3, 2, 1)
            return out.reshape(b, c * f, t).transpose(1, 2)
        if self.expand_dims:
            return out.transpose(2, 3)
        return out.reshape(b, c * f, t)

    def forward(self, inputs: Any) -> torch.Tensor:  # type: ignore[override]  # no generator
        x = as_tensor(inputs)
        if x.ndim != 3:
            self._fail(
                "input",
                "must be rank 3 (batch, channels, time) / (batch, time, channels)",
                tuple(x.shape),
            )
        if not x.is_floating_point():
            self._fail("input", "must be float16, float32 or float64", f"dtype {x.dtype}")
        if self.compute_dtype is not None:  # a dtype policy: Keras computes in it
            x = x.to(self.compute_dtype)
        if self.data_format == "channels_last":
            x = x.transpose(1, 2)
        if self.padding == "valid" and x.shape[-1] < self.frame_length:
            self._fail(
                "input",
                f"must hold at least frame_length={self.frame_length} samples with "
                "padding='valid' (or use padding='same')",
                f"{x.shape[-1]} samples",
            )
        if self.mode == "real":
            return self._layout(self._conv(x, self._real))
        if self.mode == "imag":
            return self._layout(self._conv(x, self._imag))
        real, imag = self._conv(x, self._real), self._conv(x, self._imag)
        if self.mode == "angle":
            return self._layout(torch.atan2(imag, real))
        if self.mode == "stft":
            return self._layout(torch.cat([real, imag], dim=2))
        power = real.square() + imag.square()
        if self.mode == "psd":
            return self._layout(power + F.pad(power[:, :, 1:-1, :], (0, 0, 1, 1)))
        magnitude = self._layout(power.clamp_min(_KERAS_EPSILON).sqrt())
        if self.mode == "magnitude":
            return magnitude
        return magnitude.clamp_min(_KERAS_EPSILON).log()
