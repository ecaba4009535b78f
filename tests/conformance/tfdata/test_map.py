"""tf.data's ``map`` kernel tests (``kernel_tests/map_test.py``), against datapipe."""

from __future__ import annotations

import collections
import threading

import attr
import numpy as np
import pytest

import datapipe as dp
from datapipe.errors import PipelineError

from ._support import (
    VERIFY_FNS,
    assert_produces,
    assert_same,
    check_determinism,
    sleep_first,
    verify_checkpoint,
)

COMPONENTS = (
    np.arange(7),
    np.array([[1, 2, 3]]) * np.arange(7)[:, np.newaxis],
    np.array(37.0) * np.arange(7),
)


def square3(x, y, z):
    return np.square(x), np.square(y), np.square(z)


def squared(i):
    return tuple(c[i] ** 2 for c in COMPONENTS)


def test_map_dataset():
    """kernel_tests/map_test.py::MapTest.testMapDataset."""
    ds = dp.from_tensor_slices(COMPONENTS).map(square3).repeat(14)
    assert [s.shape for s in ds.element_spec] == [c.shape[1:] for c in COMPONENTS]
    assert_produces(ds, [squared(i) for _ in range(14) for i in range(7)])


def _consume_from_threads(ds, n_threads):
    """Elements of one iterator read by ``n_threads`` threads. One Iterator has one
    consumer at a time (D-TF-7): the threads share it through a lock, as a Python
    generator is shared."""
    it, lock, results = iter(ds), threading.Lock(), []

    def run():
        while True:
            with lock:
                try:
                    x = next(it)
                except StopIteration:
                    return
            results.append(x)

    threads = [threading.Thread(target=run) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _check_multithreaded(results, repeats):
    results.sort(key=lambda x: int(x[0]))
    assert len(results) == 7 * repeats
    for i in range(7):
        for j in range(repeats):
            assert_same(results[i * repeats + j], squared(i))


def test_map_dataset_multithreaded():
    """kernel_tests/map_test.py::MapTest.testMapDatasetMultiThreaded (D-TF-7)."""
    ds = dp.from_tensor_slices(COMPONENTS).map(square3).repeat(18)
    _check_multithreaded(_consume_from_threads(ds, 8), 18)


PARALLEL = [(1, 1), (1, 2), (2, 2), (2, 4), (8, 8), (8, 16)]


def _parallel_map(count, num_parallel_calls, buffer_size):
    ds = dp.from_tensor_slices(COMPONENTS).map(square3, num_parallel_calls=num_parallel_calls)
    ds = ds.prefetch(buffer_size).repeat(count)
    assert [s.shape for s in ds.element_spec] == [c.shape[1:] for c in COMPONENTS]
    return ds


@pytest.mark.parametrize("num_parallel_calls,buffer_size", PARALLEL)
def test_parallel_map_dataset(num_parallel_calls, buffer_size):
    """kernel_tests/map_test.py::MapTest.testParallelMapDataset."""
    ds = _parallel_map(14, num_parallel_calls, buffer_size)
    assert_produces(ds, [squared(i) for _ in range(14) for i in range(7)])


@pytest.mark.parametrize("num_parallel_calls,buffer_size", PARALLEL)
def test_parallel_map_dataset_multithreaded(num_parallel_calls, buffer_size):
    """kernel_tests/map_test.py::MapTest.testParallelMapDatasetMultiThreaded (D-TF-7)."""
    ds = _parallel_map(18, num_parallel_calls, buffer_size)
    _check_multithreaded(_consume_from_threads(ds, 64), 18)


def test_implicit_dispose_parallel_map_dataset(threads):
    """kernel_tests/map_test.py::MapTest.testImplicitDisposeParallelMapDataset: a parallel
    map and two prefetches not run to exhaustion stop their threads once dropped."""
    components = (
        np.arange(1000),
        np.array([[1, 2, 3]]) * np.arange(1000)[:, np.newaxis],
        np.array(37.0) * np.arange(1000),
    )
    ds = dp.from_tensor_slices(components).map(square3, num_parallel_calls=100)
    ds = ds.prefetch(100).repeat(1000).prefetch(100)
    it = iter(ds)
    for i in range(3):
        assert int(next(it)[0]) == i * i
    del it
    assert threads.settle(5.0) == []


def check_numerics(x):
    """``tf.debugging.check_numerics(x, "message")``."""
    if np.isnan(x):
        raise ValueError("message : Tensor had NaN values")
    return x


NAN_COMPONENTS = np.array([1.0, 2.0, 3.0, np.nan, 5.0]).astype(np.float32)


def test_parallel_map_unspecified_output_size():
    """kernel_tests/map_test.py::MapTest.testParallelMapUnspecifiedOutputSize."""
    ds = dp.from_tensor_slices(NAN_COMPONENTS).map(check_numerics, num_parallel_calls=2)
    it = iter(ds)
    assert [float(next(it)) for _ in range(3)] == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    "parallel", [True, False], ids=["testParallelMapError", "testPrefetchError"]
)
def test_map_error(parallel):
    """kernel_tests/map_test.py::MapTest.testParallelMapError, testPrefetchError: the 4th
    element fails, the 5th follows it, then the end."""
    ds = dp.from_tensor_slices(NAN_COMPONENTS)
    if parallel:
        ds = ds.map(check_numerics, num_parallel_calls=2)
    else:
        ds = ds.map(check_numerics).prefetch(2)
    it = iter(ds)
    assert [float(next(it)) for _ in range(3)] == [1.0, 2.0, 3.0]
    with pytest.raises(PipelineError, match="map at element 3: ValueError: message"):
        next(it)
    assert float(next(it)) == 5.0
    with pytest.raises(StopIteration):
        next(it)


