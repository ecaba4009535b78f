"""Moving elements to a device: the part of ``prefetch_to_device`` that knows accelerators.

``for_device(device)`` (called by ``iter()``) checks that the device exists and returns one
of three transfers:

* ``HostTransfer`` (``device="cpu"``): numeric numpy leaves become CPU tensors sharing
  their memory (``to_torch``'s conversion); nothing is copied. The stage is a plain
  ``prefetch``.
* ``StreamTransfer``: an accelerator whose torch backend creates streams and events
  through the device-generic API (``torch.Stream(device)``, ``torch.Event``,
  ``torch.accelerator.current_stream`` / ``set_stream``): CUDA, ROCm, XPU and others. The
  copy follows the pattern of torch's own ``DataLoader(pin_memory=True)`` plus a side
  stream, as in NVIDIA's Apex / timm prefetchers:

  1. on the stage's thread, each numeric leaf is put in pinned (page-locked) host memory
     (a batch stacked on that thread is already there: ``_batching.read_with_alloc``
     with ``alloc``), copied with
     ``non_blocking=True`` while the side stream is current, and an event is recorded on
     the side stream after the element's last copy;
  2. on the consumer's thread, at hand-over, the consumer's current stream waits for that
     event (``Stream.wait_event``: the host does not block; the kernels queued after it
     run once the copy is done), and every copied tensor is marked as used on that stream
     (``Tensor.record_stream``), so the caching allocator does not give its memory to
     another tensor while the consumer's kernels may still read it (the memory was
     allocated on the side stream);
  3. the pinned source of a copy stays referenced until its event has completed (torch's
     pinned-memory cache also records the copy's event; holding it here does not depend on
     that), and ``close()`` waits for the side stream before letting go.

* ``BlockingTransfer``: an accelerator whose backend has no streams for ``torch.Stream``;
  the stage's thread copies with a blocking ``.to(device)``.

Only ``HostTransfer`` has ever run on real hardware: this project's machines have no
accelerator. ``StreamTransfer``'s calls into torch's device API are unverified until
``benchmarks/gpu_check.py`` runs on a CUDA machine; unit tests drive its protocol with a
CPU stand-in for those calls (``tests/device/_cpu_stream.py``).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from datapipe import _structure as nest
from datapipe.errors import DeviceUnavailableError
from datapipe.ops.to_torch import _torch_dtype, element_to_torch, leaf_to_torch


def for_device(device: Any) -> Any:
    """The transfer to ``device`` (a ``torch.device``; its index defaults to the current
    device of its type, read now).

    Raises:
        DeviceUnavailableError: the device type is not this machine's accelerator (e.g.
            ``"cuda"`` with a CPU build of torch), or the index is past the device count.
    """
    import torch

    if device.type == "cpu":
        return HostTransfer()
    acc = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    if acc is None or acc.type != device.type:
        have = "no accelerator" if acc is None else f"the accelerator {acc.type!r}"
        raise DeviceUnavailableError(
            f"prefetch_to_device: device {str(device)!r} is not available: torch "
            f"{torch.__version__} sees {have} on this machine (torch.accelerator). Use "
            "device='cpu' to run the same pipeline without it."
        )
    count = torch.accelerator.device_count()
    index = torch.accelerator.current_device_index() if device.index is None else device.index
    if not 0 <= index < count:
        raise DeviceUnavailableError(
            f"prefetch_to_device: device {str(device)!r} is not available: this machine has "
            f"{count} {device.type} device(s) (indices 0 to {count - 1})"
        )
    device = torch.device(device.type, index)
    try:
        stream = torch.Stream(device)
    except (RuntimeError, NotImplementedError):  # a backend without streams (e.g. MPS)
        return BlockingTransfer(device)
    return StreamTransfer(device, stream)


def host_tensor(x: Any) -> Any:
    """The tensor ``to_torch`` makes of a leaf (numeric numpy arrays and scalars share
    their memory; a ragged component becomes a nested tensor; a tensor is itself), or None
    for the leaves that stay as they are (text, objects, Python values)."""
    import torch

    try:
        t = leaf_to_torch(x)
    except TypeError:  # a numpy dtype torch lacks
        return None
    return t if isinstance(t, torch.Tensor) else None


class HostTransfer:
    """``device="cpu"``: the consumer gets ``to_torch``'s elements (see module docstring)."""

    transform = None  # nothing to compute on the stage's thread: a plain prefetch
    chunked = True  # hand-over needs no per-element stream wait: chunks are fine
    alloc = None

    def hand_over(self, element: Any, sync: bool = False) -> Any:
        return element_to_torch(element)

    def synchronize(self) -> None:
        return None

    def close(self) -> None:
        return None


class BlockingTransfer:
    """An accelerator without streams: blocking copies on the stage's thread."""

    chunked = True
    alloc = None

    def __init__(self, device: Any):
        self.device = device

    def transform(self, index: int, element: Any) -> Any:
        def move(x: Any) -> Any:
            t = host_tensor(x)
            return x if t is None else t.to(self.device)

        return nest.map_structure(move, element)

    def hand_over(self, element: Any, sync: bool = False) -> Any:
        return element

    def synchronize(self) -> None:
        return None

    def close(self) -> None:
        return None


class InFlight:
    """A copied element on its way: the device-side structure, the event recorded after
    its copies, and the pinned sources (kept until the event has completed)."""

    __slots__ = ("value", "event", "nbytes")

    def __init__(self, value: Any, event: Any, nbytes: int):
        self.value, self.event, self.nbytes = value, event, nbytes


