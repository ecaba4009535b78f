"""A fingerprint of a ``Dataset`` graph: the same pipeline gives the same hex digest in any
process (whatever ``PYTHONHASHSEED``), another pipeline another one (``snapshot`` names its
directory by it, as tf.data names a snapshot by the hash of the dataset graph).

What is hashed, node by node from the output down: the op's class, and each of its
attributes (the op's arguments) except the library's bookkeeping (``_BOOKKEEPING``: epoch
counters, caches of inferred specs, per-worker stores). Values:

- numbers, strings, ``None``, enums, numpy scalars and dtypes: their repr; bytes (and
  ``bytearray``, ``memoryview``): length and SHA-256;
- arrays and tensors: dtype, shape and a SHA-256 of their bytes;
- lists, tuples, dicts (keys in repr order), sets, ``collections.deque`` (contents and
  ``maxlen``): their items;
- functions (lambdas, nested functions, methods; a bound method with its ``self``): their
  code (bytecode, constants, names, nested code objects), defaults, the values their
  closures capture, and each global their code reads (``LOAD_GLOBAL``):

  - a function or class: followed in turn, to any depth (each object once);
  - a module of the user's code (``__main__``, and any module outside the standard
    library, the installed packages' site-/dist-packages directories, datapipe and its
    ``preprocessing`` layers): the attributes the code reads from it,
    ``usermod.transform`` or ``pkg.sub.f``, each followed; a module the code uses whole
    (passed on, ``getattr(mod, name)``): every function and class it defines and its
    constants;
  - a library module (standard library, installed packages, datapipe, ``preprocessing``):
    its name and ``__version__``, which stand for its code;

  so editing a ``map`` function's body, a constant it uses, or a function or method it
  calls (in its own module or through another of the user's modules) gives another
  fingerprint. A library function is its code, defaults and closure; its globals are the
  library's version.
- classes of the user's code: every method (``__call__`` included; static and class
  methods, properties) and class attribute, along the MRO down to the first library
  class; a library class: its module and name;
- other objects: their class (as above: a callable object's ``__call__`` code is part of
  it) and state, read as the first of these that applies:

  - ``re.Pattern``: its ``pattern`` and ``flags``; ``random.Random``: ``getstate()``
    (``SystemRandom``: nothing, it has no state); an open file: its name and mode; a
    pyarrow ``Table`` / ``RecordBatch`` / ``Array`` / ``ChunkedArray``: its schema and a
    SHA-256 of its Arrow IPC bytes; a ``threading`` lock: nothing (its state is not data);
  - its attributes: ``__dict__`` and ``__slots__`` (``nn.Module`` layers: parameters
    included; ``functools.partial``: its function and arguments);
  - what pickle saves of it (``__reduce_ex__``: numpy and torch generators' state,
    ``datetime``, ``operator.itemgetter``, ...);
  - else nothing reads it, and the fingerprint is refused: ``FingerprintError`` names
    the object's class and where the pipeline reaches it, and says to pass ``name=`` to
    ``snapshot`` (never a hash of its class alone, which would serve one snapshot for two
    states).

Bounds: data objects are followed ``_DEPTH`` attributes (closure cells, defaults) deep;
below that an object is its class only. Code is followed to any depth (a call chain
deeper than Python's recursion limit is refused: ``FingerprintError``). Not covered: what a
function reads at call time from outside Python objects (files it opens, environment
variables, the clock), a library's code beyond its version, and module attributes read
other than by a name in the code (``getattr(usermod, some_string)`` reads the module
whole, as above), and an ``itertools.count``'s position (it is hashed as a counter
only: an id counter that the map advances would otherwise move the snapshot at each
rebuild of the pipeline). Pass ``name=`` to ``snapshot`` where those decide the elements.

Unseeded ops have no seed in the graph, so their fingerprint does not change from run to
run (tf.data: a ``shuffle`` without a seed snapshots to one fingerprint).
"""

from __future__ import annotations

