"""Calling user functions on elements: tf.data's argument convention, error location, and
the base of element-wise iterators that deliver good elements before a failure."""

from __future__ import annotations

from collections.abc import Callable
from itertools import starmap
from typing import Any

import numpy as np

from datapipe._draws import enter, leave
from datapipe._iterator import OpIterator
from datapipe._positions import error_from_state, error_to_state
from datapipe.errors import annotate


def raise_pending(owner: Any, attr: str = "pending", cause: BaseException | None = None) -> None:
    """Raise ``owner.<attr>`` (``from cause`` when given) and clear it; nothing if it is None.

    No frame of the raised error's traceback keeps a reference to it: a cycle
    error -> traceback -> frame -> error would keep the pipeline (and its threads) alive
    until a gc run. Callers hand the error over on ``owner``, never in a local of their own.
    """
    err = getattr(owner, attr)
    if err is None:
        return
    setattr(owner, attr, None)
    try:
        if cause is None:
            raise err
        raise err from cause
    finally:
        err = cause = None


def as_element(value: Any) -> Any:
    """What a user function returned, as an element: tf.data's structure rule (its
    ``StructuredFunctionWrapper``) makes a returned top-level ``list`` a tuple of
    components; a list inside the result is one component (an array), as everywhere."""
    return tuple(value) if isinstance(value, list) else value


class ReturnsElement:
    """``fn`` whose result passes through ``as_element``: the function of ``map`` and
    ``random_map`` (what it returns is the element). Picklable when ``fn`` is (process
    workers receive it with cloudpickle). ``stage_draws``: the key random layers called by
    ``fn`` draw from in a stage (``datapipe._draws``; None: their own streams).
    ``copies``: ``fn`` receives writable copies of read-only numpy arrays (``writable``):
    the views of a source's or a cache's arrays that ``from_tensor_slices``,
    ``from_tensors`` and ``cache`` hand out, which ``torch.from_numpy`` / ``torch.as_tensor``
    would share with an in-place op."""

    __slots__ = ("fn", "stage_draws", "copies")

    def __init__(self, fn: Callable, stage_draws: Any = None, copies: bool = False):
        self.fn, self.stage_draws, self.copies = fn, stage_draws, copies

    def keyed(self, stage_draws: Any) -> ReturnsElement:
        """This function, with its draws keyed by ``stage_draws`` (one stage, one epoch)."""
        return ReturnsElement(self.fn, stage_draws, self.copies)

    def copying(self, copies: bool) -> ReturnsElement:
        """This function, given writable copies of read-only arrays when ``copies``."""
        return ReturnsElement(self.fn, self.stage_draws, copies)

    def __call__(self, *args: Any) -> Any:
        if self.copies:
            args = tuple(map(writable, args))
        out = self.fn(*args)
        return tuple(out) if isinstance(out, list) else out


def writable(x: Any) -> Any:
    """``x`` with every read-only numpy array in it (nested in tuples, lists and dicts)
    replaced by a writable copy; ``x`` itself when it has none. A read-only array is a view
    of a dataset's source or cache (D-TF-28): ``torch.from_numpy`` of it shares that memory
    (with a warning), so an in-place op on the tensor would change the source."""
    if type(x) is np.ndarray:
        return x if x.flags.writeable else x.copy()
    if isinstance(x, (tuple, list)):
        ys = [writable(v) for v in x]
        if all(a is b for a, b in zip(ys, x)):
            return x
        if isinstance(x, tuple) and hasattr(x, "_fields"):  # a namedtuple
            return type(x)(*ys)
        return type(x)(ys)
    if isinstance(x, dict):
        d = {k: writable(v) for k, v in x.items()}
        if all(d[k] is v for k, v in x.items()):
            return x
        return type(x)(d) if type(x) is not dict else d
    return x


def hands_out_views(ds: Any) -> bool:
    """Whether elements reaching ``ds``'s output may hold read-only views of a source's or a
    cache's numpy arrays: a ``from_tensor_slices``, ``from_tensors`` or ``cache`` node
    below it (a conservative reading: a ``batch`` in between makes new arrays, which
    ``writable`` then leaves as they are, at the cost of one check an element)."""
    from datapipe._context import walk
    from datapipe.ops.cache import CacheDataset
    from datapipe.sources.tensor_slices import TensorSlicesDataset
    from datapipe.sources.tensors import TensorsDataset

    kinds = (TensorSlicesDataset, TensorsDataset, CacheDataset)
    return any(isinstance(n, kinds) and _may_hold_arrays(n) for n in walk(ds))


