"""TensorFlow's string hashes in torch: FarmHash64 fingerprints, SipHash-2-4, hash buckets.

``tf.strings.to_hash_bucket_fast`` (Keras's ``Hashing`` without a salt, and the OOV buckets
of the lookup layers) is ``Fingerprint64(s) % num_buckets`` where ``Fingerprint64`` is
FarmHash's ``farmhashna::Hash64`` (google/farmhash, ``src/farmhash.cc``, MIT licence);
``tf.strings.to_hash_bucket_strong`` (with a salt) is ``SipHash-2-4(key, s) % num_buckets``
(Aumasson & Bernstein 2012; TensorFlow calls highwayhash's ``SipHash``);
``tf.sparse.cross_hashed`` (``HashedCrossing``) chains ``FingerprintCat64``
(``tensorflow/core/platform/fingerprint.h``). Integers are hashed as TensorFlow's
``tf.strings.as_string`` writes them (decimal, ``-`` for negatives).

Every function works on a batch of byte strings held as a zero-padded ``uint8`` matrix
``(N, width)`` plus an ``int64`` length vector, vectorised over the rows, with 64-bit
unsigned arithmetic done in ``int64`` (two's complement wraps the same way; right shifts
are masked to be logical). The same code runs on numpy arrays (strings, eagerly: numpy's
per-op cost on small arrays is a fraction of torch's) and on torch tensors (integers, on
any device, and under ``torch.export``). Nothing branches on data for strings of at
most 64 bytes, so ``torch.export`` traces the integer path (decimal strings have at most
20 bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from . import _hash_native


def _s64(value: int) -> int:
    """An unsigned 64-bit constant as the int64 with the same bits."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


K0 = _s64(0xC3A5C85C97CB3127)
K1 = _s64(0xB492B66FBE98F273)
K2 = _s64(0x9AE16A3B2F90404F)
_KMUL = _s64(0xC6A4A7935BD1E995)  # FingerprintCat64's multiplier
CROSS_HASH_KEY = 0xDECAFCAFFE  # tf.sparse.cross_hashed's default hash_key


def _xp(x):
    """numpy for numpy arrays (the eager string path: numpy's small-array ops cost a
    fraction of torch's, and never wait on intra-op threads), torch for tensors."""
    return np if isinstance(x, np.ndarray) else torch


def _where(cond, a, b):
    return _xp(cond).where(cond, a, b)


def shr(x: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 bits (``>>`` on int64 is arithmetic)."""
    return (x >> s) & ((1 << (64 - s)) - 1)


def rotr(x: torch.Tensor, s: int) -> torch.Tensor:
    return shr(x, s) | (x << (64 - s))


def rotl(x: torch.Tensor, s: int) -> torch.Tensor:
    return (x << s) | shr(x, 64 - s)


def shift_mix(x: torch.Tensor) -> torch.Tensor:
    return x ^ shr(x, 47)


# ----------------------------------------------------------------------------- bytes
def strings_to_bytes(
    strings: Sequence | np.ndarray, encoding: str = "utf-8"
) -> tuple[np.ndarray, np.ndarray]:
    """``(uint8 matrix (N, width), int64 lengths (N,))`` of str/bytes values; str values are
    encoded with ``encoding``. ``width`` (the longest length, at least 8, plus 8) leaves
    room for the widest 8-byte read. A numpy
    ``U`` array of ASCII text is converted without a Python loop."""
    if isinstance(strings, np.ndarray) and strings.dtype.kind == "U" and strings.size:
        fast = _ascii_bytes(strings.reshape(-1), encoding)
        if fast is not None:
            return fast
        strings = strings.reshape(-1).tolist()
    encoded = [s if isinstance(s, bytes) else str(s).encode(encoding) for s in strings]
    lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded))
    width = max(int(lengths.max()) if len(encoded) else 0, 8) + 8
    # One bytes_ array, viewed as a (N, width) matrix: no Python loop over bytes.
    flat = np.array(encoded, dtype=f"S{width}")
    matrix = np.frombuffer(flat.tobytes(), dtype=np.uint8).reshape(len(encoded), width)
    return matrix.copy(), lengths


def _ascii_bytes(arr: np.ndarray, encoding: str) -> tuple[np.ndarray, np.ndarray] | None:
    """A 1-D ``U`` array's code points are its bytes when all are ASCII (UTF-8 and the other
    ASCII-compatible encodings agree there); None otherwise."""
    if encoding.lower().replace("_", "-") not in ("utf-8", "utf8", "ascii", "latin-1"):
        return None
    chars = arr.dtype.itemsize // 4
    arr = np.ascontiguousarray(arr)  # a column of a 2-D array is strided: view needs rows
    codes = arr.view(np.uint32).reshape(len(arr), chars)
    if codes.max() >= 128:
        return None
    # numpy pads with NUL; a NUL inside the text still counts: length = last non-NUL + 1.
    nonzero = codes != 0
    lengths = np.where(nonzero.any(axis=1), chars - np.argmax(nonzero[:, ::-1], axis=1), 0)
    matrix = np.zeros((len(arr), max(chars, 8) + 8), dtype=np.uint8)
    matrix[:, :chars] = codes
    return matrix, lengths.astype(np.int64)


def int64_to_decimal(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``tf.strings.as_string`` of int64 values as a byte matrix ``(N, 28)`` and lengths."""
    x = values.reshape(-1).to(torch.int64)
    neg = x < 0
    n = torch.where(neg, x, -x)  # <= 0: int64's minimum has no positive counterpart
    digits = []
    for _ in range(19):  # least significant first
        digits.append(-torch.fmod(n, 10))
        n = torch.div(n, 10, rounding_mode="trunc")
    d = torch.stack(digits, dim=1)  # (N, 19)
    nonzero = (d != 0).to(torch.int64) * torch.arange(1, 20, dtype=torch.int64, device=x.device)
    ndigits = nonzero.amax(dim=1).clamp_min(1)
    length = ndigits + neg.to(torch.int64)
    pos = torch.arange(28, dtype=torch.int64, device=x.device).unsqueeze(0)  # 20 + 8
    k = (length.unsqueeze(1) - 1 - pos).clamp(0, 18)
    digit = torch.gather(d, 1, k) + 48
    byte = torch.where(neg.unsqueeze(1) & (pos == 0), 45, digit)
    byte = torch.where(pos < length.unsqueeze(1), byte, 0)
    return byte.to(torch.uint8), length


