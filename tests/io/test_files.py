"""``list_files`` (sorted, patterns, seeded shuffles per epoch, checkpoints, a file matched
twice listed once) and the ``FileSource`` contract."""

from __future__ import annotations

import os

import pytest
from _io_helpers import write

import datapipe as dp
from datapipe.io import FileSource, list_files


def _touch(d, names):
    for n in names:
        p = os.path.join(d, n)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(n)
    return [os.path.join(d, n) for n in names]


def test_list_files_sorted_unshuffled_and_patterns(tmp_path):
    d = str(tmp_path)
    _touch(d, ["b.txt", "a.txt", "c.csv", "sub/d.txt"])
    ds = list_files(os.path.join(d, "*.txt"), shuffle=False)
    assert list(ds) == [os.path.join(d, "a.txt"), os.path.join(d, "b.txt")]
    assert ds.cardinality() == 2 and ds.element_spec == dp.TensorSpec((), object)
    both = list_files([os.path.join(d, "*.csv"), os.path.join(d, "a.*")], shuffle=False)
    assert [os.path.basename(p) for p in both] == ["a.txt", "c.csv"]
    rec = list_files(os.path.join(d, "**", "*.txt"), shuffle=False)
    assert [os.path.relpath(p, d) for p in rec] == ["a.txt", "b.txt", os.path.join("sub", "d.txt")]


def test_list_files_no_match_names_patterns(tmp_path):
    p1, p2 = str(tmp_path / "*.nope"), str(tmp_path / "x*")
    with pytest.raises(FileNotFoundError, match=r"no files match the pattern\(s\)") as info:
        list_files([p1, p2])
    assert repr(p1) in str(info.value) and repr(p2) in str(info.value)


def test_list_files_shuffle_seeded_per_epoch(tmp_path):
    files = _touch(str(tmp_path), [f"{i:02d}" for i in range(20)])
    ds = list_files(str(tmp_path / "*"), seed=3)  # shuffle=None means True (tf.data)
    e1, e2 = list(ds), list(ds)
    assert sorted(e1) == files and sorted(e2) == files
    assert e1 != files and e1 != e2  # reshuffled each epoch
    again = list_files(str(tmp_path / "*"), seed=3)
    assert list(again) == e1 and list(again) == e2  # same seed: same sequence of epochs


def test_file_source_contract(tmp_path):
    files = _touch(str(tmp_path), ["a", "b", "c", "d"])
    ds = list_files(str(tmp_path / "*"), shuffle=False)
    assert isinstance(ds, FileSource) and ds.files == tuple(files)
    part = ds.with_files(ds.files[1::2])
    assert list(part) == [files[1], files[3]] and part.cardinality() == 2
    assert list(ds) == files  # the original is untouched
    with pytest.raises(ValueError, match="with_files got 'zzz', which is not one of its files"):
        ds.with_files(["zzz"])


def test_list_files_checkpoint_resumes(tmp_path):
    _touch(str(tmp_path), [f"{i}" for i in range(7)])
    ds = list_files(str(tmp_path / "*"), seed=5)
    it = iter(ds)
    head = [next(it) for _ in range(3)]
    state = it.get_state()
    rest = list(it)
    it2 = iter(ds)
    it2.set_state(state)
    assert list(it2) == rest and len(head + rest) == 7


def test_list_files_lists_a_file_matched_twice_once(tmp_path):
    a = write(os.path.join(str(tmp_path), "a.txt"), b"x")
    b = write(os.path.join(str(tmp_path), "b.txt"), b"x")
    ds = dp.list_files([os.path.join(str(tmp_path), "*.txt"), a], shuffle=False)
    assert list(ds) == [a, b]
    with pytest.raises(FileNotFoundError, match=r"'/nope/\*\.zzz', '/nope2/\*'"):
        dp.list_files(["/nope/*.zzz", "/nope2/*"])