import contextlib
import dis
import enum
import functools
import hashlib
import io
import itertools
import os
import random
import re
import site
import sys
import sysconfig
import threading
import types
from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

from datapipe._spec import is_torch
from datapipe.errors import FingerprintError

# Attributes of Dataset nodes that are not the op's arguments.
_BOOKKEEPING = frozenset(
    {"_iterations", "_origin", "_spec_cache", "_worker_stores", "_store", "_spec", "_inputs"}
    | {"_snapshot_dirs", "_entropy"}  # _entropy: an unseeded op's bits (_context.op_entropy)
)
_DEPTH = 4  # data objects followed through closures, defaults and attributes
# Values whose repr is their whole content, the same in every process.
_SIMPLE: tuple[type, ...] = (type(None), bool, int, float, complex, str, range, slice)
_SIMPLE += (enum.Enum, np.generic, np.dtype)
# Objects whose state is no part of what a pipeline computes (a lock guards, never feeds).
_STATELESS = (type(threading.Lock()), type(threading.RLock()))
_CODE = (types.FunctionType, types.MethodType, type)  # followed without using up depth
# Class entries that are not the class's behaviour (abc's cache holds no readable state).
_CLASS_SKIP = frozenset({"_abc_impl"})
_OWN = ("datapipe", "preprocessing")  # this distribution's packages: library code


def fingerprint(dataset: Any) -> str:
    """The graph's digest (32 hex digits).

    Raises:
        FingerprintError: the graph reaches an object whose state cannot be read (module
            docstring), or code nested deeper than the recursion limit; names where.

    Example:
        >>> import datapipe as dp
        >>> twice = fingerprint(dp.range(3).map(lambda x: x * 2))
        >>> twice == fingerprint(dp.range(3).map(lambda x: x * 2))  # the same code
        True
        >>> twice == fingerprint(dp.range(3).map(lambda x: x * 3))  # an edited constant
        False
    """
    h = hashlib.sha256()
    hasher = _Hasher(h)
    try:
        hasher.dataset(dataset)
    except RecursionError:  # code that calls code ... deeper than Python's stack allows
        where = " > ".join(hasher.deepest) + " > ..."
        reason = (
            f"its code is nested deeper than Python's recursion limit ({sys.getrecursionlimit()}"
            f" frames), first through {where}"
        )
        raise FingerprintError(where, "code", reason) from None
    return h.hexdigest()[:32]


