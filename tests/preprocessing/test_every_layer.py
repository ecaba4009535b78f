"""What holds for every layer in ``preprocessing.__all__``, one case per layer (issue 32).

Keras's ``training=`` keyword (item 9) and ``torch.compile(fullgraph=True)`` against eager
(item 7). The table ``CASES`` has one small layer and input per public layer class; a
layer added to ``__all__`` without a case fails ``test_every_public_name_has_a_case``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import preprocessing as pp


def _images(h=10, w=10, scale=255.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(2, 3, h, w, generator=g) * scale


def _boxes():
    return {
        "images": _images(),
        "bounding_boxes": {
            "boxes": torch.tensor([[[1.0, 1.0, 4.0, 5.0]] * 2] * 2),
            "labels": torch.tensor([[1, 2], [3, 4]]),
        },
    }


# name -> (layer factory, input factory). Random layers are seeded (a fixed stream), with
# factors large enough that their first draw changes the input of the given seed.
CASES = {
    "AugMix": (lambda: pp.AugMix(seed=1), _images),
    "AutoContrast": (lambda: pp.AutoContrast(), _images),
    "CategoryEncoding": (
        lambda: pp.CategoryEncoding(num_tokens=5, output_mode="one_hot"),
        lambda: torch.tensor([4, 0, 2]),
    ),
    "CenterCrop": (lambda: pp.CenterCrop(6, 8), _images),
    "ContrastLimitedAdaptiveHistogramEqualization": (
        lambda: pp.ContrastLimitedAdaptiveHistogramEqualization(tile_grid_size=(2, 2)),
        _images,
    ),
    "CutMix": (lambda: pp.CutMix(seed=0), _images),
    "Discretization": (
        lambda: pp.Discretization(bin_boundaries=[0.0, 1.0]),
        lambda: torch.tensor([[-1.0, 0.5, 2.0]]),
    ),
    "Equalization": (lambda: pp.Equalization(), _images),
    "HashedCrossing": (
        lambda: pp.HashedCrossing(num_bins=9),
        lambda: (torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6])),
    ),
    "Hashing": (lambda: pp.Hashing(num_bins=7), lambda: torch.tensor([[1, 2, 3]])),
    "IntegerLookup": (
        lambda: pp.IntegerLookup(vocabulary=[3, 5, 7]),
        lambda: torch.tensor([[3, 4, 7]]),
    ),
    "MaxNumBoundingBoxes": (lambda: pp.MaxNumBoundingBoxes(max_number=3), _boxes),
    "MelSpectrogram": (
        lambda: pp.MelSpectrogram(fft_length=32, sequence_stride=8, num_mel_bins=4),
        lambda: torch.rand(2, 40, generator=torch.Generator().manual_seed(0)),
    ),
    "MixUp": (lambda: pp.MixUp(seed=0), _images),
    "Normalization": (lambda: pp.Normalization(mean=0.5, variance=0.25), _images),
    "RandAugment": (lambda: pp.RandAugment(seed=4), _images),
    "RandomBrightness": (lambda: pp.RandomBrightness(0.5, seed=5), _images),
    "RandomColorDegeneration": (lambda: pp.RandomColorDegeneration(0.5, seed=6), _images),
    "RandomColorJitter": (
        lambda: pp.RandomColorJitter(brightness_factor=0.5, hue_factor=0.3, seed=7),
        _images,
    ),
    "RandomContrast": (lambda: pp.RandomContrast(0.5, seed=8), _images),
    "RandomCrop": (lambda: pp.RandomCrop(6, 6, seed=9), _images),
    "RandomElasticTransform": (lambda: pp.RandomElasticTransform(seed=10), _images),
    "RandomErasing": (lambda: pp.RandomErasing(factor=(1.0, 1.0), seed=11), _images),
    "RandomFlip": (lambda: pp.RandomFlip("horizontal_and_vertical", seed=12), _images),
    "RandomGaussianBlur": (lambda: pp.RandomGaussianBlur(seed=13), _images),
    "RandomGrayscale": (lambda: pp.RandomGrayscale(1.0, seed=14), _images),
    "RandomHue": (lambda: pp.RandomHue(0.5, seed=15), _images),
    "RandomInvert": (lambda: pp.RandomInvert(seed=16), _images),
    "RandomPerspective": (lambda: pp.RandomPerspective(seed=17), _images),
    "RandomPosterization": (lambda: pp.RandomPosterization(2, seed=18), _images),
    "RandomResizedCrop": (lambda: pp.RandomResizedCrop(6, 6, seed=19), _images),
    "RandomRotation": (lambda: pp.RandomRotation(0.3, seed=20), _images),
    "RandomSaturation": (lambda: pp.RandomSaturation(0.8, seed=21), _images),
    "RandomSharpness": (lambda: pp.RandomSharpness(0.8, seed=22), _images),
    "RandomShear": (lambda: pp.RandomShear(0.3, 0.3, seed=23), _images),
    "RandomTranslation": (lambda: pp.RandomTranslation(0.3, 0.3, seed=24), _images),
    "RandomZoom": (lambda: pp.RandomZoom(0.4, seed=25), _images),
    "Rescaling": (lambda: pp.Rescaling(1 / 127.5, offset=-1.0), _images),
    "Resizing": (lambda: pp.Resizing(6, 8), _images),
    "Solarization": (lambda: pp.Solarization(0.5, 0.5, seed=26), _images),
    "STFTSpectrogram": (
        lambda: pp.STFTSpectrogram(mode="psd", frame_length=8),
        lambda: torch.rand(1, 2, 20, generator=torch.Generator().manual_seed(0)),
    ),
    "StringLookup": (
        lambda: pp.StringLookup(vocabulary=["a", "b"]),
        lambda: np.array([["a", "c", "b"]]),
    ),
    "TextVectorization": (
        lambda: pp.TextVectorization(vocabulary=["the", "cat"]),
        lambda: np.array(["the cat sat", "a cat"]),
    ),
}
# Pipeline is no layer of its own in Keras's list but takes the keyword too.
PIPELINE = (
    lambda: pp.Pipeline(
        [pp.RandomFlip("horizontal_and_vertical", seed=1), pp.RandomRotation(0.3, seed=2)]
    ),
    _images,
)
# Names in __all__ that are no layer one can call: functions, modules, the dtype policy and
# the abstract bases (each tested through its subclasses).
NOT_LAYERS = {
    "AffineLayer",
    "DTypePolicy",
    "GeometricLayer",
    "Layer",
    "Pipeline",  # PIPELINE above
    "RandomLayer",
    "affine_transform",
    "bounding_boxes",
    "dtype_policy",
    "image_data_format",
    "layer_from_config",
    "safe_globals",
    "serialize_layer",
    "set_dtype_policy",
    "set_image_data_format",
}
# The string layers read Python strings (numpy arrays of str): nothing a graph can hold.
STRING_INPUT = {"StringLookup", "TextVectorization"}
CALLABLE = sorted(CASES) + ["Pipeline"]


def _case(name):
    return PIPELINE if name == "Pipeline" else CASES[name]


def _same(a, b):
    """Outputs equal exactly (a tensor, a dict of targets or nested ones)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    else:
        assert torch.equal(torch.as_tensor(a), torch.as_tensor(b))


