"""Counter-based random draws: reproducible from a seed, with no generator object.

A seeded layer keeps one int64 counter (a buffer). Draw number ``c`` of a layer with seed
``s`` is a pure function of ``(s, c, index)``: SplitMix64's finaliser (Steele, Lea and
Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014) applied to
``(key + index) * golden``, with ``key = mix(s) + c * golden'``: SplitMix64's stream started
at state ``key * golden``. Everything is int64 tensor
arithmetic on the input's device, so ``torch.compile(fullgraph=True)`` traces it (a
``torch.Generator`` is an opaque object that Dynamo refuses) and the compiled and eager
streams are bit-identical. Eager draws of a few values for the CPU take the same
arithmetic in numpy's uint64 (same bits, a tenth of the per-call cost).

torch's int64 shifts are arithmetic, so logical shifts are written as shift-and-mask;
int64 products wrap modulo 2**64 on every backend, which is what the mixer needs.
"""

from __future__ import annotations

import math

import numpy as np
import torch

_MASK64 = (1 << 64) - 1


def _signed(value: int) -> int:
    """The int64 with the same 64 bits as the unsigned ``value``."""
    value &= _MASK64
    return value - (1 << 64) if value >> 63 else value


_GOLDEN = _signed(0x9E3779B97F4A7C15)  # 2**64 / golden ratio: SplitMix64's increment
_STREAM = _signed(0xD1B54A32D192ED03)  # a second odd constant: separates draw numbers
_C1 = _signed(0xBF58476D1CE4E5B9)
_C2 = _signed(0x94D049BB133111EB)


def _lsr(x: torch.Tensor, shift: int) -> torch.Tensor:
    """Logical right shift of int64 bits."""
    return (x >> shift) & ((1 << (64 - shift)) - 1)


def mix64(x: torch.Tensor) -> torch.Tensor:
    """SplitMix64's finaliser: a bijection of 64-bit values with full avalanche."""
    x = x ^ _lsr(x, 30)
    x = x * _C1
    x = x ^ _lsr(x, 27)
    x = x * _C2
    return x ^ _lsr(x, 31)


def _mix64_int(value: int) -> int:
    """``mix64`` of one Python int (as a signed int64)."""
    x = value & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return _signed(x ^ (x >> 31))


def hashed_uniform(
    seed: int, counter: torch.Tensor | int, shape: tuple[int, ...], device: torch.device
) -> torch.Tensor:
    """float32 draws from U[0, 1) of ``shape`` for draw number ``counter`` of ``seed``.

    24 random bits per value (float32's mantissa), so every value is a multiple of 2**-24
    and 1.0 never occurs. An eager draw of up to ``HOST_DRAW_MAX`` values for the CPU is
    computed with numpy (``_hashed_uniform_host``, bit-identical): the same dozen integer
    ops as torch kernels cost ~10 us of dispatch each, numpy's ~1 us on a few hundred
    values (measured: 140 us -> 20 us per draw of 2 x 64 values, 2 threads).
    """
    n = math.prod(shape)
    host = torch.device(device).type == "cpu" and n <= HOST_DRAW_MAX
    if host and not torch.compiler.is_compiling():
        if isinstance(counter, torch.Tensor):
            if counter.device.type != "cpu":  # reading it would wait for the device
                return _hashed_uniform_torch(seed, counter, shape, device)
            counter = int(counter)
        return _hashed_uniform_host(seed, counter, shape)
    return _hashed_uniform_torch(seed, counter, shape, device)


HOST_DRAW_MAX = 1 << 16  # values; numpy is single-threaded, torch's kernels are not


def _stream_key(seed: int, counter: int) -> int:
    """``counter * _STREAM + mix64(seed)`` modulo 2**64 (the key ``hashed_uniform`` uses)."""
    return (int(counter) * _STREAM + _mix64_int(int(seed))) & _MASK64


def _hashed_uniform_host(seed: int, counter: int, shape: tuple[int, ...]) -> torch.Tensor:
    """``hashed_uniform`` on the host with numpy's uint64 arithmetic (which wraps modulo
    2**64 and shifts logically): the same bits as the int64 tensor version."""
    u64 = np.uint64
    bits = np.arange(1, math.prod(shape) + 1, dtype=np.uint64)
    bits += u64(_stream_key(seed, counter))
    bits *= u64(_GOLDEN & _MASK64)
    bits ^= bits >> u64(30)
    bits *= u64(_C1 & _MASK64)
    bits ^= bits >> u64(27)
    bits *= u64(_C2 & _MASK64)
    bits ^= bits >> u64(31)
    values = (bits >> u64(40)).astype(np.float32) * np.float32(2.0**-24)
    return torch.from_numpy(values).view(shape)


