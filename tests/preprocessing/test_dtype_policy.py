"""preprocessing.dtype_policy: a policy sets the output dtype of every layer, keeps
statistics in the variable dtype, is taken from the package default at construction, and
bad policies raise.
"""

import numpy as np
import pytest
import torch
from _layer_helpers import ALL_LAYERS

import preprocessing as pp


@pytest.fixture
def default_policy():
    yield
    pp.set_dtype_policy(None)


# ------------------------------------------------------------------ dtype policy
@pytest.mark.parametrize("name", sorted(ALL_LAYERS))
@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16", "float64"])
def test_policy_sets_the_output_dtype(name, policy):
    layer = ALL_LAYERS[name](dtype=policy)
    want = pp.DTypePolicy(policy).compute_dtype
    x = torch.rand(2, 3, 14, 16)
    for inp in (x, (x * 255).to(torch.uint8), x.double()):
        assert layer(inp).dtype == want
    if want == torch.float64:  # fresh layers, same seed, same draws: a float64 policy
        # computes what a float64 input computes without one
        expected = ALL_LAYERS[name]()(x.to(torch.float64))
        torch.testing.assert_close(ALL_LAYERS[name](dtype=policy)(x), expected)
    assert layer.compute_dtype == want and layer.get_config()["dtype"] == policy


def test_normalization_statistics_stay_in_the_variable_dtype():
    mixed = pp.Normalization(dtype="mixed_bfloat16")
    data = np.random.default_rng(0).random((8, 3, 4, 4)) * 100
    mixed.adapt(data)
    assert mixed.mean.dtype == torch.float32 and mixed.variance.dtype == torch.float32
    np.testing.assert_allclose(mixed.mean.flatten(), data.mean(axis=(0, 2, 3)), rtol=1e-6)
    out = mixed(torch.from_numpy(data).float())
    assert out.dtype == torch.bfloat16
    assert pp.Normalization(dtype="float16").mean.dtype == torch.float16
    assert pp.Normalization().mean.dtype == torch.float64  # no policy: float64, as in 0.1
    fresh = pp.Normalization(dtype="mixed_float16")
    fresh.load_state_dict(pp.Normalization(mean=[1.0, 2.0], variance=[1.0, 4.0]).state_dict())
    assert fresh.mean.dtype == torch.float32 and fresh.mean.flatten().tolist() == [1.0, 2.0]


def test_package_default_policy_is_taken_at_construction(default_policy):
    assert pp.dtype_policy() is None
    before = pp.RandomFlip(seed=0)
    pp.set_dtype_policy("mixed_float16")
    assert pp.dtype_policy() == pp.DTypePolicy("mixed_float16")
    after, explicit = pp.RandomFlip(seed=0), pp.RandomFlip(seed=0, dtype="float32")
    x = torch.rand(2, 3, 4, 4)
    assert before(x).dtype == torch.float32 and before.get_config()["dtype"] is None
    assert after(x).dtype == torch.float16 and after.get_config()["dtype"] == "mixed_float16"
    assert explicit(x).dtype == torch.float32
    rebuilt = pp.layer_from_config(pp.serialize_layer(after))
    pp.set_dtype_policy(None)
    assert rebuilt.dtype == "mixed_float16"  # the config carries the policy it was built with
    assert pp.RandomFlip()(x.double()).dtype == torch.float64


def test_bad_policies_raise():
    with pytest.raises(ValueError, match="set_dtype_policy: dtype must be one of"):
        pp.set_dtype_policy("mixed_int8")
    with pytest.raises(ValueError, match="RandomFlip: dtype must be one of"):
        pp.RandomFlip(dtype=torch.float16)
    with pytest.raises(ValueError, match="DTypePolicy: name must be one of"):
        pp.DTypePolicy("half")
