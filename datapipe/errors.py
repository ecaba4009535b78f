"""Errors that say where they happened: the op, the element index, the file."""

from __future__ import annotations

from datapipe._redact import redact_url


class DatapipeError(Exception):
    """Base class of this library's errors."""


class PipelineError(DatapipeError):
    """An exception raised while producing an element, annotated with its location.

    Attributes:
        op: name of the op that failed (e.g. ``"map"``).
        index: index of the failing element in that op's input stream (0-based), or None.
        path: the file involved, when there is one (a URL with its secrets redacted:
            ``datapipe.io.redact_url``, as everywhere in the message).
        cause: the original exception (also chained as ``__cause__``).
    """

    def __init__(self, op: str, index: int | None, cause: BaseException, path: str | None = None):
        path = redact_url(path) if path else path
        self.op, self.index, self.cause, self.path = op, index, cause, path
        where = f"{op}" + (f" at element {index}" if index is not None else "")
        if path:
            where += f" (file {path!r})"
        super().__init__(redact_url(f"{where}: {type(cause).__name__}: {cause}{_hint(cause)}"))

    def __reduce__(self):
        return (PipelineError, (self.op, self.index, self.cause, self.path))


def _hint(cause: BaseException) -> str:
    """What to do about a known cause: numpy's (or OpenCV's) error for an in-place op on
    an element that ``from_tensor_slices``, ``from_tensors`` or ``cache`` handed out
    read-only; tf's ``.numpy()`` called on an element that is a numpy value already."""
    message = str(cause)
    if (
        isinstance(cause, AttributeError)
        and message.startswith("'numpy.")
        and (message.endswith("has no attribute 'numpy'"))
    ):
        return (
            " (datapipe's elements are numpy arrays already, not tf's EagerTensor: use the "
            "element itself where tf needed x.numpy(); torch.as_tensor(x) makes a tensor)"
        )
    numpy_says = isinstance(cause, ValueError) and "read-only" in message
    opencv_says = "marked as readonly" in message  # cv2.error, an output argument
    if numpy_says or opencv_says:
        return (
            " (the elements of from_tensor_slices, from_tensors and cache are read-only, "
            "as tf.data's are immutable: compute a new array, x = x / 255, instead of "
            "writing into the element, x /= 255)"
        )
    return ""


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
        super().__init__(redact_url(message))
        self.path = redact_url(path) if path else path

    def __reduce__(self):
        return (InputStuckError, (str(self), self.path))


class DeviceUnavailableError(DatapipeError, RuntimeError):
    """``prefetch_to_device`` (or ``to_torch(device=...)``) names a device this machine does
    not have (raised by ``iter()``, before any element is read)."""


class RandomAccessError(DatapipeError, TypeError):
    """Raised when an op needs random access (``global_shuffle``) but an upstream op
    (named in the message) produces a stream that can only be iterated."""


class BatchShapeError(DatapipeError, ValueError):
    """Elements of one batch have different shapes (``batch``, ``rebatch``, the parallel
    batch; ``padded_batch`` when a shape is over its ``padded_shapes``). The message names
    the op, both elements' indices and shapes, the component, and the fix."""


class CardinalityError(PipelineBrokenError):
    """The input of ``assert_cardinality`` has another number of elements than asserted
    (tf.data raises ``FailedPreconditionError``). Never dropped by ``ignore_errors``."""


class DrawKeyError(RuntimeError):
    """A random layer drew in a stage whose elements have no identity on this worker (a
    ``filter`` or ``interleave`` of a rank's share): its draws would repeat another rank's
    or loader worker's. The message says why and to pass ``key=`` to ``map`` /
    ``random_map`` (docs/architecture.md, "The element's identity"). Raised inside the
    map function, so it reaches the consumer as the cause of that element's
    ``PipelineError`` (a plain ``RuntimeError``: a ``DatapipeError`` would pass the map's
    wrapping unchanged and lose the element's index)."""


class FingerprintError(DatapipeError, TypeError):
    """``snapshot`` cannot fingerprint its input pipeline: a function or argument reaches an
    object whose state cannot be read (no attributes, and pickle cannot save it), so a
    change in it would not change the snapshot's directory and a later pass would serve
    stale elements. Pass ``name=`` to ``snapshot`` to key the snapshot yourself.

    Attributes:
        where: how the object was reached from the pipeline (e.g. ``"map._func > closure
            'gen'"``).
        type_name: the object's class, ``module.QualName``.
    """

    def __init__(self, where: str, type_name: str, reason: str | None = None):
        self.where, self.type_name, self.reason = where, type_name, reason
        why = reason or (
            f"{where} is a {type_name} object, whose state cannot be read (no attributes, "
            "and pickle cannot save it), so a change in it would still serve the old snapshot"
        )
        super().__init__(
            f"snapshot: cannot fingerprint the input pipeline: {why}; pass name='...' to "
            "snapshot() to key the snapshot by a name you change when the pipeline changes"
        )

    def __reduce__(self):
        return (FingerprintError, (self.where, self.type_name, self.reason))


class WorkerContextError(DatapipeError, ValueError):
    """Malformed or contradictory worker settings (environment, options, process group)."""


class AutoShardError(DatapipeError, ValueError):
    """Auto-sharding cannot honour the requested policy (names the counts or op)."""


class RestoredFailure(RuntimeError):
    """The cause of a ``PipelineError`` re-raised after a restore: a failure that was
    buffered when the checkpoint was taken comes back at its position with its message only
    (the original exception object is not part of a state)."""


class RedactedError(Exception):
    """Stands in, in a chain of causes, for a foreign exception (fsspec's, aiohttp's,
    botocore's) whose message named a URL with its secrets: its text is ``"<module.Class>:
    <message, redacted>"`` (``datapipe.io.redact_url``); the frames are not kept (they are
    the library's that raised it)."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process (``executor="process"``;
    its text is the message), set as the ``__cause__`` of the exception re-raised in the
    parent."""

    def __str__(self) -> str:
        return self.args[0] if self.args else ""


# ---- the file readers' errors: each names the file (``path``) and the ``reason`` ----------
class FileReadError(DatapipeError, ValueError):
    """A file could not be read as the format it was asked to be read as.

    Attributes:
        path: the file, or None when the reader was given bytes only.
        reason: what was wrong, in words.

    A URL's user info and secret query values are redacted (``datapipe.io.redact_url``)
    in ``path``, ``reason`` and the message, so neither a traceback nor a log shows them.

    ``datapipe.errors.annotate`` picks ``path`` up, so the ``PipelineError`` that a failing
    ``map`` raises names the file too.
    """

    needs_location = True  # datapipe.errors.annotate adds the op and element index

    def __init__(self, reason: str, path: str | None = None):
        reason, path = redact_url(reason), redact_url(path) if path else path
        self.reason, self.path = reason, path
        super().__init__(f"{path}: {reason}" if path else reason)

    def __reduce__(self):
        return (type(self), (self.reason, self.path))

    def with_path(self, path: str) -> FileReadError:
        """A copy of this error that names ``path`` (for readers that only saw bytes)."""
        err = type(self)(self.reason, path)
        err.__cause__ = self.__cause__
        return err


class ImageDecodeError(FileReadError):
    """Bytes that are not a decodable image: empty, unknown format, truncated, corrupt
    (PNG checksum), or over Pillow's decompression-bomb limit."""


class SchemaMismatchError(FileReadError):
    """A columnar file lacks a column of the first file, or holds it with another type."""


class NullValueError(FileReadError):
    """A column holds nulls, which have no numpy representation here (see the readers)."""


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