class StreamTransfer:
    """Pinned memory, a side stream, events (see the module docstring for each step).

    ``transform`` runs on the stage's one worker thread; ``hand_over``, ``synchronize`` and
    ``close`` on the consumer's thread (``close`` after the worker has stopped). The calls
    into torch's device API are the small methods at the top, so the protocol around them
    (what is pinned, held, waited for and recorded, in which order) runs in CPU tests with
    a stand-in for them.
    """

    chunked = False  # each element's stream wait is issued when the consumer takes it

    def __init__(self, device: Any, stream: Any):
        import torch

        self.torch = torch
        self.device, self.stream = device, stream
        self.last_event: Any = None
        # (event, pinned sources) of copies that may still be running, oldest first
        self.holding: deque = deque()

    # ---- torch's device API ----------------------------------------------------------------
    def current_stream(self) -> Any:
        return self.torch.accelerator.current_stream(self.device)

    def set_stream(self, stream: Any) -> None:
        self.torch.accelerator.set_stream(stream)  # also makes its device current

    def empty_pinned(self, shape: tuple, dtype: Any) -> Any:
        return self.torch.empty(shape, dtype=dtype, pin_memory=True)

    def is_pinned(self, t: Any) -> bool:
        return bool(t.is_pinned())

    def copy(self, t: Any) -> Any:
        """Start copying pinned ``t`` on the current (side) stream."""
        return t.to(self.device, non_blocking=True)

    def owns(self, leaf: Any) -> bool:
        return isinstance(leaf, self.torch.Tensor) and leaf.device == self.device

    def record_stream(self, t: Any, stream: Any) -> None:
        t.record_stream(stream)

    # ---- the stage's thread ----------------------------------------------------------------
    def alloc(self, shape: tuple, dtype: Any) -> Any:
        """A pinned buffer that ``batch`` stacks into on the stage's thread (numpy view of a
        pinned tensor for numpy leaves; a pinned tensor for torch leaves), or None."""
        if isinstance(dtype, self.torch.dtype):
            return self.empty_pinned(shape, dtype)
        td = _torch_dtype(np.dtype(dtype))
        return None if td is None else self.empty_pinned(shape, td).numpy()

    def pinned(self, x: Any) -> Any:
        """``x`` as a pinned CPU tensor (copied into pinned memory unless it is there: a
        batch stacked into ``alloc``'s buffer is used as it is), or None (not numeric)."""
        torch = self.torch
        if isinstance(x, np.ndarray):
            base = x.base  # a numpy view of a pinned tensor: copy from that tensor, so that
            # the pinned-memory cache sees its own allocation
            if (
                isinstance(base, torch.Tensor)
                and base.device.type == "cpu"
                and tuple(base.shape) == x.shape
                and base.is_contiguous()
                and x.flags.c_contiguous
                and base.data_ptr() == x.__array_interface__["data"][0]
                and self.is_pinned(base)
            ):
                return base
        t = host_tensor(x)
        if t is None or t.device.type != "cpu" or t.is_nested or self.is_pinned(t):
            return t
        out = self.empty_pinned(tuple(t.shape), t.dtype)
        out.copy_(t)
        return out

    def transform(self, index: int, element: Any) -> InFlight:
        """Start copying ``element`` (stream index ``index``) to the device."""
        self._release_finished()
        sources: list = []

        def start_copy(x: Any) -> Any:
            t = self.pinned(x)
            if t is None or t.is_nested:  # a ragged component is copied at hand-over
                return x if t is None else t
            sources.append(t)
            return self.copy(t)

        previous = self.current_stream()
        self.set_stream(self.stream)
        try:
            value = nest.map_structure(start_copy, element)
            event = self.stream.record_event()
        finally:
            self.set_stream(previous)
        self.holding.append((event, sources))
        return InFlight(value, event, sum(int(t.nbytes) for t in sources))

    def _release_finished(self) -> None:
        held = self.holding
        while held and held[0][0].query():
            held.popleft()

    # ---- the consumer's thread -------------------------------------------------------------
    def hand_over(self, item: InFlight, sync: bool = False) -> Any:
        """Order the consumer's stream after ``item``'s copies and give its tensors to that
        stream; with ``sync`` also block the host until they are done (statistics count
        the wait as input time)."""
        current = self.current_stream()
        current.wait_event(item.event)

        def finish(leaf: Any) -> Any:
            if isinstance(leaf, self.torch.Tensor) and leaf.is_nested:
                # Ragged (nested) tensors: no pinned buffer and no record_stream for their
                # layout, so they are copied here, on the loop's stream (no overlap).
                return leaf.to(self.device)
            if self.owns(leaf):
                self.record_stream(leaf, current)
            return leaf

        value = nest.map_structure(finish, item.value)
        self.last_event = item.event
        if sync:
            item.event.synchronize()
        return value

    def synchronize(self) -> None:
        """Block the host until the last element handed over has arrived on the device."""
        if self.last_event is not None:
            self.last_event.synchronize()

    def close(self) -> None:
        """Wait for copies still running (their sources must outlive them), then let go."""
        try:
            if self.holding:
                self.stream.synchronize()
        except RuntimeError:  # a device in an error state: nothing more to wait for
            pass
        self.holding.clear()
        self.last_event = None
