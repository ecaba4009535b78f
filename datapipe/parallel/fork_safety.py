"""Whether AUTOTUNE may move a function to worker processes without changing its results.

AUTOTUNE's process executor must never make a working pipeline fail or compute something
else (docs/architecture.md, "Executors"). Pickling a sample of elements and results
(``Engine.samples_cross``) and bounding the function's size (``shm.function_exceeds``)
catch what cannot cross; this module catches what crosses and then behaves differently,
because a worker process has its own copy of the state the function shares with this
process (the adversary's cases, issue 21's follow-up):

- a module-level open file, socket, mmap or lock that the function uses: cloudpickle
  sends a module's function by reference, so each forked worker uses its inherited copy --
  forked file objects share one file offset (a seek + read under a lock returned other
  records: 48 of 3,000 wrong), and each worker's lock guards nothing in the others;
- a module-level (or closed-over) list, dict, set, deque or bytearray that the function
  changes (``calls.append(x)``, ``cache[k] = v``), or a global it assigns
  (``global count``): the changes stay in the workers (104 of 800 appends reached the
  parent in epoch 0, 0 in the later ones once the choice was remembered).

``parent_state(fn)`` reads the bytecode of the user's functions that ``fn`` reaches (its
code, the module-level functions and module attributes it loads, a callable object's
``__call__`` and the functions its attributes hold), up to ``MAX_FUNCTIONS`` of them, and
names the first such use. It is a static reading, so it is conservative: a function that
only reads a global dict and appends to a local list is kept on threads too (what AUTOTUNE
did before it tried processes at all); library code (torch, numpy, this package, the
standard library) is not read. ``executor="process"`` is the user's choice and is never
refused here.
"""

from __future__ import annotations

import dis
import functools
import io
import mmap
import socket
import sys
import threading
import types
from collections import deque
from typing import Any

# Functions read per stage at most (a deep call graph is cut there: nothing is refused
# for what was not read).
MAX_FUNCTIONS = 64
# Modules whose code is not read: libraries, which keep their own state process-safe or
# document it, and whose globals a user function does not change through them.
_LIBRARIES = frozenset({
    "torch", "numpy", "datapipe", "preprocessing", "PIL", "cv2", "simplejpeg", "pyarrow",
    "keras", "tensorflow", "scipy", "sklearn", "pandas", "fsspec", "s3fs", "ray", "grain",
    "datasets", "cloudpickle", "tqdm", "hypothesis", "pytest", "_pytest",
})  # fmt: skip
_HANDLES: tuple[type, ...] = (
    io.IOBase,
    socket.socket,
    mmap.mmap,
    type(threading.Lock()),
    type(threading.RLock()),
    threading.Condition,
    threading.Semaphore,
    threading.Event,
)
_CONTAINERS = (list, dict, set, deque, bytearray)
# Method names that change a container in place (their presence with such a global is
# taken as a change: the bytecode does not say which object an attribute is read from).
_CHANGES = frozenset({
    "append", "extend", "insert", "add", "update", "setdefault", "pop", "popitem",
    "popleft", "appendleft", "extendleft", "remove", "discard", "clear", "sort", "reverse",
    "__setitem__", "__delitem__", "__iadd__",
})  # fmt: skip
_STORES = frozenset({"STORE_SUBSCR", "DELETE_SUBSCR", "STORE_ATTR"})


def parent_state(fn: Any) -> str | None:
    """Why ``fn`` would behave differently in worker processes (the state it shares with
    this process: module docstring), or None when nothing that it reaches says so."""
    seen: set[int] = set()
    return _callable(fn, seen, 0)


def _library(obj: Any) -> bool:
    module = (getattr(obj, "__module__", None) or "").split(".")[0]
    return module in _LIBRARIES or module in sys.stdlib_module_names or module == "builtins"


