"""What tf.data's ``DatasetTestBase`` and ``CheckpointTestBase`` give its kernel tests,
written against datapipe: ``assert_produces`` (``assertDatasetProduces``),
``assert_error`` (``expected_error=``), ``verify_checkpoint`` (the five ``verify_fn``
variants of ``checkpoint_test_base.default_test_combinations()``) and the element
comparison they share (values and dtypes, structure by structure).

tf.data's errors map onto datapipe's: ``OutOfRangeError`` is ``StopIteration``; an
``InvalidArgumentError`` raised while an element is produced is a ``PipelineError``
(the cause chained) or a ``BatchShapeError``; one raised when the dataset is built is a
``ValueError`` or ``TypeError`` raised by the method itself.
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import datapipe as dp

# checkpoint_test_base.default_test_combinations(): the verify_fn names, as test ids.
VERIFY_FNS = [
    "verify_unused_iterator",
    "verify_fully_used_iterator",
    "verify_exhausted_iterator",
    "verify_multiple_breaks",
    "verify_reset_restored_iterator",
]


def as_value(x: Any) -> Any:
    """An element as comparable Python values: tuples stay tuples, dicts stay dicts,
    arrays and numpy scalars become ``np.ndarray`` (dtype kept), a Dataset its elements.

    >>> as_value((np.int64(3), {"a": [1, 2]}))
    (array(3), {'a': array([1, 2])})
    """
    if isinstance(x, dict):
        return {k: as_value(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return type(x)(*map(as_value, x)) if hasattr(x, "_fields") else tuple(map(as_value, x))
    if isinstance(x, dp.Dataset):
        return [as_value(v) for v in x]
    if type(x).__module__.startswith("torch"):
        return x.numpy()
    if isinstance(x, (str, bytes)):
        return x
    return np.asarray(x)


def assert_same(actual: Any, expected: Any, where: str = "element") -> None:
    """``actual`` (a datapipe element) equals ``expected`` (an upstream literal):
    the same nesting, every leaf equal as arrays (``assertAllEqual``; floats to 1e-6
    relative), and a leaf given as a numpy array or scalar in ``expected`` has its dtype.
    tf.data's ``tf.string`` is ``bytes``; datapipe keeps ``str`` as ``str``: both match."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: {actual!r} is not a dict"
        assert set(actual) == set(expected), f"{where}: keys {set(actual)} != {set(expected)}"
        for k in expected:
            assert_same(actual[k], expected[k], f"{where}[{k!r}]")
        return
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple), f"{where}: {actual!r} is not a tuple"
        assert len(actual) == len(expected), f"{where}: {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{where}[{i}]")
        return
    if isinstance(actual, dp.Dataset):
        actual = [as_value(v) for v in actual]
    got, want = _leaf(actual), _leaf(expected)
    assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape} ({actual!r})"
    if isinstance(expected, (np.ndarray, np.generic)):
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind == "f" or got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=where)
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


def _leaf(x: Any) -> np.ndarray:
    if isinstance(x, (bytes, str)):
        return np.asarray(x.decode() if isinstance(x, bytes) else x, dtype=object)
    arr = np.asarray(x.numpy() if type(x).__module__.startswith("torch") else x)
    if arr.dtype.kind in "SUO":  # text: compare as str whatever the upstream type
        flat = [v.decode() if isinstance(v, bytes) else v for v in arr.ravel().tolist()]
        out = np.empty(len(flat), dtype=object)
        out[:] = flat
        return out.reshape(arr.shape)
    return arr


def assert_produces(
    ds: dp.Dataset, expected: Any, *, unordered: bool = False, iterations: int = 1
) -> None:
    """``assertDatasetProduces(ds, expected_output)``: exactly the ``expected`` elements,
    in order (any order with ``unordered``, ``assert_items_equal=True``), then the end;
    ``iterations`` passes (``num_test_iterations``)."""
    expected = list(expected)
    for _ in range(iterations):
        got = list(ds)
        assert len(got) == len(expected), f"{len(got)} elements, expected {len(expected)}"
        if unordered:
            key = _sort_key
            got, expected = sorted(got, key=key), sorted(expected, key=key)
        for i, (a, e) in enumerate(zip(got, expected)):
            assert_same(a, e, f"element {i}")


