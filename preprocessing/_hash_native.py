"""Compiled string hashes, when installed (the ``hashing`` extra): a C call per string.

The numpy code in ``_hash`` computes TensorFlow's two string hashes vectorised over a
batch's bytes; these bindings compute the same 64 bits one string at a time in C, which
is ~2-3x faster on a batch of words (``benchmarks/bench_lookup_hashing.py``):

- ``pyfarmhash``'s ``fingerprint64`` is FarmHash's ``Fingerprint64``
  (``farmhashna::Hash64``), TensorFlow's ``Fingerprint64`` and so
  ``tf.strings.to_hash_bucket_fast``. (Its ``hash64`` is a different function: not used.)
- ``siphashc``'s ``siphash(key, s)`` is SipHash-2-4 with a 16-byte key, the little-endian
  ``(k0, k1)`` pair that ``to_hash_bucket_strong`` takes as its ``key``.

Both encode a ``str`` as UTF-8 (raising ``UnicodeEncodeError`` on lone surrogates, as
``str.encode`` does) and take ``bytes`` as they are. They are used only where they agree
with ``_hash`` bit for bit; ``tests/preprocessing/test_hash_native.py`` checks that on
random strings of every length class of both hashes (0, 1-3, 4-7, 8-16, 17-32, 33-64,
over 64 bytes, non-ASCII) and on keys that need all 64 bits. Without them (or with
``DATAPIPE_HASH_BACKEND=numpy`` in the environment, for comparing) ``_hash``'s numpy code
runs.
"""

from __future__ import annotations

import contextlib
import functools
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

_MASK64 = (1 << 64) - 1
_UTF8 = ("utf-8", "utf8")
_disabled = False  # set by ``disabled()``


@functools.cache
def _bindings() -> tuple[Callable | None, Callable | None]:
    """``(fingerprint64, siphash)`` of the installed bindings (None where missing), imported
    on first use so ``import preprocessing`` does not pay for them."""
    if os.environ.get("DATAPIPE_HASH_BACKEND", "").lower() == "numpy":
        return None, None
    fingerprint64: Callable | None = None
    siphash: Callable | None = None
    try:
        import farmhash

        fingerprint64 = farmhash.fingerprint64
    except ImportError:
        pass
    try:
        import siphashc

        siphash = siphashc.siphash
    except ImportError:
        pass
    return fingerprint64, siphash


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Run the numpy code inside the ``with`` block (for tests and benchmarks that compare
    the two; not thread-safe: it flips a module flag)."""
    global _disabled
    before, _disabled = _disabled, True
    try:
        yield
    finally:
        _disabled = before


def available(salt: Sequence[int] | None) -> bool:
    """Whether the binding for this hash (Fingerprint64 for ``salt`` None, else SipHash)
    is installed and enabled."""
    return not _disabled and _bindings()[0 if salt is None else 1] is not None


def sip_key(salt: Sequence[int]) -> bytes:
    """The 16-byte SipHash key of the int pair ``salt``: each int's low 64 bits,
    little-endian (what ``_hash.siphash24`` does with ``_s64``)."""
    return struct.pack("<QQ", int(salt[0]) & _MASK64, int(salt[1]) & _MASK64)


def hash_strings(
    strings: Sequence[Any] | np.ndarray, salt: Sequence[int] | None, encoding: str = "utf-8"
) -> np.ndarray | None:
    """``uint64`` hashes of a flat sequence of str/bytes values, or None when the binding
    is missing. ``str`` values are encoded with ``encoding`` (the bindings' own UTF-8
    when that is it). Raises ``UnicodeEncodeError`` as ``str.encode`` does, and
    ``TypeError`` for a value that is neither str nor bytes (the caller falls back)."""
    if _disabled:
        return None
    fn = _bindings()[0 if salt is None else 1]
    if fn is None:
        return None
    values = strings.tolist() if isinstance(strings, np.ndarray) else list(strings)
    if encoding.lower().replace("_", "-") not in _UTF8:
        values = [v.encode(encoding) if isinstance(v, str) else v for v in values]
    it: Iterator[int]
    if salt is None:
        it = map(fn, values)
    else:
        key = sip_key(salt)
        it = (fn(key, v) for v in values)
    return np.fromiter(it, dtype=np.uint64, count=len(values))
