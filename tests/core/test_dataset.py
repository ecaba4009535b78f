"""Review of the core graph: defects found by using it as a tf.data user would."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import datapipe as dp


def ints(it) -> list[int]:
    return [int(x) for x in it]


@pytest.mark.parametrize(
    "build",
    [
        lambda: dp.range(40).global_shuffle(),
        lambda: dp.range(40).random_map(lambda x, rng: int(rng.integers(10**6))),
        lambda: dp.range(40).shuffle(8).repeat(2),
    ],
    ids=["global_shuffle", "random_map", "shuffle"],
)
def test_resume_without_a_seed_continues_the_same_stream(build):
    # No Options(seed): the global seed is fresh entropy per iter(), so the state must carry
    # it, or a resumed global_shuffle draws another permutation (duplicates, lost elements).
    it = iter(build())
    [next(it) for _ in range(7)]
    state = copy.deepcopy(it.get_state())
    rest = ints(it)
    resumed = iter(build())
    resumed.set_state(state)
    assert ints(resumed) == rest


def test_resumed_global_shuffle_without_seed_is_a_permutation():
    it = iter(dp.range(30).global_shuffle())
    head = ints(next(it) for _ in range(11))
    resumed = iter(dp.range(30).global_shuffle())
    resumed.set_state(copy.deepcopy(it.get_state()))
    assert sorted(head + ints(resumed)) == list(range(30))


def test_skip_on_a_random_access_chain_does_not_compute_the_skipped_elements():
    # skip's docstring and DESIGN.md: on a random-access chain the skipped elements are
    # never computed; before, skip streamed through all of them (10**12 here: a hang).
    calls: list[int] = []

    def f(x):
        calls.append(int(x))
        return x * 2

    assert ints(dp.range(10**12).skip(10**12 - 3)) == [10**12 - 3, 10**12 - 2, 10**12 - 1]
    assert ints(dp.range(100).map(f).skip(95)) == [190, 192, 194, 196, 198]
    shuffled = dp.range(10**12).global_shuffle(seed=1)
    assert ints(shuffled.skip(10**12 - 2)) == ints(shuffled.take(10**12).skip(10**12 - 2))
    assert calls == [95, 96, 97, 98, 99]


def test_skip_pushed_below_random_map_keeps_its_draws_and_resumes():
    def draw(x, rng):
        return int(rng.integers(10**6))

    opts = dp.Options(seed=5)
    whole = ints(dp.range(50).random_map(draw).with_options(opts))
    ds = dp.range(50).random_map(draw).skip(20).with_options(opts)
    assert ints(ds) == whole[20:]
    it = iter(dp.range(50).random_map(draw).skip(20).with_options(opts))
    [next(it) for _ in range(4)]
    state = copy.deepcopy(it.get_state())
    fresh = iter(dp.range(50).random_map(draw).skip(20).with_options(opts))
    fresh.set_state(state)
    assert ints(fresh) == whole[24:]


def test_lists_of_strings_keep_trailing_nul_bytes():
    # numpy's fixed-width "S"/"U" arrays drop trailing NULs; tf.data keeps b"a\x00".
    raw = [b"a\x00", b"", b"xyz\x00\x00"]
    assert list(dp.from_tensor_slices(raw)) == raw
    assert type(next(iter(dp.from_tensor_slices(raw)))) is bytes
    assert list(dp.from_tensor_slices(["a\x00", "b"])) == ["a\x00", "b"]
    (one,) = list(dp.from_tensors(raw))
    assert one.dtype == object and one.tolist() == raw
    grid = next(iter(dp.from_tensor_slices([[b"p\x00", b"q"], [b"r", b"s"]])))
    assert grid.dtype == object and grid.tolist() == [b"p\x00", b"q"]
    assert dp.from_tensor_slices(raw).element_spec == dp.TensorSpec((), object)


def test_a_dataset_is_always_truthy_as_in_tf_data():
    # Dataset defines __len__, which raises for infinite/unknown cardinality; without
    # __bool__, `if ds:` raised (and sample_from_datasets(weights=<infinite Dataset>) did).
    assert bool(dp.range(3).repeat()) and bool(dp.range(0))
    weights = dp.from_tensors(np.array([0.5, 0.5])).repeat()
    ds = dp.sample_from_datasets([dp.range(3), dp.range(10, 13)], weights=weights, seed=1)
    assert sorted(ints(ds)) == [0, 1, 2, 10, 11, 12]


def _fails_on_zero(x):
    if x == 0:
        raise ValueError("corrupt record")
    return np.arange(int(x))


def test_element_spec_is_inferred_past_a_failing_first_element():
    # map's spec comes from a computed element (no tracing); a bad first record made
    # element_spec raise, so map(decode).ignore_errors().padded_batch(...) failed to build.
    ds = dp.range(4).map(_fails_on_zero)
    assert ds.element_spec == dp.TensorSpec((1,), "int64")  # from element 1, the first good one
    padded = ds.ignore_errors().padded_batch(2)
    assert [b.tolist() for b in padded] == [[[0, 0], [0, 1]], [[0, 1, 2]]]


def test_element_spec_reraises_when_no_element_can_be_computed():
    def always(x):
        raise ValueError("nope")

    with pytest.raises(dp.PipelineError, match=r"map at element 0: ValueError: nope"):
        _ = dp.range(3).map(always).element_spec
