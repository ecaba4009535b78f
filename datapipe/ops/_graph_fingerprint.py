"""A fingerprint of a ``Dataset`` graph: the same pipeline gives the same hex digest in any
process, another pipeline another one (``snapshot`` names its directory by it, as tf.data
names a snapshot by the hash of the dataset graph).

What is hashed, node by node from the output down: the op's class, and each of its
attributes (the op's arguments) except the library's bookkeeping (``_BOOKKEEPING``: epoch
counters, caches of inferred specs, per-worker stores). Values:

- arrays and tensors: dtype, shape and a SHA-256 of their bytes;
- functions: their code (bytecode, constants, names, nested code objects), defaults, the
  values their closures capture and the module-level names they read (to a depth of
  ``_DEPTH`` objects), so editing a ``map`` function's body or a constant it uses gives
  another fingerprint;
- other objects: their class and attributes, ``__slots__`` included (``nn.Module``
  layers: parameters included; ``functools.partial``: its function and arguments); an
  object without attributes is its class only (never its ``repr``, which may hold a
  memory address that differs per process).

Unseeded ops have no seed in the graph, so their fingerprint does not change from run to
run (tf.data: a ``shuffle`` without a seed snapshots to one fingerprint).
"""

from __future__ import annotations

import enum
import functools
import hashlib
import itertools
import types
from typing import Any

import numpy as np

from datapipe._spec import is_torch

# Attributes of Dataset nodes that are not the op's arguments.
_BOOKKEEPING = frozenset(
    {"_iterations", "_origin", "_spec_cache", "_worker_stores", "_store", "_spec", "_inputs"}
    | {"_snapshot_dirs", "_entropy"}  # _entropy: an unseeded op's bits (_context.op_entropy)
)
_DEPTH = 4  # objects followed through closures, globals and attributes
# Values whose repr is their whole content, the same in every process.
_SIMPLE: tuple[type, ...] = (type(None), bool, int, float, complex, str, bytes, range, slice)
_SIMPLE += (enum.Enum, np.generic, np.dtype)


def fingerprint(dataset: Any) -> str:
    """The graph's digest (32 hex digits)."""
    h = hashlib.sha256()
    _Hasher(h).dataset(dataset)
    return h.hexdigest()[:32]


class _Hasher:
    def __init__(self, h: Any):
        self.h = h
        self.seen: dict[int, int] = {}  # id -> visit number: a cycle or a shared object

    def put(self, *parts: Any) -> None:
        for p in parts:
            self.h.update(repr(p).encode() + b"\x00")

    def dataset(self, node: Any) -> None:
        if self._again(node):
            return
        self.put("node", type(node).__module__, type(node).__qualname__)
        for name in sorted(vars(node)):
            if name not in _BOOKKEEPING:
                self.put(name)
                self.value(getattr(node, name), _DEPTH)
        for child in node._inputs:
            self.dataset(child)

    def _again(self, obj: Any) -> bool:
        key = id(obj)
        if key in self.seen:
            self.put("again", self.seen[key])
            return True
        self.seen[key] = len(self.seen)
        return False

    def value(self, v: Any, depth: int) -> None:  # noqa: C901 - one branch per kind
        from datapipe.dataset_ops import Dataset

        if isinstance(v, _SIMPLE):
            self.put(type(v).__name__, v)
        elif isinstance(v, Dataset):
            self.dataset(v)
        elif isinstance(v, np.ndarray) or is_torch(v):
            arr = np.ascontiguousarray(v.detach().cpu().numpy() if is_torch(v) else v)
            if arr.dtype == object:
                self.put("objects", arr.shape)
                for item in arr.reshape(-1):
                    self.value(item, depth)
            else:
                self.put("array", arr.dtype.str, arr.shape, hashlib.sha256(arr.data).hexdigest())
        elif isinstance(v, (list, tuple)):
            self.put(type(v).__name__, len(v))
            for item in v:
                self.value(item, depth)
        elif isinstance(v, dict):
            self.put("dict", len(v))
            for k in sorted(v, key=repr):
                self.value(k, depth)
                self.value(v[k], depth)
        elif isinstance(v, (set, frozenset)):
            self.put("set", sorted(repr(x) for x in v))
        elif isinstance(v, types.ModuleType):
            self.put("module", v.__name__)
        elif isinstance(v, (types.FunctionType, types.MethodType)):
            self.function(v, depth)
        elif isinstance(v, (types.BuiltinFunctionType, type)):
            self.put("named", getattr(v, "__module__", None), getattr(v, "__qualname__", None))
        elif isinstance(v, itertools.count):
            self.put("count")
        else:
            self.obj(v, depth)

    def function(self, f: Any, depth: int) -> None:
        if isinstance(f, types.MethodType):
            self.put("method")
            self.value(f.__self__, depth)
            f = f.__func__
        if self._again(f):
            return
        self.put("function", f.__module__, f.__qualname__)
        self.code(f.__code__)
        if depth <= 0:
            return
        self.value(f.__defaults__, depth - 1)
        self.value(f.__kwdefaults__, depth - 1)
        for cell in f.__closure__ or ():
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell (a name assigned later)
                contents = None
            self.value(contents, depth - 1)
        for name in _global_names(f.__code__):
            if name in f.__globals__:
                self.put(name)
                self.value(f.__globals__[name], depth - 1)

    def code(self, c: types.CodeType) -> None:
        self.put("code", c.co_code, c.co_names, c.co_varnames, c.co_argcount)
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                self.code(k)
            else:  # through value(): a frozenset constant's repr order varies per process
                self.value(k, 0)

    def obj(self, v: Any, depth: int) -> None:
        self.put("object", type(v).__module__, type(v).__qualname__)
        if depth <= 0 or self._again(v):
            return
        for name, attr in _attributes(v):
            self.put(name)
            self.value(attr, depth - 1)


def _attributes(v: Any) -> list[tuple[str, Any]]:
    """An object's state by name: its ``__dict__`` and its ``__slots__`` (a slotted
    wrapper's function is its whole content); a ``functools.partial``'s function and
    arguments (kept in neither)."""
    out: dict[str, Any] = {}
    if isinstance(v, functools.partial):
        out.update(func=v.func, args=v.args, keywords=v.keywords)
    attrs = getattr(v, "__dict__", None)
    if isinstance(attrs, dict):
        out.update(attrs)
    for cls in type(v).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(v, name):
                out.setdefault(name, getattr(v, name))
    return sorted(out.items())


def _global_names(c: types.CodeType) -> list[str]:
    """Names a code object (and the code nested in it) may read from its module."""
    names = list(c.co_names)
    for k in c.co_consts:
        if isinstance(k, types.CodeType):
            names += _global_names(k)
    return sorted(set(names))