def test_every_public_name_has_a_case():
    assert set(pp.__all__) == set(CASES) | NOT_LAYERS
    assert len(CASES) == 43  # and Pipeline: the 44 the issue counts
    bases = {"AffineLayer", "GeometricLayer", "Layer", "RandomLayer", "Pipeline"}
    for name in pp.__all__:
        value = getattr(pp, name)
        is_layer = isinstance(value, type) and issubclass(value, pp.Layer)
        assert is_layer == (name in CASES or name in bases), name


# --------------------------------------------------------------- training= (item 9)
def _random(layer):
    return type(layer)._random or isinstance(layer, pp.Pipeline)


@pytest.mark.parametrize("name", CALLABLE)
def test_training_false_is_the_identity_in_train_mode(name):
    make, data = _case(name)
    layer = make().train()
    x = data()
    out = layer(x, training=False)
    if not _random(layer):  # accepted and ignored, as Keras's deterministic layers do
        _same(out, make()(x))
        _same(layer(x, training=True), make()(x))
        return
    if name in ("RandomCrop", "RandomResizedCrop"):
        # Keras's inference form of the crops: the centred window (resized), eval()'s.
        _same(out, make().eval()(x))
        assert out.shape == (2, 3, 6, 6)
    else:
        _same(out, x)
    assert all(int(b) == 0 for k, b in layer.named_buffers() if k.endswith("_draws"))
    assert layer.training  # the module's own mode is never changed


