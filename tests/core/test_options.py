"""``Options``: merging (later wins), option values checked when set (not ignored or failed
deep inside another library), and seeds tf.data accepts."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("executor", "proc", r"executor must be one of \['thread', 'process'\].*'process'\?"),
        ("executor", "threads", r"executor must be one of .*did you mean 'thread'\?"),
        ("process_start_method", "frk", r"process_start_method must be one of .*'fork'\?"),
    ],
)
def test_threading_choices_are_checked_when_set(name, value, message):
    # executor="proc" ran on threads silently; process_start_method="frk" raised
    # multiprocessing's "cannot find context for 'frk'" at iter() (mid-iteration under
    # AUTOTUNE), naming no option.
    opts = dp.Options()
    with pytest.raises(ValueError, match=message):
        setattr(opts.threading, name, value)
    with pytest.raises(ValueError, match=message):
        dp.ThreadingOptions(**{name: value})


def test_valid_threading_choices_still_work():
    opts = dp.Options()
    opts.threading.executor = "process"
    opts.threading.process_start_method = "fork"
    opts.threading.executor = None
    ds = dp.range(6).map(lambda x: x * 2, 2, executor="process").with_options(opts)
    assert [int(x) for x in ds] == [0, 2, 4, 6, 8, 10]


@pytest.mark.parametrize("seed", [-1, -5, np.int64(-(2**63))])
def test_a_negative_global_seed_is_a_seed(seed):
    # tf.data takes any int64 seed; numpy raised "expected non-negative integer" at iter().
    def shuffled(s):
        return dp.range(20).shuffle(20).with_options(dp.Options(seed=s))

    first = [int(x) for x in shuffled(seed)]
    assert sorted(first) == list(range(20))
    assert [int(x) for x in shuffled(seed)] == first  # reproducible
    assert [int(x) for x in shuffled(5)] != first
    it = iter(shuffled(seed))
    head = [int(next(it)) for _ in range(7)]
    state = it.get_state()
    fresh = iter(shuffled(seed))
    fresh.set_state(state)
    assert head + [int(x) for x in fresh] == first


# ---- options -----------------------------------------------------------------------------
def test_options_merge_later_wins() -> None:
    ds = dp.range(3).with_options(dp.Options(seed=1, deterministic=False))
    ds = ds.with_options(dp.Options(seed=2))
    opts = ds.options
    assert opts.seed == 2 and opts.deterministic is False
    with pytest.raises(TypeError, match="with_options"):
        dp.range(3).with_options({"seed": 1})