def _callable(obj: Any, seen: set[int], depth: int) -> str | None:
    if id(obj) in seen or len(seen) >= MAX_FUNCTIONS or depth > 4:
        return None
    seen.add(id(obj))
    if isinstance(obj, functools.partial):
        return _callable(obj.func, seen, depth + 1)
    if isinstance(obj, types.MethodType):
        return _callable(obj.__func__, seen, depth + 1)
    if isinstance(obj, types.FunctionType):
        return None if _library(obj) else _function(obj, seen, depth)
    if isinstance(obj, (type, types.BuiltinFunctionType, types.ModuleType)):
        return None
    # A callable object (ours wraps the user's function; a user class with __call__):
    # its class's __call__, then the callables its attributes hold.
    call = next(
        (c.__dict__["__call__"] for c in type(obj).__mro__ if "__call__" in c.__dict__), None
    )
    if isinstance(call, types.FunctionType) and not _library(call):
        why = _function(call, seen, depth)
        if why:
            return why
    for value in _attributes(obj)[:16]:
        if callable(value) and not isinstance(value, type):
            why = _callable(value, seen, depth + 1)
            if why:
                return why
    return None


def _attributes(obj: Any) -> list[Any]:
    """The values of ``obj``'s attributes: its ``__dict__`` and its classes' slots."""
    values = list(getattr(obj, "__dict__", {}).values())
    for cls in type(obj).__mro__:
        for slot in cls.__dict__.get("__slots__", ()):
            if isinstance(slot, str) and hasattr(obj, slot):
                values.append(getattr(obj, slot))
    return values


def _function(fn: types.FunctionType, seen: set[int], depth: int) -> str | None:
    """What ``fn``'s own code does with shared state (module docstring), else what the
    user functions it loads do."""
    name = getattr(fn, "__qualname__", "the function")
    changes, loads = _read_code(fn.__code__)
    if changes.assigns:
        return f"{name} assigns the global {changes.assigns!r}"
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    for var, cell in cells.items():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if var in changes.nonlocal_stores:
            return f"{name} assigns the variable {var!r} of its enclosing function"
        if isinstance(value, _CONTAINERS) and changes.any_change and var in changes.loaded:
            return f"{name} changes the {type(value).__name__} {var!r} it closes over"
    for global_name, attrs in loads.items():
        value = fn.__globals__.get(global_name)
        why = _global(name, global_name, value, changes.any_change, seen, depth)
        if why:
            return why
        if isinstance(value, types.ModuleType) and not _library(value):
            for attr in attrs:
                why = _global(name, f"{global_name}.{attr}", getattr(value, attr, None),
                              changes.any_change, seen, depth)  # fmt: skip
                if why:
                    return why
    return None


def _global(name: str, where: str, value: Any, changes: bool, seen: set[int],
            depth: int) -> str | None:  # fmt: skip
    if isinstance(value, _HANDLES):
        return f"{name} uses the module-level {type(value).__name__} {where!r}"
    if isinstance(value, _CONTAINERS) and changes:
        return f"{name} changes the module-level {type(value).__name__} {where!r}"
    if isinstance(value, (types.FunctionType, functools.partial)) or (
        callable(value) and not isinstance(value, (type, types.ModuleType))
    ):
        return _callable(value, seen, depth + 1)
    return None


class _Changes:
    """What a code object (with its nested ones) does that changes state."""

    def __init__(self) -> None:
        self.assigns: str | None = None  # a global it assigns or deletes
        self.nonlocal_stores: set[str] = set()
        self.loaded: set[str] = set()  # closure variables it reads
        self.any_change = False  # an in-place change of some object (see _CHANGES)


def _read_code(code: types.CodeType) -> tuple[_Changes, dict[str, list[str]]]:
    """(the changes ``code`` makes, {global name: attributes loaded right after it})."""
    out = _Changes()
    loads: dict[str, list[str]] = {}
    stack = [code]
    while stack:
        c = stack.pop()
        last_global: str | None = None
        for ins in dis.get_instructions(c):
            op = ins.opname
            if op in ("STORE_GLOBAL", "DELETE_GLOBAL") and out.assigns is None:
                out.assigns = ins.argval
            elif op in ("STORE_DEREF", "DELETE_DEREF"):
                out.nonlocal_stores.add(ins.argval)
            elif op in ("LOAD_DEREF", "LOAD_CLOSURE"):
                out.loaded.add(ins.argval)
            elif op in _STORES:
                out.any_change = True
            elif op in ("LOAD_ATTR", "LOAD_METHOD") and ins.argval in _CHANGES:
                out.any_change = True
            if op == "LOAD_GLOBAL":
                last_global = ins.argval
                loads.setdefault(last_global, [])
            elif op in ("LOAD_ATTR", "LOAD_METHOD") and last_global is not None:
                loads[last_global].append(ins.argval)
                last_global = None
            else:
                last_global = None
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return out, loads