class _Hasher:
    def __init__(self, h: Any):
        self.h = h
        self.seen: dict[int, int] = {}  # id -> visit number: a cycle or a shared object
        self.where: list[str] = []  # how the value hashed now was reached (for errors)
        self.deepest: list[str] = []  # ... when the code went deeper than the stack
        self.keep: list[Any] = []  # objects made here, alive so that their ids stay unique

    def put(self, *parts: Any) -> None:
        for p in parts:
            self.h.update(repr(p).encode() + b"\x00")

    def under(self, label: str, v: Any, depth: int) -> None:
        with self.at(label):
            self.value(v, depth)

    @contextlib.contextmanager
    def at(self, label: str) -> Iterator[None]:
        """Hashing what ``label`` names (``where`` says how it was reached, for errors)."""
        self.where.append(label)
        try:
            yield
        except RecursionError:
            self.deepest = self.deepest or self.where[:6]  # where it went deep, for the error
            raise
        finally:
            self.where.pop()

    def dataset(self, node: Any) -> None:
        if self._again(node):
            return
        self.put("node", type(node).__module__, type(node).__qualname__)
        for name in sorted(vars(node)):
            if name not in _BOOKKEEPING:
                self.put(name)
                self.under(f"{getattr(node, '_name', type(node).__name__)}.{name}",
                           getattr(node, name), _DEPTH)  # fmt: skip
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
        elif isinstance(v, (bytes, bytearray, memoryview)):
            data = bytes(v)
            self.put(type(v).__name__, len(data), hashlib.sha256(data).hexdigest())
        elif isinstance(v, Dataset):
            self.dataset(v)
        elif isinstance(v, np.ndarray) or is_torch(v):
            self.array(v, depth)
        elif isinstance(v, (list, tuple, deque)):
            self.put(type(v).__name__, len(v), getattr(v, "maxlen", None))
            for k, item in enumerate(v):
                self.under(f"[{k}]", item, depth)
        elif isinstance(v, dict):
            self.put("dict", len(v))
            for k in sorted(v, key=repr):
                self.value(k, depth)
                self.under(f"[{k!r}]", v[k], depth)
        elif isinstance(v, (set, frozenset)):
            self.put("set", sorted(repr(x) for x in v))
        elif isinstance(v, types.ModuleType):
            self.module(v, None, depth)
        elif isinstance(v, (types.FunctionType, types.MethodType)):
            self.function(v, depth)
        elif isinstance(v, type):
            self.cls(v, depth)
        elif isinstance(v, types.BuiltinFunctionType):
            self.builtin(v, depth)
        elif isinstance(v, itertools.count):
            self.put("count")
        else:
            self.obj(v, depth)

    def array(self, v: Any, depth: int) -> None:
        arr = np.ascontiguousarray(v.detach().cpu().numpy() if is_torch(v) else v)
        if arr.dtype == object:
            self.put("objects", arr.shape)
            for item in arr.reshape(-1):
                self.value(item, depth)
        else:
            self.put("array", arr.dtype.str, arr.shape, hashlib.sha256(arr.data).hexdigest())

    def builtin(self, f: Any, depth: int) -> None:
        self.put("named", getattr(f, "__module__", None), getattr(f, "__qualname__", None))
        owner = getattr(f, "__self__", None)
        if owner is not None and not isinstance(owner, types.ModuleType):
            self.under("bound to", owner, depth)  # rng.normal: the generator's state

    # ---- code ----------------------------------------------------------------------------
    def function(self, f: Any, depth: int) -> None:
        if isinstance(f, types.MethodType):
            self.put("method")
            self.under("self", f.__self__, depth)
            self.value(f.__func__, depth)
            return
        if self._again(f):
            return
        self.put("function", f.__module__, f.__qualname__)
        self.code(f.__code__)
        if depth <= 0:
            return
        self.under(f"{f.__qualname__} defaults", f.__defaults__, depth - 1)
        self.under(f"{f.__qualname__} defaults", f.__kwdefaults__, depth - 1)
        for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell (a name assigned later)
                contents = None
            self.put("closure", name)
            self.under(f"closure {name!r}", contents, _next(contents, depth))
        if not _library(f.__module__ or ""):  # a library's version stands for its globals
            self.globals(f, depth)

    def globals(self, f: types.FunctionType, depth: int) -> None:
        """The globals ``f``'s code reads, a module by the attributes read from it."""
        for name, chains in sorted(_reads(f.__code__).items()):
            if name not in f.__globals__:
                continue  # a builtin, or a name not defined yet
            v = f.__globals__[name]
            self.put("global", name)
            with self.at(f"global {name!r}"):
                if isinstance(v, types.ModuleType):
                    self.module(v, chains, depth)
                else:
                    self.value(v, _next(v, depth))

    def code(self, c: types.CodeType) -> None:
        self.put("code", c.co_code, c.co_names, c.co_varnames, c.co_argcount)
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                self.code(k)
            else:  # through value(): a frozenset constant's repr order varies per process
                self.value(k, 0)

    def module(self, m: types.ModuleType, chains: set | None, depth: int) -> None:
        """A library module by name and version; the user's by what is read of it:
        ``chains`` of attribute names (``()``: the module used whole; None: reached as a
        value, so whole)."""
        name = m.__name__
        if _library(name):
            self.put("module", name, _version(name))
            return
        self.put("module", name)
        for chain in sorted(chains or {()}):
            self.put("reads", chain)
            if chain:
                self.chain(m, chain, depth)
            elif not self._again(m):
                self.whole(m, depth)

    def chain(self, m: types.ModuleType, chain: tuple, depth: int) -> None:
        cur: Any = m
        for k, attr in enumerate(chain):
            cur = vars(cur).get(attr, _MISSING)  # never a module __getattr__'s side effect
            label = f"{m.__name__}.{'.'.join(chain[: k + 1])}"
            if cur is _MISSING:
                self.put("missing", label)
                return
            if not isinstance(cur, types.ModuleType):
                self.under(label, cur, _next(cur, depth))
                return
            if _library(cur.__name__):
                self.put("module", cur.__name__, _version(cur.__name__))
                return
        self.under(".".join((m.__name__,) + chain), cur, depth)  # a submodule, whole

    def whole(self, m: types.ModuleType, depth: int) -> None:
        """A user module used whole: the functions and classes it defines, its constants."""
        for key, v in sorted(vars(m).items()):
            if key.startswith("__"):
                continue
            if isinstance(v, (types.FunctionType, type)) and v.__module__ == m.__name__:
                self.put(key)
                self.under(f"{m.__name__}.{key}", v, depth)
            elif isinstance(v, _SIMPLE):
                self.put(key, type(v).__name__, v)

    def cls(self, c: type, depth: int) -> None:
        if _library(c.__module__) or self._again(c):
            self.put("named", c.__module__, c.__qualname__)
            return
        self.put("class", c.__module__, c.__qualname__)
        for base in c.__mro__:
            if _library(base.__module__):
                self.put("base", base.__module__, base.__qualname__)
                continue
            self.put("body", base.__module__, base.__qualname__)
            for key, v in sorted(vars(base).items()):
                member = _member(key, v)
                if member is not None:
                    self.put(key)
                    self.under(f"{base.__qualname__}.{key}", member, _next(member, depth))

    # ---- objects -------------------------------------------------------------------------
    def obj(self, v: Any, depth: int) -> None:
        self.cls(type(v), depth)
        if depth <= 0 or self._again(v):
            return
        if self.special(v, depth):
            return
        attrs = _attributes(v)
        if attrs:
            for name, attr in attrs:
                self.put(name)
                self.under(f".{name}", attr, depth - 1)
            return
        self.pickled(v, depth)

    def special(self, v: Any, depth: int) -> bool:
        """Objects whose state is not (all) in their attributes; True when read."""
        if isinstance(v, re.Pattern):
            self.put("pattern", v.pattern, v.flags)
        elif isinstance(v, random.Random):
            try:
                self.value(v.getstate(), depth)
            except NotImplementedError:  # SystemRandom: no state, the OS's entropy
                self.put("system random")
            for name, attr in _attributes(v):
                self.put(name)
                self.under(f".{name}", attr, depth - 1)
        elif isinstance(v, io.IOBase) and isinstance(getattr(v, "name", None), (str, int)):
            self.put("file", getattr(v, "name", None), getattr(v, "mode", None))
        elif isinstance(v, _STATELESS):
            self.put("stateless")
        elif _is_arrow(v):
            self.put("arrow", *_arrow_digest(v))
        else:
            return False
        return True

    def pickled(self, v: Any, depth: int) -> None:
        """An object without attributes: what pickle would save of it, else refused."""
        try:
            reduced = v.__reduce_ex__(4)
        except Exception as e:  # pickle cannot save it: nothing can read it
            where = " > ".join(self.where) or "the pipeline"
            kind = f"{type(v).__module__}.{type(v).__qualname__}"
            raise FingerprintError(where, kind) from e
        if isinstance(reduced, str):  # a module-level singleton, named
            self.put("global", reduced)
            return
        parts = list(reduced) + [None] * 5
        maker, args, state, items, pairs = parts[:5]
        self.put("reduce", getattr(maker, "__module__", None), getattr(maker, "__qualname__", None))
        # The reduction's own objects (a list made from an iterator) die after this: keep
        # them so that a later object cannot reuse their id and read as "seen".
        made = [args, state, _listed(items), _listed(pairs)]
        self.keep.append(made)
        self.under("pickled", made, depth - 1)