def _hashed_uniform_torch(
    seed: int, counter: torch.Tensor | int, shape: tuple[int, ...], device: torch.device
) -> torch.Tensor:
    """``hashed_uniform`` as int64 tensor arithmetic on ``device`` (traceable, no sync)."""
    if isinstance(counter, torch.Tensor):
        c = counter.to(device=device, dtype=torch.int64)
    else:
        c = torch.tensor(int(counter), dtype=torch.int64, device=device)
    # The seed is mixed once, in Python (a constant under torch.compile); draws of one
    # seed start 0.82 * 2**64 states apart, and different seeds at unrelated places.
    key = c * _STREAM + _mix64_int(int(seed))
    n = math.prod(shape)
    index = torch.arange(1, n + 1, dtype=torch.int64, device=device)
    # (index + key) * golden, not index * golden + key: Inductor folds arange times a
    # constant into a symbolic index expression and overflows int64 evaluating it.
    bits = mix64((index + key) * _GOLDEN)
    return (_lsr(bits, 40).to(torch.float32) * (2.0**-24)).view(shape)


def box_muller(u1: torch.Tensor, u2: torch.Tensor) -> torch.Tensor:
    """Standard normal draws from two independent U[0, 1) tensors (Box and Muller, 1958)."""
    radius = torch.sqrt(-2.0 * torch.log1p(-u1))  # 1 - u1 lies in (0, 1]: log is finite
    return radius * torch.cos((2.0 * math.pi) * u2)


def derive_seed(seed: int | None, index: int) -> int | None:
    """The seed of sub-layer ``index`` of a layer seeded with ``seed`` (None stays None).

    Keras hands its composite layers' seed unchanged to every sub-layer; with counter-based
    draws that would make the sub-layers' draws equal, so each gets a hash of (seed, index)
    instead: unrelated streams, still a pure function of the layer's seed.
    """
    if seed is None:
        return None
    return _mix64_int(int(seed) + (index + 1) * _STREAM)


GAMMA_TRIES = 10  # Marsaglia-Tsang candidates per draw (each accepted with p > 0.95)


def log_standard_gamma(
    alpha: torch.Tensor, normals: torch.Tensor, uniforms: torch.Tensor, boost: torch.Tensor
) -> torch.Tensor:
    """``log`` of Gamma(``alpha``, 1) draws, shape ``alpha.shape``, from fixed inputs.

    Marsaglia and Tsang, "A simple method for generating gamma variables" (ACM TOMS 26(3),
    2000): candidate ``d * v`` with ``d = a - 1/3``, ``v = (1 + z / sqrt(9 d))**3``, kept
    when ``log U < z**2 / 2 + d - d v + d log v``. ``normals`` / ``uniforms`` (shape
    ``(T, *alpha.shape)``, N(0, 1) and U[0, 1)) hold T candidates; the first kept one is
    taken, so the draw is a fixed amount of tensor work (no loop: ``torch.compile``
    traces it). Each candidate is kept with probability above 0.95 for ``a >= 1``, so all
    ten fail with probability below 1e-13; then ``v = 1`` (the mode) is taken. A shape
    below 1 uses the paper's boost ``Gamma(a) = Gamma(a + 1) * U**(1/a)`` with ``boost``
    (U[0, 1), shape ``alpha.shape``), in logs so that small shapes cannot underflow.
    """
    boosted = alpha < 1.0
    a = torch.where(boosted, alpha + 1.0, alpha)
    d = a - 1.0 / 3.0
    c = torch.rsqrt(9.0 * d)
    v = (1.0 + c * normals) ** 3
    log_v = torch.log(v.clamp_min(1e-30))
    # 1 - U lies in (0, 1]: its log is finite.
    keep = (v > 0) & (torch.log1p(-uniforms) < 0.5 * normals**2 + d - d * v + d * log_v)
    first = keep.to(torch.int8).argmax(dim=0, keepdim=True)
    chosen = torch.where(keep.any(dim=0), log_v.gather(0, first).squeeze(0), 0.0)
    extra = torch.where(boosted, torch.log1p(-boost) / alpha, 0.0)
    return torch.log(d) + chosen + extra


def beta_from_gammas(log_gamma_a: torch.Tensor, log_gamma_b: torch.Tensor) -> torch.Tensor:
    """Beta(a, b) = G_a / (G_a + G_b) for independent Gamma draws, from their logs
    (a sigmoid of the difference: no overflow or 0 / 0 however small the shapes)."""
    return torch.sigmoid(log_gamma_a - log_gamma_b)
