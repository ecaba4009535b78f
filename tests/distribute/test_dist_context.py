"""Worker context resolution: order of the sources and the errors' messages; an iterator
state restored in another worker context is refused, in the same one it resumes."""

from __future__ import annotations

import time

import pytest
import torch
from _dist_helpers import worker_options

import datapipe as dp
from datapipe.distribute.context import (
    WorkerContext,
    WorkerContextError,
    process_from_env,
    resolve_worker_context,
)

pytestmark = pytest.mark.usefixtures("clean_env")


def explicit(n, i, **kw):
    return dp.Options(distribute=dp.DistributeOptions(num_workers=n, worker_index=i, **kw))


def _advanced(ds, count, index, steps=2):
    it = iter(ds.with_options(worker_options(count, index)))
    for _ in range(steps):
        next(it)
    return it.state_dict()


def test_default_is_one_worker():
    assert resolve_worker_context() == WorkerContext(0, 1, 0, 1, 0, 1, "default")


def test_torchrun_env(clean_env):
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    for k, v in env.items():
        clean_env.setenv(k, v)
    ctx = resolve_worker_context()
    assert (ctx.index, ctx.count, ctx.source) == (3, 4, "env:torchrun")


def test_slurm_env_used_when_no_torchrun(clean_env):
    clean_env.setenv("SLURM_PROCID", "2")
    clean_env.setenv("SLURM_NTASKS", "5")
    ctx = resolve_worker_context()
    assert (ctx.index, ctx.count, ctx.source) == (2, 5, "env:slurm")
    clean_env.setenv("RANK", "0")
    clean_env.setenv("WORLD_SIZE", "2")
    assert resolve_worker_context().source == "env:torchrun"  # torchrun beats Slurm


def test_explicit_option_beats_environment(clean_env):
    clean_env.setenv("RANK", "1")
    clean_env.setenv("WORLD_SIZE", "2")
    ctx = resolve_worker_context(explicit(5, 4))
    assert (ctx.index, ctx.count, ctx.source) == (4, 5, "options")


@pytest.mark.parametrize(
    "env, message",
    [
        ({"RANK": "one", "WORLD_SIZE": "2"}, "environment variable RANK='one' is not an integer"),
        ({"RANK": "0", "WORLD_SIZE": "2.5"}, "WORLD_SIZE='2.5' is not an integer"),
        ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK=2 must be in [0, WORLD_SIZE) but WORLD_SIZE=2"),
        ({"RANK": "-1", "WORLD_SIZE": "2"}, "RANK=-1 must be in [0, WORLD_SIZE) but WORLD_SIZE=2"),
        ({"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE=0 must be >= 1 (RANK=0)"),
        ({"RANK": "0"}, "RANK='0' is set but WORLD_SIZE is not"),
        ({"WORLD_SIZE": "2"}, "WORLD_SIZE='2' is set but RANK is not"),
        (
            {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"},
            "LOCAL_RANK=2 must be in [0, LOCAL_WORLD_SIZE) but LOCAL_WORLD_SIZE=2",
        ),
        (
            {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4"},
            "LOCAL_WORLD_SIZE=4 is larger than WORLD_SIZE=2",
        ),
        ({"LOCAL_RANK": "x"}, "LOCAL_RANK='x' is not an integer"),
        (
            {"SLURM_PROCID": "3", "SLURM_NTASKS": "3"},
            "SLURM_PROCID=3 must be in [0, SLURM_NTASKS) but SLURM_NTASKS=3",
        ),
    ],
)
def test_malformed_environment_fails_at_iter_naming_variables(clean_env, env, message):
    for k, v in env.items():
        clean_env.setenv(k, v)
    with pytest.raises(WorkerContextError) as info:
        process_from_env()
    assert message in str(info.value)
    start = time.monotonic()
    with pytest.raises(WorkerContextError, match=r".") as info:
        iter(dp.range(10))
    assert message in str(info.value)
    assert time.monotonic() - start < 1.0


@pytest.mark.parametrize(
    "n, i, message",
    [
        (4, None, "must be set together, got num_workers=4, worker_index=None"),
        (None, 1, "must be set together, got num_workers=None, worker_index=1"),
        (2, 2, "must be in [0, num_workers), got num_workers=2, worker_index=2"),
        (0, 0, "must be in [0, num_workers), got num_workers=0, worker_index=0"),
    ],
)
def test_malformed_explicit_options(n, i, message):
    with pytest.raises(WorkerContextError) as info:
        iter(dp.range(4).with_options(explicit(n, i)))
    assert message in str(info.value)


def test_policy_off_skips_resolution(clean_env):
    clean_env.setenv("RANK", "nonsense")
    clean_env.setenv("WORLD_SIZE", "2")
    off = dp.Options(distribute=dp.DistributeOptions(auto_shard_policy=dp.AutoShardPolicy.OFF))
    assert [int(x) for x in dp.range(3).with_options(off)] == [0, 1, 2]


def test_loader_worker_info_multiplies_process_part(monkeypatch):
    class Info:
        id, num_workers = 1, 3

    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: Info())
    ctx = resolve_worker_context(explicit(2, 1))
    assert (ctx.index, ctx.count) == (1 * 3 + 1, 6)
    assert (ctx.process_index, ctx.process_count, ctx.loader_index, ctx.loader_count) == (
        1,
        2,
        1,
        3,
    )


def test_env_sharding_end_to_end(clean_env):
    clean_env.setenv("RANK", "1")
    clean_env.setenv("WORLD_SIZE", "3")
    assert [int(x) for x in dp.range(10)] == [1, 4, 7]


@pytest.mark.parametrize(
    "env",
    [
        {"RANK": "1", "WORLD_SIZE": "2"},  # disagrees with the group
        {"WORLD_SIZE": "2"},  # Lightning's ddp launcher: no RANK (issue 32, item 3)
        {"WORLD_SIZE": "2", "LOCAL_RANK": "5"},  # out of range beside the group
        {"RANK": "one", "SLURM_PROCID": "x"},  # malformed
    ],
)
def test_a_live_process_group_outranks_any_environment(clean_env, tmp_path, env):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        for k, v in env.items():
            clean_env.setenv(k, v)
        ctx = resolve_worker_context()
        assert (ctx.index, ctx.count, ctx.source) == (0, 1, "torch.distributed")
        assert [int(x) for x in dp.range(4)] == [0, 1, 2, 3]
        # The explicit option still wins over both.
        assert resolve_worker_context(explicit(2, 1)).source == "options"
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize(
    "env, expected",
    [
        # Lightning's ddp subprocess launcher, before its group exists
        ({"WORLD_SIZE": "2", "LOCAL_RANK": "1", "NODE_RANK": "0"}, (1, 2, "env:lightning")),
        ({"WORLD_SIZE": "4", "LOCAL_RANK": "1"}, (1, 4, "env:lightning")),
        (
            {"WORLD_SIZE": "4", "LOCAL_RANK": "1", "NODE_RANK": "1", "LOCAL_WORLD_SIZE": "2"},
            (3, 4, "env:lightning"),
        ),
        # accelerate launch runs torchrun: RANK/WORLD_SIZE beside ACCELERATE_* variables
        (
            {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "ACCELERATE_USE_CPU": "true"},
            (1, 2, "env:torchrun"),
        ),
        ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "3"}, (2, 3, "env:mpi")),
        ({"PMI_RANK": "0", "PMI_SIZE": "2"}, (0, 2, "env:mpi")),
        (
            {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "PMI_RANK": "0", "PMI_SIZE": "2"},
            (1, 2, "env:slurm"),
        ),
    ],
)
def test_launcher_environments(clean_env, env, expected):
    for k, v in env.items():
        clean_env.setenv(k, v)
    ctx = resolve_worker_context()
    assert (ctx.process_index, ctx.process_count, ctx.source) == expected
    assert len(dp.range(12)) == 12 // expected[1]


