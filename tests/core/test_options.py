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


# tf.data.Options' experimental_* attributes (TF 2.21's dir(tf.data.Options()), plus the
# older experimental_stats / experimental_stateful_whitelist): each one, read or set, names
# datapipe's option or says why there is none (issue 27: reading experimental_distribute
# gave a bare AttributeError).
TF_EXPERIMENTAL = {
    "experimental_deterministic": "did you mean 'deterministic'",
    "experimental_distribute": "did you mean 'distribute'",
    "experimental_threading": "did you mean 'threading'",
    "experimental_stats": "did you mean 'stats'",
    "experimental_optimization": "no equivalent: datapipe has no optimization options",
    "experimental_slack": "no equivalent: no prefetch slack",
    "experimental_external_state_policy": "no equivalent: a checkpoint holds iterator pos",
    "experimental_stateful_whitelist": "no equivalent: a checkpoint holds iterator pos",
    "experimental_symbolic_checkpoint": "no equivalent: checkpoints are always positions",
    "experimental_warm_start": "no equivalent: no warm start",
    "experimental_service": r"no equivalent: the service is an op: ds.apply\(dp.service",
}


@pytest.mark.parametrize("name", sorted(TF_EXPERIMENTAL))
def test_every_tf_experimental_option_names_its_replacement(name):
    message = f"Options has no option '{name}'; tf.data's {name} .*{TF_EXPERIMENTAL[name]}"
    opts = dp.Options()
    with pytest.raises(AttributeError, match=message):
        getattr(opts, name)
    with pytest.raises(AttributeError, match=message):
        setattr(opts, name, None)
    assert not hasattr(opts, name)


def test_reading_an_unknown_option_suggests_the_closest():
    with pytest.raises(AttributeError, match="ThreadingOptions has no option 'privat_threadpool"):
        dp.Options().threading.privat_threadpool_size  # noqa: B018
    with pytest.raises(AttributeError, match="did you mean 'private_threadpool_size'"):
        dp.Options().threading.privat_threadpool_size  # noqa: B018
    with pytest.raises(AttributeError, match=r"its options are \['enabled'\]"):
        dp.Options().stats.xyz  # noqa: B018
    # the options still copy and pickle (both probe for dunder attributes)
    import copy
    import pickle

    opts = dp.Options(seed=3)
    assert copy.deepcopy(opts) == opts and pickle.loads(pickle.dumps(opts)) == opts
