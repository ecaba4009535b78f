"""Calling user functions on elements: tf.data's argument convention and error location."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from datapipe.errors import annotate


def call(fn: Callable, element: Any) -> Any:
    """``fn(*element)`` for a plain tuple (tf.data unpacks those), else ``fn(element)``."""
    if type(element) is tuple:
        return fn(*element)
    return fn(element)


def apply_chunk(
    fn: Callable, chunk: list, op: str, start_index: int, unpack: bool = True
) -> tuple[list, BaseException | None]:
    """Map ``fn`` over ``chunk`` (tf.data call convention unless ``unpack=False``).

    Returns the results computed before the first failure and that failure (annotated with
    ``op`` and the element index), so callers deliver the good elements before raising.
    """
    out = []
    try:
        if unpack and chunk and type(chunk[0]) is tuple:
            for x in chunk:
                out.append(fn(*x))
        else:
            for x in chunk:
                out.append(fn(x))
    except Exception as e:  # noqa: BLE001 - annotated and handed to the consumer
        return out, annotate(op, start_index + len(out), e)
    return out, None