def byte_words(b):
    """``(N, width - 7)`` int64: the little-endian 8-byte word starting at every byte of
    each row of the uint8 matrix ``b`` (numpy or torch), built once per call so every read
    below is one gather."""
    if isinstance(b, np.ndarray):
        windows = np.lib.stride_tricks.sliding_window_view(b, 8, axis=1)
        return np.ascontiguousarray(windows).view("<i8")[..., 0].astype(np.int64)
    windows = b.unfold(1, 8, 1).to(torch.int64)  # (N, width - 7, 8)
    shifts = torch.arange(0, 64, 8, dtype=torch.int64, device=b.device)
    # Distinct bytes never overlap after shifting, so a sum is an OR.
    return (windows << shifts).sum(dim=-1)


def _fetch(w: torch.Tensor, offset: torch.Tensor | int, n: int = 8) -> torch.Tensor:
    """Little-endian ``n``-byte (8 or 4 or 1) words of each row at ``offset`` (per row or
    shared), from ``byte_words`` ``w``."""
    if isinstance(offset, int):
        word = w[:, offset]
    else:
        if isinstance(w, np.ndarray):
            word = w[np.arange(len(w)), np.clip(offset, 0, w.shape[1] - 1)]
        else:
            idx = offset.clamp(0, w.shape[1] - 1).unsqueeze(1)
            word = torch.gather(w, 1, idx).squeeze(1)
    return word if n == 8 else word & ((1 << (8 * n)) - 1)


# -------------------------------------------------------------------------- farmhash
def _hash_len16(u: torch.Tensor, v: torch.Tensor, mul: torch.Tensor | int) -> torch.Tensor:
    a = (u ^ v) * mul
    a = a ^ shr(a, 47)
    b = (v ^ a) * mul
    b = b ^ shr(b, 47)
    return b * mul