def test_lightning_environment_on_a_second_node_needs_its_size(clean_env):
    for k, v in {"WORLD_SIZE": "4", "LOCAL_RANK": "1", "NODE_RANK": "1"}.items():
        clean_env.setenv(k, v)
    with pytest.raises(WorkerContextError) as info:
        resolve_worker_context()
    assert str(info.value) == (
        "environment variable NODE_RANK=1 with LOCAL_RANK=1 and WORLD_SIZE=4 but no RANK or "
        "LOCAL_WORLD_SIZE: the global rank is unknown; set RANK, or initialise "
        "torch.distributed before iterating"
    )


# ---- iterator state and the worker context ---------------------------------------------
@pytest.mark.parametrize("other", [(3, 0), (2, 1), (1, 0)])
def test_state_restored_in_another_worker_context_raises(other):
    ds = dp.range(24).shuffle(6, seed=1).batch(2)
    state = _advanced(ds, 2, 0)
    it = iter(ds.with_options(worker_options(*other)))
    with pytest.raises(ValueError) as info:
        it.load_state_dict(state)
    msg = str(info.value)
    assert "worker 0 of 2" in msg and f"worker {other[1]} of {other[0]}" in msg


def test_state_restored_in_the_same_context_still_resumes():
    ds = dp.range(24).shuffle(6, seed=1).batch(2)
    it = iter(ds.with_options(worker_options(2, 1)))
    first = [next(it).tolist() for _ in range(2)]
    state = it.state_dict()
    rest = [b.tolist() for b in it]
    it2 = iter(ds.with_options(worker_options(2, 1)))
    it2.load_state_dict(state)
    assert [b.tolist() for b in it2] == rest and len(first + rest) == 6


def test_torch_dataset_state_restored_in_another_world_raises():
    ds = dp.range(24).batch(2)
    tds = ds.with_options(worker_options(2, 0)).as_torch_dataset()
    g = iter(tds)
    next(g)
    state = tds.state_dict()
    other = ds.with_options(worker_options(3, 0)).as_torch_dataset()
    other.load_state_dict(state)
    with pytest.raises(ValueError, match="worker 0 of 2"):
        next(iter(other))
