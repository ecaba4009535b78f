"""tf.data's ``from_generator`` kernel tests (``kernel_tests/from_generator_test.py``).

Upstream's deprecated ``output_types=`` / ``output_shapes=`` as it writes them (numpy
dtypes for tf's; ``tf.string`` is ``object``)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import datapipe as dp
from datapipe.errors import PipelineError

from ._support import assert_produces, assert_same

S = dp.TensorSpec
pytestmark = pytest.mark.filterwarnings("ignore:from_generator. output_types:DeprecationWarning")


def _generator_fn():
    for i in range(1, 100):
        yield [i] * i


GENERATORS = {
    "testFromGeneratorUsingFn": _generator_fn,
    "testFromGeneratorUsingList": lambda: [[i] * i for i in range(1, 100)],
    "testFromGeneratorUsingNdarray": lambda: np.arange(100, dtype=np.int64),
    "testFromGeneratorUsingGeneratorExpression": lambda: ([i] * i for i in range(1, 100)),
}


@pytest.mark.parametrize("num_repeats", [1, 5])
@pytest.mark.parametrize("name", list(GENERATORS))
def test_from_generator(name, num_repeats):
    """kernel_tests/from_generator_test.py::FromGeneratorTest.testFromGeneratorUsingFn,
    testFromGeneratorUsingList, testFromGeneratorUsingNdarray,
    testFromGeneratorUsingGeneratorExpression (``requires_initialization`` is graph mode's:
    one case per generator and repeat count)."""
    generator = GENERATORS[name]
    elem_sequence = [np.array(e) for e in generator()]
    ds = dp.from_generator(generator, output_types=np.int64).repeat(num_repeats).prefetch(5)
    assert_produces(ds, elem_sequence * num_repeats, iterations=2)


def test_from_multiple_concurrent_generators():
    """kernel_tests/from_generator_test.py::FromGeneratorTest.testFromMultipleConcurrentGenerators."""
    num_inner_repeats, num_outer_repeats = 5, 100

    def generator():
        for i in range(1, 10):
            yield [i] * i, [i, i**2, i**3]

    input_list = list(generator())

    def interleave_fn(_):
        ds = dp.from_generator(
            generator, output_types=(np.int64, np.int64), output_shapes=([None], [3])
        )
        return ds.repeat(num_inner_repeats).prefetch(5)

    ds = dp.range(num_outer_repeats).interleave(
        interleave_fn, cycle_length=10, block_length=len(input_list)
    )
    expected = [
        (np.array(a), np.array(b))
        for _ in range(num_inner_repeats * num_outer_repeats)
        for a, b in input_list
    ]
    assert_produces(ds, expected)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_from_generator_implicit_conversion(dtype):
    """kernel_tests/from_generator_test.py::FromGeneratorTest.testFromGeneratorImplicitConversion."""

    def generator():
        yield [1]
        yield [2]
        yield [3]

    ds = dp.from_generator(generator, output_types=dtype, output_shapes=[1])
    assert_produces(ds, [np.array([1], dtype), np.array([2], dtype), np.array([3], dtype)])


def test_from_generator_string():
    """kernel_tests/from_generator_test.py::FromGeneratorTest.testFromGeneratorString."""

    def generator():
        yield "foo"
        yield b"bar"
        yield "baz"

    ds = dp.from_generator(generator, output_types=object, output_shapes=[])
    assert_produces(ds, [b"foo", b"bar", b"baz"])


def test_from_generator_datastructures():
    """kernel_tests/from_generator_test.py::FromGeneratorTest.testFromGeneratorDatastructures."""

    def generator():
        yield {"a": "foo", "b": [1, 2], "c": (9,)}
        yield {"a": "bar", "b": [3], "c": (7, 6)}
        yield {"a": "baz", "b": [5, 6], "c": (5, 4)}

    ds = dp.from_generator(
        generator,
        output_types={"a": object, "b": np.int32, "c": np.int32},
        output_shapes={"a": [], "b": [None], "c": [None]},
    )
    i32 = lambda *v: np.array(v, np.int32)  # noqa: E731
    expected = [
        {"a": b"foo", "b": i32(1, 2), "c": i32(9)},
        {"a": b"bar", "b": i32(3), "c": i32(7, 6)},
        {"a": b"baz", "b": i32(5, 6), "c": i32(5, 4)},
    ]
    assert_produces(ds, expected)


def _consume(ds, n_good_before, n_good_after):
    it = iter(ds)
    head = [next(it) for _ in range(n_good_before)]
    with pytest.raises(PipelineError) as info:
        next(it)
    tail = [next(it) for _ in range(n_good_after)]
    with pytest.raises(StopIteration):
        next(it)
    return head, info.value, tail


def test_from_generator_type_error():
    """kernel_tests/from_generator_test.py::FromGeneratorTest.testFromGeneratorTypeError:
    a value of the wrong type fails its element; the generator goes on."""

    def generator():
        yield np.array([1, 2, 3], dtype=np.int64)
        yield np.array([4, 5, 6], dtype=np.int64)
        yield "ERROR"
        yield np.array([7, 8, 9], dtype=np.int64)

    head, err, tail = _consume(
        dp.from_generator(generator, output_types=np.int64, output_shapes=[3]), 2, 1
    )
    assert [h.tolist() for h in head] == [[1, 2, 3], [4, 5, 6]]
    assert isinstance(err.cause, TypeError) and err.index == 2
    assert [t.tolist() for t in tail] == [[7, 8, 9]]


def test_from_generator_shape_error():
    """kernel_tests/from_generator_test.py::FromGeneratorTest.testFromGeneratorShapeError."""

    def generator():
        yield np.array([1, 2, 3], dtype=np.int64)
        yield np.array([4, 5, 6], dtype=np.int64)
        yield np.array([7, 8, 9, 10], dtype=np.int64)
        yield np.array([11, 12, 13], dtype=np.int64)

    head, err, tail = _consume(
        dp.from_generator(generator, output_types=np.int64, output_shapes=[3]), 2, 1
    )
    assert [h.tolist() for h in head] == [[1, 2, 3], [4, 5, 6]]
    assert "expected shape (3,)" in str(err) and err.index == 2
    assert [t.tolist() for t in tail] == [[11, 12, 13]]


def test_from_generator_structure_error():
    """kernel_tests/from_generator_test.py::FromGeneratorTest.testFromGeneratorStructureError."""

    def generator():
        yield 1, 2
        yield 3, 4
        yield 5
        yield 6, 7, 8
        yield 9, 10

    ds = dp.from_generator(generator, output_types=(np.int64, np.int64))
    it = iter(ds)
    assert next(it) == (1, 2)
    assert next(it) == (3, 4)
    for index in (2, 3):
        with pytest.raises(PipelineError, match="structure does not match output_signature") as e:
            next(it)
        assert e.value.index == index
    assert next(it) == (9, 10)
    with pytest.raises(StopIteration):
        next(it)


def test_from_generator_heterogeneous():
    """kernel_tests/from_generator_test.py::FromGeneratorTest.testFromGeneratorHeterogeneous."""

    def generator():
        yield 1
        yield [2, 3]

    ds = dp.from_generator(generator, output_types=np.int64)
    assert_produces(ds, [np.int64(1), np.array([2, 3])])


def test_from_generator_stop_short():
    """kernel_tests/from_generator_test.py::FromGeneratorTest.testFromGeneratorStopShort."""

    def generator():
        yield 0
        yield 1
        yield 2

    it = iter(dp.from_generator(generator, output_types=np.int64))
    assert next(it) == 0
    assert next(it) == 1


def test_from_generator_destructor_called():
    """kernel_tests/from_generator_test.py::FromGeneratorTest.testFromGeneratorDestructorCalled:
    the generator object is let go when the iterator is done with it; after ``take``'s
    count that is when the iterator is closed or dropped (D-TF-12), at its own end at once."""
    event = threading.Event()

    class GeneratorWrapper:
        def __iter__(self):
            return self

        def __next__(self):
            return 42

        def __del__(self):
            event.set()

    it = iter(dp.from_generator(GeneratorWrapper, output_types=np.int64).take(2))
    assert [int(next(it)), int(next(it))] == [42, 42]
    with pytest.raises(StopIteration):
        next(it)
    it.close()  # D-TF-12
    assert event.wait(1.0)

    ended = threading.Event()

    class Finite(GeneratorWrapper):
        def __init__(self):
            self.left = 2

        def __next__(self):
            self.left -= 1
            if self.left < 0:
                raise StopIteration
            return 42

        def __del__(self):
            ended.set()

    it = iter(dp.from_generator(Finite, output_types=np.int64))
    assert [int(x) for x in it] == [42, 42]
    assert ended.is_set()  # at the generator's end, the iterator still held


def test_from_generator_with_args():
    """kernel_tests/from_generator_test.py::FromGeneratorTest.testFromGeneratorWithArgs."""

    def flat_map_fn(elem):
        def generator_with_arg(n):
            for _ in range(n):
                yield np.array(n, dtype=np.int64)

        return dp.from_generator(
            generator_with_arg, output_types=np.int64, output_shapes=(), args=(elem,)
        )

    ds = dp.range(5).flat_map(flat_map_fn)
    assert_produces(ds, [np.int64(v) for v in [1, 2, 2, 3, 3, 3, 4, 4, 4, 4]])


def test_from_generator_with_two_args():
    """kernel_tests/from_generator_test.py::FromGeneratorTest.testFromGeneratorWithTwoArgs."""

    def flat_map_fn(elem, message):
        def generator_with_arg(n, msg):
            for i in range(n):
                yield i, msg

        return dp.from_generator(
            generator_with_arg,
            output_types=(np.int64, object),
            output_shapes=((), ()),
            args=(elem, message),
        )

    ds = dp.zip((dp.range(5), dp.from_tensors("Hi!").repeat(None))).flat_map(flat_map_fn)
    expected = [(i, b"Hi!") for n in range(5) for i in range(n)]
    assert_produces(ds, expected)
    assert_same(next(iter(ds)), (0, "Hi!"))
