"""Differential tests of the feature layers against Keras 3 (TensorFlow backend), same inputs.

Every layer and output mode: lookups (StringLookup, IntegerLookup: given and adapted
vocabularies, masks, OOV buckets by floormod / FarmHash64 / SipHash, invert, tf_idf),
Hashing, HashedCrossing, CategoryEncoding, Discretization (fixed and adapted boundaries),
TextVectorization (standardize x split x ngrams x modes), tabular Normalization and the
spectrograms (float32 FFTs: compared within 1e-4 of the largest magnitude).
Output dtypes differ on purpose in one place: the lookups' one/multi-hot and count
encodings are float32 here (Keras's declared floatx; its TF path returns int64).

Keras's results are read from tests/goldens/ (``[golden]``) or computed by Keras itself
(``[live]``, ``pytest -m differential``): tests/differential.py.
"""

import numpy as np
import pytest
import torch
from differential import keras, tf

import preprocessing as pp

STRINGS = [
    np.array("a"),
    np.array(["a", "z", "b"]),
    np.array([["a", "b"], ["c", "a"]]),
    np.array([["a"], ["z"]]),
    np.array([["a", ""], ["", "quux"]]),
]
MODES = ["int", "one_hot", "multi_hot", "count", "tf_idf"]


def outcome(fn, x):
    """Keras's / our output as numpy, or the exception's class name (both must fail)."""
    try:
        y = fn(x)
    except Exception as e:  # noqa: BLE001 - Keras raises TF errors; ours must be ValueError
        if isinstance(fn, torch.nn.Module):
            assert isinstance(e, ValueError), e
        return "error"
    return y.numpy() if isinstance(y, torch.Tensor) else np.asarray(y)


def keras_outcomes(layer, kw, inputs, adapt=None, batch_size=None, call_kw=None):
    """Keras's ``layer(**kw)``, adapted on ``adapt`` first when given (streamed through
    tf.data in batches of ``batch_size`` when that is given): its vocabulary (lookups), IDF
    weights (tf_idf), bin boundaries (Discretization) and its outcome on each of ``inputs``."""
    theirs = getattr(keras().layers, layer)(**kw)
    if adapt is not None:
        if batch_size is not None:
            adapt = tf().data.Dataset.from_tensor_slices(adapt).batch(batch_size)
        theirs.adapt(adapt)
    out = {"outcomes": [outcome(lambda x: theirs(x, **(call_kw or {})), x) for x in inputs]}
    if hasattr(theirs, "get_vocabulary"):
        out["vocabulary"] = [v if isinstance(v, str) else int(v) for v in theirs.get_vocabulary()]
    if getattr(theirs, "idf_weights_const", None) is not None:
        out["idf_weights"] = theirs.idf_weights_const.numpy()
    if layer == "Discretization":
        out["bin_boundaries"] = np.float32(theirs.bin_boundaries)
    return out


def assert_same(expected, got, atol=1e-6):
    if isinstance(expected, str) or isinstance(got, str):
        assert expected == got
        return
    assert expected.shape == got.shape
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), atol=atol)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("mask", [None, ""])
@pytest.mark.parametrize("num_oov", [0, 1, 3])
def test_string_lookup_given_vocabulary(ref, mode, mask, num_oov):
    for salt in (None, 7):
        kw = dict(
            vocabulary=["a", "b", "c"],
            output_mode=mode,
            mask_token=mask,
            num_oov_indices=num_oov,
            salt=salt,
        )
        if mode == "tf_idf":
            kw["idf_weights"] = [0.5, 1.0, 2.0]
        ours, theirs = pp.StringLookup(**kw), ref(keras_outcomes, "StringLookup", kw, STRINGS)
        assert ours.get_vocabulary() == theirs["vocabulary"]
        for x, expected in zip(STRINGS, theirs["outcomes"], strict=True):
            assert_same(expected, outcome(ours, x))


ADAPT = np.array([["a", "b", "b"], ["c", "c", "c"], ["d", "a", "e"], ["e", "e", "x"]])


@pytest.mark.parametrize("mode", ["int", "multi_hot", "tf_idf"])
@pytest.mark.parametrize("max_tokens,pad", [(None, False), (4, False), (4, True), (9, True)])
def test_string_lookup_adapt(ref, mode, max_tokens, pad):
    kw = dict(output_mode=mode, max_tokens=max_tokens, pad_to_max_tokens=pad)
    ours = pp.StringLookup(**kw)
    ours.adapt(ADAPT)
    theirs = ref(keras_outcomes, "StringLookup", kw, [ADAPT], ADAPT)
    assert ours.get_vocabulary() == theirs["vocabulary"]
    assert_same(theirs["outcomes"][0], ours(ADAPT).numpy())
    if mode == "tf_idf":
        np.testing.assert_allclose(ours.idf_weights.numpy(), theirs["idf_weights"], rtol=1e-6)


