"""Pipeline stages on ``torch.profiler``'s timeline: ``record_function`` ranges per stage.

While a ``torch.profiler.profile()`` (or ``torch.autograd.profiler.profile()``) is
recording, every stage's work appears next to the model's ops and kernels in the same trace
(TensorBoard, Perfetto, ``prof.key_averages()``):

* ``datapipe::<stage>`` — each ``next_chunk`` call of a stage on the thread that makes it.
  On the training loop's thread these nest (``datapipe::batch`` around
  ``datapipe::map`` ...); the outermost one is the time the loop waited for input.
* ``datapipe::<stage> [<thread>]`` — the same on the pipeline's own threads
  (``datapipe-map-0``, ...), and each chunk a worker thread computes for a parallel stage.

``torch.autograd.profiler.emit_nvtx()`` (and ``emit_itt()``) set the same flag, so under
Nsight Systems (VTune) the ranges become NVTX (ITT) ranges; that path needs a GPU build
and has not run here.

``<stage>`` is the stage's label in ``Dataset.profile()``'s table (the op's name, ``[i]``
after it when several ops share it). torch's profiler records only the threads that have
its state: by default the thread that entered ``profile()``; pass
``experimental_config=torch.profiler._ExperimentalConfig(profile_all_threads=True)`` to see
the worker threads' ranges too.

Cost when no profiler records: the public iterator checks one flag of torch's profiler
module (``torch.autograd.profiler._is_profiler_enabled``, which profilers set when they
start and clear when they stop) per call into the chain, and worker threads per chunk; the
ranges are installed on the chain's iterators only while a profiler records
(``benchmarks/bench_torch_ranges.py``: 0.13% of a W1 epoch at most, by count).
"""

from __future__ import annotations

import sys
import threading
import weakref
from contextlib import nullcontext
from typing import Any

PREFIX = "datapipe::"


def active() -> bool:
    """Whether a torch profiler records now (False when torch was never imported)."""
    mod = sys.modules.get("torch.autograd.profiler")
    return mod is not None and bool(getattr(mod, "_is_profiler_enabled", False))


def range_name(label: str) -> str:
    """The range name of stage ``label`` on the current thread (see module docstring)."""
    name = threading.current_thread().name
    if name.startswith("datapipe-"):
        return f"{PREFIX}{label} [{name}]"
    return PREFIX + label


def tag_hook(node: Any, it: Any, ctx: Any) -> Any:
    """The ``ITERATOR_HOOKS`` entry: remember which node an op iterator runs (the first
    node that built it: a pass-through node hands back its input's iterator)."""
    d = getattr(it, "__dict__", None)
    if d is not None and "_dp_node" not in d:
        d["_dp_node"] = node
    return it


def worker_range(label: str) -> Any:
    """A ``record_function`` range for a chunk a worker thread computes (a no-op context
    while no profiler records)."""
    if not active():
        return nullcontext()
    from torch.autograd.profiler import record_function

    return record_function(range_name(label))


def _ranged(it: Any, label: str) -> Any:
    from torch.autograd.profiler import record_function

    own = type(it).next_chunk
    ref = weakref.ref(it)  # the iterator holds this function: no reference cycle

    def next_chunk(n: int) -> list:
        me = ref()
        if not active():
            return own(me, n)
        with record_function(range_name(label)):
            return own(me, n)

    next_chunk.datapipe_ranged = True  # type: ignore[attr-defined]
    return next_chunk


def _labels(ctx: Any) -> dict[int, str]:
    from datapipe.stats.recorder import _static_labels

    return _static_labels(ctx.root) if ctx is not None and ctx.root is not None else {}


def _chain(root: Any) -> list:
    """The op iterators reachable from ``root`` (each once)."""
    out, seen, stack = [], set(), [root]
    while stack:
        it = stack.pop()
        if id(it) in seen:
            continue
        seen.add(id(it))
        out.append(it)
        stack.extend(getattr(it, "inputs", ()))
    return out


# public Iterator -> {id(node): range label}, computed once per iterator.
_range_labels: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def instrument(iterator: Any) -> None:
    """Install ranges on the op iterators of a public ``Iterator``'s chain that have none
    yet (iterators built since, e.g. by ``repeat``, get theirs on a later call)."""
    labels = _range_labels.get(iterator)
    if labels is None:
        labels = _range_labels[iterator] = _labels(iterator.context)
    for it in _chain(iterator.root):
        node = it.__dict__.get("_dp_node")
        if node is None or "next_chunk" in it.__dict__:
            continue
        label = labels.get(id(node)) or f"{node._name} (inner)"
        it.next_chunk = _ranged(it, label)
        label_workers = getattr(it, "label_worker_ranges", None)
        if label_workers is not None:
            label_workers(label)  # a parallel stage: its worker threads' chunk ranges


def uninstrument(iterator: Any) -> None:
    """Remove the ranges (the profiler stopped): the chain runs its own methods again."""
    for it in _chain(iterator.root):
        fn = it.__dict__.get("next_chunk")
        if fn is not None and getattr(fn, "datapipe_ranged", False):
            del it.next_chunk
