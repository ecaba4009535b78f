"""Argument checks every op runs when the pipeline is built (not when it first runs).

Python's ``int()`` and ``bool()`` accept nonsense silently: ``int("32")`` is 32,
``int(2.7)`` is 2, ``bool("False")`` is True. The ops take their integer and flag
arguments through these helpers instead, so a wrong type fails at once with a
``TypeError`` (a wrong value with a ``ValueError``) that names the op and the argument,
as tf.data's ops do when the graph is built.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np


def _kind(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def check_int(
    op: str,
    name: str,
    value: Any,
    minimum: int | None = None,
    special: tuple[int, ...] = (),
    what: str = "",
) -> int:
    """``value`` as a Python ``int``: an ``int`` or numpy integer (``bool`` and floats,
    strings, arrays of more than one value are refused).

    Args:
        op, name: the op and the argument, for the message.
        minimum: the smallest accepted value (None: no bound).
        special: values accepted besides ``>= minimum`` (e.g. ``-1`` for "all",
            ``AUTOTUNE``).
        what: the accepted range in words, for the message (default from ``minimum``).

    Raises:
        TypeError: not an integer.
        ValueError: out of range.
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{op}: {name} must be an integer, got {_kind(value)}")
    v = int(value)
    if minimum is not None and v < minimum and v not in special:
        rng = what or f">= {minimum}"
        raise ValueError(f"{op}: {name} must be {rng}, got {v}")
    return v


def check_optional_int(op: str, name: str, value: Any, *args: Any, **kwargs: Any) -> int | None:
    """``None`` or ``check_int(op, name, value, ...)``."""
    return None if value is None else check_int(op, name, value, *args, **kwargs)


def check_bool(op: str, name: str, value: Any) -> bool:
    """``value`` as a ``bool``: only ``True``/``False`` (or numpy's) are accepted, since
    ``bool("False")`` and ``bool([0])`` are True.

    Raises:
        TypeError: not a bool.
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{op}: {name} must be True or False, got {_kind(value)}")


def check_optional_bool(op: str, name: str, value: Any) -> bool | None:
    """``None`` or ``check_bool(op, name, value)``."""
    return None if value is None else check_bool(op, name, value)


def check_seed(op: str, value: Any) -> int | None:
    """An op's ``seed``: None or an integer (``Options.seed`` too)."""
    return check_optional_int(op, "seed", value)
