"""Whether AUTOTUNE may move a function to worker processes without changing its results.

AUTOTUNE's process executor must never make a working pipeline compute something else
(docs/architecture.md, "Executors"). A worker process has its own copy of everything the
function reaches, so any state the function keeps between calls -- a random generator, a
counter, an open file's offset, a cache, an attribute it assigns -- advances in each
worker separately: draws and ids repeat, lines are read twice, changes never reach the
parent (issue 35: a module-level ``np.random.default_rng(0)`` repeated 700-1,760 of 3,000
draws once AUTOTUNE chose processes). Searching the code for such state misses some, so
this module proves the opposite instead: ``parent_state(fn)`` is None only when every
value ``fn`` reaches is one of

- an immutable value: ``int``, ``float``, ``complex``, ``bool``, ``str``, ``bytes``,
  ``None``, ``Ellipsis``, ``range``, an ``enum`` member holding one, a tuple or frozenset
  of such values; numpy scalars and (non-structured) dtypes, whose objects cannot be
  changed in place; a numpy array that is not writeable, and none of its bases is;
- a module. A library's module (the standard library, an installed package: a file
  under ``site-packages``, the interpreter's own directories) is not read further: its
  functions, classes, ufuncs and module-level generators (``random.random``,
  ``np.random.rand``) are library code whose state the worker processes re-seed
  (``processes.py``). A user's module (any other file, ``__main__``) is read through the
  attributes the code loads from it (``mod.RNG``, ``mod.helper``);
- a library callable: a function, builtin, class, or an object its library module
  exports under its own name (``np.sqrt``, ``np.sort``, ``from random import random``);
- a user function that passes the same reading: its code's globals, the attributes it
  loads from user modules and classes, its closure's values, its defaults and keyword
  defaults, a decorator's ``__wrapped__``; and the code assigns no global, no variable
  of its enclosing function, and no attribute of a global, a closed-over value or
  something it cannot place; it does not call ``setattr``, ``delattr``, ``globals``,
  ``vars``, ``exec`` or ``eval``;
- a list, dict or set in a user function's closure (sent with the function by value)
  whose items are such values and which the function only reads (``_only_read``: the
  bytecode from each load to the instruction that consumes it shows indexing, ``in``,
  iteration, a comparison, a reading method, or a reading builtin such as ``len``);
- a user class whose methods pass the reading and whose class attributes are such values;
- a ``functools.partial`` whose function and arguments pass; a bound method, a callable
  object: the object (``self``) is an instance of a user class that passes, its attributes
  are such values, and no method of its class but the constructors assigns an attribute of
  ``self`` (``self.n += 1`` advances a copy in each worker);
- an object of datapipe or preprocessing (their random layers draw by the element's
  key, docs/architecture.md "Draws in a stage"), read through the callables it holds;
  a ``torch.nn.Module`` made of those and of torch's modules without parameters or
  buffers (``nn.Sequential`` of augmentation layers);
- a ``logging.Logger`` (what it writes is output, not a result);
- anything marked with ``datapipe.process_safe`` (the user's word for it).

Anything else -- a list, dict or set, a writeable array, a tensor, a generator
(``np.random.Generator``, ``random.Random``), ``itertools.count``, an open file, a
socket, a lock, a sqlite3 cursor, a zlib stream, an ``lru_cache``-wrapped function --
keeps the stage on threads, and the string names it. The reading also stops (and
refuses) after ``MAX_OBJECTS`` functions, classes and objects, or at depth ``MAX_DEPTH``:
what was not read is not proven. Not followed: a user module passed on as a value (only
the attributes the code loads from it are read). ``executor="process"`` is the user's
choice and is never refused here.
"""

from __future__ import annotations

import builtins
import dis
import enum
import functools
import os
import re
import sys
import types
from typing import Any, TypeVar

