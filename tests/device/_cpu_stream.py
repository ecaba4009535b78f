"""A CPU stand-in for torch's device API under ``StreamTransfer``.

CI has no accelerator, so ``StreamTransfer``'s protocol (what is pinned, which stream is
current while copies start, what the consumer's stream waits for and when, which tensors
are recorded on it, what is held until its copy is done) runs here against stand-ins
that log every call. "Device" tensors are CPU clones registered as such; "pinned" tensors
are the ones ``empty_pinned`` made. The real calls (``torch.Stream``, ``torch.Event``,
``Tensor.record_stream``, ``pin_memory``) are exercised only by
``benchmarks/gpu_check.py`` on a CUDA machine.
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from typing import Any

import torch

from datapipe.parallel.transfer import StreamTransfer


class Event:
    """A copy's completion. ``instant``: done as soon as recorded; otherwise done only
    when synchronised (the copy is "still running" until someone waits for it)."""

    ids = itertools.count()

    def __init__(self, log: list, instant: bool, delay_s: float):
        self.id = next(Event.ids)
        self.log, self.instant, self.delay_s = log, instant, delay_s
        self.done = instant
        self.synchronized = 0

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        if self.delay_s:
            time.sleep(self.delay_s)  # the copy takes this long to finish
        self.done = True
        self.synchronized += 1
        self.log.append(("event.synchronize", self.id))


class Stream:
    def __init__(self, name: str, log: list, owner: CpuStreamTransfer):
        self.name, self.log, self.owner = name, log, owner

    def wait_event(self, event: Event) -> None:
        self.log.append(("wait_event", self.name, event.id, threading.current_thread().name))

    def record_event(self) -> Event:
        ev = Event(self.log, self.owner.instant, self.owner.delay_s)
        self.owner.events.append(ev)
        self.log.append(("record_event", self.name, ev.id))
        return ev

    def synchronize(self) -> None:
        for ev in self.owner.events:
            ev.done = True
        self.log.append(("stream.synchronize", self.name))


class CpuStreamTransfer(StreamTransfer):
    """``StreamTransfer`` with its device-API methods on the CPU (see module docstring).

    Args:
        instant: events complete when recorded (else only when synchronised).
        delay_s: how long ``Event.synchronize`` blocks (a copy still running).
        fail_at: stream index whose copy raises (a device error).
    """

    def __init__(self, instant: bool = True, delay_s: float = 0.0, fail_at: int | None = None):
        self.log: list = []
        self.events: list[Event] = []
        self.instant, self.delay_s, self.fail_at = instant, delay_s, fail_at
        super().__init__(torch.device("cpu"), Stream("side", self.log, self))
        self.consumer = Stream("consumer", self.log, self)
        self._current = threading.local()
        self.pinned_made = 0  # pinned buffers allocated
        self.copied_into_pinned = 0  # leaves that had to be copied into pinned memory
        self.copies: list[tuple[int, str]] = []  # (source data_ptr, stream current meanwhile)
        # "pinned" allocations, kept for the test's life so that no address is reused
        self._pinned: dict[int, torch.Tensor] = {}
        self._device: dict[int, weakref.ref] = {}  # id -> "device" tensor made by copy
        self.transforms = 0
        self.on_transform = None  # called on the worker before each copy starts

    # the consumer's thread starts on "consumer"; any other thread on its own default
    def current_stream(self) -> Any:
        s = getattr(self._current, "stream", None)
        if s is None:
            main = threading.current_thread() is threading.main_thread()
            s = self.consumer if main else Stream("default", self.log, self)
            self._current.stream = s
        return s

    def set_stream(self, stream: Any) -> None:
        self._current.stream = stream

    def empty_pinned(self, shape: tuple, dtype: Any) -> Any:
        t = torch.empty(shape, dtype=dtype)
        self._pinned[t.untyped_storage().data_ptr()] = t
        self.pinned_made += 1
        return t

    def is_pinned(self, t: Any) -> bool:
        return self.is_pinned_ptr(_ptr(t))

    def is_pinned_ptr(self, ptr: int) -> bool:
        return ptr in self._pinned

    def pinned(self, x: Any) -> Any:
        t = super().pinned(x)
        if t is not None and not _same_memory(t, x):
            self.copied_into_pinned += 1
        return t

    def copy(self, t: Any) -> Any:
        self.copies.append((_ptr(t), self.current_stream().name))
        out = t.clone()
        self._device[id(out)] = weakref.ref(out)
        return out

    def owns(self, leaf: Any) -> bool:
        ref = self._device.get(id(leaf))
        return ref is not None and ref() is leaf

    def device_tensors(self) -> list:
        """The "device" tensors still alive."""
        return [t for t in (r() for r in self._device.values()) if t is not None]

    def record_stream(self, t: Any, stream: Any) -> None:
        self.log.append(("record_stream", stream.name, _ptr(t)))

    def transform(self, index: int, element: Any) -> Any:
        if index == self.fail_at:
            raise RuntimeError("out of device memory (stand-in)")
        self.transforms += 1
        if self.on_transform is not None:
            self.on_transform()
        return super().transform(index, element)


def _ptr(t: torch.Tensor) -> int:
    """The address of a tensor's memory (a nested tensor's: its values')."""
    return t.values().data_ptr() if t.is_nested else t.untyped_storage().data_ptr()


def _same_memory(t: torch.Tensor, x: Any) -> bool:
    if isinstance(x, torch.Tensor):
        return _ptr(x) == _ptr(t)
    ptr = getattr(x, "__array_interface__", {}).get("data", (None,))[0]
    return ptr == _ptr(t)
