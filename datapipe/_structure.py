"""Nested element structures, handled in one place.

An element is a *leaf* (numpy array or scalar, torch tensor, Python scalar, str, bytes)
or a nest of tuples, namedtuples and dicts of elements (tf.nest's model; lists are leaves,
as in tf.data where a list becomes one tensor). Every op that needs to look inside an
element goes through ``flatten`` / ``pack_as`` / ``map_structure`` so that the rules live
here only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def is_nested(x: Any) -> bool:
    """True for the containers that nest (tuple, namedtuple, dict); False for leaves."""
    return isinstance(x, (tuple, dict))


def flatten(x: Any) -> list:
    """Leaves of ``x`` in a fixed order (dict keys sorted, as tf.nest does)."""
    if isinstance(x, dict):
        out: list = []
        for k in sorted(x):
            out.extend(flatten(x[k]))
        return out
    if isinstance(x, tuple):
        out = []
        for v in x:
            out.extend(flatten(v))
        return out
    return [x]


def flatten_with_paths(x: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """``(path, leaf)`` pairs; paths read like ``[0]['image']`` for error messages."""
    if isinstance(x, dict):
        out: list = []
        for k in sorted(x):
            out.extend(flatten_with_paths(x[k], f"{prefix}[{k!r}]"))
        return out
    if isinstance(x, tuple):
        out = []
        for i, v in enumerate(x):
            out.extend(flatten_with_paths(v, f"{prefix}[{i}]"))
        return out
    return [(prefix or "element", x)]


def _pack(structure: Any, it) -> Any:
    if isinstance(structure, dict):
        packed = {k: _pack(structure[k], it) for k in sorted(structure)}
        return type(structure)((k, packed[k]) for k in structure)
    if is_namedtuple(structure):
        return type(structure)(*[_pack(v, it) for v in structure])
    if isinstance(structure, tuple):
        return tuple(_pack(v, it) for v in structure)
    return next(it)


def pack_as(structure: Any, leaves: list) -> Any:
    """Inverse of ``flatten``: rebuild ``structure`` with ``leaves`` in flatten order."""
    it = iter(leaves)
    out = _pack(structure, it)
    rest = sum(1 for _ in it)
    if rest:
        raise ValueError(f"pack_as: {rest} leaves left over after packing the structure")
    return out


def same_structure(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` nest the same containers with the same keys."""
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)) or set(a) != set(b):
            return False
        return all(same_structure(a[k], b[k]) for k in a)
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
            return False
        return all(same_structure(x, y) for x, y in zip(a, b))
    return True


def flatten_up_to(structure: Any, value: Any) -> list | None:
    """``value``'s parts at the leaves of ``structure``, in ``flatten`` order
    (``tf.nest.flatten_up_to``): below a leaf of ``structure`` the value is one part,
    whatever it nests (``{"c": (9,)}`` against ``{"c": spec}`` gives ``[(9,)]``). None
    when ``value`` lacks a container or a key that ``structure`` has.

    >>> flatten_up_to({"a": 0, "b": 0}, {"b": (1, 2), "a": "x"})
    ['x', (1, 2)]
    >>> flatten_up_to((0, 0), (1,)) is None
    True
    """
    if isinstance(structure, dict):
        if not isinstance(value, dict) or set(value) != set(structure):
            return None
        parts = [flatten_up_to(structure[k], value[k]) for k in sorted(structure)]
    elif isinstance(structure, tuple):
        if not isinstance(value, tuple) or len(value) != len(structure):
            return None
        parts = [flatten_up_to(s, v) for s, v in zip(structure, value)]
    else:
        return [value]
    if any(p is None for p in parts):
        return None
    return [leaf for p in parts for leaf in p]  # type: ignore[union-attr]


def map_structure(fn: Callable, *structures: Any) -> Any:
    """Apply ``fn`` leaf-wise over structures of the same shape; returns the first's shape."""
    if len(structures) == 1:
        s = structures[0]
        if not is_nested(s):
            return fn(s)
        return pack_as(s, [fn(v) for v in flatten(s)])
    flat = [flatten(s) for s in structures]
    return pack_as(structures[0], [fn(*vs) for vs in zip(*flat)])
