"""tf.data's ``list_files`` kernel tests (``kernel_tests/list_files_test.py``). Paths are
``str`` here (tf.data's are ``bytes``; the comparisons accept both)."""

from __future__ import annotations

import os

import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint


@pytest.fixture
def tmp_dir(tmp_path):
    return str(tmp_path)


def _touch(tmp_dir, filenames):
    for filename in filenames:
        open(os.path.join(tmp_dir, filename), "a").close()


def _paths(tmp_dir, filenames):
    return [os.path.join(tmp_dir, f) for f in filenames]


def test_empty_directory(tmp_dir):
    """kernel_tests/list_files_test.py::ListFilesTest.testEmptyDirectory (raised when the
    pipeline is built: D-TF-15)."""
    with pytest.raises(FileNotFoundError, match="list_files: no files match"):
        dp.list_files(os.path.join(tmp_dir, "*"))


@pytest.mark.parametrize("shuffle", [None, True])
def test_simple_directory(tmp_dir, shuffle):
    """kernel_tests/list_files_test.py::ListFilesTest.testSimpleDirectory,
    testSimpleDirectoryInitializer (one case each: the default, shuffled)."""
    _touch(tmp_dir, ["a", "b", "c"])
    ds = dp.list_files(os.path.join(tmp_dir, "*"), shuffle=shuffle)
    assert_produces(ds, _paths(tmp_dir, ["a", "b", "c"]), unordered=True)


def test_simple_directory_not_shuffled(tmp_dir):
    """kernel_tests/list_files_test.py::ListFilesTest.testSimpleDirectoryNotShuffled."""
    _touch(tmp_dir, ["b", "c", "a"])
    ds = dp.list_files(os.path.join(tmp_dir, "*"), shuffle=False)
    assert_produces(ds, _paths(tmp_dir, sorted(["b", "c", "a"])))


def test_fixed_seed_results_in_repeatable_order(tmp_dir):
    """kernel_tests/list_files_test.py::ListFilesTest.testFixedSeedResultsInRepeatableOrder."""
    _touch(tmp_dir, ["a", "b", "c"])
    runs = [
        list(dp.list_files(os.path.join(tmp_dir, "*"), shuffle=True, seed=37)) for _ in range(3)
    ]
    assert sorted(runs[0]) == _paths(tmp_dir, ["a", "b", "c"])
    assert runs[0] == runs[1] == runs[2]


@pytest.mark.parametrize(
    "filenames,pattern,expected",
    [
        (["a.txt", "b.py", "c.py", "d.pyc"], "*.py", ["b.py", "c.py"]),
        (["a.txt", "b.py", "c.pyc"], "*.py*", ["b.py", "c.pyc"]),
    ],
    ids=["testFileSuffixes", "testFileMiddles"],
)
def test_patterns(tmp_dir, filenames, pattern, expected):
    """kernel_tests/list_files_test.py::ListFilesTest.testFileSuffixes, testFileMiddles
    (one case each)."""
    _touch(tmp_dir, filenames)
    assert_produces(
        dp.list_files(os.path.join(tmp_dir, pattern)), _paths(tmp_dir, expected), unordered=True
    )


def test_no_shuffle(tmp_dir):
    """kernel_tests/list_files_test.py::ListFilesTest.testNoShuffle."""
    _touch(tmp_dir, ["a", "b", "c"])
    out = list(dp.list_files(os.path.join(tmp_dir, "*"), shuffle=False).repeat(2))
    assert sorted(out) == sorted(_paths(tmp_dir, ["a", "b", "c"]) * 2)
    assert out[:3] == out[3:]


@pytest.mark.parametrize(
    "as_array", [False, True], ids=["testMultiplePatternsAsList", "testMultiplePatternsAsTensor"]
)
def test_multiple_patterns(tmp_dir, as_array):
    """kernel_tests/list_files_test.py::ListFilesTest.testMultiplePatternsAsList,
    testMultiplePatternsAsTensor (one case each; a tensor of patterns is a tuple here)."""
    _touch(tmp_dir, ["a.txt", "b.py", "c.py", "d.pyc"])
    patterns = [os.path.join(tmp_dir, pat) for pat in ["*.py", "*.txt"]]
    ds = dp.list_files(tuple(patterns) if as_array else patterns)
    assert_produces(ds, _paths(tmp_dir, ["a.txt", "b.py", "c.py"]), unordered=True)


FILES = list("abcdefghijk")


@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
@pytest.mark.parametrize("seed", [None, 42])
@pytest.mark.parametrize("repetitions", [1, 2])
def test_global_shuffle(tmp_dir, repetitions, seed, reshuffle_each_iteration):
    """kernel_tests/list_files_test.py::ListFilesGlobalShuffleTest.test."""
    _touch(tmp_dir, FILES)
    ds = dp.list_files(os.path.join(tmp_dir, "*"), shuffle=False).prefetch(buffer_size=dp.AUTOTUNE)
    if repetitions > 1:
        ds = ds.repeat(repetitions)
    ds = ds.global_shuffle(seed=seed, reshuffle_each_iteration=reshuffle_each_iteration)
    expected = _paths(tmp_dir, FILES) * repetitions
    out = list(ds)
    assert sorted(out) == sorted(expected)
    assert out != expected
    assert len(out) == ds.cardinality()


def test_global_shuffle_of_shuffled_files(tmp_dir):
    """kernel_tests/list_files_test.py::ListFilesGlobalShuffleTest.testShuffleNotSupported:
    tf.data cannot globally shuffle list_files(shuffle=True); here its shuffle is a
    permutation of the list, which keeps random access (D-TF-20)."""
    _touch(tmp_dir, FILES)
    ds = dp.list_files(os.path.join(tmp_dir, "*"), shuffle=True, seed=1).global_shuffle(seed=2)
    assert sorted(ds) == _paths(tmp_dir, FILES)  # D-TF-20


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
@pytest.mark.parametrize("repetitions", [1, 2])
def test_global_shuffle_checkpoint(tmp_dir, verify_fn, repetitions, reshuffle_each_iteration):
    """kernel_tests/list_files_test.py::ListFilesGlobalShuffleCheckpointTest.test."""
    _touch(tmp_dir, FILES)

    def build():
        ds = dp.list_files(os.path.join(tmp_dir, "*"), shuffle=False).prefetch(
            buffer_size=dp.AUTOTUNE
        )
        if repetitions > 1:
            ds = ds.repeat(repetitions)
        return ds.global_shuffle(seed=42, reshuffle_each_iteration=reshuffle_each_iteration)

    verify_checkpoint(
        build, len(FILES) * repetitions, verify_fn, unordered=reshuffle_each_iteration
    )
