"""Exactly once, proven over the dimensions that matter (hypothesis): policy (AUTO, FILE,
DATA), number of files (fewer than workers too), lines per file (0 too), ranks x DataLoader
workers, ``uneven`` in {allow, drop, pad}, and pipelines with shuffle, map, batch, filter.

With ``uneven="allow"`` one epoch delivers every element exactly once across workers;
``"drop"`` misses at most ``workers - 1`` and repeats none; ``"pad"`` misses none and
repeats at most ``workers - 1``. FILE with fewer files than workers raises.

The default run keeps the example counts small; ``-m slow`` runs the same properties
deeper.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from contextlib import contextmanager
from unittest import mock

import numpy as np
import pytest
from _dist_helpers import worker_options
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import datapipe as dp
from datapipe.distribute import AutoShardError

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DEEP = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

POLICIES = st.sampled_from(["AUTO", "FILE", "DATA"])
UNEVEN = st.sampled_from(["allow", "drop", "pad"])


@contextmanager
def loader_worker(index: int, count: int):
    """Runs as DataLoader worker ``index`` of ``count`` (what torch's get_worker_info says)."""
    with mock.patch("datapipe.distribute.context._loader_worker", return_value=(index, count)):
        yield


def flatten(x) -> list:
    if isinstance(x, (str, bytes, int, np.integer)):
        return [x]
    return np.asarray(x).reshape(-1).tolist()


def text_files(d: str, lines: list[int]) -> list[str]:
    """Files ``f<i>.txt`` with ``lines[i]`` lines ``"<i>-<j>"``; the paths, in order."""
    paths = []
    for i, n in enumerate(lines):
        p = os.path.join(d, f"f{i:02d}.txt")
        with open(p, "w") as f:
            f.write("".join(f"{i}-{j}\n" for j in range(n)))
        paths.append(p)
    return paths


def build(kind: str, d: str, paths: list[str], ops: dict) -> tuple[dp.Dataset, list]:
    """A pipeline and the elements one unsharded epoch delivers (as a multiset)."""
    if kind == "interleave":  # list_files shuffles by default, unseeded
        ds = dp.list_files(os.path.join(d, "*.txt")).interleave(dp.TextLineDataset, cycle_length=2)
    elif kind == "text":
        ds = dp.TextLineDataset(paths, num_parallel_reads=ops["reads"])
    else:
        ds = dp.range(ops["n"]).map(lambda x: f"r{int(x)}")
    if ops["filter"]:
        ds = ds.filter(lambda s: not s.endswith("1"))
    if ops["map"]:
        ds = ds.map(lambda s: s.upper())
    if ops["shuffle"]:
        ds = ds.shuffle(ops["shuffle"])
    if ops["batch"]:
        ds = ds.batch(ops["batch"])
    with_off = ds.with_options(dp.Options(distribute=dp.DistributeOptions(auto_shard_policy="OFF")))
    universe = [v for x in with_off for v in flatten(x)]
    return ds, universe


def deliveries(ds, ranks: int, loaders: int, policy: str, uneven: str) -> list[list]:
    """Each worker's elements (ranks x DataLoader workers), each worker reading alone."""
    out = []
    for r in range(ranks):
        for w in range(loaders):
            with loader_worker(w, loaders):
                opts = worker_options(ranks, r, policy=policy, uneven=uneven)
                out.append([v for x in ds.with_options(opts) for v in flatten(x)])
    return out


def check(parts: list[list], universe: list, uneven: str) -> None:
    k = len(parts)
    got, want = Counter(v for p in parts for v in p), Counter(universe)
    missing, extra = want - got, got - want
    assert set(got) <= set(want), f"elements that are not in the data: {set(got) - set(want)}"
    if uneven == "allow":
        assert got == want
    elif uneven == "drop":
        assert not extra, f"repeated: {extra}"
        assert sum(missing.values()) <= k - 1
    else:
        assert not missing, f"lost: {missing}"
        assert sum(extra.values()) <= k - 1


OPS = st.fixed_dictionaries(
    {
        "filter": st.booleans(),
        "map": st.booleans(),
        "shuffle": st.sampled_from([0, 3]),
        "batch": st.sampled_from([0, 1, 3]),
        "reads": st.sampled_from([None, 2]),
        "n": st.integers(0, 30),
    }
)


def exactly_once(kind, policy, lines, ranks, loaders, uneven, ops):
    with tempfile.TemporaryDirectory() as d:
        paths = text_files(d, lines)
        ds, universe = build(kind, d, paths, ops)
        k = ranks * loaders
        if kind == "range" and policy == "FILE":
            with pytest.raises(AutoShardError, match="the graph has no file source"):
                deliveries(ds, ranks, loaders, policy, uneven)
            return
        if kind != "range" and policy == "FILE" and len(lines) < k:
            with pytest.raises(AutoShardError, match=f"has {len(lines)} files but there are {k}"):
                deliveries(ds, ranks, loaders, policy, uneven)
            return
        check(deliveries(ds, ranks, loaders, policy, uneven), universe, uneven)


ARGS = dict(
    kind=st.sampled_from(["interleave", "text", "range"]),
    policy=POLICIES,
    lines=st.lists(st.integers(0, 6), min_size=1, max_size=6),
    ranks=st.integers(1, 3),
    loaders=st.integers(1, 2),
    uneven=UNEVEN,
    ops=OPS,
)


@FAST
@given(**ARGS)
def test_one_epoch_delivers_each_element_once(kind, policy, lines, ranks, loaders, uneven, ops):
    exactly_once(kind, policy, lines, ranks, loaders, uneven, ops)


@pytest.mark.slow
@DEEP
@given(**ARGS)
def test_one_epoch_delivers_each_element_once_deep(
    kind, policy, lines, ranks, loaders, uneven, ops
):
    exactly_once(kind, policy, lines, ranks, loaders, uneven, ops)


# ---- the reported cases, by name ----------------------------------------------------------
@pytest.mark.parametrize("policy", ["AUTO", "DATA"])
@pytest.mark.parametrize("uneven", ["allow", "drop", "pad"])
def test_one_file_two_workers_splits_its_lines(tmp_path, policy, uneven):
    text_files(str(tmp_path), [5])
    ds = dp.list_files(str(tmp_path / "*.txt")).interleave(dp.TextLineDataset)
    parts = [
        list(ds.with_options(worker_options(2, i, policy=policy, uneven=uneven))) for i in (0, 1)
    ]
    # Text lines have no known count, so nothing can be evened out: every line, once.
    assert parts == [["0-0", "0-2", "0-4"], ["0-1", "0-3"]]


@pytest.mark.parametrize("uneven", ["allow", "drop", "pad"])
def test_three_files_two_workers_lose_no_file(tmp_path, uneven):
    text_files(str(tmp_path), [2, 3, 4])
    ds = dp.list_files(str(tmp_path / "*.txt")).interleave(dp.TextLineDataset)
    parts = [list(ds.with_options(worker_options(2, i, uneven=uneven))) for i in (0, 1)]
    assert sorted(parts[0] + parts[1]) == sorted(
        f"{i}-{j}" for i, n in enumerate([2, 3, 4]) for j in range(n)
    )
    assert sorted(parts[1]) == ["1-0", "1-1", "1-2"]  # AUTO -> FILE: worker 1 reads f01


def test_auto_with_fewer_files_than_workers_says_it_shards_by_data(tmp_path, caplog):
    import logging

    text_files(str(tmp_path), [4])
    ds = dp.list_files(str(tmp_path / "*.txt"), shuffle=False).interleave(dp.TextLineDataset)
    with caplog.at_level(logging.INFO, logger="datapipe"):
        assert list(ds.with_options(worker_options(3, 2))) == ["0-2"]
    (msg,) = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("auto-shard: rank")
    ]
    assert "policy DATA (AUTO fell back to DATA: 'list_files' has 1 files for 3 workers)" in msg
    assert "this worker reads the elements of 'interleave', every 3rd from 2 (count unknown)" in msg
