"""RandAugment: each image gets its own ops, each op computed only on its images."""

import copy

import pytest
import torch

import preprocessing as pp
from preprocessing import _augment_ops
from preprocessing._photometric import take
from preprocessing.rand_augment import OPS


def images(n=6, h=12, w=10, seed=0):
    return torch.rand(n, 3, h, w, generator=torch.Generator().manual_seed(seed))


def test_ops_and_magnitudes_follow_keras():
    layer = pp.RandAugment(value_range=(0, 1), factor=0.5, seed=0)
    assert tuple(layer.ops) == OPS
    assert layer.ops["random_shear"]._x == (0.0, 0.5)
    assert layer.ops["random_translation"]._height_factor == (0.0, 0.5)
    assert layer.ops["random_rotation"]._factor[0] == 0.0
    assert layer.ops["random_rotation"]._factor[1] == 0.5
    assert layer.ops["random_posterization"]._bits == (1, 4)  # max(1, int(8 * 0.5))
    assert layer.ops["solarization"]._threshold_factor == (0.0, 0.5)
    assert layer.ops["random_contrast"]._factor[1] == 0.5
    assert layer.ops["auto_contrast"]._range == (0.0, 1.0)
    # Each op has its own seed: equal seeds would give equal counter-based draws.
    seeds = {op.seed for op in layer.ops.values() if isinstance(op, pp.RandomLayer)}
    assert len(seeds) == 9


@pytest.mark.parametrize("k", range(len(OPS)))
def test_every_op_alone_equals_that_layer(k):
    layer = pp.RandAugment(value_range=(0, 1), num_ops=1, factor=0.7, seed=1)
    x = images()
    params = layer.get_random_transformation(x)
    params["layer_idxes"] = torch.full((6, 1), k)
    op = layer.ops[OPS[k]]
    expected = op.transform_images(x, params["transforms"][0][OPS[k]])
    torch.testing.assert_close(layer.transform_images(x, params), expected, rtol=0, atol=0)


def test_mixed_choices_equal_each_image_on_its_own():
    layer = pp.RandAugment(value_range=(0, 1), num_ops=2, factor=0.9, seed=2)
    x = images(n=11)
    params = layer.get_random_transformation(x)
    params["layer_idxes"] = torch.stack([torch.arange(11), torch.arange(11).flip(0)], dim=1)
    out = layer.transform_images(x, params)
    for i in range(11):
        y = x[i : i + 1]
        for slot in range(2):
            name = OPS[int(params["layer_idxes"][i, slot])]
            y = layer.ops[name].transform_images(
                y, take(params["transforms"][slot][name], torch.tensor([i]), 11)
            )
        torch.testing.assert_close(out[i : i + 1], y, rtol=0, atol=1e-6)


def test_choices_are_per_image_and_uniform():
    layer = pp.RandAugment(num_ops=3, seed=5)
    choice = layer.get_random_transformation(torch.zeros(2000, 3, 4, 4))["layer_idxes"]
    assert choice.shape == (2000, 3) and choice.dtype == torch.int64
    counts = torch.bincount(choice.flatten(), minlength=11)
    assert counts.min() > 6000 / 11 * 0.85 and counts.max() < 6000 / 11 * 1.15
    assert (choice[:, 0] != choice[0, 0]).any()  # not one op for the whole batch


def test_compiled_path_equals_eager_path(monkeypatch):
    layer = pp.RandAugment(value_range=(0, 1), num_ops=2, factor=0.6, seed=3)
    x = images(n=9)
    params = layer.get_random_transformation(x)
    eager = layer.transform_images(x, params)
    monkeypatch.setattr(_augment_ops.torch.compiler, "is_compiling", lambda: True)
    traced = layer.transform_images(x, params)
    torch.testing.assert_close(traced, eager, rtol=0, atol=1e-6)


def test_seeded_stream_formats_ranks_and_dtypes():
    x = images()
    a = pp.RandAugment(value_range=(0, 1), seed=7)(x)
    b = pp.RandAugment(value_range=(0, 1), seed=7)(x)
    c = pp.RandAugment(value_range=(0, 1), seed=8)(x)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.equal(a, c)
    last = pp.RandAugment(value_range=(0, 1), seed=7, data_format="channels_last")
    torch.testing.assert_close(last(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2), a)
    single = pp.RandAugment(seed=7)(torch.full((3, 8, 8), 9, dtype=torch.uint8))
    assert single.shape == (3, 8, 8) and single.dtype == torch.float32
    half = pp.RandAugment(value_range=(0, 1), seed=7, dtype="mixed_bfloat16")(x)
    assert half.dtype == torch.bfloat16


def test_moves_between_devices_and_copies():
    # nn.Module.to() calls Module._apply: a layer method of that name once shadowed it.
    layer = pp.RandAugment(value_range=(0, 1), seed=0)
    moved = copy.deepcopy(layer).to("cpu", torch.float64)
    x = images()
    torch.testing.assert_close(moved(x), layer(x), rtol=0, atol=0)


def test_eval_is_identity_and_num_ops_zero_too():
    x = images()
    layer = pp.RandAugment(value_range=(0, 1), seed=0).eval()
    assert torch.equal(layer(x), x)
    assert torch.equal(pp.RandAugment(num_ops=0, seed=0)(x), x)


def test_dict_targets_move_only_with_geometric_ops():
    layer = pp.RandAugment(value_range=(0, 1), num_ops=1, seed=4, bounding_box_format="xyxy")
    n = len(OPS)
    x = images(n=n, h=16, w=16)
    boxes = torch.tensor([4.0, 4.0, 12.0, 12.0]).repeat(n, 1, 1)
    masks = torch.zeros(n, 16, 16, dtype=torch.uint8)
    masks[:, 4:12, 4:12] = 1
    data = {
        "images": x,
        "labels": torch.arange(n),
        "bounding_boxes": {"boxes": boxes, "labels": torch.ones(n, 1)},
        "segmentation_masks": masks,
        "keypoints": torch.tensor([[[3.0, 5.0]]]).repeat(n, 1, 1),  # off the centre
    }
    params = layer.get_random_transformation(x)
    params["layer_idxes"] = torch.arange(n).view(n, 1)
    params["input_shape"] = tuple(x.shape)
    out = layer._apply_targets(data, x, False, params)
    assert torch.equal(out["labels"], data["labels"])
    for i, name in enumerate(OPS):
        moved = name in _augment_ops.GEOMETRIC
        assert torch.equal(out["bounding_boxes"]["boxes"][i], boxes[i]) != moved, name
        assert torch.equal(out["segmentation_masks"][i], masks[i]) != moved, name
        assert torch.equal(out["keypoints"][i], data["keypoints"][i]) != moved, name
        if moved:  # exactly what the geometric layer does to that sample alone
            op, idx = layer.ops[name], torch.tensor([i])
            p = take(params["transforms"][0][name], idx, n)
            sub = op.transform_bounding_boxes(
                {"boxes": boxes[i : i + 1], "labels": torch.ones(1, 1)}, p
            )
            torch.testing.assert_close(out["bounding_boxes"]["boxes"][i : i + 1], sub["boxes"])
    assert out["segmentation_masks"].dtype == torch.uint8


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="RandAugment: num_ops"):
        pp.RandAugment(num_ops=-1)
    with pytest.raises(ValueError, match="RandAugment: factor"):
        pp.RandAugment(factor=1.5)
    with pytest.raises(ValueError, match="RandAugment: interpolation"):
        pp.RandAugment(interpolation="bicubic")
    with pytest.raises(ValueError, match="RandAugment: value_range"):
        pp.RandAugment(value_range=(1, 1))