# Functions, classes and objects read per stage at most, and how deep: beyond them nothing
# is proven, so the stage stays on threads (a marked function is not read at all).
MAX_OBJECTS = 256
MAX_DEPTH = 12
_MARK = "__datapipe_process_safe__"
_OURS = frozenset({"datapipe", "preprocessing"})
_LEAVES = frozenset({
    int, float, complex, bool, str, bytes, type(None), type(Ellipsis), type(NotImplemented),
    range,
})  # fmt: skip
# Builtins that change a namespace the reading cannot follow.
_WRITERS = frozenset({"setattr", "delattr", "globals", "vars", "exec", "eval"})
# A class's methods that may assign attributes of self: they run before the object is
# shared (a bound method or a callable object calls none of them again).
_CONSTRUCTORS = frozenset({
    "__init__", "__new__", "__post_init__", "__setstate__", "__init_subclass__",
    "__set_name__", "__class_getitem__", "__copy__", "__deepcopy__", "__reduce__",
    "__reduce_ex__",
})  # fmt: skip
_F = TypeVar("_F")
_NOT_PROVEN = (
    "not an immutable value, a module, or a function or class that passes the reading; "
    "a worker process would use its own copy"
)


def process_safe(fn: _F) -> _F:
    """Mark ``fn`` (a function, a class, or a callable object) as safe to run in worker
    processes: AUTOTUNE may move a map that calls it there without reading it
    (``Dataset.map``, ``executor=None`` with ``AUTOTUNE``). Use it for a function whose
    state is safe per process though the reading cannot prove it (a global table it
    only reads); a marked function that keeps a counter or a generator would repeat its
    values in each worker. ``executor="process"`` needs no mark. Returns ``fn``.

    Example:
        >>> import datapipe as dp
        >>> TABLE = {0: "zero", 1: "one"}  # a dict: the reading would refuse it
        >>> @dp.process_safe
        ... def name(i):
        ...     return TABLE[int(i) % 2]
        >>> [str(x) for x in dp.range(3).map(name, dp.AUTOTUNE)]
        ['zero', 'one', 'zero']
    """
    try:
        setattr(fn, _MARK, True)
    except (AttributeError, TypeError) as e:  # a builtin, or an object with __slots__
        raise TypeError(
            f"process_safe: cannot mark {type(fn).__name__} objects; wrap it in a function"
        ) from e
    return fn


def parent_state(fn: Any) -> str | None:
    """None when ``fn`` provably computes the same in worker processes (module
    docstring), else why not: the value that is not proven safe, where ``fn`` reaches it,
    and what it is. A reading that fails (an object whose attributes raise) is a refusal
    too: the pipeline never fails because of this reading."""
    try:
        return _Reading().value(fn, "the function", "", 0)
    except Exception as e:  # noqa: BLE001 - a refusal, not an error
        return f"its code could not be read ({type(e).__name__}: {e})"


@functools.lru_cache(maxsize=512)
def _library_module(name: str) -> bool:
    """Whether the module ``name`` is a library's: this package, the standard library, or
    a file under an installation directory; a user's module is read."""
    top = name.split(".")[0]
    if top == "__main__":
        return False
    if top in _OURS or top in sys.stdlib_module_names or top == "builtins":
        return True
    module = sys.modules.get(top)
    path = getattr(module, "__file__", None)
    if module is None or path is None:
        return module is not None and not hasattr(module, "__path__")  # a builtin module
    return _under_library_dirs(os.path.realpath(path))


@functools.lru_cache(maxsize=1)
def _library_dirs() -> tuple[str, ...]:
    import sysconfig  # (not at `import datapipe`, which exports process_safe from here)

    keys = ("stdlib", "platstdlib", "purelib", "platlib")
    dirs = {os.path.realpath(sysconfig.get_paths()[k]) for k in keys}
    return tuple(sorted(dirs))


def _under_library_dirs(path: str) -> bool:
    parts = path.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    return any(path.startswith(d + os.sep) for d in _library_dirs())


def _library_function(fn: types.FunctionType) -> bool:
    """A library's function: of a library's module, or with code from a library's file (a
    wrapper ``reprlib`` puts on a dataclass's ``__repr__`` of a user's module)."""
    if _library_module(_module_of(fn)):
        return True
    filename = fn.__code__.co_filename
    return os.path.isabs(filename) and _under_library_dirs(os.path.realpath(filename))