@pytest.mark.parametrize("name", CALLABLE)
def test_training_true_augments_in_eval_mode(name):
    make, data = _case(name)
    layer = make().eval()
    x = data()
    out = layer(x, training=True)
    assert not layer.training
    expected = make().train()(x)  # the same seed's first draw in train() mode
    _same(out, expected)
    if _random(layer):
        assert not torch.equal(out, x)
        _same(layer(x), make().eval()(x))  # None: the module's mode again


def test_training_none_follows_the_module_and_reaches_nested_layers():
    x = _images()
    flip = pp.RandomFlip("horizontal_and_vertical", seed=12)
    model = torch.nn.Sequential(pp.Pipeline([flip]))
    assert not torch.equal(model[0](x, training=None), x)  # train(): augments
    model.eval()
    assert torch.equal(model[0](x, training=None), x)
    # The keyword of the outer call reaches the layers it calls (Keras's call context).
    fresh = pp.RandomFlip("horizontal_and_vertical", seed=12)
    fresh(x)  # the draw the train() call above made
    assert torch.equal(model[0](x, training=True), fresh(x))
    assert not torch.equal(fresh(x), x)  # (a draw that flips)


@pytest.mark.parametrize("bad", ["yes", 1, 0.0])
def test_training_must_be_a_bool_or_none(bad):
    with pytest.raises(ValueError, match=r"RandomFlip: training must be True or False; got "):
        pp.RandomFlip(seed=0)(_images(), training=bad)


def test_training_keyword_is_per_thread():
    # A layer shared by a pipeline's threads: one thread's training=False never reaches
    # another thread's call (no module attribute is flipped).
    import threading

    layer = pp.RandomFlip("horizontal_and_vertical", seed=0)
    x = _images()
    inside, release = threading.Event(), threading.Event()

    class _Wait(torch.nn.Module):
        def forward(self, y):
            inside.set()
            release.wait(10)
            return y

    holder = pp.Pipeline([layer])
    holder.layers.append(_Wait())  # ModuleList takes any module; runs after the flip
    thread = threading.Thread(target=lambda: holder(x, training=False))
    thread.start()
    inside.wait(10)
    try:
        assert pp.base.call_training(layer) is True  # this thread: the module's mode
    finally:
        release.set()
        thread.join(10)


# ------------------------------------------------- torch.compile(fullgraph=True) (item 7)
# backend="eager": Dynamo captures the whole forward as one graph (what fullgraph=True
# checks and what Rescaling failed) and runs it with the same kernels as eager, so the
# outputs agree to float32 rounding: 1e-5 relative to values of up to 255. Inductor's
# generated kernels (other summation orders) are compared in the slow sweep below.
ATOL = {"eager": 255 * 1e-6, "inductor": 255 * 1e-5}


