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
_SUBSCRIPT_STORES = frozenset({"STORE_SUBSCR", "DELETE_SUBSCR"})
_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_DEREF", "LOAD_FAST"})


def parent_state(fn: Any) -> str | None:
    """Why ``fn`` would behave differently in worker processes (the state it shares with
    this process: module docstring), or None when nothing that it reaches says so. A
    function whose reading fails (an object whose attributes raise) is refused too: the
    pipeline never fails because of this reading."""
    try:
        return _callable(fn, set(), 0)
    except Exception as e:  # noqa: BLE001 - a refusal, not an error
        return f"its code could not be read ({type(e).__name__}: {e})"


def _library(obj: Any) -> bool:
    module = (getattr(obj, "__module__", None) or "").split(".")[0]
    return module in _LIBRARIES or module in sys.stdlib_module_names or module == "builtins"


def _callable(obj: Any, seen: set[int], depth: int) -> str | None:
    if id(obj) in seen or len(seen) >= MAX_FUNCTIONS or depth > 6:
        return None
    seen.add(id(obj))
    if isinstance(obj, functools.partial):
        return _callable(obj.func, seen, depth + 1)
    if isinstance(obj, types.MethodType):
        func = obj.__func__
        if isinstance(func, types.FunctionType):
            return _method(func, obj.__self__, seen, depth)
        return None
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
        why = _method(call, obj, seen, depth)
        if why:
            return why
    for value in _attributes(obj)[:16]:
        if callable(value) and not isinstance(value, type):
            why = _callable(value, seen, depth + 1)
            if why:
                return why
    return None


def _method(fn: types.FunctionType, owner: Any, seen: set[int], depth: int) -> str | None:
    """``fn`` called on ``owner`` (its ``self``): what the function does, what ``owner``
    holds (a handle), and whether it changes ``owner`` (a worker changes its copy)."""
    if _library(fn):
        return None
    name = getattr(fn, "__qualname__", "the method")
    held = _handle_in(owner)
    if held:
        return f"{name} runs on an object holding the {held}"
    code = fn.__code__
    if code.co_argcount and _changes_of(code).changes_local(code.co_varnames[0]):
        return f"{name} changes its object (a worker would change its copy)"
    return _function(fn, seen, depth)


def _attributes(obj: Any) -> list[Any]:
    """The values of ``obj``'s attributes: its ``__dict__`` and its classes' slots."""
    values = list(getattr(obj, "__dict__", {}).values())
    for cls in type(obj).__mro__:
        for slot in cls.__dict__.get("__slots__", ()):
            if isinstance(slot, str) and hasattr(obj, slot):
                values.append(getattr(obj, slot))
    return values


def _handle_in(obj: Any) -> str | None:
    """The type and name of a handle ``obj`` holds directly (one level), if any."""
    module = (type(obj).__module__ or "").split(".")[0]
    if isinstance(obj, (type, types.ModuleType)) or module in _LIBRARIES:
        return None  # (the standard library's objects are read: a ZipFile holds its file)
    try:
        items = list(vars(obj).items())[:64]
    except TypeError:  # no __dict__
        return None
    for key, value in items:
        if isinstance(value, _handles()):
            return f"{type(value).__name__} {key!r}"
    return None


def _handles() -> tuple[type, ...]:
    """``_HANDLES``, and a sqlite3 connection once sqlite3 is imported."""
    sqlite3 = sys.modules.get("sqlite3")
    return _HANDLES + ((sqlite3.Connection,) if sqlite3 is not None else ())


def _function(fn: types.FunctionType, seen: set[int], depth: int) -> str | None:
    """What ``fn``'s own code does with shared state (module docstring), else what the
    user functions it loads do."""
    name = getattr(fn, "__qualname__", "the function")
    changes = _changes_of(fn.__code__)
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
        if isinstance(value, _CONTAINERS) and changes.changes(("deref", var)):
            return f"{name} changes the {type(value).__name__} {var!r} it closes over"
        if callable(value) and not isinstance(value, type):  # a decorator's function
            why = _callable(value, seen, depth + 1)
            if why:
                return why
    for (kind, global_name), chains in changes.loads.items():
        if kind != "global":
            continue
        value = fn.__globals__.get(global_name)
        why = _global(name, global_name, value, changes.changes(("global", global_name)),
                      seen, depth)  # fmt: skip
        if why:
            return why
        if isinstance(value, (types.ModuleType, type)) and not _library(value):
            for chain in chains:
                why = _attribute_chain(name, global_name, value, chain, changes, seen, depth)
                if why:
                    return why
    return None


