"""``PathList``: file lists in numpy buffers behave as sequences of ``str``, sort like
Python's ``sorted``, and hold a few tens of bytes per file."""

from __future__ import annotations

import os

import numpy as np
import pytest

from datapipe.io._path_list import PathList, PathListBuilder

NAMES = ["b.jpg", "a.JPEG", "é.png", "z z.gif", "a\udcff.jpg", "🐍.bmp", ".hidden.png"]


def built(groups, is_sorted=False) -> PathList:
    b = PathListBuilder()
    for d, names in groups:
        b.add(d, names, is_sorted=is_sorted)
    return b.build()


def test_paths_round_trip_any_name():
    paths = [f"/data/{n}" for n in NAMES] + ["rel/x.png", "noslash.png"]
    pl = PathList.from_paths(paths)
    assert len(pl) == len(paths)
    assert list(pl) == paths and pl[0] == paths[0] and pl[-1] == "noslash.png"
    assert pl.paths([4, 0]) == [paths[4], paths[0]]
    assert os.fsencode(pl[4]) == b"/data/a\xff.jpg"  # an undecodable name survives
    assert pl == paths and pl == tuple(paths) and pl != paths[:-1]
    with pytest.raises(IndexError, match="path index 9 out of range for 9 paths"):
        pl[9]


@pytest.mark.parametrize(
    "groups",
    [
        [("/d/b/", sorted(NAMES)), ("/d/a/", sorted(NAMES)), ("/d/a-b/", ["1.jpg", "0.jpg"])],
        [("/d/a/", ["x.jpg"]), ("/d/a/sub/", ["y.jpg"]), ("/d/a/", ["a.jpg", "z.jpg"])],  # nested
        [("/r/c10/", ["2.png", "10.png"]), ("/r/c9/", ["1.png"]), ("", ["top.png"])],
    ],
    ids=["prefix-order", "nested-and-repeated-dirs", "numeric-names"],
)
def test_sorted_order_is_pythons_sort_for_lists_and_views(groups):
    pl = built(groups)
    want = sorted(range(len(pl)), key=lambda j: (list(pl)[j], j))
    assert pl.sorted_order().tolist() == want
    assert list(pl.sorted_view()) == sorted(pl)
    rng = np.random.default_rng(0)
    for view in (pl.take(rng.permutation(len(pl))), pl[::2], pl.take([1, 1, 0, 1])):
        items = list(view)
        assert view.sorted_order().tolist() == sorted(range(len(view)), key=lambda j: (items[j], j))


def test_a_directory_listed_sorted_needs_no_string_sort():
    # 3 directories in one listing: the sorted order comes from numpy (sorted_rank).
    pl = built([(f"/x/c{k}/", [f"{i:03d}.jpg" for i in range(50)]) for k in (2, 0, 1)], True)
    assert pl._t.sorted_rank() is not None
    shuffled = pl.take(np.random.default_rng(1).permutation(150))
    assert list(shuffled.sorted_view()) == sorted(pl)


def test_views_share_the_buffers_and_the_bytes_per_file_are_few():
    names = [f"n01440764_{i:05d}.JPEG" for i in range(20000)]
    pl = built([("/data/imagenet/train/n01440764/", names)], True)
    assert pl.nbytes / len(pl) < 40  # 20 bytes of name + 14 of offsets, length, directory
    view = pl.take(np.arange(len(pl))[::-1])
    assert view.same_table(pl) and view[0] == pl[-1]
    assert view.nbytes - pl.nbytes == 8 * len(pl)  # one int64 row number per file
    assert pl[10:13] == [f"/data/imagenet/train/n01440764/{n}" for n in names[10:13]]


def test_an_overlong_name_is_refused():
    with pytest.raises(ValueError, match="a file name of 70000 bytes"):
        built([("/d/", ["x" * 70000])])
