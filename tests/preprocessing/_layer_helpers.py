"""What the layer tests share: images, boxes and masks, layer tables, and the comparisons
with Keras (whose results come through ``ref``: tests/differential.py).

Imported by basename (``from _layer_helpers import img``), as pytest's default import
mode puts this folder on ``sys.path``. Every helper is deterministic: the goldens
fingerprint the inputs these build, so a change here makes them stale (and says so).
"""

from __future__ import annotations

import json

import numpy as np
import torch
from differential import keras, keras_call, tf
from PIL import Image

import preprocessing as pp

FORMATS = ["channels_first", "channels_last"]
FILL_MODES = ["reflect", "wrap", "constant", "nearest"]
INTERPOLATIONS = ["bilinear", "nearest"]
# The photometric layers against Keras: values in [0, 255] computed in float32 by different
# kernels (TF's depthwise conv and HSV ops against torch's) differ by a few ulps of 255,
# about 3e-5; 1e-3 leaves room for that and still catches any real difference (the
# smallest change that matters is one grey level).
ATOL = 1e-3


# ---------------------------------------------------------------------------- images
def img(b=2, c=3, h=5, w=6, seed=0):
    """``(b, c, h, w)`` float32 in [0, 1) (numpy's generator: the same on every machine)."""
    return torch.from_numpy(np.random.default_rng(seed).random((b, c, h, w), dtype=np.float32))


def unit_images(n=5, h=9, w=7, seed=0):
    """``(n, 3, h, w)`` float32 in [0, 1) from torch's generator."""
    return torch.rand(n, 3, h, w, generator=torch.Generator().manual_seed(seed))


def nhwc(b=2, h=9, w=11, seed=0):
    """``(b, h, w, 3)`` float32 numpy images in [0, 1): Keras's layout."""
    return np.random.default_rng(seed).random((b, h, w, 3), dtype=np.float32)


def in_format(x, fmt):
    """NHWC numpy images in the layout of ``fmt`` (contiguous)."""
    return x if fmt == "channels_last" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def keras_batch(h=6, w=8, fmt="channels_last", seed=0):
    """Two RGB images for the geometric and deterministic layers against Keras."""
    return in_format(nhwc(2, h, w, seed), fmt)


def photometric_batch(fmt, n=3, h=7, w=9, seed=0, scale=255.0):
    """``n`` RGB images in [0, scale) for the photometric layers against Keras."""
    return in_format(nhwc(n, h, w, seed) * scale, fmt)


def pixels(n=40, seed=0):
    """A (n, 3, 1, 1) batch of single RGB pixels in [0, 1], greys and primaries included."""
    x = torch.rand(n, 3, 1, 1, generator=torch.Generator().manual_seed(seed))
    x[0] = 0.5  # grey
    x[1, :, 0, 0] = torch.tensor([1.0, 0.0, 0.0])
    x[2, :, 0, 0] = torch.tensor([0.0, 0.0, 0.0])
    x[3, :, 0, 0] = torch.tensor([0.2, 0.9, 0.9])  # two equal maxima
    return x


def colorsys_map(x, fn):
    """``fn(i, r, g, b) -> (r, g, b)`` applied to each pixel of a ``pixels()`` batch."""
    out = torch.empty_like(x)
    for i in range(x.shape[0]):
        out[i, :, 0, 0] = torch.tensor(fn(i, *x[i, :, 0, 0].tolist()))
    return out


def uint8_image(seed=0, h=12, w=10):
    """One ``(3, h, w)`` uint8 image."""
    return torch.randint(0, 256, (3, h, w), generator=torch.Generator().manual_seed(seed)).to(
        torch.uint8
    )


def pil(x):
    """(3, H, W) uint8 tensor -> PIL image."""
    return Image.fromarray(x.permute(1, 2, 0).numpy())


def from_pil(image):
    """PIL image -> (3, H, W) float32 tensor."""
    return torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1).float()