def _attribute_chain(name: str, root: str, value: Any, chain: tuple[str, ...],
                     changes: _Changes, seen: set[int], depth: int) -> str | None:  # fmt: skip
    """``root.a.b`` loaded from a user module or class: each value on the way."""
    where = root
    for k, attr in enumerate(chain[:3]):
        if attr in _CHANGES and k == len(chain) - 1:
            return None  # the method called on the value before it (judged there)
        try:
            value = getattr(value, attr)
        except Exception:  # noqa: BLE001 - a lazy attribute that fails: nothing to read
            return None
        where = f"{where}.{attr}"
        changed = changes.changes(("global", root), chain[: k + 1])
        why = _global(name, where, value, changed, seen, depth)
        if why:
            return why
        if not isinstance(value, (types.ModuleType, type)):
            return None
    return None


def _global(name: str, where: str, value: Any, changed: bool, seen: set[int],
            depth: int) -> str | None:  # fmt: skip
    if isinstance(value, _handles()):
        return f"{name} uses the module-level {type(value).__name__} {where!r}"
    if isinstance(value, _CONTAINERS) and changed:
        return f"{name} changes the module-level {type(value).__name__} {where!r}"
    if isinstance(value, (types.ModuleType, type)):
        return None
    held = _handle_in(value)
    if held:  # a module-level object holding a file or a lock (a reader, a ZipFile)
        return f"{name} uses the module-level {type(value).__name__} {where!r} holding the {held}"
    if isinstance(value, (types.FunctionType, functools.partial, types.MethodType)) or (
        callable(value) and not _library(type(value))
    ):
        return _callable(value, seen, depth + 1)
    return None


class _Changes:
    """What a code object (with its nested ones) does that changes state: the globals it
    assigns, the closure variables it rebinds, and the values it changes in place -- a
    value loaded by name (``("global", n)``, ``("deref", n)``, ``("local", n)``) and a
    chain of attributes, followed by a changing method (``calls.append``) or by an
    attribute store (``self.n = ...``); and whether it stores into any subscript (the
    bytecode does not say cheaply into which: every loaded container then counts)."""

    def __init__(self) -> None:
        self.assigns: str | None = None
        self.nonlocal_stores: set[str] = set()
        self.loads: dict[tuple[str, str], list[tuple[str, ...]]] = {}
        self.changed: set[tuple[tuple[str, str], tuple[str, ...]]] = set()
        self.subscript_store = False

    def changes(self, target: tuple[str, str], chain: tuple[str, ...] = ()) -> bool:
        """Whether the value ``target`` (through ``chain``) may be changed in place."""
        return (target, chain) in self.changed or (self.subscript_store and target in self.loads)

    def changes_local(self, var: str) -> bool:
        """Whether the local ``var`` (a method's ``self``) or what it holds is changed."""
        return any(t == ("local", var) for t, _ in self.changed)


_KINDS = {"LOAD_GLOBAL": "global", "LOAD_DEREF": "deref", "LOAD_FAST": "local"}


def _changes_of(code: types.CodeType) -> _Changes:
    out = _Changes()
    stack = [code]
    while stack:
        c = stack.pop()
        target: tuple[str, str] | None = None
        chain: list[str] = []
        copied: tuple[tuple[str, str], tuple[str, ...]] | None = None  # `x.n += 1`: COPY
        for ins in dis.get_instructions(c):
            op = ins.opname
            if op in ("STORE_GLOBAL", "DELETE_GLOBAL") and out.assigns is None:
                out.assigns = ins.argval
            elif op in ("STORE_DEREF", "DELETE_DEREF"):
                out.nonlocal_stores.add(ins.argval)
            elif op in _SUBSCRIPT_STORES:
                out.subscript_store = True
            if op in _KINDS:
                target, chain = (_KINDS[op], ins.argval), []
                out.loads.setdefault(target, []).append(())
            elif op in ("LOAD_ATTR", "LOAD_METHOD") and target is not None:
                if ins.argval in _CHANGES:
                    out.changed.add((target, tuple(chain)))
                chain.append(ins.argval)
                out.loads[target].append(tuple(chain))
                continue
            elif op in ("STORE_ATTR", "DELETE_ATTR") and (target is not None or copied):
                if target is not None:
                    out.changed.add((target, tuple(chain)))  # target.chain.attr = ...
                elif copied is not None:
                    out.changed.add(copied)  # target.attr += ... (loaded, copied, stored)
                target, copied = None, None
            elif op == "COPY" and target is not None:
                copied, target = (target, tuple(chain)), None
            else:
                target = None
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return out