def test_string_lookup_adapt_streams_like_keras_over_batches(ref):
    rows = np.array([f"t{i % 7}" for i in range(60)]).reshape(20, 3)
    kw = dict(output_mode="tf_idf")
    theirs = ref(keras_outcomes, "StringLookup", kw, [], rows, 4)
    ours = pp.StringLookup(**kw)
    ours.adapt(pp_dataset(rows).batch(4), progress=False)
    assert ours.get_vocabulary() == theirs["vocabulary"]
    np.testing.assert_allclose(ours.idf_weights.numpy(), theirs["idf_weights"])


def pp_dataset(array):
    import datapipe as dp

    return dp.Dataset.from_tensor_slices(array)


@pytest.mark.parametrize("mode", ["int", "one_hot", "multi_hot", "tf_idf"])
@pytest.mark.parametrize("mask", [None, 0])
@pytest.mark.parametrize(
    "num_oov,method,salt",
    [
        (0, "floormod", None),
        (1, "floormod", None),
        (3, "floormod", None),
        (3, "farmhash", None),
        (3, "farmhash", [3, 4]),
    ],
)
def test_integer_lookup(ref, mode, mask, num_oov, method, salt):
    kw = dict(
        vocabulary=[10, 20, 30],
        output_mode=mode,
        mask_token=mask,
        num_oov_indices=num_oov,
        oov_method=method,
        salt=salt,
    )
    if mode == "tf_idf":
        kw["idf_weights"] = [0.5, 1.0, 2.0]
    inputs = [np.array([10, -7, 31, 30, 8]), np.array([[10, 20], [0, 5]]), np.array(20)]
    ours, theirs = pp.IntegerLookup(**kw), ref(keras_outcomes, "IntegerLookup", kw, inputs)
    for x, expected in zip(inputs, theirs["outcomes"], strict=True):
        assert_same(expected, outcome(ours, torch.from_numpy(x)))


@pytest.mark.parametrize("mask", [None, 0])
def test_lookups_invert(ref, mask):
    idx = np.array([0, 1, 2, 3, 4, 5, -1])
    kw = dict(vocabulary=[10, 20, 30], invert=True, mask_token=mask)
    theirs = ref(keras_outcomes, "IntegerLookup", kw, [idx])["outcomes"][0]
    np.testing.assert_array_equal(pp.IntegerLookup(**kw)(idx).numpy(), theirs)
    kw = dict(vocabulary=["a", "b"], invert=True, mask_token=None if mask is None else "")
    theirs = ref(keras_outcomes, "StringLookup", kw, [idx])["outcomes"][0]
    assert pp.StringLookup(**kw)(idx).tolist() == [t.decode() for t in theirs.tolist()]


def test_integer_lookup_adapt(ref):
    data = np.array([[5, 5, 7], [7, 7, 9], [1, 1, 1], [-1, 5, 2]])
    for kw in (dict(), dict(max_tokens=4), dict(mask_token=1, output_mode="count")):
        ours = pp.IntegerLookup(**kw)
        ours.adapt(data)
        theirs = ref(keras_outcomes, "IntegerLookup", kw, [data], data)
        assert ours.get_vocabulary() == theirs["vocabulary"]
        assert_same(theirs["outcomes"][0], ours(torch.from_numpy(data)).numpy())


@pytest.mark.parametrize("mode", ["int", "one_hot", "multi_hot", "count"])
@pytest.mark.parametrize("salt", [None, 133, [5, 6]])
@pytest.mark.parametrize("mask", [None, "", 0, "A"])
def test_hashing(ref, mode, salt, mask):
    inputs = [
        np.array([["A", "B"], ["", "héllo"], ["a" * 70, "x" * 33]]),
        np.array([[1, -5], [0, 123456789012]]),
        np.array([[1.7, -5.2], [0.0, 3.9]]),
    ]
    inputs = [x for x in inputs if mask is None or isinstance(mask, str) == (x.dtype.kind == "U")]
    for num_bins in (1, 3, 1000):
        kw = dict(num_bins=num_bins, mask_value=mask, salt=salt, output_mode=mode)
        theirs = ref(keras_outcomes, "Hashing", kw, inputs)["outcomes"]
        for x, expected in zip(inputs, theirs, strict=True):
            assert_same(expected, pp.Hashing(**kw)(x).numpy())