# ---------------------------------------------------------------------- boxes, masks
H, W = 36, 44  # the image side of the box and mask tests


def random_boxes(n_img, n_box, seed=0):
    """Boxes with whole-pixel edges: then a nearest-resampled mask pixel is in the box
    exactly when its centre maps inside the box, and the mask's extent is within one
    output pixel of the moved box."""
    rng = np.random.default_rng(seed)
    x1 = rng.integers(0, W - 8, (n_img, n_box))
    y1 = rng.integers(0, H - 8, (n_img, n_box))
    x2 = x1 + rng.integers(4, 20, (n_img, n_box))
    y2 = y1 + rng.integers(4, 16, (n_img, n_box))
    boxes = np.stack([x1, y1, np.minimum(x2, W), np.minimum(y2, H)], -1)
    return torch.tensor(boxes, dtype=torch.float32)


def box_masks(boxes):
    """(B, N, H, W) uint8: pixel (i, j) is in box b when its centre lies inside b."""
    cy = torch.arange(H).view(1, 1, H, 1) + 0.5
    cx = torch.arange(W).view(1, 1, 1, W) + 0.5
    x1, y1, x2, y2 = (boxes[..., k, None, None] for k in range(4))
    return ((cx >= x1) & (cx < x2) & (cy >= y1) & (cy < y2)).to(torch.uint8)


def extent(mask):
    """xyxy extent of the nonzero pixels of a (H, W) mask, None when empty."""
    rows, cols = torch.nonzero(mask, as_tuple=True)
    if rows.numel() == 0:
        return None
    return [cols.min().item(), rows.min().item(), cols.max().item() + 1, rows.max().item() + 1]


def as_format(t, fmt):
    """(B, C, H, W) -> the layout of ``fmt``."""
    return t if fmt == "channels_first" else t.movedim(1, -1)


# ---------------------------------------------------------------------- layer tables
# One of each layer that takes images and has no colour requirement, by a short name.
ALL_LAYERS = {
    "flip": lambda **k: pp.RandomFlip("horizontal_and_vertical", seed=1, **k),
    "rotation": lambda **k: pp.RandomRotation(0.1, seed=2, **k),
    "zoom": lambda **k: pp.RandomZoom(0.2, seed=3, **k),
    "translation": lambda **k: pp.RandomTranslation(0.1, 0.1, seed=4, **k),
    "shear": lambda **k: pp.RandomShear(0.2, 0.2, seed=5, **k),
    "perspective": lambda **k: pp.RandomPerspective(seed=6, **k),
    "elastic": lambda **k: pp.RandomElasticTransform(seed=7, value_range=(0, 1), **k),
    "crop": lambda **k: pp.RandomCrop(10, 12, seed=8, **k),
    "resized_crop": lambda **k: pp.RandomResizedCrop(10, 12, seed=9, **k),
    "contrast": lambda **k: pp.RandomContrast(0.3, value_range=(0, 1), seed=10, **k),
    "brightness": lambda **k: pp.RandomBrightness(0.3, value_range=(0, 1), seed=11, **k),
    "resizing": lambda **k: pp.Resizing(10, 12, **k),
    "center_crop": lambda **k: pp.CenterCrop(10, 12, **k),
    "rescaling": lambda **k: pp.Rescaling(2.0, -1.0, **k),
    "normalization": lambda **k: pp.Normalization(mean=[0.5] * 3, variance=[0.25] * 3, **k),
}

# Strings that a vocabulary must keep byte for byte.
TRICKY = ["plain", "new\nline", "tab\there", "nul\x00byte", "emoji 🐍", "ß", "  ", "[UNK]x"]


