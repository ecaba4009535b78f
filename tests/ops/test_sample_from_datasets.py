"""from_tensors, from_generator, zip, concatenate, sample_from_datasets, choose_from_datasets:
exact elements, specs, cardinalities, error messages, checkpoint/resume."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch
from harness import assert_resumes, py, values
from hypothesis import given, settings
from hypothesis import strategies as st

import datapipe as dp
from datapipe import INFINITE_CARDINALITY as INF
from datapipe import UNKNOWN_CARDINALITY as UNK
from datapipe import TensorSpec
from datapipe.errors import PipelineError, RandomAccessError


def unknown_len(ds):
    return ds.filter(lambda x: True)


# ---- from_tensors ------------------------------------------------------------------------
def test_from_tensors_is_one_element():
    ds = dp.from_tensors(([[1, 2], [3, 4]], 7))
    assert values(ds) == [([[1, 2], [3, 4]], 7)]
    assert ds.element_spec == (TensorSpec((2, 2), "int64"), TensorSpec((), "int64"))
    assert ds.cardinality() == 1 and len(ds) == 1
    image, label = next(iter(ds))
    assert isinstance(image, np.ndarray) and isinstance(label, np.int64)


def test_from_tensors_keeps_arrays_tensors_and_nesting():
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = torch.ones(3, dtype=torch.int32)
    ds = dp.from_tensors({"a": arr, "b": (t, "text")})
    (x,) = list(ds)
    assert x["a"] is arr and x["b"][0] is t and x["b"][1] == "text"
    spec = ds.element_spec
    assert spec["a"] == TensorSpec((2, 3), "float32")
    assert spec["b"][0] == TensorSpec((3,), torch.int32)
    assert spec["b"][1] == TensorSpec((), np.dtype(object))


def test_from_tensors_repeat_and_random_access():
    ds = dp.from_tensors(np.array([5, 6])).repeat(3)
    assert values(ds) == [[5, 6]] * 3
    assert ds._random_access_breaker() is None
    assert values(ds.global_shuffle(seed=0)) == [[5, 6]] * 3
    assert_resumes(ds)


# ---- from_generator ----------------------------------------------------------------------
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


# ---- zip ---------------------------------------------------------------------------------
def test_zip_forms():
    a, b, c = dp.range(3), dp.range(10, 15), dp.range(20, 24)
    assert values(dp.zip(a, b)) == [(0, 10), (1, 11), (2, 12)]
    assert values(dp.zip((a, b))) == values(dp.zip(a, b))
    assert values(dp.zip({"x": a, "y": b})) == [{"x": i, "y": 10 + i} for i in range(3)]
    assert values(dp.zip((a, b), c)) == [((i, 10 + i), 20 + i) for i in range(3)]
    assert values(dp.zip(a)) == [0, 1, 2]  # a single dataset: its own elements (tf.data)
    Pair = collections.namedtuple("Pair", "p q")
    out = list(dp.zip(Pair(a, b)))
    assert type(out[0]) is Pair and py(out) == [(0, 10), (1, 11), (2, 12)]


def test_zip_spec_and_arrays():
    imgs = np.arange(24, dtype=np.uint8).reshape(4, 2, 3)
    ds = dp.zip({"img": dp.from_tensor_slices(imgs), "i": dp.range(4)})
    assert ds.element_spec == {"img": TensorSpec((2, 3), "uint8"), "i": TensorSpec((), "int64")}
    assert py(list(ds)[2]["img"]) == imgs[2].tolist()


@pytest.mark.parametrize(
    "cards, expected",
    [
        ([3, 5], 3),
        ([5, INF], 5),
        ([INF, INF], INF),
        ([0, INF], 0),
        ([3, UNK], UNK),
        ([INF, UNK], UNK),
    ],
)
def test_zip_cardinality_rules(cards, expected):
    def make(n):
        if n == INF:
            return dp.range(2).repeat()
        if n == UNK:
            return unknown_len(dp.range(4))
        return dp.range(n)

    ds = dp.zip(tuple(make(n) for n in cards))
    assert ds.cardinality() == expected
    if expected >= 0:
        assert len(values(ds)) == expected


def test_zip_errors():
    with pytest.raises(TypeError, match="Python list.*use a tuple"):
        dp.zip([dp.range(2), dp.range(2)])
    with pytest.raises(TypeError, match=r"component \[1\] must be a Dataset, got int"):
        dp.zip(dp.range(2), 5)
    with pytest.raises(TypeError, match="at least one dataset"):
        dp.zip(())


def test_zip_resume_and_random_access():
    ds = dp.zip(dp.range(6), dp.range(10, 20).map(lambda x: x * 2))
    assert_resumes(ds)
    assert ds._random_access_breaker() is None
    shuffled = values(ds.global_shuffle(seed=1))
    assert sorted(shuffled) == values(ds)
    assert all(b == 2 * (10 + a) for a, b in shuffled)  # components stay aligned
    streamed = dp.zip(dp.range(6), unknown_len(dp.range(6)))
    assert_resumes(streamed)
    with pytest.raises(RandomAccessError, match="at op 'filter'"):
        streamed.global_shuffle()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 12), st.just(INF)), min_size=1, max_size=4))
def test_zip_cardinality_property(sizes):
    inputs = tuple(dp.range(7).repeat() if n == INF else dp.range(n) for n in sizes)
    ds = dp.zip(inputs)
    finite = [n for n in sizes if n != INF]
    assert ds.cardinality() == (min(finite) if finite else INF)
    if finite:
        assert len(list(ds)) == min(finite)


# ---- concatenate -------------------------------------------------------------------------
def test_concatenate_elements_and_cardinality():
    ds = dp.range(3).concatenate(dp.range(10, 12))
    assert values(ds) == [0, 1, 2, 10, 11]
    assert ds.cardinality() == 5
    assert dp.range(3).concatenate(dp.range(2).repeat()).cardinality() == INF
    assert unknown_len(dp.range(3)).concatenate(dp.range(2)).cardinality() == UNK
    assert unknown_len(dp.range(3)).concatenate(dp.range(2).repeat()).cardinality() == INF


def test_concatenate_merges_shapes():
    a = dp.from_tensor_slices((np.zeros((2, 4, 3), np.float32), np.zeros(2, np.int64)))
    b = dp.from_tensor_slices((np.ones((3, 5, 3), np.float32), np.ones(3, np.int64)))
    ds = a.concatenate(b)
    assert ds.element_spec == (TensorSpec((None, 3), "float32"), TensorSpec((), "int64"))
    assert [x.shape for x, _ in ds] == [(4, 3)] * 2 + [(5, 3)] * 3
    c = dp.from_tensor_slices(np.zeros((2, 4)))
    d = dp.from_tensor_slices(np.zeros((2, 4, 1)))
    assert c.concatenate(d).element_spec == TensorSpec(None, "float64")


def test_concatenate_incompatible_specs_name_both():
    with pytest.raises(TypeError) as info:
        dp.range(3).concatenate(dp.range(3, dtype="float32"))
    msg = str(info.value)
    assert "concatenate: incompatible" in msg
    assert "TensorSpec(shape=(), dtype=int64)" in msg
    assert "TensorSpec(shape=(), dtype=float32)" in msg
    with pytest.raises(TypeError, match=r"(?s)dtype=int64\).*vs\..*\(TensorSpec"):
        dp.range(3).concatenate(dp.zip(dp.range(3), dp.range(3)))


def test_concatenate_resume_random_access_and_laziness():
    ds = dp.range(4).concatenate(dp.range(100, 103).map(lambda x: x + 1))
    assert_resumes(ds)
    assert ds._random_access_breaker() is None
    assert sorted(values(ds.global_shuffle(seed=2))) == values(ds)
    calls = []

    def gen():
        calls.append(1)
        yield 99

    lazy = dp.range(3).concatenate(dp.from_generator(gen, TensorSpec((), "int64")))
    assert values(lazy.take(3)) == [0, 1, 2] and calls == []
    assert values(lazy) == [0, 1, 2, 99] and calls == [1]
    assert_resumes(lazy)
    with pytest.raises(RandomAccessError, match="'from_generator'"):
        lazy.global_shuffle()


# ---- sample_from_datasets ----------------------------------------------------------------
def test_sample_yields_every_element_in_input_order():
    a, b, c = dp.range(0, 5), dp.range(100, 108), dp.range(200, 203)
    ds = dp.sample_from_datasets([a, b, c], seed=4)
    out = values(ds)
    assert sorted(out) == sorted(values(a) + values(b) + values(c))
    for lo in (0, 100, 200):
        part = [x for x in out if lo <= x < lo + 100]
        assert part == sorted(part)
    assert ds.cardinality() == 16 and ds.element_spec == TensorSpec((), "int64")


def test_sample_seed_reproducible_and_chunk_independent():
    def make(seed):
        return dp.sample_from_datasets([dp.range(0, 50), dp.range(100, 150)], seed=seed)

    assert values(make(1)) == values(make(1))
    assert values(make(1)) != values(make(2))
    one_by_one = values(make(1))
    in_batches = [v for b in make(1).batch(7) for v in b.tolist()]
    assert in_batches == one_by_one
    global_seeded = make(None).with_options(dp.Options(seed=5))
    assert values(global_seeded) == values(make(None).with_options(dp.Options(seed=5)))


def test_sample_rerandomize_each_iteration():
    inputs = [dp.range(0, 20), dp.range(100, 120)]
    fixed = dp.sample_from_datasets(inputs, seed=3)
    assert values(fixed) == values(fixed)
    assert values(fixed.repeat(2))[:40] == values(fixed.repeat(2))[40:]
    fresh = dp.sample_from_datasets(inputs, seed=3, rerandomize_each_iteration=True)
    assert values(fresh) != values(fresh)


def test_sample_weights_frequencies():
    inputs = [dp.from_tensors(np.int64(i)).repeat() for i in range(3)]
    ds = dp.sample_from_datasets(inputs, weights=[0.2, 0.3, 0.5], seed=0).take(20000)
    freq = np.bincount(np.array(values(ds)), minlength=3) / 20000
    np.testing.assert_allclose(freq, [0.2, 0.3, 0.5], atol=0.015)
    assert dp.sample_from_datasets(inputs, weights=[1, 1, 1]).cardinality() == INF


def test_sample_renormalises_when_an_input_ends():
    # Input 0 is empty: the draw that picks it must be redone with the remaining weights
    # (1:1), not mapped to whichever input is next to it. Only the first element of each
    # run meets the empty input (afterwards it is known to be empty), so look at those.
    def first(seed):
        inputs = [dp.range(0)] + [dp.from_tensors(np.int64(i)).repeat() for i in (1, 2)]
        ds = dp.sample_from_datasets(inputs, weights=[0.5, 0.25, 0.25], seed=seed)
        return int(next(iter(ds)))

    firsts = np.array([first(s) for s in range(400)])
    assert set(firsts.tolist()) == {1, 2}
    assert abs((firsts == 1).mean() - 0.5) < 0.1  # a biased retry would give 0.75

    inputs = [dp.range(0)] + [dp.from_tensors(np.int64(i)).repeat() for i in (1, 2)]
    ds = dp.sample_from_datasets(inputs, weights=[0.5, 0.25, 0.25], seed=7).take(20000)
    freq = np.bincount(np.array(values(ds)), minlength=3) / 20000
    np.testing.assert_allclose(freq, [0.0, 0.5, 0.5], atol=0.015)


def test_sample_stop_on_empty_dataset_is_a_prefix():
    inputs = [dp.range(0, 4), dp.range(100, 140)]
    go_on = values(dp.sample_from_datasets(inputs, seed=11))
    stop = values(dp.sample_from_datasets(inputs, seed=11, stop_on_empty_dataset=True))
    assert go_on[: len(stop)] == stop
    assert [x for x in stop if x < 100] == [0, 1, 2, 3]  # ended at the first empty draw
    assert len(stop) < 44
    ds = dp.sample_from_datasets(inputs, stop_on_empty_dataset=True)
    assert ds.cardinality() == UNK


def test_sample_zero_weight_input_is_never_read():
    ds = dp.sample_from_datasets([dp.range(5), dp.range(100, 103)], weights=[0, 2], seed=0)
    assert values(ds) == [100, 101, 102]
    assert ds.cardinality() == 3


def test_sample_weights_dataset():
    w = dp.from_tensor_slices(np.array([[1.0, 0.0], [0.0, 1.0]] * 3))
    ds = dp.sample_from_datasets([dp.range(0, 10), dp.range(100, 110)], weights=w, seed=0)
    assert values(ds) == [0, 100, 1, 101, 2, 102]  # ends with the weights dataset
    assert ds.cardinality() == UNK
    bad = dp.from_tensor_slices(np.array([[1.0, 0.0], [-1.0, 1.0]]))
    it = iter(dp.sample_from_datasets([dp.range(3), dp.range(3)], weights=bad))
    assert py(next(it)) == 0
    with pytest.raises(PipelineError, match=r"at element 1: .*non-negative.*\[-1.0, 1.0\]"):
        next(it)


def test_sample_argument_errors():
    with pytest.raises(ValueError, match="datasets must not be empty"):
        dp.sample_from_datasets([])
    with pytest.raises(ValueError, match=r"weights must have shape \(2,\).*got \(3,\)"):
        dp.sample_from_datasets([dp.range(2), dp.range(2)], weights=[1, 2, 3])
    for w in ([-1, 2], [0, 0], [np.nan, 1]):
        with pytest.raises(ValueError, match="finite, non-negative and not all zero"):
            dp.sample_from_datasets([dp.range(2), dp.range(2)], weights=w)
    with pytest.raises(TypeError, match=r"datasets\[1\] must be a Dataset"):
        dp.sample_from_datasets([dp.range(2), [1, 2]])
    with pytest.raises(TypeError, match="incompatible dataset elements"):
        dp.sample_from_datasets([dp.range(2), dp.range(2, dtype="float32")])


def test_sample_resume_everywhere():
    inputs = [dp.range(0, 3), dp.range(100, 110).map(lambda x: x * 2), dp.range(200, 201)]
    assert_resumes(dp.sample_from_datasets(inputs, weights=[3, 1, 1], seed=9))
    stop = dp.sample_from_datasets(inputs, weights=[3, 1, 1], seed=9, stop_on_empty_dataset=True)
    assert_resumes(stop)


def test_sample_resume_with_elements_read_past_an_exhausted_input():
    # With 16 positions decided at once, input 0 runs out mid-chunk after inputs 1 and 2
    # were read for later positions; the re-decided positions leave some of those unused,
    # and they wait in the state until their input is drawn again.
    inputs = [dp.range(0, 5), dp.range(100, 130), dp.range(200, 230)]
    ds = dp.sample_from_datasets(inputs, seed=2).batch(16)
    it = iter(ds)
    next(it)
    pending = it.get_state()["root"]["input"]["pending"]
    assert [len(p["items"]) for p in pending] == [0, 2, 0]
    assert_resumes(ds)
    out = [v for b in ds for v in b.tolist()]
    assert sorted(out) == list(range(5)) + list(range(100, 130)) + list(range(200, 230))
    assert out == values(dp.sample_from_datasets(inputs, seed=2))


# ---- choose_from_datasets ----------------------------------------------------------------
def _choices(values):
    return dp.from_tensor_slices(np.array(values, dtype=np.int64))


def test_choose_follows_the_choices():
    a, b = dp.range(0, 3), dp.range(10, 14)
    ds = dp.choose_from_datasets([a, b], _choices([0, 1, 1, 0, 1]))
    assert values(ds) == [0, 10, 11, 1, 12]
    assert ds.element_spec == TensorSpec((), "int64")


def test_choose_stop_on_empty_dataset():
    a, b = dp.range(0, 2), dp.range(10, 14)
    choices = _choices([0, 0, 0, 1, 1, 0, 1])
    assert values(dp.choose_from_datasets([a, b], choices)) == [0, 1]
    skipping = dp.choose_from_datasets([a, b], choices, stop_on_empty_dataset=False)
    assert values(skipping) == [0, 1, 10, 11, 12]
    assert_resumes(skipping)


def test_choose_out_of_range_names_value_and_index():
    ds = dp.choose_from_datasets([dp.range(3), dp.range(10, 13)], _choices([0, 1, 5, 1, -1]))
    it = iter(ds)
    assert py([next(it), next(it)]) == [0, 10]
    with pytest.raises(PipelineError) as info:
        next(it)
    assert info.value.index == 2
    assert "choice_dataset element 2 is 5, outside the valid range [0, 2)" in str(info.value)
    assert py(next(it)) == 11  # iteration may go on past the bad choice
    with pytest.raises(PipelineError, match="choice_dataset element 4 is -1"):
        next(it)


def test_choose_choice_dataset_must_be_scalar_int64():
    for bad in (dp.range(2, dtype="int32"), dp.from_tensor_slices(np.zeros((2, 1), np.int64))):
        with pytest.raises(TypeError, match="must be scalar int64 values"):
            dp.choose_from_datasets([dp.range(2)], bad)


def test_choose_cardinality():
    inf = dp.range(3).repeat()
    assert dp.choose_from_datasets([inf, inf], _choices([0, 1, 0])).cardinality() == 3
    assert dp.choose_from_datasets([inf], dp.range(1).repeat()).cardinality() == INF
    assert dp.choose_from_datasets([dp.range(3), inf], _choices([0, 1])).cardinality() == UNK
    assert dp.choose_from_datasets([dp.range(3)], _choices([])).cardinality() == 0


def test_choose_resume_and_no_random_access():
    choices = dp.range(30).map(lambda i: (i * 7) % 3)
    inputs = [dp.range(0, 12), dp.range(100, 110), dp.range(200, 220)]
    ds = dp.choose_from_datasets(inputs, choices, stop_on_empty_dataset=False)
    assert_resumes(ds)
    with pytest.raises(RandomAccessError, match="'choose_from_datasets'"):
        ds.global_shuffle()
