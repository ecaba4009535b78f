"""Property tests: over random worker counts, sizes, file counts and policies, the workers'
shares partition the input (or its documented drop / pad), with equal batch counts."""

from __future__ import annotations

from collections import Counter

import pytest
from _dist_helpers import FakeFiles, per_worker
from hypothesis import given, settings
from hypothesis import strategies as st

import datapipe as dp
from datapipe.distribute import AutoShardError

SETTINGS = settings(max_examples=40, deadline=None)


def shard_sizes(n: int, k: int) -> list[int]:
    return [n // k + (1 if j < n % k else 0) for j in range(k)]


def check_partition(parts: list[list], sizes: list[int], universe: list, uneven: str) -> None:
    k = len(parts)
    flat = [x for p in parts for x in p]
    if uneven == "allow":
        assert [len(p) for p in parts] == sizes
        assert sorted(flat) == sorted(universe)  # union = input, pairwise disjoint
    elif uneven == "drop":
        assert [len(p) for p in parts] == [min(sizes)] * k
        assert len(set(flat)) == len(flat)  # pairwise disjoint, none repeated
        assert set(flat) <= set(universe)
        assert len(universe) - len(flat) == sum(sizes) - k * min(sizes)
    else:  # pad
        assert [len(p) for p in parts] == [max(sizes)] * k
        if universe:
            assert set(flat) == set(universe)  # nothing lost
        extra = Counter(flat) - Counter(universe)
        assert sum(extra.values()) == k * max(sizes) - sum(sizes)


@SETTINGS
@given(
    n=st.integers(0, 40),
    k=st.integers(1, 6),
    uneven=st.sampled_from(["drop", "pad", "allow"]),
    pipeline=st.sampled_from(["plain", "map", "shuffle", "global_shuffle", "take"]),
)
def test_data_policy_partitions_elements(n, k, uneven, pipeline):
    ds = dp.range(n)
    universe = list(range(n))
    if pipeline == "map":
        ds = ds.map(lambda x: x + 1000)
        universe = [x + 1000 for x in universe]
    elif pipeline == "shuffle":
        ds = ds.shuffle(7)  # unseeded: the shard goes below it
    elif pipeline == "global_shuffle":
        ds = ds.global_shuffle(seed=n)  # seeded: one permutation, split
    elif pipeline == "take":
        ds = ds.take(n // 2)
        universe = universe[: n // 2]
    policy = dp.AutoShardPolicy.DATA
    parts = per_worker(ds, k, policy=policy, uneven=uneven)
    check_partition(parts, shard_sizes(len(universe), k), universe, uneven)


@SETTINGS
@given(
    file_sizes=st.lists(st.integers(0, 6), min_size=1, max_size=10),
    k=st.integers(1, 6),
    uneven=st.sampled_from(["drop", "pad", "allow"]),
    policy=st.sampled_from([dp.AutoShardPolicy.FILE, dp.AutoShardPolicy.AUTO]),
)
def test_file_and_auto_policies_partition_elements(file_sizes, k, uneven, policy):
    contents, start = {}, 0
    for i, s in enumerate(file_sizes):
        contents[f"f{i}"] = list(range(start, start + s))
        start += s
    universe = list(range(start))
    src = FakeFiles(contents)
    if policy is dp.AutoShardPolicy.FILE and len(file_sizes) < k:
        with pytest.raises(AutoShardError, match=f"has {len(file_sizes)} files but there are {k}"):
            per_worker(src, k, policy=policy, uneven=uneven)
        return
    parts = per_worker(src, k, policy=policy, uneven=uneven)
    if len(file_sizes) >= k:  # FILE (AUTO picks it too): worker j reads files j::k
        sizes = [sum(file_sizes[j::k]) for j in range(k)]
        for j, p in enumerate(parts):
            own = [v for f in list(contents)[j::k] for v in contents[f]]
            assert p[: len(own)] == own[: len(p)]  # its own files, in order
    else:  # AUTO fell back to DATA
        sizes = shard_sizes(start, k)
    check_partition(parts, sizes, universe, uneven)


@SETTINGS
@given(
    n=st.integers(0, 50),
    k=st.integers(1, 5),
    batch=st.integers(1, 6),
    drop_remainder=st.booleans(),
    uneven=st.sampled_from(["drop", "pad"]),
)
def test_equal_batch_counts_under_drop_and_pad(n, k, batch, drop_remainder, uneven):
    ds = dp.range(n).shuffle(5).map(lambda x: x * 2).batch(batch, drop_remainder=drop_remainder)
    parts = per_worker(ds, k, uneven=uneven)
    assert len({len(p) for p in parts}) == 1
    sizes = shard_sizes(n, k)
    per = min(sizes) if uneven == "drop" else max(sizes)
    expected = per // batch if drop_remainder else -(-per // batch)
    assert [len(p) for p in parts] == [expected] * k
