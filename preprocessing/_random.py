"""Counter-based random draws: reproducible from a seed, with no generator object.

A seeded layer keeps one int64 counter (a buffer). Draw number ``c`` of a layer with seed
``s`` is a pure function of ``(s, c, index)``: SplitMix64's finaliser (Steele, Lea and
Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014) applied to
``(key + index) * golden``, with ``key = mix(s) + c * golden'``: SplitMix64's stream started
at state ``key * golden``. Everything is int64 tensor
arithmetic on the input's device, so ``torch.compile(fullgraph=True)`` traces it (a
``torch.Generator`` is an opaque object that Dynamo refuses) and the compiled and eager
streams are bit-identical.

torch's int64 shifts are arithmetic, so logical shifts are written as shift-and-mask;
int64 products wrap modulo 2**64 on every backend, which is what the mixer needs.
"""

from __future__ import annotations

import math

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
    and 1.0 never occurs.
    """
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
