"""Issue 22: every size-like layer argument has a documented bound, checked at construction
(so by ``from_config`` and ``layer_from_config`` too) before anything is allocated; the
statistics ``adapt`` learns and those a checkpoint brings pass the constructor's checks;
an adapted layer's JSON config alone rebuilds it (the README's promise)."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import torch
from harness import run_under_memory_limit

import preprocessing as pp
from preprocessing import base

# (class, the arguments that build it, the bounded argument, its bound). In process, only
# one past each bound is tried: cheap even if the check regressed (the hostile sizes, which
# would allocate gigabytes, run under an address-space limit below).
BOUNDS = [
    (pp.MelSpectrogram, {}, "fft_length", base.MAX_FFT_LENGTH),
    (pp.MelSpectrogram, {}, "sequence_stride", base.MAX_FFT_LENGTH),
    (pp.MelSpectrogram, {"fft_length": 64}, "sequence_length", base.MAX_FFT_LENGTH),
    (pp.MelSpectrogram, {}, "num_mel_bins", base.MAX_MEL_BINS),
    (pp.STFTSpectrogram, {"frame_length": 16}, "fft_length", base.MAX_STFT_LENGTH),
    (pp.AugMix, {}, "chain_depth", base.MAX_OPS),
    (pp.AugMix, {}, "num_chains", base.MAX_OPS),
    (pp.RandAugment, {}, "num_ops", base.MAX_OPS),
    (pp.CategoryEncoding, {}, "num_tokens", base.MAX_ENCODING_DEPTH),
    (pp.Hashing, {"output_mode": "one_hot"}, "num_bins", base.MAX_ENCODING_DEPTH),
    (pp.HashedCrossing, {"output_mode": "one_hot"}, "num_bins", base.MAX_ENCODING_DEPTH),
    (pp.StringLookup, {"pad_to_max_tokens": True, "output_mode": "one_hot"}, "max_tokens",
     base.MAX_ENCODING_DEPTH),
    (pp.IntegerLookup, {"pad_to_max_tokens": True, "output_mode": "count"}, "max_tokens",
     base.MAX_ENCODING_DEPTH),
    (pp.IntegerLookup, {}, "num_oov_indices", base.MAX_ENCODING_DEPTH),
    (pp.StringLookup, {}, "num_oov_indices", base.MAX_ENCODING_DEPTH),
    (pp.Discretization, {}, "num_bins", base.MAX_ENCODING_DEPTH),
    (pp.TextVectorization, {}, "output_sequence_length", base.MAX_SEQUENCE_LENGTH),
    (pp.TextVectorization, {}, "ngrams", base.MAX_NGRAM),
    (pp.RandomGaussianBlur, {}, "kernel_size", base.MAX_KERNEL_SIZE),
    (pp.ContrastLimitedAdaptiveHistogramEqualization, {}, "tile_grid_size", base.MAX_TILES),
    (pp.Equalization, {}, "bins", base.MAX_BINS),
    (pp.MaxNumBoundingBoxes, {}, "max_number", base.MAX_BOXES),
    (pp.Resizing, {"width": 4}, "height", base.MAX_SIDE),
    (pp.RandomCrop, {"width": 4}, "height", base.MAX_SIDE),
]  # fmt: skip
IDS = [f"{cls.__name__}-{arg}" for cls, _, arg, _ in BOUNDS]


def _past(arg: str, bound: int):
    """The smallest value past ``bound`` that is otherwise valid for ``arg``."""
    if arg == "kernel_size":
        return bound + 2  # odd
    if arg == "tile_grid_size":
        return (bound + 1, 1)
    return bound + 1


def _required(cls) -> dict:
    """Arguments without defaults, at harmless values."""
    need = {"Hashing": {"num_bins": 8}, "HashedCrossing": {"num_bins": 8},
            "CategoryEncoding": {"num_tokens": 4}, "MaxNumBoundingBoxes": {"max_number": 2},
            "Resizing": {"height": 4, "width": 4}, "RandomCrop": {"height": 4, "width": 4},
            "Discretization": {"num_bins": 4}}  # fmt: skip
    return dict(need.get(cls.__name__, {}))


@pytest.mark.parametrize("cls, kwargs, arg, bound", BOUNDS, ids=IDS)
def test_a_size_past_its_bound_fails_at_construction_and_in_from_config(cls, kwargs, arg, bound):
    config = {**_required(cls), **kwargs, arg: _past(arg, bound)}
    for build in (
        lambda: cls(**config),
        lambda: cls.from_config(json.loads(json.dumps(config))),
        lambda: pp.layer_from_config({"class_name": cls.__name__, "config": config}),
    ):
        with pytest.raises(ValueError, match=rf"{cls.__name__}: {arg} .*\b{bound}\b"):
            build()


@pytest.mark.parametrize(
    "cls, kwargs, arg, value",
    [
        (pp.MelSpectrogram, {}, "fft_length", base.MAX_FFT_LENGTH),
        (pp.MelSpectrogram, {"fft_length": 2048}, "num_mel_bins", base.MAX_MEL_BINS),
        (pp.AugMix, {"num_chains": base.MAX_OPS}, "chain_depth", base.MAX_OPS),
        (pp.RandAugment, {}, "num_ops", base.MAX_OPS),
        (pp.CategoryEncoding, {}, "num_tokens", base.MAX_ENCODING_DEPTH),
        (pp.Hashing, {"output_mode": "multi_hot"}, "num_bins", base.MAX_ENCODING_DEPTH),
        (pp.Hashing, {}, "num_bins", 2**63 - 1),  # int mode allocates nothing: int64's range
        (pp.RandomGaussianBlur, {}, "kernel_size", base.MAX_KERNEL_SIZE),
        (pp.ContrastLimitedAdaptiveHistogramEqualization, {}, "tile_grid_size", (64, 64)),
    ],
)
def test_the_bounds_themselves_are_accepted(cls, kwargs, arg, value):
    layer = cls(**{**_required(cls), **kwargs, arg: value})
    assert getattr(layer, arg) == value
    assert pp.layer_from_config(pp.serialize_layer(layer)).get_config() == layer.get_config()


def test_hostile_sizes_fail_fast_under_an_address_space_limit():
    """The old code allocated gigabytes (or looped) for these; under RLIMIT_AS it ran out
    of address space (MemoryError / torch's allocator error) instead of refusing."""
    body = textwrap.dedent(
        """
        import torch, preprocessing as pp
        attacks = [
            lambda: pp.MelSpectrogram(fft_length=10**9),
            lambda: pp.MelSpectrogram(num_mel_bins=10**9, fft_length=4096),
            lambda: pp.STFTSpectrogram(frame_length=10**6),
            lambda: pp.RandAugment(num_ops=10**9, value_range=(0, 1))(torch.rand(2, 3, 8, 8)),
            lambda: pp.AugMix(chain_depth=10**6, value_range=(0, 1))(torch.rand(2, 3, 8, 8)),
            lambda: pp.AugMix(num_chains=10**6, value_range=(0, 1))(torch.rand(2, 3, 8, 8)),
            lambda: pp.CategoryEncoding(10**12)(torch.tensor([1])),
            lambda: pp.StringLookup(max_tokens=10**12, pad_to_max_tokens=True,
                                    output_mode="one_hot", vocabulary=["a"])(["a"]),
            lambda: pp.Hashing(10**12, output_mode="one_hot")(torch.tensor([1])),
            lambda: pp.IntegerLookup(num_oov_indices=10**12, vocabulary=[1]),
            lambda: pp.RandomGaussianBlur(1.0, kernel_size=10**6 + 1)(torch.rand(1, 1, 8, 8)),
            lambda: pp.ContrastLimitedAdaptiveHistogramEqualization(
                tile_grid_size=(10**5, 10**5))(torch.rand(1, 1, 8, 8) * 255),
        ]
        for attack in attacks:
            try:
                attack()
                print("no error")
            except ValueError as e:
                print("ValueError", str(e).split(";")[0])
            except Exception as e:
                print(type(e).__name__)
        """
    )
    out = run_under_memory_limit("import torch, preprocessing", body, headroom_mb=768)
    lines = out.stdout.splitlines()
    assert out.returncode == 0, out.stderr[-2000:]
    assert len(lines) == 12 and all(ln.startswith("ValueError") for ln in lines), lines
    assert "MelSpectrogram: fft_length must be an int >= 1 and <= 65536" in lines[0]
    assert "AugMix: chain_depth must be an int >= 1 and <= 32" in lines[4]


# ---- statistics and vocabularies go through the constructor's checks ----------------------
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_normalization_adapt_refuses_non_finite_data_and_keeps_its_statistics(bad):
    layer = pp.Normalization(axis=-1)
    layer.adapt(np.array([[1.0, 2.0], [3.0, 4.0]]))
    before = (layer.mean.clone(), layer.variance.clone(), layer.get_config())
    data = np.array([[1.0, 2.0], [bad, 4.0]])
    with pytest.raises(ValueError, match=r"Normalization: the adapted mean must be finite \(the "
                       r"data holds NaN or inf"):  # fmt: skip
        layer.adapt(data)
    assert torch.equal(layer.mean, before[0]) and torch.equal(layer.variance, before[1])
    assert layer.get_config() == before[2]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda sd: sd["mean"].fill_(float("nan")), "state_dict's mean must be finite"),
        (lambda sd: sd["variance"].fill_(-1.0), "state_dict's variance must be finite and >= 0"),
        (lambda sd: sd.update(mean=torch.zeros(1, 2, 2, dtype=torch.float64)),
         r"must have the same shape"),
        (lambda sd: sd.update(mean=torch.zeros(3, 2, 1, dtype=torch.float64),
                              variance=torch.ones(3, 2, 1, dtype=torch.float64)),
         r"size 1 off the kept axes \(0,\)"),
    ],
)  # fmt: skip
def test_normalization_load_state_dict_refuses_bad_statistics(change, message):
    src = pp.Normalization()
    src.adapt(torch.rand(4, 3, 5, 5))
    sd = {k: v.clone() for k, v in src.state_dict().items()}
    change(sd)
    dst = pp.Normalization(mean=[1.0, 2.0, 3.0], variance=[1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=message):
        dst.load_state_dict(sd)
    assert dst.mean.reshape(-1).tolist() == [1.0, 2.0, 3.0]  # unchanged


def _lookup_state(vocab: list[str]) -> dict:
    return {k: v.clone() for k, v in pp.StringLookup(vocabulary=vocab).state_dict().items()}


def test_lookups_refuse_a_vocabulary_over_max_tokens():
    ten = _lookup_state([f"t{i}" for i in range(10)])
    small = pp.StringLookup(max_tokens=4)
    with pytest.raises(ValueError, match="StringLookup: vocabulary has 11 entries, more than "
                       "max_tokens; got 4"):  # fmt: skip
        small.load_state_dict(ten)
    assert small.get_vocabulary() == ["[UNK]"]
    text = pp.TextVectorization()
    text.adapt(["a b c d e f g h i j k"])
    assert text.vocabulary_size() == 13
    with pytest.raises(ValueError, match="13 entries, more than max_tokens; got 5"):
        pp.TextVectorization(max_tokens=5).load_state_dict(text.state_dict())
    ints = pp.IntegerLookup(vocabulary=list(range(20)))
    with pytest.raises(ValueError, match="IntegerLookup: vocabulary has 21 entries"):
        pp.IntegerLookup(max_tokens=8).load_state_dict(ints.state_dict())
    # within max_tokens it loads, and the layer is the source's
    ok = pp.StringLookup(max_tokens=11)
    ok.load_state_dict(ten)
    assert ok(["t3", "zz"]).tolist() == [4, 0]


@pytest.mark.parametrize(
    "ends, why",
    [
        ([2, 1, 4], "decreasing"),
        ([2, 4, 100], "past the bytes"),
        ([-2, 4, 6], "negative"),
    ],
)
def test_string_lookup_refuses_vocabulary_ends_that_do_not_index_the_bytes(ends, why):
    sd = _lookup_state(["aa", "bb", "cc"])
    sd["vocabulary_ends"] = torch.tensor(ends, dtype=torch.int64)
    layer = pp.StringLookup(vocabulary=["x"])
    with pytest.raises(ValueError, match=r"vocabulary_ends'\] must be non-negative, "
                       r"non-decreasing end offsets within the 6 vocabulary bytes"):  # fmt: skip
        layer.load_state_dict(sd)
    assert layer.get_vocabulary() == ["[UNK]", "x"], why


def test_lookups_refuse_non_utf8_bytes_repeats_and_bad_idf_weights():
    sd = _lookup_state(["aa", "bb"])
    sd["vocabulary_bytes"] = torch.tensor([0xFF, 0xFE, 98, 98], dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"vocabulary_bytes'\] must be UTF-8 text"):
        pp.StringLookup().load_state_dict(sd)
    sd = _lookup_state(["aa", "bb"])
    sd["vocabulary_bytes"] = torch.tensor([97, 97, 97, 97], dtype=torch.uint8)
    with pytest.raises(ValueError, match="has repeated tokens"):
        pp.StringLookup().load_state_dict(sd)
    tfidf = pp.StringLookup(vocabulary=["a", "b"], idf_weights=[0.5, 0.25], output_mode="tf_idf")
    sd = {k: v.clone() for k, v in tfidf.state_dict().items()}
    sd["idf_weights"][1] = float("nan")
    with pytest.raises(ValueError, match=r"idf_weights'\] must be finite"):
        pp.StringLookup(output_mode="tf_idf").load_state_dict(sd)
    sd["idf_weights"] = torch.ones(7)
    with pytest.raises(ValueError, match=r"idf_weights'\] must be 1-D with 3 entries"):
        pp.StringLookup(output_mode="tf_idf").load_state_dict(sd)


def test_discretization_refuses_bad_boundaries_from_a_checkpoint():
    layer = pp.Discretization(bin_boundaries=[0.0, 1.0])
    for bad in ([0.0, float("nan")], [2.0, 1.0]):
        with pytest.raises(ValueError, match=r"Discretization: state_dict\['bin_boundaries'\]"):
            layer.load_state_dict({"bin_boundaries": torch.tensor(bad)})
        assert layer.bin_boundaries.tolist() == [0.0, 1.0]


# ---- an adapted layer's JSON config alone rebuilds it (README: "State") --------------------
def _adapted_layers():
    rng = np.random.default_rng(0)
    texts = np.array(["the cat sat", "a dog ran", "the dog and the cat"])
    norm = pp.Normalization()
    norm.adapt(torch.from_numpy(rng.normal(3.0, 2.0, size=(16, 3, 4, 4))).float())
    table = pp.Normalization(axis=-1)
    table.adapt(rng.normal(5.0, 2.0, size=(64, 3)))
    scalar = pp.Normalization(axis=None, data_format="channels_last")
    scalar.adapt(rng.normal(-1.0, 0.5, size=(8, 4, 4, 3)))
    words = pp.StringLookup(output_mode="count")
    words.adapt(texts.reshape(-1, 1))
    ints = pp.IntegerLookup(num_oov_indices=2)
    ints.adapt(np.array([3, 3, 9, 4, 4, 4]))
    vec = pp.TextVectorization(output_mode="tf_idf")
    vec.adapt(texts)
    bins = pp.Discretization(num_bins=3)
    bins.adapt(rng.uniform(0, 10, size=(100, 1)))
    return [
        (norm, torch.rand(2, 3, 4, 4)),
        (table, torch.tensor([[5.0, 1.0, 9.0]])),
        (scalar, torch.rand(2, 4, 4, 3)),
        (words, np.array([["the"], ["zebra"]])),
        (ints, torch.tensor([3, 4, 5])),
        (vec, np.array(["the cat", "a zebra"])),
        (bins, torch.tensor([[1.0], [5.0], [9.0]])),
    ]


def test_an_adapted_layers_json_config_alone_rebuilds_it():
    for layer, x in _adapted_layers():
        config = json.loads(json.dumps(pp.serialize_layer(layer)))
        rebuilt = pp.layer_from_config(config)  # no state_dict
        torch.testing.assert_close(rebuilt(x), layer(x), rtol=0, atol=0, msg=type(layer).__name__)
