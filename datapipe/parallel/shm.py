"""Moving elements between processes through shared memory, not pickled copies.

``dumps(obj, name)`` pickles ``obj`` with protocol 5 (PEP 574): the data of every numpy
array (and torch CPU tensor, sent as a numpy view of its storage) of at least
``MIN_SHM_BYTES`` goes *out of band* into one POSIX shared-memory segment per call
(``/dev/shm/<name>``), the rest (small arrays, scalars, strings, the structure) into the
pickle bytes. ``loads`` maps the segment, unlinks its name at once and rebuilds ``obj``
with arrays that are views of the mapping: no copy on the receiving side, and nothing
left in ``/dev/shm`` once received. The mapping is freed when the last array viewing it
is (so one array kept alive keeps its whole chunk's segment).

Segment names start with ``datapipe-`` (``SHM_PREFIX``) and carry the parent's pid, the
pool and the worker, so leftovers (a process killed between writing and reading) can be
found and removed by ``unlink_prefix``.

Where ``/dev/shm`` is missing (not Linux) everything goes in band.
"""

from __future__ import annotations

import ctypes
import errno
import io
import mmap
import os
import pickle
import sys
from typing import Any

import numpy as np

SHM_DIR = "/dev/shm"
SHM_PREFIX = "datapipe-"
# Arrays smaller than this travel inside the pickle: a segment costs ~20 µs to set up.
MIN_SHM_BYTES = 16 * 1024
_ALIGN = 64

HAVE_SHM = os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK)