def test_seeded_stateful_operator_is_properly_stateful():
    """kernel_tests/map_test.py::MapTest.testSeededStatefulOperatorIsProperlyStateful: a
    seeded random function draws a new value per element, and the same values again on a
    new iterator (``random_map``'s draws are keyed by seed, element and epoch; a new
    Dataset object starts again at epoch 0)."""

    def build():
        ds = dp.from_tensors(0).repeat(10)
        return ds.random_map(lambda _, rng: rng.uniform(), seed=11).batch(2)

    random_values = np.concatenate(list(build()))
    assert len(random_values) == 10
    assert np.abs(np.diff(random_values)).max() > 1e-6
    np.testing.assert_allclose(random_values, np.concatenate(list(build())))


def test_stateful_map_keeps_state_across_iterators():
    """kernel_tests/map_test.py::MapTest.testStatefulMapKeepsStateAcrossIterators: each
    repetition of a seeded random map draws new values."""
    ds = dp.from_tensors(0).repeat(10)
    ds = ds.random_map(lambda _, rng: rng.uniform(), seed=11).repeat(1000).batch(10)
    it = iter(ds)
    random_values = next(it)
    i = 0
    while i < 99:
        if np.any(random_values != next(it)):
            break
        i += 1
    assert i < 99


def test_stateful_operation_in_short_circuit():
    """kernel_tests/map_test.py::MapTest.testStatefulOperationInShortCircuit: the function
    runs once per element (a Python counter in place of a TF variable); it may run up to
    a chunk ahead of the consumer (D-TF-8)."""
    counter = [0]

    def increment_fn(x):
        counter[0] += 1
        return x

    it = iter(dp.range(10).map(increment_fn))
    for i in range(10):
        # D-TF-8: the iterator computes a chunk ahead of the consumer, never behind it
        assert i <= counter[0] <= 10
        assert next(it) == i
    assert counter[0] == 10
    with pytest.raises(StopIteration):
        next(it)
    assert counter[0] == 10


def test_map_dict():
    """kernel_tests/map_test.py::MapTest.testMapDict."""
    ds = dp.range(10).map(lambda x: {"foo": x * 2, "bar": x**2}).map(lambda d: d["foo"] + d["bar"])
    assert_produces(ds, [i * 2 + i**2 for i in range(10)])


def test_map_namedtuple():
    """kernel_tests/map_test.py::MapTest.testMapNamedtuple."""
    labels = dp.range(10)
    images = labels.map(lambda label: -label)
    dataset_tuple = dp.zip((labels, images))
    example = collections.namedtuple("Example", ["label", "image"])
    dataset_namedtuple = dataset_tuple.map(example)
    dataset_tuple = dataset_tuple.map(lambda label, image: (label, 2 * image))
    dataset_namedtuple = dataset_namedtuple.map(lambda e: e._replace(image=2 * e.image))
    for i, (tuple_, namedtuple_) in enumerate(zip(dataset_tuple, dataset_namedtuple)):
        assert isinstance(namedtuple_, example)
        assert tuple_ == namedtuple_ == (i, -2 * i)
    assert len(list(dataset_namedtuple)) == 10


def test_map_attrs():
    """kernel_tests/map_test.py::MapTest.testMapAttrs."""
    labels = dp.range(10)
    ds = dp.zip((labels, labels.map(lambda label: -label)))

    @attr.s(eq=True)
    class Example:
        label = attr.ib()
        image = attr.ib()

    def preprocess(example):
        example.image = 2 * example.image
        return example

    out = list(ds.map(Example).map(preprocess))
    assert out == [Example(i, -2 * i) for i in range(10)]


def test_use_step_container_in_map():
    """kernel_tests/map_test.py::MapTest.testUseStepContainerInMap (``tf.map_fn`` over the
    row, in Python)."""
    row = np.arange(6)
    ds = dp.from_tensors(row).map(lambda elems: np.array([x * x for x in elems]))
    assert_produces(ds, [row**2])


