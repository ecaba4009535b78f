"""``from_generator``: tf.data's conversions and signatures, errors located at the element,
resume by replaying, no random access."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from harness import assert_resumes, py, values

import datapipe as dp
from datapipe import UNKNOWN_CARDINALITY as UNK
from datapipe import TensorSpec
from datapipe.errors import PipelineError, RandomAccessError

SIG = (TensorSpec((), "int64"), TensorSpec((2,), "float32"))


def test_from_generator_converts_like_tf():
    def gen():
        yield 1.7, [1, 2]  # float -> int64 as numpy's asarray does (truncates)
        yield np.int32(2), np.array([3.5, 4.5])

    ds = dp.from_generator(gen, SIG)
    out = list(ds)
    assert py(out) == [(1, [1.0, 2.0]), (2, [3.5, 4.5])]
    assert all(isinstance(a, np.int64) for a, _ in out)
    assert all(b.dtype == np.float32 and b.shape == (2,) for _, b in out)
    assert ds.element_spec == SIG
    assert ds.cardinality() == UNK


def test_from_generator_calls_generator_anew_with_args():
    calls = []

    def gen(start, stop):
        calls.append((start, stop))
        yield from range(start, stop)

    ds = dp.from_generator(gen, TensorSpec((), "int64"), args=(2, 5))
    assert values(ds) == [2, 3, 4]
    assert values(ds.repeat(2)) == [2, 3, 4, 2, 3, 4]
    assert calls == [(2, 5)] * 3


def test_from_generator_dict_signature_and_torch_dtype():
    sig = {"x": TensorSpec((None,), torch.float32), "y": TensorSpec((), "int64")}

    def gen():
        yield {"x": [1.0, 2.0], "y": 1}
        yield {"x": [3.0], "y": 2}

    out = list(dp.from_generator(gen, sig))
    assert isinstance(out[0]["x"], torch.Tensor) and out[0]["x"].dtype == torch.float32
    assert py(out) == [{"x": [1.0, 2.0], "y": 1}, {"x": [3.0], "y": 2}]


def test_from_generator_shape_mismatch_names_index_component_and_specs():
    def gen():
        yield 0, [0, 0]
        yield 1, [1, 1]
        yield 2, [1, 2, 3]
        yield 3, [3, 3]

    it = iter(dp.from_generator(gen, SIG))
    assert py([next(it), next(it)]) == [(0, [0.0, 0.0]), (1, [1.0, 1.0])]
    with pytest.raises(PipelineError) as info:
        next(it)
    msg = str(info.value)
    assert info.value.op == "from_generator" and info.value.index == 2
    assert "component [1]" in msg and "expected shape (2,)" in msg and "got shape (3,)" in msg
    assert py(next(it)) == (3, [3.0, 3.0])  # iteration may go on past the bad element


def test_from_generator_structure_and_conversion_errors():
    def scalar_gen():
        yield 5

    with pytest.raises(PipelineError, match=r"at element 0: .*structure does not match"):
        list(dp.from_generator(scalar_gen, SIG))

    def text_gen():
        yield "abc", [1, 2]

    with pytest.raises(PipelineError, match=r"component \[0\]: expected .*int64.*'abc'"):
        list(dp.from_generator(text_gen, SIG))


def test_from_generator_exception_in_generator_is_located():
    def gen():
        yield 1
        raise KeyError("boom")

    it = iter(dp.from_generator(gen, TensorSpec((), "int64")))
    assert py(next(it)) == 1
    with pytest.raises(PipelineError, match=r"from_generator at element 1: KeyError: 'boom'"):
        next(it)


def test_from_generator_construction_errors():
    with pytest.raises(TypeError, match="generator must be callable"):
        dp.from_generator([1, 2], TensorSpec((), "int64"))
    with pytest.raises(TypeError, match=r"component \[1\] must be a datapipe.TensorSpec"):
        dp.from_generator(lambda: iter([]), (TensorSpec((), "int64"), "int64"))


def test_from_generator_resume_replays():
    calls = []

    def gen():
        calls.append(1)
        for i in range(7):
            yield i, [i, -i]

    ds = dp.from_generator(gen, SIG)
    assert_resumes(ds)
    it = iter(ds)
    [next(it) for _ in range(4)]
    state = it.get_state()
    # The generator's own state is the count of elements it produced (the outer iterator
    # may have read a few ahead of the consumer; they travel in its part of the state).
    root = state["root"]
    assert set(root) == {"count", "done"} and 4 <= root["count"] <= 7 and not root["done"]
    before = len(calls)
    fresh = iter(ds)
    fresh.set_state(state)
    assert py(next(fresh)) == (4, [4.0, -4.0])
    assert len(calls) == before + 1  # re-called the generator and skipped 4 elements


def test_from_generator_has_no_random_access():
    ds = dp.from_generator(lambda: iter([1]), TensorSpec((), "int64")).map(lambda x: x)
    with pytest.raises(RandomAccessError, match="lost random access at op 'from_generator'"):
        ds.global_shuffle()


# ---- tf.data's older signature: output_types / output_shapes (issue 27, item 6) ---------
class _FakeTFDType:
    """Stands for a ``tf.DType`` (``tf.int64.as_numpy_dtype is np.int64``) without TF."""

    def __init__(self, numpy_type):
        self.as_numpy_dtype = numpy_type


def _pairs():
    for i in range(3):
        yield i, [i, i + 0.5]


def test_output_types_and_shapes_positionally_as_tf_orders_them():
    with pytest.warns(DeprecationWarning, match="deprecated.*use output_signature") as got:
        ds = dp.from_generator(_pairs, (np.int64, "float32"), ((), (2,)))
    assert got[0].filename == __file__  # the warning points at the caller, as tf's does
    assert ds.element_spec == (TensorSpec((), "int64"), TensorSpec((2,), "float32"))
    assert py(list(ds)) == [(0, [0.0, 0.5]), (1, [1.0, 1.5]), (2, [2.0, 2.5])]


def test_output_types_alone_give_unknown_shapes():
    def rows():
        yield [1]
        yield [1, 2, 3]

    with pytest.warns(DeprecationWarning):
        ds = dp.from_generator(rows, output_types=_FakeTFDType(np.int32))
    assert ds.element_spec == TensorSpec(None, "int32")  # tf: TensorShape(None)
    assert [(v.dtype, v.tolist()) for v in ds] == [(np.int32, [1]), (np.int32, [1, 2, 3])]


def test_output_shapes_match_output_types_structure_up_to_its_leaves():
    def gen(start):
        yield {"x": [start, start], "y": "a"}

    with pytest.warns(DeprecationWarning):
        ds = dp.from_generator(
            gen,
            output_types={"x": torch.float32, "y": str},
            output_shapes={"x": [2], "y": ()},  # a list below a leaf of types is a shape
            args=(4,),
        )
    assert ds.element_spec == {"x": TensorSpec((2,), torch.float32), "y": TensorSpec((), object)}
    (el,) = list(ds)
    assert el["x"].dtype == torch.float32 and el["x"].tolist() == [4.0, 4.0] and el["y"] == "a"
    with pytest.warns(DeprecationWarning):  # args as tf's fourth positional argument
        assert py(list(dp.from_generator(range, np.int64, (), (2, 5)))) == [2, 3, 4]


def test_a_signature_in_the_second_place_is_not_deprecated():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = dp.from_generator(_pairs, SIG)
        ds2 = dp.from_generator(_pairs, output_signature=SIG)
    assert ds.element_spec == ds2.element_spec == SIG


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(output_types=np.int64, output_signature=SIG), "`output_types` argument can not"),
        (dict(output_shapes=(), output_signature=SIG), "`output_shapes` argument can not"),
        ({}, "provide either the `output_signature` argument or the `output_types`"),
        (dict(output_types=(np.int64, np.int64), output_shapes=((),)), "must match output_types"),
        (dict(output_types=np.int64, output_shapes="x"), "not a shape"),
        (dict(output_types=(np.int64, object())), r"at element\[1\]: not a dtype"),
    ],
)
def test_older_signature_errors_are_tfs(kwargs, message):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(TypeError, match=message):
            dp.from_generator(_pairs, **kwargs)