def adapted_layers():
    """One of each feature layer, adapted where it adapts, with an input for it."""
    rng = np.random.default_rng(0)
    words = np.array(TRICKY * 3 + ["plain", "ß"]).reshape(-1, 1)
    string = pp.StringLookup(output_mode="tf_idf", num_oov_indices=2, max_tokens=9)
    string.adapt(words)
    integer = pp.IntegerLookup(mask_token=0, output_mode="count")
    integer.adapt(rng.integers(0, 30, size=(50, 4)))
    text = pp.TextVectorization(ngrams=2, output_mode="int", output_sequence_length=6)
    text.adapt(["The cat sat.", "the dog, the cat!", "Ünïcode\nlines"])
    bins = pp.Discretization(num_bins=5, output_mode="one_hot")
    bins.adapt(rng.normal(size=(300, 2)))
    norm = pp.Normalization()
    norm.adapt(rng.normal(size=(40, 3)))
    return [
        (string, np.array([["plain", "emoji 🐍"], ["nul\x00byte", "unseen"]])),
        (integer, torch.tensor([[0, 1, 2, 99], [5, 5, 5, 7]])),
        (text, np.array(["the cat and the dog", "unseen words"])),
        (bins, torch.tensor([[-2.0, 0.1], [0.0, 3.0]])),
        (norm, torch.tensor([[1.0, 2.0, 3.0]])),
        (pp.Hashing(num_bins=7, salt=3, output_mode="count"), np.array([["a", "b", "a"]])),
        (pp.HashedCrossing(num_bins=9, output_mode="one_hot"), (np.array(["x"]), np.array([4]))),
        (pp.CategoryEncoding(num_tokens=5, output_mode="one_hot"), torch.tensor([4, 0])),
        (pp.MelSpectrogram(fft_length=32, sequence_stride=8, num_mel_bins=4), torch.ones(40)),
        (pp.STFTSpectrogram(mode="psd", frame_length=8), torch.ones(1, 2, 20)),
    ]


def rebuilt(layer):
    """What a saved model gets back: a layer from its JSON config, then its state_dict."""
    config = json.loads(json.dumps(pp.serialize_layer(layer)))
    other = pp.layer_from_config(config)
    other.load_state_dict(layer.state_dict())
    return other


def pp_dataset(array):
    """A datapipe Dataset of ``array``'s rows (adapt streams over it)."""
    import datapipe as dp

    return dp.Dataset.from_tensor_slices(array)


# ------------------------------------------------------------- comparing with Keras
def compare(ref, ours, layer, args, kw, x, atol=1e-4):
    """Our layer and Keras's ``layer(*args, **kw)`` on ``x`` agree within ``atol``."""
    expected = ref(keras_call, layer, args, kw, x)
    got = ours(torch.from_numpy(x)).numpy()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=atol, rtol=0)


def close(ours, theirs, atol=ATOL):
    """Two outputs (tensors or arrays) of one shape agree within ``atol``."""
    ours = ours.numpy() if isinstance(ours, torch.Tensor) else ours
    theirs = np.asarray(theirs)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, atol=atol, rtol=0)


def keras_affine_transform(x, flat, kw):
    """Keras's torch backend's ``affine_transform`` (its documented fill modes)."""
    keras()
    from keras.src.backend.torch import image as keras_torch_image

    return keras_torch_image.affine_transform(x, flat, **kw).numpy()


def keras_documented(ref, layer, x):
    """Keras's own implementation of its documented fill modes (its torch backend)."""
    params = layer.get_random_transformation(x)
    h, w = layer._hw(layer._as_batch(x)[0])
    m = layer.matrix(params, h, w)
    flat = torch.cat([m[:, 0, :], m[:, 1, :], torch.zeros(m.shape[0], 2)], dim=1)
    kw = dict(
        interpolation=layer.interpolation,
        fill_mode=layer.fill_mode,
        fill_value=layer.fill_value,
        data_format=layer.data_format,
    )
    expected = torch.from_numpy(ref(keras_affine_transform, x, flat, kw))
    return layer.transform_images(x, params), expected


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
    """Two ``outcome`` results agree: both errors, or arrays of one shape within ``atol``."""
    if isinstance(expected, str) or isinstance(got, str):
        assert expected == got
        return
    assert expected.shape == got.shape
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), atol=atol)