def _may_hold_arrays(node: Any) -> bool:
    """Whether ``node``'s elements may hold numpy arrays: a component of rank 0 comes out as
    a numpy scalar (immutable, nothing to copy), so a source of scalars needs no copies
    (W1's ``from_tensor_slices`` of int64: a pass over each chunk cost it 0.6x its rate)."""
    from datapipe._spec import TensorSpec
    from datapipe._structure import flatten

    try:
        leaves = flatten(node.element_spec)
    except Exception:  # noqa: BLE001 - an unknown spec: assume arrays (copies are safe)
        return True
    return not all(isinstance(s, TensorSpec) and s.shape == () for s in leaves)


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
    Random layers that ``fn`` calls draw by the element's index (``datapipe._draws``) when
    ``fn`` carries a stage's draw key.
    """
    out: list = []
    chunk = writable_inputs(fn, chunk)
    scope = enter(fn, out, start_index)
    call = called_through(fn)
    try:
        # The loops run in C; ``extend`` keeps the results made before an exception, one
        # at a time (what the draw scope counts positions by).
        if unpack and chunk and type(chunk[0]) is tuple:
            out.extend(starmap(call, chunk))
        else:
            out.extend(map(call, chunk))
        if len(out) < len(chunk):
            # a StopIteration raised by the function ends ``map`` (the only way it stops
            # early): that element's failure, as a Python loop would have raised it
            raise StopIteration(f"raised by the function of '{op}'")
    except Exception as e:  # noqa: BLE001 - annotated and handed to the consumer
        return as_elements(out, fn, call), annotate(op, start_index + len(out), e)
    finally:
        leave(scope)
    return as_elements(out, fn, call), None


def called_through(fn: Callable) -> Callable:
    """What a loop over a chunk calls for ``fn``: a ``ReturnsElement``'s own function, whose
    results then go through ``as_elements`` once per chunk (a Python frame less per
    element: W1 ran 1.46x faster); ``fn`` itself otherwise."""
    return fn.fn if type(fn) is ReturnsElement else fn


def writable_inputs(fn: Callable, chunk: list) -> list:
    """``chunk`` as a loop over it calls ``fn`` (``called_through``): with writable copies of
    read-only arrays when ``fn`` asks for them (``ReturnsElement.copies``), one pass per
    chunk (a copy in each call cost a Python frame an element too)."""
    if type(fn) is ReturnsElement and fn.copies:
        return list(map(writable, chunk))
    return chunk


def as_elements(out: list, fn: Callable, called: Callable) -> list:
    """``ReturnsElement``'s rule over the results ``out`` of ``called`` (when that was
    ``fn``'s own function, ``called_through``): a list result is the tuple of its items.
    Returns ``out``, changed in place."""
    if called is not fn and any(issubclass(t, list) for t in set(map(type, out))):
        for i, v in enumerate(out):
            if isinstance(v, list):
                out[i] = tuple(v)
    return out


class ElementwiseIterator(OpIterator):
    """Base of iterators that handle their input's elements one at a time (``map``,
    ``filter``, ``scan``, ``take_while``, ``unique``) and keep going past a failing one.

    The good elements before a failure are delivered first: the failure is kept in
    ``pending`` and raised on the next call. The input elements after the failing one are
    kept in ``leftover`` (part of the state) and handled on later calls, so iteration may
    continue past the failure (``ignore_errors``) without losing any other element.
    ``count`` is the number of input elements consumed, for error indices.
    """

    def __init__(self, inner: OpIterator):
        super().__init__([inner])
        self.inner = inner
        self.count = 0
        self.leftover: list = []
        self.pending: BaseException | None = None

    def _raise_pending(self) -> None:
        raise_pending(self)

    def _take(self, n: int) -> list:
        """The next 1..n input elements (the leftover first), or ``[]`` at the end.

        They stay in ``leftover`` (part of the state) until the call commits what it used
        (``_commit``, ``_fail``): an interrupt (``KeyboardInterrupt``, ``SystemExit``, a
        ``GeneratorExit`` from the function) anywhere in between leaves them there, so a
        state taken after it, or the next call, has them. The elements are read from the
        input straight into ``leftover`` (a Python return into an attribute store: no
        signal handler runs between the two)."""
        if not self.leftover:
            self.leftover = self.inner.next_chunk(n)
        chunk = self.leftover
        return chunk if len(chunk) <= n else chunk[:n]

    def _commit(self, k: int) -> None:
        """The first ``k`` elements ``_take`` returned are consumed (one statement: an
        interrupt lands before or after it). Callers return right after it."""
        self.count, self.leftover = self.count + k, self.leftover[k:]

    def _fail(
        self, chunk: list, j: int, out: list, err: BaseException, cause: BaseException | None
    ) -> list:
        """``chunk[j]`` failed with ``err``: keep the rest of the chunk, then raise ``err``
        now when nothing good came before it, else return ``out`` and raise it next call."""
        # ``chunk`` is the head of ``leftover`` (``_take``): one statement commits the
        # elements up to the failing one and the failure.
        self.count, self.leftover, self.pending = self.count + j + 1, self.leftover[j + 1 :], err
        del err  # no local may keep it (see raise_pending)
        if not out:
            raise_pending(self, cause=cause)
        return out

    def _select(self, n: int, keep: Callable[[Any], bool]) -> list:
        """The next elements ``x`` with ``keep(x)`` true, in order: reads ``n`` input
        elements at a time until at least one is kept or the input ends (``[]``). A failing
        ``keep`` is located (``op_name``, input index) and handled as in ``_fail``."""
        self._raise_pending()
        while True:
            chunk = self._take(n)
            if not chunk:
                return []
            out: list = []
            for j, x in enumerate(chunk):
                try:
                    kept = keep(x)
                except Exception as e:  # noqa: BLE001 - located and handed to the consumer
                    # No local for the error: e's traceback keeps this frame (a cycle).
                    return self._fail(chunk, j, out, annotate(self.op_name, self.count + j, e), e)
                if kept:
                    out.append(x)
            self._commit(len(chunk))  # an interrupt before it: the chunk is in leftover
            if out:
                return out

    def get_state(self) -> dict:
        return {
            "count": self.count,
            "leftover": list(self.leftover),
            "pending_error": error_to_state(self.pending),
            "input": self.inner.get_state(),
        }

    def set_state(self, state: dict) -> None:
        self.count = int(state["count"])
        self.leftover = list(state.get("leftover", []))
        self.pending = error_from_state(state.get("pending_error"), self.op_name)
        self.inner.set_state(state["input"])
