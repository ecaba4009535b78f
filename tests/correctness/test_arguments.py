"""Issue 11, "unclear errors and accepted nonsense": every op checks its arguments when the
pipeline is built and names the op and the argument; Options refuse unknown attributes;
set_state / load_state_dict refuse what get_state did not make."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import datapipe as dp


def _ds():
    return dp.range(10)


# (call, op, argument) for arguments that must be integers.
INT_ARGS = [
    (lambda v: _ds().take(v), "take", "count"),
    (lambda v: _ds().skip(v), "skip", "count"),
    (lambda v: _ds().repeat(v), "repeat", "count"),
    (lambda v: _ds().batch(v), "batch", "batch_size"),
    (lambda v: _ds().padded_batch(v), "padded_batch", "batch_size"),
    (lambda v: _ds().shuffle(v), "shuffle", "buffer_size"),
    (lambda v: _ds().shuffle(4, seed=v), "shuffle", "seed"),
    (lambda v: _ds().global_shuffle(seed=v), "global_shuffle", "seed"),
    (lambda v: _ds().window(v), "window", "size"),
    (lambda v: _ds().window(2, shift=v), "window", "shift"),
    (lambda v: _ds().window(2, stride=v), "window", "stride"),
    (lambda v: _ds().shard(v, 0), "shard", "num_shards"),
    (lambda v: _ds().shard(2, v), "shard", "index"),
    (lambda v: _ds().prefetch(v), "prefetch", "buffer_size"),
    (lambda v: _ds().enumerate(v), "enumerate", "start"),
    (lambda v: _ds().map(lambda x: x, num_parallel_calls=v), "map", "num_parallel_calls"),
    (lambda v: _ds().random_map(lambda x, r: x, seed=v), "random_map", "seed"),
    (lambda v: _ds().interleave(lambda x: _ds(), cycle_length=v), "interleave", "cycle_length"),
    (lambda v: _ds().interleave(lambda x: _ds(), block_length=v), "interleave", "block_length"),
    (lambda v: dp.range(v), "range", "stop"),
    (lambda v: dp.sample_from_datasets([_ds()], seed=v), "sample_from_datasets", "seed"),
    # issue 16
    (lambda v: _ds().ragged_batch(v), "ragged_batch", "batch_size"),
    (
        lambda v: _ds().group_by_window(lambda x: x, _window, window_size=v),
        "group_by_window",
        "window_size",
    ),
    (lambda v: _ds().rejection_resample(lambda x: 0, [1.0], seed=v), "rejection_resample", "seed"),
    (lambda v: _dicts().first_fit_pack({"t": 4}, v), "first_fit_pack", "num_packing_bins"),
    (lambda v: _dicts().first_fit_pack({"t": v}, 2), "first_fit_pack", r"length_struct\['t'\]"),
    (lambda v: _dicts().first_fit_pack({"t": 4}, 2, seed=v), "first_fit_pack", "seed"),
    (
        lambda v: _dicts().first_fit_pack({"t": 4}, 2, max_sequences_per_bin=v),
        "first_fit_pack",
        "max_sequences_per_bin",
    ),
    (lambda v: dp.Dataset.counter(start=v), "counter", "start"),
    (lambda v: dp.Dataset.counter(step=v), "counter", "step"),
    (lambda v: dp.Dataset.random(seed=v), "random", "seed"),
    (
        lambda v: _ds().filter(bool).assert_cardinality(v),
        "assert_cardinality",
        "expected_cardinality",
    ),
]


def _window(key, window):
    return window.batch(2)


def _dicts():
    return dp.range(5).map(lambda n: {"t": np.arange(n)})


@pytest.mark.parametrize("make, op, arg", INT_ARGS)
@pytest.mark.parametrize("bad", ["a", "32", 2.0, 2.5, True, None, [3]])
def test_integer_arguments_refuse_other_types(make, op, arg, bad):
    defaults_none = (
        "seed",
        "cycle_length",
        "num_parallel_calls",
        "shift",
        "window_size",
        "max_sequences_per_bin",
    )
    if bad is None and (arg in defaults_none or op in ("repeat", "prefetch")):
        pytest.skip("None is this argument's documented default (prefetch: AUTOTUNE)")
    with pytest.raises(TypeError, match=rf"^{op}: {arg} must be an integer, got"):
        make(bad)


@pytest.mark.parametrize("make, op, arg", INT_ARGS)
def test_integer_arguments_accept_numpy_integers(make, op, arg):
    value = 1 if arg != "index" else 0
    make(np.int32(value))
    make(np.int64(value))


@pytest.mark.parametrize(
    "make, op, arg",
    [
        (lambda v: _ds().batch(2, drop_remainder=v), "batch", "drop_remainder"),
        (lambda v: _ds().padded_batch(2, drop_remainder=v), "padded_batch", "drop_remainder"),
        (lambda v: _ds().window(2, drop_remainder=v), "window", "drop_remainder"),
        (
            lambda v: _ds().shuffle(2, reshuffle_each_iteration=v),
            "shuffle",
            "reshuffle_each_iteration",
        ),
        (lambda v: _ds().map(lambda x: x, deterministic=v), "map", "deterministic"),
        (lambda v: _ds().ignore_errors(log_warning=v), "ignore_errors", "log_warning"),
        (
            lambda v: dp.sample_from_datasets([_ds()], stop_on_empty_dataset=v),
            "sample_from_datasets",
            "stop_on_empty_dataset",
        ),
        # issue 16
        (lambda v: _ds().ragged_batch(2, drop_remainder=v), "ragged_batch", "drop_remainder"),
        (lambda v: _ds().batch(2).rebatch(3, drop_remainder=v), "rebatch", "drop_remainder"),
        (lambda v: _bucket(drop_remainder=v), "bucket_by_sequence_length", "drop_remainder"),
        (lambda v: _bucket(no_padding=v), "bucket_by_sequence_length", "no_padding"),
        (
            lambda v: _bucket(pad_to_bucket_boundary=v),
            "bucket_by_sequence_length",
            "pad_to_bucket_boundary",
        ),
        (
            lambda v: _dicts().first_fit_pack({"t": 4}, 2, shuffle_bins=v),
            "first_fit_pack",
            "shuffle_bins",
        ),
        (
            lambda v: dp.Dataset.random(rerandomize_each_iteration=v),
            "random",
            "rerandomize_each_iteration",
        ),
    ],
)
@pytest.mark.parametrize("bad", ["False", 0, 1, [0]])
def test_flags_refuse_non_bools(make, op, arg, bad):
    # bool("False") is True: a silent flip without this check.
    with pytest.raises(TypeError, match=rf"^{op}: {arg} must be True or False"):
        make(bad)
    make(np.bool_(True))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: _ds().take(-2), r"take: count must be >= 0, or -1 for all, got -2"),
        (lambda: _ds().batch(0), r"batch: batch_size must be >= 1, got 0"),
        (lambda: _ds().shard(2, 2), r"shard: index must be in \[0, num_shards\)"),
        (lambda: _ds().prefetch(-5), r"prefetch: buffer_size must be >= 0 or AUTOTUNE"),
        (lambda: dp.range(0, 10, 0), r"range: step must not be 0"),
        (lambda: _ds().map(lambda x: x, num_parallel_calls=0), r"map: num_parallel_calls"),
    ],
)
def test_out_of_range_values_name_op_and_argument(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def _bucket(**kw):
    return _ds().map(lambda n: np.arange(n)).bucket_by_sequence_length(len, [3], [2, 2], **kw)


def test_valid_arguments_still_run():
    assert [int(x) for x in _ds().take(np.int64(3))] == [0, 1, 2]
    assert [b.tolist() for b in _ds().batch(np.int32(4), drop_remainder=True)] == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
    ]
    assert len(list(_ds().repeat(None).take(25))) == 25
    assert [int(x) for x in _ds().take(-1)] == list(range(10))


def test_cache_filename_must_be_a_path():
    with pytest.raises(TypeError, match="cache: filename must be a str or os.PathLike"):
        _ds().cache(123)


def test_options_refuse_unknown_attributes_with_a_suggestion():
    opts = dp.Options()
    with pytest.raises(
        AttributeError, match="Options has no option 'determinstic'; did you mean 'deterministic'"
    ):
        opts.determinstic = False
    with pytest.raises(
        AttributeError, match="AutotuneOptions has no option 'enabeld'; did you mean 'enabled'"
    ):
        opts.autotune.enabeld = False
    with pytest.raises(AttributeError, match="its options are"):
        opts.zzzzzzzz = 1
    opts.deterministic = False  # the real one still works
    assert opts.deterministic is False


def test_options_check_value_types():
    with pytest.raises(TypeError, match="Options: seed must be an integer, got str"):
        dp.Options(seed="7")
    with pytest.raises(TypeError, match="Options: deterministic must be True or False"):
        dp.Options(deterministic="no")
    with pytest.raises(TypeError, match="Options: autotune must be a AutotuneOptions"):
        dp.Options(autotune=True)
    with pytest.raises(ValueError, match="AutotuneOptions: cpu_budget must be >= 1"):
        dp.AutotuneOptions(cpu_budget=0)
    merged = dp.Options(seed=np.int64(3)).merge(dp.Options(deterministic=False))
    assert (merged.seed, merged.deterministic) == (3, False)


@pytest.mark.parametrize("bad", ["abc", None, 5])
def test_set_state_of_a_wrong_type_is_a_value_error(bad):
    it = iter(_ds().map(lambda x: x + 1).filter(lambda x: x > 0))
    next(it)
    with pytest.raises(ValueError, match="expected the dict that get_state"):
        it.set_state(bad)


def test_set_state_of_a_list_of_non_states_is_a_value_error():
    # A list is the elastic form (every worker's state); its items must be states.
    it = iter(_ds().map(lambda x: x + 1).filter(lambda x: x > 0))
    next(it)
    with pytest.raises(ValueError, match=r"states\[0\] is not an iterator state \(a dict from"):
        it.set_state([1, 2, 3])


@pytest.mark.parametrize(
    "patch",
    [{"epoch": 5}, {"worker": "ab"}, {"pending": "x"}, {"root": [1]}, {"root": "x"}, {"seed": "s"}],
)
def test_set_state_with_wrong_entries_is_a_value_error(patch):
    it = iter(_ds().map(lambda x: x + 1).filter(lambda x: x > 0))
    next(it)
    state = {**it.get_state(), **patch}
    with pytest.raises(ValueError, match="load_state_dict: the state"):
        iter(_ds().map(lambda x: x + 1).filter(lambda x: x > 0)).set_state(state)


@pytest.mark.parametrize(
    "entry, what",
    [("notbytes", "got str"), (torch.zeros(3), "float32 tensor"), (12, "got int")],
)
def test_torch_dataset_load_state_dict_with_a_bad_iterator_entry(entry, what):
    tds = _ds().as_torch_dataset()
    with pytest.raises(ValueError, match=rf"'iterator' entry must be the 1-D uint8 tensor.*{what}"):
        tds.load_state_dict({"epoch": 0, "done": False, "iterator": entry})
    with pytest.raises(ValueError, match="expected the dict that get_state"):
        tds.load_state_dict([1, 2])


def test_torch_dataset_round_trip_still_works():
    tds = _ds().as_torch_dataset()
    it = iter(tds)
    first = [int(next(it)) for _ in range(4)]
    state = tds.state_dict()
    fresh = _ds().as_torch_dataset()
    fresh.load_state_dict(state)
    assert first == [0, 1, 2, 3]
    assert [int(x) for x in fresh] == [4, 5, 6, 7, 8, 9]


@pytest.fixture
def image_dir(tmp_path):
    from PIL import Image

    (tmp_path / "a").mkdir()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "a" / "x.png")
    (tmp_path / "t.txt").write_text("a\nb\n")
    return tmp_path


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(image_size=("a", 4)), TypeError, "image_size height must be an integer"),
        (dict(image_size=(0, 4)), ValueError, "image_size height must be >= 1"),
        (dict(image_size=8), ValueError, r"image_size must be a pair \(height, width\)"),
        (dict(shuffle="no"), TypeError, "shuffle must be True or False"),
        (dict(follow_links="yes"), TypeError, "follow_links must be True or False"),
        (dict(seed="1"), TypeError, "seed must be an integer"),
        (dict(batch_size="32"), TypeError, "batch: batch_size must be an integer"),
        (dict(validation_split="0.2", subset="training", seed=1), TypeError, "validation_split"),
    ],
)
def test_image_dataset_from_directory_checks_its_arguments(image_dir, kwargs, error, message):
    with pytest.raises(error, match=message):
        dp.image_dataset_from_directory(str(image_dir), verbose=False, **kwargs)


def test_file_sources_check_their_arguments(image_dir):
    pattern = str(image_dir / "*.txt")
    with pytest.raises(TypeError, match="list_files: shuffle must be True or False"):
        dp.list_files(pattern, shuffle="no")
    with pytest.raises(TypeError, match="list_files: seed must be an integer"):
        dp.list_files(pattern, seed="1")
    with pytest.raises(TypeError, match="text_line: num_parallel_reads must be an integer"):
        dp.TextLineDataset(pattern.replace("*", "t"), num_parallel_reads="2")
    assert list(dp.TextLineDataset(str(image_dir / "t.txt"), num_parallel_reads=dp.AUTOTUNE)) == [
        "a",
        "b",
    ]