def _len0to16(b: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    mul = K2 + n * 2
    # len >= 8
    a8 = _fetch(b, 0) + K2
    b8 = _fetch(b, n - 8)
    c8 = rotr(b8, 37) * mul + a8
    d8 = (rotr(a8, 25) + b8) * mul
    h8 = _hash_len16(c8, d8, mul)
    # 4 <= len < 8
    a4 = _fetch(b, 0, 4)
    h4 = _hash_len16(n + (a4 << 3), _fetch(b, n - 4, 4), mul)
    # 0 < len < 4
    first = _fetch(b, 0, 1)
    mid = _fetch(b, n >> 1, 1)
    last = _fetch(b, n - 1, 1)
    y = first + (mid << 8)
    z = n + (last << 2)
    h1 = shift_mix((y * K2) ^ (z * K0)) * K2
    out = _where(n >= 8, h8, _where(n >= 4, h4, h1))
    return _where(n == 0, _xp(n).full_like(out, K2), out)


def _len17to32(b: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    mul = K2 + n * 2
    a = _fetch(b, 0) * K1
    bb = _fetch(b, 8)
    c = _fetch(b, n - 8) * mul
    d = _fetch(b, n - 16) * K2
    return _hash_len16(rotr(a + bb, 43) + rotr(c, 30) + d, a + rotr(bb + K2, 18) + c, mul)


def _len33to64(b: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    mul = K2 + n * 2
    a = _fetch(b, 0) * K2
    bb = _fetch(b, 8)
    c = _fetch(b, n - 8) * mul
    d = _fetch(b, n - 16) * K2
    y = rotr(a + bb, 43) + rotr(c, 30) + d
    z = _hash_len16(y, a + rotr(bb + K2, 18) + c, mul)
    e = _fetch(b, 16) * mul
    f = _fetch(b, 24)
    g = (y + _fetch(b, n - 32)) * mul
    h = (z + _fetch(b, n - 24)) * mul
    return _hash_len16(rotr(e + f, 43) + rotr(g, 30) + h, e + rotr(f + a, 18) + g, mul)


def _weak32(b: torch.Tensor, off: Any, a: torch.Tensor, bb: torch.Tensor) -> tuple:
    w, x, y, z = (_fetch(b, off + k) for k in (0, 8, 16, 24))
    a = a + w
    bb = rotr(bb + a + z, 21)
    c = a
    a = a + x + y
    bb = bb + rotr(a, 44)
    return a + z, bb + c


def _len_over64(b: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """farmhashna::Hash64's loop over 64-byte blocks, rows advancing while they have one."""
    zero = _xp(n).zeros_like(n)
    seed = 81
    x = zero + seed
    y = zero + (_s64(seed * K1 + 113))
    z = shift_mix(y * K2 + 113) * K2
    v1, v2, w1, w2 = zero, zero, zero, zero
    x = x * K2 + _fetch(b, 0)
    blocks = (n - 1) // 64  # rows with n > 64 run at least one
    for i in range(int(blocks.max())):
        at = 64 * i  # the same offset in every row: a column read, no gather
        nx = rotr(x + y + v1 + _fetch(b, at + 8), 37) * K1
        ny = rotr(y + v2 + _fetch(b, at + 48), 42) * K1
        nx = nx ^ w2
        ny = ny + v1 + _fetch(b, at + 40)
        nz = rotr(z + w1, 33) * K1
        nv1, nv2 = _weak32(b, at, v2 * K1, nx + w1)
        nw1, nw2 = _weak32(b, at + 32, nz + w2, ny + _fetch(b, at + 16))
        nx, nz = nz, nx
        go = blocks > i
        x, y, z = (_where(go, new, old) for new, old in ((nx, x), (ny, y), (nz, z)))
        v1, v2 = _where(go, nv1, v1), _where(go, nv2, v2)
        w1, w2 = _where(go, nw1, w1), _where(go, nw2, w2)
    mul = K1 + ((z & 0xFF) << 1)
    s = n - 64
    w1 = w1 + ((n - 1) & 63)
    v1 = v1 + w1
    w1 = w1 + v1
    x = rotr(x + y + v1 + _fetch(b, s + 8), 37) * mul
    y = rotr(y + v2 + _fetch(b, s + 48), 42) * mul
    x = x ^ (w2 * 9)
    y = y + v1 * 9 + _fetch(b, s + 40)
    z = rotr(z + w1, 33) * mul
    v1, v2 = _weak32(b, s, v2 * mul, x + w1)
    w1, w2 = _weak32(b, s + 32, z + w2, y + _fetch(b, s + 16))
    x, z = z, x
    return _hash_len16(
        _hash_len16(v1, w1, mul) + shift_mix(y) * K0 + z, _hash_len16(v2, w2, mul) + x, mul
    )


def fingerprint64(b: torch.Tensor, n: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """FarmHash ``Fingerprint64`` of each row (int64 holding the uint64 bits).

    ``b``: ``byte_words`` of a zero-padded uint8 ``(N, width)`` matrix with
    ``width >= max(max_len, 8) + 8``; ``n``: int64 lengths. ``max_len`` (a bound on
    ``n``) skips branches no row needs; the integer path passes 20 so the traced graph
    has no data-dependent loop.
    """
    out = _len0to16(b, n)
    bound = int(n.max()) if max_len is None and len(n) else (max_len or 0)
    if bound > 16:
        out = _where(n > 16, _len17to32(b, n), out)
    if bound > 32:
        out = _where(n > 32, _len33to64(b, n), out)
    if bound > 64:
        out = _where(n > 64, _len_over64(b, n), out)
    return out


# --------------------------------------------------------------------------- siphash
def _sip_round(v0, v1, v2, v3):
    v0 = v0 + v1
    v1 = rotl(v1, 13) ^ v0
    v0 = rotl(v0, 32)
    v2 = v2 + v3
    v3 = rotl(v3, 16) ^ v2
    v0 = v0 + v3
    v3 = rotl(v3, 21) ^ v0
    v2 = v2 + v1
    v1 = rotl(v1, 17) ^ v2
    v2 = rotl(v2, 32)
    return v0, v1, v2, v3


def siphash24(
    b: torch.Tensor, n: torch.Tensor, key: Sequence[int], max_len: int | None = None
) -> torch.Tensor:
    """SipHash-2-4 of each row with the 128-bit ``key`` ``(k0, k1)`` (int64 bits);
    ``max_len`` as in ``fingerprint64``."""
    k0, k1 = _s64(int(key[0])), _s64(int(key[1]))
    zero = _xp(n).zeros_like(n)
    v0 = zero + _s64(k0 ^ 0x736F6D6570736575)
    v1 = zero + _s64(k1 ^ 0x646F72616E646F6D)
    v2 = zero + _s64(k0 ^ 0x6C7967656E657261)
    v3 = zero + _s64(k1 ^ 0x7465646279746573)
    full = n // 8
    if max_len is not None:
        blocks = max_len // 8
    else:
        blocks = int(full.max()) if len(n) else 0
    for i in range(blocks):
        m = _fetch(b, 8 * i)  # the same offset in every row: a column read
        u0, u1, u2, u3 = v0, v1, v2, v3 ^ m
        for _ in range(2):
            u0, u1, u2, u3 = _sip_round(u0, u1, u2, u3)
        go = full > i
        v0, v1 = _where(go, u0 ^ m, v0), _where(go, u1, v1)
        v2, v3 = _where(go, u2, v2), _where(go, u3, v3)
    # The last block: the remaining bytes (little-endian) and the length in the top byte.
    tail = _fetch(b, full * 8)
    rem = n & 7
    keep = _where(rem == 0, 0, (_xp(rem).ones_like(rem) << (rem * 8)) - 1)
    last = (tail & keep) | (n << 56)
    v3 = v3 ^ last
    for _ in range(2):
        v0, v1, v2, v3 = _sip_round(v0, v1, v2, v3)
    v0 = v0 ^ last
    v2 = v2 ^ 0xFF
    for _ in range(4):
        v0, v1, v2, v3 = _sip_round(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


# --------------------------------------------------------------------------- buckets
def unsigned_mod(h: torch.Tensor, m: int) -> torch.Tensor:
    """``h % m`` with ``h``'s int64 bits read as an unsigned 64-bit number (0 < m < 2**63)."""
    xp = _xp(h)
    r = xp.remainder(h, m)  # floor mod: in [0, m) for negative h too
    # A negative h stands for h + 2**64, so add k = 2**64 % m modulo m; r + k passes
    # 2**63 - 1 once m > 2**62, so compute r + k - m (in [-m, m)) and add m back if < 0.
    s = r - (m - (2**64) % m)
    return xp.where(h < 0, s + xp.where(s < 0, m, 0), r)


def fingerprint_cat64(fp1: torch.Tensor, fp2: torch.Tensor) -> torch.Tensor:
    """TensorFlow's ``FingerprintCat64``: combine two fingerprints (order matters)."""
    result = fp1 ^ _KMUL
    result = result ^ (shift_mix(fp2 * _KMUL) * _KMUL)
    result = result * _KMUL
    result = shift_mix(result) * _KMUL
    return shift_mix(result)


def hash_bytes(
    b: Any,  # numpy arrays (strings) or torch tensors (integers): the same ops on either
    n: Any,
    salt: Sequence[int] | None,
    max_len: int | None = None,
) -> Any:
    """Fingerprint64 (``salt`` None) or SipHash-2-4 keyed by ``salt`` of each row of the
    uint8 matrix ``b`` (lengths ``n``)."""
    w = byte_words(b)
    return fingerprint64(w, n, max_len) if salt is None else siphash24(w, n, salt, max_len)


def hash_strings_numpy(
    strings: Sequence | np.ndarray,
    salt: Sequence[int] | None,
    encoding: str = "utf-8",
    backend: str = "auto",
) -> np.ndarray:
    """int64 hashes (uint64 bits) of a flat sequence of str/bytes values, as a numpy array.

    ``backend``: ``"auto"`` uses the compiled binding of ``_hash_native`` where installed
    (the same bits, ~2-3x faster), else this module's numpy code; ``"numpy"`` forces the
    numpy code, ``"native"`` the binding (``RuntimeError`` if it is missing).
    """
    if backend != "numpy":
        try:
            out = _hash_native.hash_strings(strings, salt, encoding)
        except TypeError:  # a value neither str nor bytes: the numpy path's str() of it
            out = None
        if out is not None:
            return out.view(np.int64)
        if backend == "native":
            raise RuntimeError(
                'no compiled binding for this hash: pip install "datapipe-torch[hashing]"'
            )
    if len(strings) == 0:
        return np.zeros(0, dtype=np.int64)
    if isinstance(strings, np.ndarray) and strings.dtype.kind == "U":
        flat = strings.reshape(-1)
        chars = flat.dtype.itemsize // 4
        if chars <= _WIDE:  # words: ASCII rows convert without a Python loop, by row chunks
            rows = _CHUNK_BYTES // (max(chars, 8) + 8)
            parts = [_ascii_bytes(flat[i : i + rows], encoding) for i in range(0, len(flat), rows)]
            if all(p is not None for p in parts):
                return np.concatenate([hash_bytes(b, n, salt) for b, n in parts])  # type: ignore[misc]
        strings = flat.tolist()
    encoded = [s if isinstance(s, bytes) else str(s).encode(encoding) for s in strings]
    return _hash_encoded(encoded, salt)


# The bytes of one padded matrix that the numpy code hashes at once (its ``byte_words`` take
# 8x that): strings are grouped by length, so one long string among many words is never
# padded to (it costs its own length, not the batch's size times it).
_CHUNK_BYTES = 1 << 20
_WIDE = 64  # a U array wider than this goes through the grouping by length


def _hash_encoded(encoded: list[bytes], salt: Sequence[int] | None) -> np.ndarray:
    """``hash_bytes`` of each byte string, grouped by length into matrices of at most
    ``_CHUNK_BYTES`` (one row at least)."""
    lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded))
    widths = np.maximum(lengths, 8) + 8  # strings_to_bytes's row width
    if int(widths.max()) * len(encoded) <= _CHUNK_BYTES:
        return hash_bytes(*strings_to_bytes(encoded), salt)
    order = np.argsort(lengths, kind="stable")
    widths = widths[order]
    out = np.empty(len(encoded), dtype=np.int64)
    start = 0
    while start < len(order):
        # Rows [start, start + k): the matrix is k x widths[start + k - 1] (sorted), which
        # grows with k; the largest k within the budget, at least 1.
        most = min(max(1, _CHUNK_BYTES // int(widths[start])), len(order) - start)
        cost = np.arange(1, most + 1) * widths[start : start + most]
        k = max(1, int(np.searchsorted(cost, _CHUNK_BYTES, side="right")))
        rows = order[start : start + k]
        out[rows] = hash_bytes(*strings_to_bytes([encoded[i] for i in rows]), salt)
        start += k
    return out


def hash_strings(
    strings: Sequence | np.ndarray, salt: Sequence[int] | None, encoding: str = "utf-8"
) -> torch.Tensor:
    """int64 hashes (uint64 bits) of a flat sequence of str/bytes values."""
    return torch.from_numpy(hash_strings_numpy(strings, salt, encoding))


def string_buckets(
    strings: Sequence | np.ndarray, salt: Sequence[int] | None, num_buckets: int, encoding: str
) -> np.ndarray:
    """``hash % num_buckets`` (the hash's bits read unsigned) of each string, int64 numpy:
    ``tf.strings.to_hash_bucket_fast`` (``salt`` None) / ``_strong``."""
    h = hash_strings_numpy(strings, salt, encoding)
    return (h.view(np.uint64) % np.uint64(num_buckets)).astype(np.int64)


def hash_int64(values: torch.Tensor, salt: Sequence[int] | None) -> torch.Tensor:
    """int64 hashes of the decimal strings of ``values`` (flattened), as TensorFlow's
    ``to_hash_bucket_*(as_string(values))``; traceable by ``torch.export``."""
    b, n = int64_to_decimal(values)
    return hash_bytes(b, n, salt, max_len=20)
