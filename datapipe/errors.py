"""Errors that say where they happened: the op, the element index, the file."""

from __future__ import annotations


class DatapipeError(Exception):
    """Base class of this library's errors."""


class PipelineError(DatapipeError):
    """An exception raised while producing an element, annotated with its location.

    Attributes:
        op: name of the op that failed (e.g. ``"map"``).
        index: index of the failing element in that op's input stream (0-based), or None.
        path: the file involved, when there is one.
        cause: the original exception (also chained as ``__cause__``).
    """

    def __init__(self, op: str, index: int | None, cause: BaseException, path: str | None = None):
        self.op, self.index, self.cause, self.path = op, index, cause, path
        where = f"{op}" + (f" at element {index}" if index is not None else "")
        if path:
            where += f" (file {path!r})"
        super().__init__(f"{where}: {type(cause).__name__}: {cause}")

    def __reduce__(self):
        return (PipelineError, (self.op, self.index, self.cause, self.path))


class PipelineBrokenError(DatapipeError, RuntimeError):
    """The pipeline itself cannot go on (not one bad element): a worker died, an input
    cannot move past its failure. ``ignore_errors`` never drops these: skipping would
    loop or silently lose the rest of the stream."""


class WorkerDiedError(PipelineBrokenError):
    """A pipeline's worker thread (or process) died of something other than the user's
    function: a bug in datapipe, an out-of-memory kill, a signal. The stage cannot go on;
    it raises this to its consumer at once (and on every later call) instead of leaving
    the consumer waiting for elements that will never come."""


class InputStuckError(PipelineBrokenError):
    """``ignore_errors``' input failed again without moving past its failure (its state
    did not change), so skipping the failure cannot make progress.

    Attributes:
        path: the file named by the failure, when there is one.
    """

    def __init__(self, message: str, path: str | None = None):
        super().__init__(message)
        self.path = path

    def __reduce__(self):
        return (InputStuckError, (str(self), self.path))


class DeviceUnavailableError(DatapipeError, RuntimeError):
    """``prefetch_to_device`` (or ``to_torch(device=...)``) names a device this machine does
    not have (raised by ``iter()``, before any element is read)."""


class RandomAccessError(DatapipeError, TypeError):
    """Raised when an op needs random access (``global_shuffle``) but an upstream op
    (named in the message) produces a stream that can only be iterated."""


def annotate(
    op: str, index: int | None, exc: BaseException, path: str | None = None
) -> BaseException:
    """Wrap ``exc`` in a ``PipelineError`` unless it is already one of ours (located).

    Control-flow exceptions (KeyboardInterrupt, SystemExit, GeneratorExit) pass unchanged.
    """
    if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
        return exc
    if isinstance(exc, DatapipeError) and not getattr(exc, "needs_location", False):
        return exc  # located already; file readers' errors (needs_location) know only the file
    if not isinstance(exc, Exception):
        return exc
    if path is None:
        # File readers raise errors that carry the path (datapipe.io's errors set ``path``,
        # OSError sets ``filename``), so a failure inside ``map(load_image)`` names the file.
        path = getattr(exc, "path", None) or getattr(exc, "filename", None)
        path = path if isinstance(path, str) else None
    err = PipelineError(op, index, exc, path)
    err.__cause__ = exc
    return err