def _module_of(obj: Any) -> str:
    name = getattr(obj, "__module__", None)
    return name if isinstance(name, str) else ""


def _describe(obj: Any) -> str:
    cls = type(obj)
    module = _module_of(cls)
    name = cls.__qualname__
    return name if module in ("", "builtins") else f"{module}.{name}"


def _immutable(value: Any) -> bool:
    """An immutable leaf (module docstring): no worker can change it, no call advances it."""
    cls = type(value)
    if cls in _LEAVES:
        return True
    if isinstance(value, enum.Enum):
        return _immutable(value.value) or isinstance(value.value, (tuple, frozenset))
    np = sys.modules.get("numpy")
    if np is None:
        return False
    if isinstance(value, np.dtype):
        return value.names is None  # a structured dtype's names can be assigned
    if isinstance(value, np.generic):
        return not isinstance(value, (np.void, np.object_))  # a void scalar is a view
    if isinstance(value, np.ndarray):
        while isinstance(value, np.ndarray):  # a read-only view of a writeable array changes
            if value.flags.writeable or value.dtype.hasobject:
                return False
            value = value.base
        return value is None or isinstance(value, bytes)
    return False


class _Refused(Exception):
    """The first value the reading cannot prove safe (its message is the refusal)."""


class _Reading:
    """One reading of a stage's function: the objects seen (each read once) and the shared
    user objects it reached (an attribute store on a local may be one of them)."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.shared: list[str] = []
        self.local_store: str | None = None

    def value(self, v: Any, owner: str, where: str, depth: int) -> str | None:
        try:
            self._value(v, owner, where, depth)
        except _Refused as e:
            return str(e)
        if self.shared and self.local_store:
            return (
                f"{self.local_store} assigns an attribute of a local object while it reaches "
                f"the shared object {self.shared[0]} (it may be that object)"
            )
        return None

    def _refuse(self, v: Any, owner: str, where: str, why: str = "") -> None:
        what = f"{where} ({_describe(v)})" if where else f"a {_describe(v)}"
        raise _Refused(f"{owner} uses {what}: " + (why or _NOT_PROVEN))

    def _enter(self, v: Any, owner: str, depth: int) -> bool:
        """Whether ``v`` is read now (False: read before); refuses past the bounds."""
        if id(v) in self.seen:
            return False
        if len(self.seen) >= MAX_OBJECTS or depth > MAX_DEPTH:
            raise _Refused(
                f"{owner} reaches more than {MAX_OBJECTS} functions and objects, or nests "
                f"deeper than {MAX_DEPTH}: the reading stops there (mark the function "
                "with datapipe.process_safe, or name executor='process')"
            )
        self.seen.add(id(v))
        return True

    def _value(self, v: Any, owner: str, where: str, depth: int) -> None:
        if _immutable(v) or isinstance(v, types.ModuleType):
            return
        if getattr(v, _MARK, False) is True:
            return
        if isinstance(v, (tuple, frozenset)):
            if all(type(x) in _LEAVES for x in v):
                return
            if self._enter(v, owner, depth):
                for x in v:
                    self._value(x, owner, where, depth + 1)
            return
        if isinstance(v, type):
            self._class(v, owner, depth)
        elif isinstance(v, types.FunctionType):
            if not _library_function(v) and self._enter(v, owner, depth):
                _Code(self, v, depth).read()
        elif isinstance(v, functools.partial):
            self._value(v.func, owner, where, depth + 1)
            label = f"functools.partial({getattr(v.func, '__qualname__', '...')})"
            for k, x in [*enumerate(v.args), *v.keywords.items()]:
                self._value(x, label, f"its argument {k!r}", depth + 1)
        elif isinstance(v, (types.MethodType, types.BuiltinMethodType)):
            self._method(v, owner, where, depth)
        elif isinstance(v, (staticmethod, classmethod)):
            self._value(v.__func__, owner, where, depth + 1)
        elif isinstance(v, property):
            for f in (v.fget, v.fset, v.fdel):
                if f is not None:
                    self._value(f, owner, where, depth + 1)
        elif _library_export(v):
            return
        else:
            self._instance(v, owner, where, depth)

    def _method(self, m: Any, owner: str, where: str, depth: int) -> None:
        """A bound method: library code bound to a module, or an export of its module
        (``random.random``); else its function, on a ``self`` that must pass."""
        this = getattr(m, "__self__", None)
        if this is None or isinstance(this, types.ModuleType) or _library_export(m):
            return
        if isinstance(this, type):  # a classmethod
            self._class(this, owner, depth)
        elif where:
            self._instance(this, owner, where, depth)
        else:
            self._instance(this, getattr(m, "__qualname__", owner), "its object", depth)
        func = getattr(m, "__func__", None)
        if func is not None:
            self._value(func, owner, where, depth + 1)

    def _class(self, cls: type, owner: str, depth: int) -> None:
        """A user class: its methods pass, and its class attributes are allowed values."""
        if _library_module(_module_of(cls)) or not self._enter(cls, owner, depth):
            return
        if issubclass(cls, enum.Enum):
            for member in cls:
                self._value(member, owner, f"the member {member.name!r}", depth + 1)
            return
        named_tuple = issubclass(cls, tuple) and hasattr(cls, "_fields")
        for base in cls.__bases__:
            self._class(base, owner, depth + 1)
        for name, attr in list(vars(cls).items()):
            code = isinstance(attr, (types.FunctionType, staticmethod, classmethod, property))
            if name.startswith("__") and name.endswith("__") and not code:
                continue  # the class's own machinery (__dict__, __doc__, __slots__, ...)
            if named_tuple and name.startswith("_") and not code:
                continue  # namedtuple's _fields and _field_defaults
            label = f"the class attribute '{cls.__qualname__}.{name}'"
            self._value(attr, owner, label, depth + 1)

    def _instance(self, obj: Any, owner: str, where: str, depth: int) -> None:
        """An object shared by every call (a global, a closure's value, a bound ``self``)."""
        cls = type(obj)
        module = _module_of(cls).split(".")[0]
        if module in _OURS:
            self._ours(obj, owner, where, depth)
            return
        logging = sys.modules.get("logging")
        if logging is not None and isinstance(obj, (logging.Logger, logging.LoggerAdapter)):
            return  # a module-level logger: its records are output, never a result
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(obj, torch.nn.Module):
            self._torch_module(obj, owner, where, depth)
            return
        if _library_module(_module_of(cls)) or not hasattr(obj, "__dict__") and not _slots(cls):
            self._refuse(obj, owner, where)
        if not self._enter(obj, owner, depth):
            return
        self._class(cls, owner, depth + 1)
        self._no_self_changes(cls, where, depth)
        self.shared.append(where or f"a {cls.__qualname__}")
        for name, attr in _attributes(obj):
            self._value(attr, owner, _attribute_label(where, name), depth + 1)

    def _no_self_changes(self, cls: type, where: str, depth: int) -> None:
        for klass in cls.__mro__:
            if _library_module(_module_of(klass)):
                continue
            for name, attr in vars(klass).items():
                func = getattr(attr, "__func__", attr)
                if name in _CONSTRUCTORS or not isinstance(func, types.FunctionType):
                    continue
                code = func.__code__
                if code.co_argcount and _scan(code).self_changes(code.co_varnames[0]):
                    raise _Refused(
                        f"{func.__qualname__} changes its object"
                        + (f", {where}" if where else "")
                        + " (a worker process would change its own copy)"
                    )

    def _ours(self, obj: Any, owner: str, where: str, depth: int) -> None:
        """datapipe's and preprocessing's objects: the user functions they hold are read."""
        if not self._enter(obj, owner, depth):
            return
        for name, attr in _attributes(obj):
            if callable(attr) and not isinstance(attr, type):
                self._value(attr, owner, where or f"the attribute {name!r}", depth + 1)

    def _torch_module(self, obj: Any, owner: str, where: str, depth: int) -> None:
        """An ``nn.Module``: each submodule is ours, or torch's without parameters and
        buffers (those change with training in the parent), or a user module read as a
        shared object."""
        import torch

        for name, sub in obj.named_modules():
            label = _attribute_label(where, name) if name else where
            if _module_of(type(sub)).split(".")[0] in _OURS:
                self._ours(sub, owner, label, depth + 1)
                continue
            if any(True for _ in sub.parameters(recurse=False)) or any(
                True for _ in sub.buffers(recurse=False)
            ):
                why = "parameters or buffers, which may change in this process (training): "
                self._refuse(sub, owner, label, why + "a worker process keeps its own copy")
            if not _library_module(_module_of(type(sub))):
                self._class(type(sub), owner, depth + 1)
                self._no_self_changes(type(sub), label, depth)
                internal = set(vars(torch.nn.Module()))
                for key, attr in _attributes(sub):
                    if key not in internal:
                        self._value(attr, owner, _attribute_label(label, key), depth + 1)


def _attribute_label(where: str, name: str) -> str:
    """``the attribute 'READER.file'`` for ``the global 'READER'``; ``the attribute 'file'
    of its object`` otherwise."""
    quoted = re.search(r"'([^']+)'", where)
    if quoted:
        return f"the attribute '{quoted.group(1)}.{name}'"
    return f"the attribute {name!r} of {where}" if where else f"the attribute {name!r}"


def _slots(cls: type) -> list[str]:
    return [s for c in cls.__mro__ for s in c.__dict__.get("__slots__", ()) if isinstance(s, str)]


def _attributes(obj: Any) -> list[tuple[str, Any]]:
    """``obj``'s attributes: its ``__dict__`` and its classes' slots."""
    items = list(getattr(obj, "__dict__", {}).items())
    for slot in _slots(type(obj)):
        if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
            items.append((slot, getattr(obj, slot)))
    return items


def _library_export(v: Any) -> bool:
    """A callable a library module exports under its own name (``np.sqrt``, a ufunc;
    ``np.sort``; ``random.random``, bound to the module's hidden generator): library
    code, which the worker processes re-seed where it draws."""
    if not callable(v):
        return False
    name = getattr(v, "__name__", None)
    if isinstance(v, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        this = getattr(v, "__self__", None)
        module = _module_of(v) or _module_of(type(this) if this is not None else None)
        if this is None or isinstance(this, types.ModuleType):
            return True
        # ``random.random`` has no __module__: look for it in the module of its self
        candidates = [module, type(this).__module__]
    else:
        candidates = [_module_of(v)]
    for module in candidates:
        if module and isinstance(name, str) and _library_module(module):
            mod = sys.modules.get(module)
            if mod is not None and getattr(mod, name, None) is v:
                return True
    return False


class _Scan:
    """What one code object (with its nested ones) loads and assigns: the roots of the
    names it loads with the attribute chains after them, and its stores."""

    def __init__(self) -> None:
        self.loads: dict[tuple[str, str], set[tuple[str, ...]]] = {}
        self.global_stores: list[str] = []
        self.deref_stores: set[str] = set()
        # (root kind, root name, attribute) of each attribute store/delete; root kind
        # "?" when the store's object is not a name with attributes after it
        self.attr_stores: list[tuple[str, str, str]] = []
        self.imports: list[tuple[str, str | None]] = []  # (module, name from it)

    def self_changes(self, var: str) -> bool:
        """Whether the local ``var`` (a method's ``self``) is changed: an attribute store
        through it (or one the reading cannot place), or its ``__dict__`` loaded."""
        for kind, name, _ in self.attr_stores:
            if kind == "?" or (kind == "local" and name == var):
                return True
        return any("__dict__" in chain for chain in self.loads.get(("local", var), ()))


_ROOTS = {
    "LOAD_GLOBAL": "global", "LOAD_NAME": "global", "LOAD_DEREF": "deref",
    "LOAD_CLASSDEREF": "deref", "LOAD_FAST": "local", "LOAD_FAST_CHECK": "local",
    "LOAD_FAST_AND_CLEAR": "local",
}  # fmt: skip


@functools.lru_cache(maxsize=1024)
def _scan(code: types.CodeType) -> _Scan:
    """The bytecode's loads and stores (cached: a code object never changes)."""
    out = _Scan()
    stack = [code]
    while stack:
        c = stack.pop()
        _scan_one(c, out)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return out


def _scan_one(c: types.CodeType, out: _Scan) -> None:
    root: tuple[str, str] | None = None
    chain: list[str] = []
    copied: tuple[str, str] | None = None  # `x.n += 1`: LOAD x, COPY, LOAD_ATTR, ..., STORE_ATTR
    previous = ""
    module: str | None = None
    for ins in dis.get_instructions(c):
        op = ins.opname
        if op in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            out.global_stores.append(ins.argval)
        elif op in ("STORE_DEREF", "DELETE_DEREF"):
            out.deref_stores.add(ins.argval)
        elif op == "IMPORT_NAME":
            module = ins.argval
            out.imports.append((module, None))
        elif op == "IMPORT_FROM" and module is not None:
            out.imports.append((module, ins.argval))
        if op in _ROOTS:
            root, chain = (_ROOTS[op], ins.argval), []
            out.loads.setdefault(root, set()).add(())
        elif op in ("LOAD_ATTR", "LOAD_METHOD") and root is not None:
            chain.append(ins.argval)
            out.loads[root].add(tuple(chain))
        elif op in ("STORE_ATTR", "DELETE_ATTR"):
            if root is not None:
                out.attr_stores.append((root[0], root[1], ins.argval))
            elif copied is not None and previous == "SWAP":
                out.attr_stores.append((copied[0], copied[1], ins.argval))
            else:
                out.attr_stores.append(("?", "", ins.argval))
            root, copied = None, None
        elif op == "COPY" and root is not None:
            copied, root = root, None
        else:
            root = None
        previous = op


class _Code:
    """The reading of one user function (module docstring)."""

    def __init__(self, reading: _Reading, fn: types.FunctionType, depth: int):
        self.r, self.fn, self.depth = reading, fn, depth + 1
        self.name = getattr(fn, "__qualname__", "the function")
        self.scan = _scan(fn.__code__)

    def read(self) -> None:
        fn, scan, name = self.fn, self.scan, self.name
        if scan.global_stores:
            raise _Refused(f"{name} assigns the global {scan.global_stores[0]!r} (a worker "
                           "process would assign its own copy)")  # fmt: skip
        freevars = set(fn.__code__.co_freevars)
        for var in sorted(scan.deref_stores & freevars):
            raise _Refused(f"{name} assigns the variable {var!r} of its enclosing function "
                           "(a worker process would assign its own copy)")  # fmt: skip
        self._attribute_stores(freevars)
        cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        for var, cell in cells.items():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell (a function defined before its variable)
                continue
            where = f"the variable {var!r} it closes over"
            if (
                type(value) in (list, dict, set)
                and _only_read(fn.__code__, var)
                and not _READ_BUILTINS & set(fn.__globals__)  # len() is the builtin
            ):
                self._contents(value, where)  # data sent with the function, only read
                continue
            self._root(value, ("deref", var), where)
        for k, default in enumerate(fn.__defaults__ or ()):
            self.r._value(default, name, f"its default {k}", self.depth)
        for key, default in (fn.__kwdefaults__ or {}).items():
            self.r._value(default, name, f"its default {key!r}", self.depth)
        if "__wrapped__" in vars(fn):
            self.r._value(vars(fn)["__wrapped__"], name, "the function it wraps", self.depth)
        for kind, var in sorted(scan.loads):
            if kind == "global":
                self._global(var)
        for module, attr in scan.imports:
            self._import(module, attr)

    def _contents(self, value: list | dict | set, where: str) -> None:
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        if all(type(x) in _LEAVES for x in items):
            return
        for x in items:
            self.r._value(x, self.name, f"an item of {where}", self.depth)

    def _attribute_stores(self, freevars: set[str]) -> None:
        code = self.fn.__code__
        parts = self.name.split(".")
        method = len(parts) > 1 and parts[-2] != "<locals>" and code.co_argcount > 0
        for kind, var, attr in self.scan.attr_stores:
            if method and kind == "local" and var == code.co_varnames[0]:
                continue  # self: judged where the object is shared (_no_self_changes)
            if kind == "local" and var not in freevars:
                self.r.local_store = self.r.local_store or self.name
                continue
            target = f"{var}.{attr}" if var else f"{attr!r} of an object it cannot place"
            raise _Refused(f"{self.name} assigns the attribute {target!r} (a worker process "
                           "would assign its own copy)" if var else
                           f"{self.name} assigns the attribute {target}")  # fmt: skip

    def _global(self, var: str) -> None:
        if var in self.fn.__globals__:
            value = self.fn.__globals__[var]
        elif hasattr(builtins, var):
            if var in _WRITERS:
                raise _Refused(f"{self.name} calls {var}(), which changes state this "
                               "reading cannot follow")  # fmt: skip
            return
        else:
            raise _Refused(f"{self.name} uses the global {var!r}, which does not exist yet")
        self._root(value, ("global", var), f"the global {var!r}")

    def _root(self, value: Any, root: tuple[str, str], where: str) -> None:
        """A global or closed-over value, and the attributes the code loads from it when
        it is a user module or class (``mod.RNG``, ``C.table``)."""
        self.r._value(value, self.name, where, self.depth)
        if not isinstance(value, (types.ModuleType, type)):
            return
        if _library_module(getattr(value, "__name__", "") if isinstance(value, types.ModuleType)
                           else _module_of(value)):  # fmt: skip
            return
        for chain in sorted(self.scan.loads.get(root, ())):
            self._chain(value, root[1], chain)

    def _chain(self, value: Any, label: str, chain: tuple[str, ...]) -> None:
        for attr in chain:
            if not isinstance(value, (types.ModuleType, type)):
                return  # the value before it passed: its attributes are its own
            if isinstance(value, types.ModuleType) and _library_module(value.__name__):
                return
            try:
                value = getattr(value, attr)
            except Exception:  # noqa: BLE001 - fails in every process alike
                return
            label = f"{label}.{attr}"
            self.r._value(value, self.name, f"the attribute {label!r}", self.depth)

    def _import(self, module: str, attr: str | None) -> None:
        """``import m`` / ``from m import x`` inside the function: a user module's names
        are values like its globals."""
        loaded = sys.modules.get(module)
        if loaded is None:
            if _library_module(module) or _installed(module) is not False:
                return  # a library's, or not there at all (ImportError alike everywhere)
            raise _Refused(f"{self.name} imports {module!r}, which is not loaded yet, so "
                           "this reading cannot read it")  # fmt: skip
        if attr is None or _library_module(module):
            return
        if hasattr(loaded, attr):
            self.r._value(getattr(loaded, attr), self.name, f"'{module}.{attr}'", self.depth)


# Read-only uses of a closed-over list, dict or set (``_only_read``): the methods that
# return data without changing the container, the builtins that only read their argument.
_READ_METHODS = frozenset({
    "index", "count", "copy", "get", "keys", "values", "items", "issubset", "issuperset",
    "isdisjoint", "union", "intersection", "difference", "symmetric_difference",
})  # fmt: skip
_READ_BUILTINS = frozenset({
    "len", "sorted", "tuple", "frozenset", "list", "set", "dict", "min", "max", "sum",
    "any", "all", "enumerate", "reversed",
})  # fmt: skip
_NO_POPS = frozenset({
    "LOAD_CONST", "LOAD_FAST", "LOAD_GLOBAL", "LOAD_DEREF", "LOAD_NAME", "LOAD_CLOSURE",
    "LOAD_CLASSDEREF", "PUSH_NULL", "KW_NAMES", "NOP", "EXTENDED_ARG",
})  # fmt: skip
_TWO_POPS = frozenset({"BINARY_OP", "BINARY_SUBSCR", "COMPARE_OP", "CONTAINS_OP", "IS_OP"})
_ONE_POP = frozenset({"UNARY_NEGATIVE", "UNARY_NOT", "UNARY_INVERT", "UNARY_POSITIVE"})
_READERS = frozenset({"BINARY_SUBSCR", "CONTAINS_OP", "COMPARE_OP", "IS_OP", "GET_ITER"})


@functools.lru_cache(maxsize=1024)
def _only_read(code: types.CodeType, var: str) -> bool:
    """Whether each load of the closed-over ``var`` in ``code`` (and its nested code) is
    read-only: indexed, tested with ``in``, iterated, compared, a reading method called
    (``get``, ``index``), or passed alone to a reading builtin (``len``, ``sorted``). Any
    other use -- a store, an alias, an argument to another function, a branch while it
    is on the stack -- is not proven. The bytecode is followed, not guessed: an
    instruction this does not know ends the proof. The stack effects modelled are
    CPython 3.11's; on another version nothing is proven (the container is refused)."""
    if sys.version_info[:2] != (3, 11):
        return False
    stack = [code]
    while stack:
        c = stack.pop()
        ins = list(dis.get_instructions(c))
        for k, i in enumerate(ins):
            if i.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF") and i.argval == var:
                if not _read_at(ins, k, c):
                    return False
        stack.extend(x for x in c.co_consts if isinstance(x, types.CodeType))
    return True


def _pops(i: dis.Instruction) -> int | None:
    """How many stack items ``i`` pops (None: not modelled; 3.11's bytecode)."""
    op, arg = i.opname, i.arg or 0
    if op in _NO_POPS:
        return 0
    if op in _TWO_POPS:
        return 2
    if op in _ONE_POP or op in ("GET_ITER", "LOAD_ATTR", "LOAD_METHOD"):
        return 1
    if op in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "BUILD_STRING", "BUILD_SLICE"):
        return arg
    if op == "PRECALL":
        return arg + 2
    if op == "CALL":
        return 2
    if op == "FORMAT_VALUE":
        return 2 if arg & 4 else 1
    return None


def _read_at(ins: list[dis.Instruction], k: int, code: types.CodeType) -> bool:
    """Whether the value loaded by ``ins[k]`` is consumed by a read-only use."""
    depth = 0  # stack items above the value
    for j in range(k + 1, len(ins)):
        i = ins[j]
        if i.is_jump_target or i.opcode in dis.hasjrel or i.opcode in dis.hasjabs:
            return False  # a branch while the value is on the stack: not followed
        pops = _pops(i)
        if pops is None:
            return False
        if pops <= depth:
            pushes = pops + dis.stack_effect(i.opcode, i.arg)
            depth += pushes - pops
            if depth < 0:
                return False  # the model is off: nothing proven
            continue
        # this instruction consumes the value, `depth` items above it
        if i.opname in _READERS:
            return True
        if i.opname in ("LOAD_ATTR", "LOAD_METHOD"):
            return i.argval in _READ_METHODS
        if i.opname == "PRECALL" and i.arg == 1 and depth == 0:
            before = ins[k - 1] if k else None
            return (
                before is not None
                and before.opname == "LOAD_GLOBAL"
                and before.argval in _READ_BUILTINS
                and before.argrepr.startswith("NULL")
                and before.argval not in code.co_varnames
            )
        return False
    return False


def _installed(module: str) -> bool | None:
    """Whether the not yet imported ``module`` is a library's (None: it is not there)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module.split(".")[0])
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    origin = getattr(spec, "origin", None)
    if origin in ("built-in", "frozen"):
        return True
    return isinstance(origin, str) and _under_library_dirs(os.path.realpath(origin))
