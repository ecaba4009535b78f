"""``sample_from_datasets``: order within inputs, seeds, weights (lists and datasets),
renormalisation when an input ends, ``stop_on_empty_dataset``, errors, resume."""

from __future__ import annotations

import numpy as np
import pytest
from harness import assert_resumes, py, values

import datapipe as dp
from datapipe import INFINITE_CARDINALITY as INF
from datapipe import UNKNOWN_CARDINALITY as UNK
from datapipe import TensorSpec
from datapipe.errors import PipelineError


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
    for w in ([-1, 2], [np.nan, 1]):
        with pytest.raises(ValueError, match="must be finite and non-negative"):
            dp.sample_from_datasets([dp.range(2), dp.range(2)], weights=w)
    # All weights zero: nothing is sampled (tf.data's testSampleFromDatasetsAllWeightsAreZero).
    zero = dp.sample_from_datasets([dp.range(2), dp.range(2)], weights=[0, 0])
    assert (zero.cardinality(), list(zero)) == (0, [])
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
