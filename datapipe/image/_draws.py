"""The draws of the ``stateless_random_*`` functions: a ``seed=(a, b)`` pair keys numpy's
Philox counter-based generator, so the same pair gives the same numbers on every call, in
every thread and process (tf's stateless contract). The stream is not TensorFlow's
(Threefry/Philox in tf's own layout): the same pair draws other values than tf's
(docs/guides/differences.md, D-IMG-3).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def generator(seed: Any, fn: str) -> np.random.Generator:
    """A fresh generator for ``seed``, a pair of ints (tf's ``shape [2]`` seed)."""
    if is_tensor_like(seed):
        seed = np.asarray(seed.detach().cpu().numpy() if hasattr(seed, "detach") else seed)
    try:
        pair = [int(v) for v in seed]
    except (TypeError, ValueError):
        pair = []
    if len(pair) != 2:
        raise ValueError(f"{fn}: seed must be a pair of ints (a, b), as tf's; got {seed!r}")
    key = [v % 2**64 for v in pair]  # negative ints too, as tf's int64 seeds
    return np.random.Generator(np.random.Philox(key=key))


def is_tensor_like(x: Any) -> bool:
    return hasattr(x, "shape") and not isinstance(x, (list, tuple))