def _compiled_equals_eager(name, backend):
    make, data = _case(name)
    torch._dynamo.reset()
    compiled = torch.compile(make(), fullgraph=True, backend=backend)
    eager = make()
    x = data()
    for _ in range(2):  # the second call: the draw counter moved, same graph
        got, want = compiled(x), eager(x)
        if isinstance(want, dict):
            got, want = got["images"], want["images"]
        torch.testing.assert_close(got, want, atol=ATOL[backend], rtol=0)


# A fast subset in the default run: one of each kind (feature, deterministic image,
# geometric, photometric, composite, mixing, the one that failed).
FAST = [
    "Rescaling",
    "Resizing",
    "Normalization",
    "CategoryEncoding",
    "RandomRotation",
    "RandomBrightness",
    "CutMix",
    "Pipeline",
]


def _compile_param(name):
    if name in STRING_INPUT:
        return pytest.param(name, marks=pytest.mark.skip(reason="numpy strings: no graph"))
    return name if name in FAST else pytest.param(name, marks=pytest.mark.slow)


@pytest.mark.parametrize("name", [_compile_param(n) for n in CALLABLE])
def test_fullgraph_compile_equals_eager(name):
    _compiled_equals_eager(name, "eager")


# --------------------------------------- whole-model torch.load(weights_only=True) (item 8)
@pytest.mark.parametrize("name", CALLABLE)
def test_whole_model_loads_with_weights_only(name, tmp_path):
    # torch.save(model) pickles each module by its class; torch.load's default
    # weights_only=True rebuilds only allowlisted classes. Importing preprocessing adds its
    # own; the user allowlists their model's (here torch.nn.Sequential), as torch asks.
    make, data = _case(name)
    model = torch.nn.Sequential(make())
    x = data()
    model(x)
    torch.save(model, tmp_path / "model.pt")
    with torch.serialization.safe_globals([torch.nn.Sequential]):
        loaded = torch.load(tmp_path / "model.pt")  # weights_only=True: torch's default
    assert type(loaded[0]) is type(model[0])
    assert loaded[0].get_config() == model[0].get_config()
    # A pickled random layer starts afresh from its seed (RandomLayer's documented
    # copy rule): its first output is the seed's first draw. Its state_dict continues.
    _same(loaded(x), make()(x))
    loaded.load_state_dict(model.state_dict())
    _same(loaded(x), model(x))


def test_safe_globals_are_this_packages_layers_and_their_containers():
    classes = pp.safe_globals()
    names = {c.__name__ for c in classes}
    assert set(CASES) | {"Pipeline", "Layer", "RandomLayer", "AffineLayer"} <= names
    assert {torch.nn.ModuleList, torch.nn.ModuleDict} <= set(classes)
    others = [c for c in classes if c.__module__.split(".")[0] != "preprocessing"]
    assert others == [torch.nn.ModuleList, torch.nn.ModuleDict]
    assert all(c in torch.serialization.get_safe_globals() for c in classes)


def test_a_model_class_not_allowlisted_is_still_refused(tmp_path):
    # Nothing but the package's classes is added: torch's own refusal names the user's.
    torch.save(torch.nn.Sequential(pp.RandomFlip(seed=0)), tmp_path / "model.pt")
    with pytest.raises(Exception, match=r"torch\.nn\.modules\.container\.Sequential"):
        torch.load(tmp_path / "model.pt")


def test_training_keyword_under_fullgraph_compile():
    # The keyword is read inside the graph (Dynamo guards on it): one compiled layer takes
    # all three values, each equal to eager.
    torch._dynamo.reset()
    make = lambda: pp.RandomFlip("horizontal_and_vertical", seed=12)  # noqa: E731
    compiled, eager = torch.compile(make(), fullgraph=True, backend="eager"), make()
    x = _images()
    assert torch.equal(compiled(x, training=False), x)
    for training in (True, None, False):
        torch.testing.assert_close(compiled(x, training=training), eager(x, training=training))
    compiled.eval(), eager.eval()
    assert torch.equal(compiled(x), x)
    torch.testing.assert_close(compiled(x, training=True), eager(x, training=True))