@pytest.mark.parametrize("mode", ["int", "one_hot"])
def test_hashed_crossing(ref, mode):
    pairs = [
        (np.array([1, 2, 3]), np.array(["A", "B", "C"])),
        (np.array([[1], [-2]]), np.array([[7], [8]])),
        (np.array(["x", "y"]), np.array(["y", "x"])),
        (np.array(5), np.array("q")),
        (np.array([1, 2]), np.array(["p", "q"]), np.array([9, 9])),
    ]
    for num_bins in (1, 5, 10**6):
        kw = dict(num_bins=num_bins, output_mode=mode)
        theirs = ref(keras_outcomes, "HashedCrossing", kw, pairs)["outcomes"]
        for features, expected in zip(pairs, theirs, strict=True):
            assert_same(expected, pp.HashedCrossing(**kw)(features).numpy())


@pytest.mark.parametrize("mode", ["one_hot", "multi_hot", "count"])
def test_category_encoding(ref, mode):
    inputs = [np.array(2), np.array([0, 1, 2]), np.array([[0, 1], [2, 2]]), np.array([[1], [0]])]
    kw = dict(num_tokens=3, output_mode=mode)
    theirs = ref(keras_outcomes, "CategoryEncoding", kw, inputs)["outcomes"]
    for x, expected in zip(inputs, theirs, strict=True):
        assert_same(expected, pp.CategoryEncoding(**kw)(x).numpy())
    if mode == "count":
        x, w = np.array([[0, 1, 1], [2, 2, 2]]), np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 0.5]])
        call_kw = dict(count_weights=w)
        expected = ref(keras_outcomes, "CategoryEncoding", kw, [x], None, None, call_kw)
        expected = expected["outcomes"][0]
        got = pp.CategoryEncoding(3, "count")(x, count_weights=w)
        assert got.dtype == torch.float32
        assert_same(expected, got.numpy())


@pytest.mark.parametrize("mode", ["int", "one_hot", "multi_hot", "count"])
def test_discretization_fixed(ref, mode):
    inputs = [
        np.array([[-1.0, 0.0, 0.5, 1.0, 2.0, 3.0]]),
        np.array([0.5, 2.0]),
        np.array([[0.0], [2.5]]),
    ]
    kw = dict(bin_boundaries=[0.0, 1.0, 2.0], output_mode=mode)
    theirs = ref(keras_outcomes, "Discretization", kw, inputs)["outcomes"]
    for x, expected in zip(inputs, theirs, strict=True):
        got = pp.Discretization(**kw)(x).numpy()
        assert expected.dtype == got.dtype
        assert_same(expected, got)


@pytest.mark.parametrize("num_bins", [2, 4, 10])
@pytest.mark.parametrize("epsilon", [0.01, 0.1])
def test_discretization_adapt(ref, num_bins, epsilon):
    data = np.random.default_rng(0).normal(size=(1000, 3)).astype(np.float32)
    kw = dict(num_bins=num_bins, epsilon=epsilon)
    theirs = ref(keras_outcomes, "Discretization", kw, [], data)
    ours = pp.Discretization(**kw)
    ours.adapt(data)
    np.testing.assert_array_equal(ours.bin_boundaries.numpy(), theirs["bin_boundaries"])
    # Streaming: the same batches give the same sketch.
    theirs = ref(keras_outcomes, "Discretization", kw, [], data, 128)
    ours = pp.Discretization(**kw)
    ours.adapt(pp_dataset(data).batch(128), progress=False)
    np.testing.assert_array_equal(ours.bin_boundaries.numpy(), theirs["bin_boundaries"])


CORPUS = np.array(
    [
        "The quick brown fox.",
        "jumped over the LAZY dog!!",
        "Ünïcode ÄÖ café, déjà-vu\u00a0nbsp",
        "  spaces\tand\nnewlines  ",
        "the the the fox",
        "",
        "x's y_z (a+b) [c] {d} @e #f",
    ]
)
QUERIES = np.array(["the fox and the dog", "unknown words here", "Ünïcode café", "", "a+b c"])


@pytest.mark.parametrize(
    "standardize", ["lower_and_strip_punctuation", "lower", "strip_punctuation", None]
)
@pytest.mark.parametrize("split", ["whitespace", "character"])
@pytest.mark.parametrize("ngrams", [None, 2, (1, 3)])
def test_text_vectorization_adapted(ref, standardize, split, ngrams):
    for mode, osl, max_tokens in [
        ("int", None, None),
        ("int", 3, 8),
        ("int", 12, None),
        ("multi_hot", None, 8),
        ("count", None, None),
        ("tf_idf", None, 8),
    ]:
        kw = dict(
            standardize=standardize,
            split=split,
            ngrams=ngrams,
            output_mode=mode,
            max_tokens=max_tokens,
            output_sequence_length=osl,
        )
        ours = pp.TextVectorization(**kw)
        ours.adapt(CORPUS)
        theirs = ref(keras_outcomes, "TextVectorization", kw, [QUERIES], CORPUS)
        assert ours.get_vocabulary() == theirs["vocabulary"]
        assert_same(theirs["outcomes"][0], ours(QUERIES).numpy(), atol=1e-6)