_MISSING = object()


def _next(v: Any, depth: int) -> int:
    """The depth for ``v``: code keeps it (followed to any depth), data uses one up."""
    return depth if isinstance(v, _CODE) else depth - 1


def _member(key: str, v: Any) -> Any:
    """What of a class entry is hashed: its function (methods, static, class methods),
    its accessors (properties), or its value (class attributes); None to skip it."""
    if isinstance(v, (staticmethod, classmethod)):
        return v.__func__
    if isinstance(v, property):
        return (v.fget, v.fset, v.fdel)
    if isinstance(v, types.FunctionType):
        return v
    if key.startswith("__") or key in _CLASS_SKIP:
        return None  # __dict__, __module__, __doc__, __weakref__...: not behaviour
    return v


def _listed(it: Any) -> Any:
    return None if it is None else list(it)


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


def _codes(c: types.CodeType) -> Iterator[types.CodeType]:
    yield c
    for k in c.co_consts:
        if isinstance(k, types.CodeType):
            yield from _codes(k)


def _reads(c: types.CodeType) -> dict[str, set[tuple[str, ...]]]:
    """The globals a code object (and the code nested in it) reads, each with the chains
    of attributes read from it right after it is loaded: ``usermod.transform(x)`` gives
    ``{"usermod": {("transform",)}}``; ``()`` where it is used otherwise."""
    out: dict[str, set[tuple[str, ...]]] = {}
    for code in _codes(c):
        ops = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
        for k, op in enumerate(ops):
            if op.opname not in ("LOAD_GLOBAL", "LOAD_NAME"):
                continue
            chain: list[str] = []
            for nxt in ops[k + 1 :]:
                if nxt.opname not in ("LOAD_ATTR", "LOAD_METHOD"):
                    break
                chain.append(str(nxt.argval))
            out.setdefault(str(op.argval), set()).add(tuple(chain))
    return out


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = [paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    dirs += list(getattr(site, "getsitepackages", lambda: [])())
    return tuple(sorted({os.path.realpath(d) + os.sep for d in dirs if d}))


def _library(name: str) -> bool:
    """Whether module ``name`` is library code (standard library, an installed package,
    datapipe), whose version stands for its code; anything else is the user's."""
    known = _LIBRARY.get(name)
    if known is None:
        known = _classify(name)
        if name in sys.modules:  # a module not imported yet may be found later
            _LIBRARY[name] = known
    return known


_LIBRARY: dict[str, bool] = {}


def _classify(name: str) -> bool:
    top = name.partition(".")[0]
    if top in _OWN:
        return True
    module = sys.modules.get(name) or sys.modules.get(top)
    file = getattr(module, "__file__", None)
    if name == "__main__":
        return False
    if not isinstance(file, str):  # built in, frozen, or made at run time
        return top in sys.stdlib_module_names or top == "builtins"
    real = os.path.realpath(file)
    if os.sep + "site-packages" + os.sep in real or os.sep + "dist-packages" + os.sep in real:
        return True
    return real.startswith(_library_dirs())


def _version(name: str) -> str | None:
    top = name.partition(".")[0]
    version = getattr(sys.modules.get("datapipe" if top in _OWN else top), "__version__", None)
    return version if isinstance(version, str) else None


def _is_arrow(v: Any) -> bool:
    pa = sys.modules.get("pyarrow")  # never imported here: an object of it means it is
    return pa is not None and isinstance(v, (pa.Table, pa.RecordBatch, pa.Array, pa.ChunkedArray))


def _arrow_digest(v: Any) -> tuple[str, str, str]:
    """A pyarrow table's (or array's) type name, schema, and SHA-256 of its IPC bytes."""
    import pyarrow as pa

    table = v if isinstance(v, (pa.Table, pa.RecordBatch)) else pa.table({"values": v})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write(table)
    digest = hashlib.sha256(memoryview(sink.getvalue())).hexdigest()
    return type(v).__name__, str(table.schema), digest
