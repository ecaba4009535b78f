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

import numpy as np


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


# Items of one container that ``element_nbytes`` visits; past it, the rest are taken to be
# the size of the visited ones on average (an estimate that stays cheap for a list of 10^6).
NBYTES_SAMPLE = 64


def element_nbytes(x: Any) -> int:
    """Bytes of one element: the size estimate that statistics (``Stats.bytes``), the
    parallel stages' RAM budget (AUTOTUNE) and the service's reply size all use.

    The rule, per leaf: a numpy array or scalar, a torch tensor or anything with an int
    ``nbytes`` counts ``nbytes`` (numpy's / torch's: item size x number of items; torch
    tensors without it, ``element_size() * nelement()``); ``bytes``, ``bytearray`` and
    ``memoryview`` their length in bytes, a ``str`` its length in characters; a Python
    ``int``/``float``/``complex``/``bool`` 8 (as in an int64/float64 array); ``None`` 0; any
    other object 8 (the reference, nothing behind it: a PIL image counts 8). A ``dict``,
    ``tuple`` (namedtuples too) or ``list`` counts the sum of its items, computed on the
    first ``NBYTES_SAMPLE`` (64) items and scaled to the container's length past that.
    Shared or aliased leaves are counted each time they appear; container overhead is not
    counted. Never raises (a leaf whose ``nbytes`` is not an int falls to the rules below).

    Example:
        >>> import numpy as np
        >>> element_nbytes({"image": np.zeros((2, 3), np.float32), "label": 1, "id": b"ab"})
        34
    """
    nb = getattr(x, "nbytes", None)
    if isinstance(nb, int) and not isinstance(nb, bool):
        return nb
    if isinstance(x, dict):
        return _items_nbytes(list(x.values()) if len(x) > NBYTES_SAMPLE else x.values(), len(x))
    if isinstance(x, (tuple, list)):
        return _items_nbytes(x, len(x))
    if isinstance(x, (bytes, bytearray, str)):  # (a memoryview has nbytes)
        return len(x)
    if x is None:
        return 0
    if hasattr(x, "element_size") and hasattr(x, "nelement"):  # a torch tensor before nbytes
        try:
            return int(x.element_size() * x.nelement())
        except Exception:  # noqa: BLE001 - not a tensor after all: counted as an object
            return 8
    return 8


def _items_nbytes(items: Any, n: int) -> int:
    if n <= NBYTES_SAMPLE:
        return sum(element_nbytes(v) for v in items)
    seen = sum(element_nbytes(v) for v in items[:NBYTES_SAMPLE])
    return seen * n // NBYTES_SAMPLE


_IMMUTABLE = (np.generic, int, float, complex, str, bytes, type(None))


def _read_only_array(x: np.ndarray) -> np.ndarray:
    if not x.flags.writeable:
        return x
    view = x.view()
    view.flags.writeable = False  # the view only: the array itself stays as it was
    return view


def _writable_array(x: np.ndarray) -> np.ndarray:
    return x if x.flags.writeable else x.copy()


def _map_arrays(x: Any, fn: Callable[[np.ndarray], np.ndarray]) -> Any:
    """``x`` with ``fn`` applied to each numpy array leaf; other leaves as they are.
    Written out rather than through ``map_structure``: it runs once per element."""
    t = type(x)
    if t is np.ndarray:
        return fn(x)
    if isinstance(x, _IMMUTABLE):
        return x
    if t is tuple:
        return tuple([_map_arrays(v, fn) for v in x])
    if t is dict:
        return {k: _map_arrays(v, fn) for k, v in x.items()}
    if is_namedtuple(x):
        return t(*[_map_arrays(v, fn) for v in x])
    if isinstance(x, dict):  # as _pack rebuilds a dict subclass
        return t((k, _map_arrays(v, fn)) for k, v in x.items())
    if isinstance(x, tuple):
        return tuple([_map_arrays(v, fn) for v in x])
    if isinstance(x, np.ndarray):  # a subclass
        return fn(x)
    return x


def read_only(x: Any) -> Any:
    """``x`` as an element an op may hand out more than once (``from_tensor_slices``'s
    source, ``from_tensors``'s element, ``cache``'s records): each writable numpy array
    as a read-only view of it (no copy); torch tensors (torch has no read-only tensors:
    a clone per read cost 10 ms for a 38 MB batch, D-TF-28), numbers, str, bytes and lists
    as they are.

    tf.data's elements are immutable: an in-place op downstream (``x /= 255`` in ``map``)
    then fails at once (numpy: "output array is read-only"; ``map`` names the element)
    where it used to write into the source, so that the next epoch differed, and only on
    some executors."""
    return _map_arrays(x, _read_only_array)


def writable(x: Any) -> Any:
    """``x`` with each read-only numpy array copied (for code that hands elements to
    torch, which has no read-only tensors and warns on such an array: a DataLoader's
    collate); writable arrays and other leaves as they are."""
    return _map_arrays(x, _writable_array)
