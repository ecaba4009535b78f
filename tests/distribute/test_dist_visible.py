"""Auto-sharding is visible and can be turned off: ``len()``/``cardinality()`` say what this
worker iterates, one log record per pipeline, an explicit ``shard()`` turns it off."""

from __future__ import annotations

import logging
from unittest import mock

import numpy as np
import pytest
from _dist_helpers import worker_options
from hypothesis import given, settings
from hypothesis import strategies as st

import datapipe as dp

pytestmark = pytest.mark.usefixtures("clean_env")


def torchrun_rank(env, rank: int, world: int) -> None:
    env.setenv("RANK", str(rank))
    env.setenv("WORLD_SIZE", str(world))


# ---- len() / cardinality() -------------------------------------------------------------
def test_len_is_this_ranks_share_under_torchrun(clean_env):
    torchrun_rank(clean_env, 0, 2)
    ds = dp.range(100)
    assert len(ds) == 50 == len(list(ds))
    batched = dp.range(100).batch(10)
    assert len(batched) == 5 == len(list(batched))  # was 10 while iteration gave 5
    assert batched.cardinality() == 5


def test_len_follows_uneven(clean_env):
    torchrun_rank(clean_env, 2, 3)
    for uneven, expected in (("drop", 3), ("pad", 4), ("allow", 3)):
        ds = dp.range(10).with_options(dp.Options(distribute=dp.DistributeOptions(uneven=uneven)))
        assert len(ds) == expected == len(list(ds)), uneven
    torchrun_rank(clean_env, 0, 3)
    allow = dp.Options(distribute=dp.DistributeOptions(uneven="allow"))
    assert len(dp.range(10).with_options(allow)) == 4


def test_len_without_a_worker_context_is_the_whole_dataset():
    assert len(dp.range(100)) == 100
    assert dp.range(100).filter(lambda x: x > 3).cardinality() == dp.UNKNOWN_CARDINALITY


def test_inner_cardinalities_stay_the_graphs_own(clean_env):
    # An op's own rule reads its input's count unsharded: only the public result is a view.
    torchrun_rank(clean_env, 1, 4)
    ds = dp.range(40).batch(3, drop_remainder=True)
    assert len(ds) == 3 == len(list(ds))  # 10 elements on this rank -> 3 full batches


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 60),
    ranks=st.integers(1, 4),
    loaders=st.integers(1, 3),
    uneven=st.sampled_from(["drop", "pad", "allow"]),
    batch=st.sampled_from([0, 1, 4]),
    drop_remainder=st.booleans(),
    shuffle=st.booleans(),
)
def test_cardinality_equals_what_each_worker_iterates(
    n, ranks, loaders, uneven, batch, drop_remainder, shuffle
):
    ds = dp.range(n).map(lambda x: x * 2)
    if shuffle:
        ds = ds.shuffle(5)
    if batch:
        ds = ds.batch(batch, drop_remainder=drop_remainder)
    for r in range(ranks):
        for w in range(loaders):
            patch = mock.patch(
                "datapipe.distribute.context._loader_worker", return_value=(w, loaders)
            )
            with patch:
                mine = ds.with_options(worker_options(ranks, r, uneven=uneven))
                assert mine.cardinality() == len(list(mine))


# ---- one log record ------------------------------------------------------------------------
def test_torchrun_iteration_logs_rank_world_policy_and_share(clean_env, caplog):
    torchrun_rank(clean_env, 1, 2)
    ds = dp.range(100).map(lambda x: x)
    with caplog.at_level(logging.INFO, logger="datapipe"):
        for _ in range(3):
            list(ds)
    msgs = [r.getMessage() for r in caplog.records if r.name.startswith("datapipe")]
    assert msgs == [
        "auto-shard: rank 1 of world size 2 (worker 1 of 2, from env:torchrun): policy DATA "
        "(AUTO fell back to DATA: no file source); this worker reads 50 of 100 elements of "
        "'range', every 2nd from 1"
    ]


def test_no_record_without_a_worker_context(caplog):
    with caplog.at_level(logging.DEBUG, logger="datapipe"):
        list(dp.range(10))
        len(dp.range(10))
    assert not [r for r in caplog.records if r.name.startswith("datapipe")]