def _torch_from_numpy(array: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(array)


def _torch_strided() -> Any:
    import torch

    return torch.strided


class _Pickler(pickle.Pickler):
    """Sends torch CPU tensors as numpy views (so their data goes out of band too) and
    large non-contiguous arrays as contiguous copies (numpy pickles those in band)."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is np.ndarray:
            if obj.nbytes >= MIN_SHM_BYTES and not (
                obj.flags.c_contiguous or obj.flags.f_contiguous
            ):
                return np.ascontiguousarray, (np.ascontiguousarray(obj),)
            return NotImplemented
        if type(obj).__module__ == "torch" and type(obj).__name__ == "Tensor":
            if obj.device.type == "cpu" and obj.layout is _torch_strided():
                try:  # bfloat16 and other dtypes numpy lacks: torch's own pickling
                    return _torch_from_numpy, (obj.detach().contiguous().numpy(),)
                except (TypeError, RuntimeError):
                    pass
        return NotImplemented


def dumps(obj: Any, name: str | None) -> tuple[bytes, str | None, list]:
    """(pickle bytes, segment name or None, [(offset, nbytes), ...] of the buffers)."""
    big: list[pickle.PickleBuffer] = []

    def out_of_band(buf: pickle.PickleBuffer) -> bool:
        if name is not None and HAVE_SHM and buf.raw().nbytes >= MIN_SHM_BYTES:
            big.append(buf)
            return False
        return True  # in band

    f = io.BytesIO()
    _Pickler(f, protocol=5, buffer_callback=out_of_band).dump(obj)
    data = f.getvalue()
    if not big:
        return data, None, []
    assert name is not None  # buffers go out of band only with a segment name
    layout, off = [], 0
    for b in big:
        n = b.raw().nbytes
        layout.append((off, n))
        off += -(-n // _ALIGN) * _ALIGN
    try:
        _write_segment(os.path.join(SHM_DIR, name), big, layout, off)
    except OSError as e:
        if e.errno not in _NO_ROOM:
            raise
        _warn_no_room(off, e)
        return dumps(obj, None)  # in band: slower, but the pipeline goes on
    return data, name, layout


# A segment that does not fit: /dev/shm full (Docker gives 64 MB by default), over the
# process's file size limit, out of memory.
_NO_ROOM = (errno.ENOSPC, errno.EFBIG, errno.ENOMEM, getattr(errno, "EDQUOT", errno.ENOSPC))


def _write_segment(path: str, big: list, layout: list, size: int) -> None:
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, size)
        # Allocate the pages now: writing through the mapping to a tmpfs that is full
        # raises SIGBUS, which kills the process (the training process, for inputs).
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(fd, 0, size)
        with mmap.mmap(fd, size) as mm:
            for b, (o, n) in zip(big, layout):
                mm[o : o + n] = b.raw()
    except BaseException:
        os.unlink(path)
        raise
    finally:
        os.close(fd)


def _warn_no_room(size: int, e: OSError) -> None:
    import warnings

    warnings.warn(
        f"datapipe: no room for a {size}-byte shared-memory segment in {SHM_DIR} "
        f"({os.strerror(e.errno or 0)}); worker processes' elements go through the pipe instead "
        "(a copy). Give the machine or container more shared memory (e.g. docker run "
        "--shm-size=2g) for the fast path.",
        RuntimeWarning,
        stacklevel=3,
    )


class _Discard(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        return len(b)


class _TooLarge(Exception):
    pass


class _Counting(io.RawIOBase):
    """A sink that counts what is written and stops the pickler past ``limit`` bytes."""

    def __init__(self, limit: int):
        self.n, self.limit = 0, limit

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        n = memoryview(b).nbytes  # bytes, memoryview or PickleBuffer (an array's data)
        self.n += n
        if self.n > self.limit:
            raise _TooLarge
        return n


def function_exceeds(fn: Any, limit: int) -> bool:
    """Whether ``fn`` pickles (cloudpickle, as worker processes receive it) to more than
    ``limit`` bytes; it stops at the limit, nothing is copied (a numpy array in a closure
    is written as one view). A function that does not pickle is False here (the caller's
    own pickling says why)."""
    import cloudpickle

    try:
        cloudpickle.Pickler(_Counting(limit), protocol=5).dump(fn)
    except _TooLarge:
        return True
    except Exception:  # noqa: BLE001 - set_function reports it
        return False
    return False


def check(obj: Any) -> None:
    """Raise what ``dumps(obj, ...)`` would raise for an object that cannot be sent
    (a lock, an open file, a generator); nothing is kept, and large buffers are not
    copied (they would go out of band)."""
    _Pickler(_Discard(), protocol=5, buffer_callback=lambda buf: False).dump(obj)


def loads(data: bytes, name: str | None, layout: list) -> Any:
    """Rebuild what ``dumps`` sent; the segment's name is removed at once, and no file
    descriptor stays open for it (``map_shared``)."""
    if name is None:
        return pickle.loads(data)
    path = os.path.join(SHM_DIR, name)
    fd = os.open(path, os.O_RDWR)
    try:
        os.unlink(path)
        view = map_shared(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    buffers = [view[o : o + n] for o, n in layout]
    return pickle.loads(data, buffers=buffers)


class _Mapping:
    """Owns one mapping made by ``map_shared``; unmaps it when the last view is gone."""

    __slots__ = ("addr", "size", "munmap")

    def __init__(self, addr: int, size: int, munmap: Any):
        # munmap is held here: at interpreter exit a view may outlive this module's
        # globals (``_LIBC`` is None by then: "'NoneType' object has no attribute").
        self.addr, self.size, self.munmap = addr, size, munmap

    def __del__(self) -> None:
        self.munmap(self.addr, self.size)


def _libc() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]  # fmt: skip
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()
_MAP_FAILED = ctypes.c_void_p(-1).value


def map_shared(fd: int, size: int) -> memoryview:
    """A writable view of the first ``size`` bytes of ``fd``, mapped shared, that holds no
    file descriptor. Python's ``mmap.mmap`` keeps a duplicate of ``fd`` open until the
    mapping is freed: one per chunk whose arrays are still referenced (a ``list(ds)`` of a
    long process map ran out of descriptors at ~1,000 chunks). ``mmap(trackfd=False)`` does
    not (Python >= 3.13); before, the mapping is made with libc's ``mmap``, and unmapped
    when the last array viewing it is freed."""
    if sys.version_info >= (3, 13):
        return memoryview(mmap.mmap(fd, size, trackfd=False))  # type: ignore[call-arg]
    if _LIBC is None:
        return memoryview(mmap.mmap(fd, size))
    # The length is a power of two: ctypes keeps each array type it makes (per length) for
    # good, so lengths of all sizes would grow that cache without bound. The pages past the
    # segment's end are never touched (that would be SIGBUS): the view stops at ``size``.
    length = 1 << max(12, (size - 1).bit_length())
    prot, flags = mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED
    addr = _LIBC.mmap(None, length, prot, flags, fd, 0)
    if addr is None or addr == _MAP_FAILED:
        err = ctypes.get_errno()
        raise OSError(err, f"mmap of a {size}-byte segment: {os.strerror(err)}")
    buf = (ctypes.c_char * length).from_address(addr)
    buf._mapping = _Mapping(addr, length, _LIBC.munmap)  # type: ignore[attr-defined]  # freed with buf
    return memoryview(buf).cast("B")[:size]


def discard(name: str | None) -> None:
    """Remove a segment that will not be read (its message was dropped)."""
    if name is not None:
        try:
            os.unlink(os.path.join(SHM_DIR, name))
        except FileNotFoundError:
            pass


def unlink_prefix(prefix: str) -> int:
    """Remove every segment whose name starts with ``prefix``; how many there were."""
    if not HAVE_SHM:
        return 0
    n = 0
    for entry in os.listdir(SHM_DIR):
        if entry.startswith(prefix):
            discard(entry)
            n += 1
    return n