def test_text_vectorization_given_vocabulary_and_unsplit(ref):
    def check(kw, inputs):
        theirs = ref(keras_outcomes, "TextVectorization", kw, inputs)["outcomes"]
        for x, expected in zip(inputs, theirs, strict=True):
            assert_same(expected, pp.TextVectorization(**kw)(x).numpy())

    check(
        dict(
            max_tokens=20,
            pad_to_max_tokens=True,
            output_mode="multi_hot",
            vocabulary=["the", "fox"],
        ),
        [QUERIES],
    )
    check(
        dict(output_mode="tf_idf", vocabulary=["the", "fox", "dog"], idf_weights=[0.1, 0.2, 0.3]),
        [QUERIES],
    )
    unsplit = [
        np.array([["a"], ["c"], ["B"]]),
        np.array(["a", "c"]),
        np.array([["a", "b"], ["c", "a"]]),
    ]
    for mode in ["int", "one_hot", "multi_hot", "count"]:
        check(dict(split=None, output_mode=mode, vocabulary=["a", "b"]), unsplit)


def test_normalization_tabular(ref):
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(500, 4)) * [1, 10, 100, 0] + [0, 5, -3, 2]).astype(np.float32)
    theirs = ref(keras_outcomes, "Normalization", dict(axis=-1), [x], x)["outcomes"][0]
    ours = pp.Normalization(axis=-1)
    ours.adapt(x, batch_size=64)  # streamed: Chan's merge gives the same moments
    # The constant 4th feature: Keras divides 0 by its 1e-7 floor too, giving 0.
    np.testing.assert_allclose(ours(x).numpy(), theirs, atol=2e-6)
    theirs = ref(keras_outcomes, "Normalization", dict(axis=None), [x], x)["outcomes"][0]
    ours = pp.Normalization(axis=None)
    ours.adapt(x)
    np.testing.assert_allclose(ours(x).numpy(), theirs, atol=2e-6)
    kw = dict(mean=[1.0, 2.0], variance=[4.0, 1.0], invert=True)
    y = np.array([[1.0, 1.0], [0.0, -2.0]], dtype=np.float32)
    theirs = ref(keras_outcomes, "Normalization", kw, [y])["outcomes"][0]
    np.testing.assert_allclose(pp.Normalization(**kw)(y).numpy(), theirs)


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(
            fft_length=512,
            sequence_stride=128,
            sequence_length=400,
            num_mel_bins=40,
            sampling_rate=8000,
        ),
        dict(fft_length=256, sequence_stride=100, window="hamming", power_to_db=False, mag_exp=1.0),
        dict(
            fft_length=256, window=None, top_db=20.0, ref_power=2.0, min_freq=0.0, max_freq=3000.0
        ),
    ],
)
def test_mel_spectrogram(ref, kw):
    audio = np.random.default_rng(0).normal(size=(2, 2000)).astype(np.float32)
    inputs = [audio, audio[0]]
    theirs = ref(keras_outcomes, "MelSpectrogram", kw, inputs)["outcomes"]
    for x, expected in zip(inputs, theirs, strict=True):
        got = pp.MelSpectrogram(**kw)(torch.from_numpy(x)).numpy()
        assert got.shape == expected.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, expected, atol=1e-4 * np.abs(expected).max(), rtol=0)


@pytest.mark.parametrize("mode", ["log", "magnitude", "psd", "real", "imag", "angle", "stft"])
@pytest.mark.parametrize("fmt", ["channels_last", "channels_first"])
def test_stft_spectrogram(ref, mode, fmt):
    x = np.random.default_rng(1).normal(size=(1, 300, 2)).astype(np.float32)
    if fmt == "channels_first":
        x = np.ascontiguousarray(x.transpose(0, 2, 1))
    for kw in (
        dict(),
        dict(
            frame_length=64,
            frame_step=16,
            fft_length=128,
            window="hamming",
            periodic=True,
            scaling="spectrum",
            padding="same",
        ),
        dict(frame_length=50, window=None, scaling=None, expand_dims=True),
    ):
        kw = dict(mode=mode, data_format=fmt, **kw)
        expected = ref(keras_outcomes, "STFTSpectrogram", kw, [x])["outcomes"][0]
        got = pp.STFTSpectrogram(**kw)(torch.from_numpy(x)).numpy()
        assert got.shape == expected.shape
        diff = np.abs(got - expected)
        if mode == "angle":  # -pi and pi are one angle
            diff = np.minimum(diff, 2 * np.pi - diff)
        assert diff.max() <= 1e-4 * max(np.abs(expected).max(), 1.0)