def test_len_does_not_log(clean_env, caplog):
    torchrun_rank(clean_env, 0, 2)
    with caplog.at_level(logging.INFO, logger="datapipe"):
        assert len(dp.range(8)) == 4
    assert not caplog.records


# ---- an explicit shard() turns auto-sharding off --------------------------------------------
def test_explicit_shard_is_not_sharded_again(clean_env):
    torchrun_rank(clean_env, 1, 2)
    assert [int(x) for x in dp.range(12).shard(2, 0)] == [0, 2, 4, 6, 8, 10]  # was [0, 4, 8]
    assert len(dp.range(12).shard(2, 0)) == 6


def test_explicit_shard_anywhere_turns_it_off_for_the_whole_pipeline(clean_env, caplog):
    torchrun_rank(clean_env, 1, 2)
    ds = dp.zip(dp.range(8).shard(2, 1), dp.range(100, 104)).map(lambda a, b: int(a) + int(b))
    with caplog.at_level(logging.INFO, logger="datapipe"):
        assert [int(x) for x in ds] == [101, 104, 107, 110]
    (msg,) = [r.getMessage() for r in caplog.records]
    assert msg.endswith("off: the pipeline shards itself with an explicit shard()")


def test_rank0_evaluates_the_full_test_set(clean_env):
    torchrun_rank(clean_env, 0, 4)
    test = dp.range(100).map(lambda x: x).batch(32)
    assert sum(len(b) for b in test) == 25  # auto-sharded: a quarter
    whole = test.shard(1, 0)  # one shard of one: everything, on every rank
    assert sum(len(b) for b in whole) == 100 == sum(len(b) for b in whole)
    off = dp.Options(distribute=dp.DistributeOptions(auto_shard_policy=dp.AutoShardPolicy.OFF))
    assert sum(len(b) for b in test.with_options(off)) == 100


def test_help_of_shard_mentions_auto_sharding():
    doc = dp.Dataset.shard.__doc__
    assert "Auto-sharding" in doc and "turns that off" in doc and "shard(1, 0)" in doc
    assert "RANK" in doc and "DataLoader" in doc


# ---- bad settings fail at once, naming the variable -------------------------------------------
@pytest.mark.parametrize(
    "env, message",
    [
        ({"RANK": "x", "WORLD_SIZE": "2"}, "environment variable RANK='x' is not an integer"),
        ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK=2 must be in [0, WORLD_SIZE)"),
        ({"RANK": "0"}, "RANK='0' is set but WORLD_SIZE is not"),
    ],
)
def test_bad_launcher_variables_fail_naming_them(clean_env, env, message):
    # At iter() and at len(), before anything waits on anything.
    for k, v in env.items():
        clean_env.setenv(k, v)
    for attempt in (lambda: iter(dp.range(4)), lambda: len(dp.range(4))):
        with pytest.raises(dp.WorkerContextError) as info:
            attempt()
        assert message in str(info.value)


def test_worker_view_of_numpy_sources(clean_env):
    torchrun_rank(clean_env, 1, 3)
    ds = dp.Dataset.from_tensor_slices(np.arange(10))
    assert len(ds) == 3 and [int(x) for x in ds] == [1, 4, 7]


# ---- the README's distributed section ----------------------------------------------------------
def test_readme_evaluation_examples_run(clean_env):
    import re
    import socket
    from pathlib import Path

    import torch
    import torch.distributed as dist

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    (code,) = [
        c
        for c in re.findall(r"```python\n(.*?)\n```", readme, flags=re.S)
        if "def evaluate_all_ranks" in c
    ]
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        x = np.eye(4, dtype=np.float32)[np.arange(10) % 4]
        test = dp.from_tensor_slices((x, np.arange(10) % 4)).batch(3).to_torch()
        model = torch.nn.Identity()  # argmax of a one-hot row is its label
        assert scope["evaluate_on_rank0"](model, test) == 1.0
        assert scope["evaluate_all_ranks"](model, test) == 1.0
    finally:
        dist.destroy_process_group()
