"""Where a pipeline may compute ahead of its consumer, decided in one place.

Two facts about a graph decide whether elements may be computed before the consumer asks
for them:

* a *buffering* op (``prefetch``, a parallel ``map`` / ``random_map`` / ``batch`` /
  ``interleave``) computes ahead by design: the user asked for its buffer, or AUTOTUNE
  sized it;
* a source whose class sets ``_no_read_ahead`` (``from_generator``: its generator may wait
  for the consumer, e.g. on a queue the training loop fills) must never be asked for an
  element before the consumer needs it, unless a buffering op sits between it and the
  consumer.

``read_ahead_allowed(ds)`` walks the graph from the output and answers whether the outer
iterator may take more than one element per call (see ``datapipe._iterator.Iterator``).
"""

from __future__ import annotations

from typing import Any


def is_buffering(node: Any) -> bool:
    """Whether ``node`` computes ahead of its consumer on its own (a buffer or workers)."""
    calls = getattr(node, "_num_parallel_calls", None)
    if calls not in (None, 1):
        return True
    if getattr(node, "_name", None) == "prefetch":
        return getattr(node, "_buffer_size", 0) != 0
    return False


def read_ahead_allowed(ds: Any) -> bool:
    """False when a source that must not be read ahead (``_no_read_ahead``) is reachable
    from ``ds`` without passing a buffering op."""
    stack, seen = [ds], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if getattr(node, "_no_read_ahead", False):
            return False
        if not is_buffering(node):
            stack.extend(getattr(node, "_inputs", ()))
    return True