def _sort_key(x: Any) -> str:
    return repr(_plain(as_value(x)))


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return sorted((k, _plain(v)) for k, v in x.items())
    if isinstance(x, (tuple, list)):
        return [_plain(v) for v in x]
    return np.asarray(x).tolist()


def assert_error(
    ds: dp.Dataset, error: type[BaseException], match: str | None = None, after: int = 0
) -> BaseException:
    """``expected_error=(error, match)``: ``after`` good elements, then ``error``
    (``match``: a regular expression searched in the message, or in its cause's)."""
    it = iter(ds)
    for _ in range(after):
        next(it)
    with pytest.raises(error) as info:
        next(it)
    if match is not None:
        import re

        text = str(info.value) + " | " + str(getattr(info.value, "cause", "") or "")
        assert re.search(match, text), f"{match!r} not in {text!r}"
    return info.value


def state_copy(it: Any) -> Any:
    return pickle.loads(pickle.dumps(it.get_state()))


def _keys(elements: list) -> list:
    return [_sort_key(x) for x in elements]


def verify_checkpoint(
    build: Callable[[], dp.Dataset],
    num_outputs: int,
    verify_fn: str,
    unordered: bool = False,
    verify_exhausted: bool = True,
) -> None:
    """``verify_fn(self, ds_fn, num_outputs)`` of ``checkpoint_test_base``: save an
    iterator's state (through pickle, so it holds no live object), restore it into an
    iterator of a freshly built dataset, and check what comes out.

    - ``verify_unused_iterator``: saved before the first element; restored, the whole pass.
    - ``verify_fully_used_iterator``: saved after the last element; restored, nothing more.
    - ``verify_exhausted_iterator``: saved after the end was reached; restored, the end.
    - ``verify_multiple_breaks``: saved and restored at several points; the pieces make
      the whole pass.
    - ``verify_reset_restored_iterator``: a restored iterator, then a new ``iter()``: a
      whole pass again.

    ``unordered`` (``assert_items_equal``): compared as multisets (a reshuffling pipeline
    draws another order for each new dataset object's epoch). ``verify_exhausted=False``
    (an infinite dataset): only the first ``num_outputs`` elements are compared.
    """
    if not verify_exhausted:
        unbounded = build
        build = lambda: unbounded().take(num_outputs)  # noqa: E731
    first = [as_value(x) for x in build()]
    assert len(first) == num_outputs, f"{len(first)} outputs, expected {num_outputs}"

    def same(got: list, want: list) -> None:
        if unordered:
            assert sorted(_keys(got)) == sorted(_keys(want))
        else:
            assert _keys(got) == _keys(want)

    def restored(state: Any) -> Any:
        it = iter(build())
        it.set_state(state)
        return it

    if verify_fn == "verify_unused_iterator":
        same([as_value(x) for x in restored(state_copy(iter(build())))], first)
    elif verify_fn in ("verify_fully_used_iterator", "verify_exhausted_iterator"):
        it = iter(build())
        got = [as_value(x) for x in it]  # consumed to the end (StopIteration seen)
        if verify_fn == "verify_fully_used_iterator":
            it = iter(build())
            got = [as_value(next(it)) for _ in range(num_outputs)]
        same(got, first)
        assert list(restored(state_copy(it))) == []
    elif verify_fn == "verify_multiple_breaks":
        breaks = sorted({0, num_outputs // 3, (2 * num_outputs) // 3, num_outputs})
        ds = build()
        it, got, done = iter(ds), [], 0
        for b in breaks[1:]:
            got += [as_value(next(it)) for _ in range(b - done)]
            done = b
            it = restored(state_copy(it))
        got += [as_value(x) for x in it]
        same(got, first)
    elif verify_fn == "verify_reset_restored_iterator":
        ds = build()
        it = iter(ds)
        for _ in range(num_outputs // 2):
            next(it)
        restored(state_copy(it)).close()
        same([as_value(x) for x in build()], first)
    else:  # pragma: no cover - a typo in a test
        raise AssertionError(verify_fn)


def check_determinism(
    dataset_fn: Callable[[int], dp.Dataset], expect_determinism: bool, expected: list
) -> None:
    """``checkDeterminism``: ``dataset_fn(delay_ms)`` delays its first element by
    ``delay_ms``. Deterministic: exactly ``expected`` in order. Not deterministic: the
    same elements, out of order under one of the growing delays (up to 1 s here)."""
    if expect_determinism:
        assert [as_value(x).tolist() for x in dataset_fn(100)] == expected
        return
    for delay_ms in (10, 100, 1000):
        actual = [as_value(x).tolist() for x in dataset_fn(delay_ms)]
        assert sorted(actual) == sorted(expected)
        if actual != expected:
            return
    raise AssertionError("Failed to observe nondeterministic ordering")


def verify_random_access(ds: dp.Dataset, expected: list) -> None:
    """``verifyRandomAccess``: ``ds[i]`` is ``expected[i]`` in a shuffled order with
    repeats, and ``ds[len(expected)]`` is out of range."""
    order = np.random.default_rng(0).permutation(len(expected)).tolist() * 2
    for i in order:
        assert_same(ds[i], expected[i], f"ds[{i}]")
    with pytest.raises(IndexError):
        ds[len(expected)]


def shuffled_after(ds: dp.Dataset, repetitions: int, seed: Any, reshuffle: bool) -> dp.Dataset:
    """The pipeline of upstream's ``<Op>GlobalShuffleTest`` cases: ``ds`` prefetched,
    repeated ``repetitions`` times (when more than once), then globally shuffled."""
    ds = ds.prefetch(buffer_size=dp.AUTOTUNE)
    if repetitions > 1:
        ds = ds.repeat(repetitions)
    return ds.global_shuffle(seed=seed, reshuffle_each_iteration=reshuffle)


def assert_globally_shuffled(ds: dp.Dataset, expected: list) -> None:
    """``assertCountEqual(output, expected)``, ``assertNotEqual(output, expected)`` and
    ``assertLen(output, cardinality)``: the same elements, in another order."""
    output = [as_value(x).tolist() for x in ds]
    assert sorted(output) == sorted(expected)
    assert output != expected
    assert len(output) == ds.cardinality()


def sleep_first(delay_ms: float) -> Callable[[Any], Any]:
    """The identity, sleeping ``delay_ms`` on element 0 (``checkDeterminism``'s delay)."""
    import time

    def f(x: Any) -> Any:
        if x == 0:
            time.sleep(delay_ms / 1000)
        return x

    return f


def tfrecord_frame(data: bytes) -> bytes:
    """One TFRecord as ``tf.io.TFRecordWriter`` writes it: the length, the masked CRC32C
    of the length, the data, the masked CRC32C of the data (needs ``google_crc32c``)."""
    from datapipe.io.tfrecord import masked_crc32c

    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", masked_crc32c(n)) + data + struct.pack("<I", masked_crc32c(data))


def tf_record(f: int, r: int) -> bytes:
    """Record ``r`` of file ``f`` as ``tf_record_test_base`` writes it."""
    return f"Record {r} of file {f}".encode()


def create_tf_record_files(tmp_path: Any, num_files: int, num_records: int) -> list[str]:
    """``tf_record_test_base._createFiles``: ``tf_record.<i>.txt`` of ``num_records``
    records each (needs ``google_crc32c``)."""
    out = []
    for i in range(num_files):
        fn = tmp_path / f"tf_record.{i}.txt"
        fn.write_bytes(b"".join(tfrecord_frame(tf_record(i, j)) for j in range(num_records)))
        out.append(str(fn))
    return out