def _control_map_fn(x, y, with_cond):
    def multiply():
        return x * 2

    def divide():
        return x // 2

    def defaults_two():
        return multiply() if x % 2 == 0 else divide()

    if y == 2 or y == 3:
        return defaults_two() if with_cond else divide()
    return multiply()


@pytest.mark.parametrize("num", [2, 3, 4])
def test_case_and_cond_in_map(num):
    """kernel_tests/map_test.py::MapTest.testCaseAndCondInMap (``tf.case`` / ``tf.cond``
    as Python branches)."""
    ds = dp.from_tensor_slices(np.arange(6)).map(lambda x: _control_map_fn(x, num, True))
    expected = [(i // 2 if i % 2 else i * 2) if num in (2, 3) else i * 2 for i in range(6)]
    assert_produces(ds, expected)


@pytest.mark.parametrize("num", [2, 3, 4])
def test_case_in_while_in_map(num):
    """kernel_tests/map_test.py::MapTest.testCaseInWhileInMap."""
    row = np.arange(6)
    ds = dp.from_tensors(row).map(
        lambda elems: np.array([_control_map_fn(x, num, False) for x in elems])
    )
    assert_produces(ds, [np.array([x // 2 if num in (2, 3) else x * 2 for x in row])])


def test_case_and_cond_in_while_in_map():
    """kernel_tests/map_test.py::MapTest.testCaseAndCondInWhileInMap."""
    row, num = np.arange(6), 2
    ds = dp.from_tensors(row).map(
        lambda elems: np.array([_control_map_fn(x, num, True) for x in elems])
    )
    expected = [(x // 2 if x % 2 else x * 2) if num in (2, 3) else x * 2 for x in row]
    assert_produces(ds, [np.array(expected)])


def test_nested_list_map_dataset():
    """kernel_tests/map_test.py::MapTest.testNestedListMapDataset: a list nested in the
    returned tuple is one component (a tensor), not a structure."""
    ds = dp.from_tensors([0, 1, 2]).repeat(10).map(lambda a: ([a[1], a[0] + a[2]], a[1]))
    assert_produces(ds, [(np.array([1, 2]), 1)] * 10)


@pytest.mark.parametrize("buffer_size", [1, 2, 3, 4])
def test_prefetch(buffer_size):
    """kernel_tests/map_test.py::MapTest.testPrefetch: ``prefetch(b)`` never runs the
    function more than ``b`` elements ahead of the consumer, and does run ahead: the 6th
    call happens while the consumer holds the 6 - b first results. The buffer is refilled
    a chunk at a time (D-TF-8), so the 6th call may wait until the consumer has taken up
    to ``b`` more elements."""
    ev = threading.Event()

    def map_fn(x):
        if x == 5:
            ev.set()
        return x * x

    it = iter(dp.range(100).map(map_fn).prefetch(buffer_size))
    consumed = 5 - buffer_size + 1
    for i in range(consumed):
        assert not ev.is_set()
        assert next(it) == i * i
    while not ev.wait(2.0):  # D-TF-8: set at the latest when this chunk is used up
        assert next(it) == consumed * consumed
        consumed += 1
        assert consumed <= 5 + 1
    for i in range(consumed, 100):
        assert next(it) == i * i
    with pytest.raises(StopIteration):
        next(it)


def test_return_list():
    """kernel_tests/map_test.py::MapTest.testReturnList: a list returned by the function
    is a tuple of components."""
    ds = dp.range(10).map(lambda x: [x, np.float32(37.0)])
    assert isinstance(ds.element_spec, tuple) and len(ds.element_spec) == 2
    assert_produces(ds, [(np.int64(i), np.float32(37.0)) for i in range(10)])


def test_multi_output_py_func():
    """kernel_tests/map_test.py::MapTest.testMultiOutputPyFunc (a Python function that
    returns a list of two values, as ``tf.py_func`` with two output types)."""

    def map_py_func(x):
        return [x, np.array(37.0, dtype=np.float64)]

    ds = dp.range(10).map(map_py_func)
    assert_produces(ds, [(np.int64(i), np.float64(37.0)) for i in range(10)])


def test_constant_output():
    """kernel_tests/map_test.py::MapTest.testConstantOutput."""
    ds = dp.range(10).map(lambda x: [x, "hello", 10])
    assert_produces(ds, [(i, b"hello", 10) for i in range(10)])


def test_nested_dataset_map():
    """kernel_tests/map_test.py::MapTest.testNestedDatasetMap."""
    ds = dp.from_tensors([1.0, 2.0, 3.0]).map(dp.from_tensor_slices)
    ds = ds.map(lambda d: d.batch(3)).flat_map(lambda x: x)
    assert_produces(ds, [[1.0, 2.0, 3.0]])


def test_return_value_error():
    """kernel_tests/map_test.py::MapTest.testReturnValueError: tf.data refuses a function
    that returns a Python class; here any Python object is a leaf value (D-TF-9)."""

    class Foo:
        pass

    ds = dp.from_tensors([1.0, 2.0, 3.0]).map(lambda x: Foo)
    assert list(ds) == [Foo]
    assert ds.element_spec == dp.TensorSpec((), object)


SHORT_CIRCUIT = [
    ("Identity", None, lambda x: x),
    ("Replicate", None, lambda x: (x, x)),
    ("Swap", (None, None), lambda x, y: (y, x)),
    ("Project", (None, None), lambda x, y: x),
]


def structured_dataset(structure):
    """``structuredDataset``: a one-element dataset of int64 zeros with that structure."""
    if structure is None:
        return dp.from_tensors(np.zeros([], np.int64))
    return dp.zip(tuple(structured_dataset(s) for s in structure))


def structured_element(structure):
    if structure is None:
        return np.zeros([], np.int64)
    return tuple(structured_element(s) for s in structure)


@pytest.mark.parametrize("num_parallel_calls", [None, 12])
@pytest.mark.parametrize("name,structure,fn", SHORT_CIRCUIT, ids=[c[0] for c in SHORT_CIRCUIT])
def test_short_circuit(name, structure, fn, num_parallel_calls):
    """kernel_tests/map_test.py::MapTest.testShortCircuit."""
    ds = structured_dataset(structure).repeat().map(fn, num_parallel_calls=num_parallel_calls)
    element = structured_element(structure)
    expected = fn(*element) if isinstance(structure, tuple) else fn(element)
    assert_same(next(iter(ds)), expected)


@pytest.mark.parametrize("num_parallel_calls", [None, 12])
def test_preserve_cardinality(num_parallel_calls):
    """kernel_tests/map_test.py::MapTest.testPreserveCardinality: a StopIteration raised
    by the function is an error, not the end of the dataset."""

    def py_fn(_):
        raise StopIteration()

    ds = dp.from_tensors(0).map(py_fn, num_parallel_calls=num_parallel_calls)
    with pytest.raises(PipelineError, match="map at element 0: StopIteration"):
        next(iter(ds))


@pytest.mark.parametrize("global_determinism", [True, False])
@pytest.mark.parametrize("local_determinism", [None, True, False])
def test_determinism_configuration(local_determinism, global_determinism):
    """kernel_tests/map_test.py::MapTest.testDeterminismConfiguration."""
    expect = local_determinism or (local_determinism is None and global_determinism)
    elements = list(range(1000))

    def dataset_fn(delay_ms):
        ds = dp.from_tensor_slices(elements).map(
            sleep_first(delay_ms), num_parallel_calls=2, deterministic=local_determinism
        )
        return ds.with_options(dp.Options(deterministic=global_determinism))

    check_determinism(dataset_fn, expect, elements)


def test_none_component():
    """kernel_tests/map_test.py::MapTest.testNoneComponent."""
    ds = dp.from_tensors((42, None)).map(lambda x, y: x / 2 if y is None else x)
    assert_produces(ds, [21])


@pytest.mark.parametrize("num_parallel_calls", [None, 1])
def test_name(num_parallel_calls):
    """kernel_tests/map_test.py::MapTest.testName (the name is the op's in errors)."""
    ds = dp.from_tensors(21).map(lambda x: x * 2, num_parallel_calls=num_parallel_calls, name="map")
    assert_produces(ds, [42])
    bad = dp.from_tensors(21).map(lambda x: int(x) // 0, name="my_map")
    with pytest.raises(PipelineError, match="^my_map at element 0"):
        next(iter(bad))


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("num_parallel_calls", [None, 2])
def test_checkpoint_core(verify_fn, num_parallel_calls):
    """kernel_tests/map_test.py::MapCheckpointTest.testCore."""
    components = (
        np.arange(7),
        np.array([[1, 2, 3]]) * np.arange(7)[:, np.newaxis],
        np.array(37.0) * np.arange(7),
    )

    def build():
        ds = dp.from_tensor_slices(components)
        return ds.map(square3, num_parallel_calls=num_parallel_calls).repeat(2)

    verify_checkpoint(build, 7 * 2, verify_fn)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("num_parallel_calls", [None, 2])
def test_checkpoint_capture_constant_in_map_fn(verify_fn, num_parallel_calls):
    """kernel_tests/map_test.py::MapCheckpointTest.testCaptureConstantInMapFn."""
    constant = np.int64(5)

    def build():
        ds = dp.from_tensors(0).repeat(10)
        return ds.map(lambda x: x + constant, num_parallel_calls=num_parallel_calls)

    verify_checkpoint(build, 10, verify_fn)
