"""The one base class of every preprocessing layer.

It owns what all layers share: the JSON config (``get_config`` / ``from_config``), the
registry that rebuilds a layer from its class name (no pickle, no code execution), the
``data_format`` argument, rank-3 (one image) / rank-4 (batch) handling, the dtype policy
(``preprocessing.dtype_policy``), dict inputs whose targets (images, labels, bounding
boxes, segmentation masks, keypoints) all receive one draw, and, for random layers, the
counter-based draws from the layer's seed and the hook that lets a data pipeline hand its
own generator to a draw.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import math
import numbers
import threading
from typing import Any, ClassVar, Literal, NoReturn, TypeVar, overload

import numpy as np
import torch

from datapipe._draws import element_draw
from datapipe.image_format import looks_like_other_layout, resolve_data_format

from . import _targets
from ._random import box_muller, hashed_uniform
from .bounding_boxes import check_format
from .dtype_policy import POLICY_NAMES, DTypePolicy, keras_dtype_name, resolve_dtype

# Filled by Layer.__init_subclass__: class name -> class. Loading a config looks the
# class up here, so a config can only ever build one of this package's layers.
_REGISTRY: dict[str, type[Layer]] = {}

# The keyword arguments every Keras 3 layer takes (keras/src/layers/layer.py, Layer.__init__)
# and, for the image layers, BaseImagePreprocessingLayer's bounding_box_format: accepted by
# every layer here so Keras code and configs run unchanged (see Layer's docstring for what
# each means). A layer whose own signature names one of them (bounding_box_format on the
# geometric layers) uses it as its argument.
KERAS_LAYER_KWARGS = (
    "name",
    "trainable",
    "autocast",
    "activity_regularizer",
    "input_shape",
    "input_dim",
    "dtype",
)
KERAS_IMAGE_LAYER_KWARGS = ("bounding_box_format",)


def _jsonable(value: Any) -> Any:
    """Tuples become lists (JSON has no tuple); numpy/torch scalars become floats/ints."""
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, np.ndarray) or isinstance(value, torch.Tensor):
        return _jsonable(value.tolist())
    return value


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars and arrays as Python numbers and lists (tuples stay
    tuples): what a layer keeps of an argument, so its config is plain JSON."""
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


_L = TypeVar("_L", bound="Layer")

# The hooks that take the image batch. A subclass writes them for a rank-4 tensor (what
# ``forward`` hands them, batched and checked once by ``_as_batch``); ``__init_subclass__``
# wraps each so that a direct call, as Keras code makes one, also takes a rank-3 image or
# an array (``_takes_any_batch``).
_BATCHED_HOOKS = ("get_random_transformation", "transform_images")


def _hook_training(layer: Layer, training: Any) -> bool:
    """A hook's ``training=``: a bool, or None, which Keras's hooks read as False."""
    return False if training is None else check_bool(layer, "training", training)


def _takes_any_batch(fn: Any, unbatch: bool) -> Any:
    """``fn`` (a hook) for a direct call: the input goes through ``_as_batch`` (a tensor,
    rank 4, the layout checked) and, with ``unbatch``, a single image comes back as one.
    ``forward`` calls ``fn`` itself (``Layer._call_hook``).

    The keywords of Keras's hooks are taken as Keras takes them
    (``BaseImagePreprocessingLayer.get_random_transformation(data, training=True,
    seed=None)`` and ``transform_images(images, transformation, training=True)``):

    - ``training=False``: a random layer's draw is its ``eval()`` parameters (what
      ``forward`` uses in ``eval()``) and ``transform_images`` returns the images
      unchanged, as Keras's random layers (and ``Equalization``) do; a deterministic
      layer ignores it (Keras's ``AutoContrast``, ``CLAHE``, ``Resizing`` do).
      ``training=None`` is False, as in Keras's hooks (``if training:``); anything else
      but a bool is refused.
    - ``seed=``: an int draws from a generator seeded with it (the same draw for the same
      seed, as Keras's ``keras.random`` ops with an int seed; the values are this
      package's stream, D-K-5); a ``torch.Generator`` or ``numpy.random.Generator`` is the
      ``generator`` argument; None: the layer's own stream.
    - ``transformation=``: Keras's name of ``transform_images``'s parameters argument.
    """
    if unbatch:

        @functools.wraps(fn)
        def apply(self: Layer, images: Any, *args: Any, training: bool = True, **kwargs: Any):
            if "transformation" in kwargs and not args:
                args = (kwargs.pop("transformation"),)
            training = _hook_training(self, training)
            batch, single = self._as_batch(images)
            if not training and self._random:  # Keras: ``return images``
                return self._unbatch(batch, single)
            return self._unbatch(fn(self, batch, *args, **kwargs), single)

        return apply

    @functools.wraps(fn)
    def draw(
        self: Layer, images: Any, *args: Any, training: bool = True, seed: Any = None, **kwargs: Any
    ) -> Any:
        training = _hook_training(self, training)
        batch, _ = self._as_batch(images)
        if not training and self._random:
            return self._eval_params(batch)
        if seed is not None:
            if args or kwargs.get("generator") is not None:
                self._fail("seed", "cannot be given with a generator", seed)
            kwargs["generator"] = _seed_generator(self, seed)
        return fn(self, batch, *args, **kwargs)

    return draw


# Keras's ``training`` argument of a call (``layer(x, training=...)``): the value given to
# the innermost enclosing layer call that gave one, as Keras's call context hands it to
# nested layers (keras/src/layers/layer.py, ``CallContext``). Per thread: a layer shared by a
# pipeline's worker threads sees each thread's own call, and no module's ``training``
# attribute is changed (which another thread would see). Dynamo traces the attribute (it
# guards on it), so a compiled layer takes the keyword too.
_CALL = threading.local()


def call_training(layer: torch.nn.Module) -> bool:
    """Whether ``layer`` runs in training mode now: the ``training=`` of the innermost
    enclosing layer call that gave one (Keras's call context), else ``layer.training``
    (``train()`` / ``eval()``)."""
    mode = getattr(_CALL, "training", None)
    return layer.training if mode is None else mode


def _takes_training(fn: Any) -> Any:
    """``fn`` (a layer's ``forward``) taking Keras's ``training=`` keyword: True or False
    runs the call (and every layer it calls) in that mode whatever ``train()`` / ``eval()``
    set; None (the default) follows each layer's own mode. Wrapped once per class by
    ``Layer.__init_subclass__``, so every layer's ``forward`` takes it; a deterministic
    layer has nothing that depends on it (Keras's deterministic layers ignore it too)."""

    @functools.wraps(fn)
    def forward(self: Layer, *args: Any, training: Any = None, **kwargs: Any) -> Any:
        if training is None:
            return fn(self, *args, **kwargs)
        training = check_bool(self, "training", training)
        outer = getattr(_CALL, "training", None)
        _CALL.training = training
        try:
            return fn(self, *args, **kwargs)
        finally:
            _CALL.training = outer

    forward._takes_training = True  # type: ignore[attr-defined]
    return forward


def _seed_generator(layer: Layer, seed: Any) -> Any:
    """A direct hook call's ``seed=`` as the generator its draw reads."""
    if isinstance(seed, (torch.Generator, np.random.Generator)):
        return seed
    _check_seed(layer, seed)
    return torch.Generator().manual_seed(seed)


class Layer(torch.nn.Module):
    """Base of all preprocessing layers (a ``torch.nn.Module``).

    Subclasses store every constructor argument as an attribute of the same name; that
    is what ``get_config`` reads, so no hyperparameter can be lost on a round trip.

    ``data_format=None`` takes the package default (``preprocessing.image_data_format()``)
    once, at construction; the config records the value taken. A rank-3/4 input whose
    channel axis is wider than 4 while the axis at the other end is 1, 3 or 4 wide looks
    like the other layout: ``_as_batch`` raises a ``ValueError`` naming ``data_format``
    (layers whose result does not depend on the layout set ``_checks_layout = False``).

    ``dtype``: a dtype policy name (``"float32"``, ``"mixed_bfloat16"``, ...; see
    ``preprocessing.dtype_policy``) or None, which takes the package default
    (``preprocessing.dtype_policy()``) once, at construction. With a policy, image outputs
    are in its compute dtype; without one, float inputs keep their dtype and others become
    float32.

    **One draw, many targets.** ``forward(data, generator=None)`` takes an image
    (``(C, H, W)`` / ``(H, W, C)``), a batch (rank 4) or a dict with Keras 3's keys
    ``images``, ``labels``, ``bounding_boxes`` (``{"boxes", "labels"}``),
    ``segmentation_masks``, plus ``keypoints``. It draws once (``get_random_transformation``,
    one parameter set per image; deterministic layers return None) and hands the draw to
    ``transform_images``, ``transform_labels``, ``transform_bounding_boxes``,
    ``transform_segmentation_masks`` and ``transform_keypoints``, each receiving the batch
    form of its target (see ``_targets``): ``forward`` batches and checks the images once
    (``_as_batch``), so a subclass writes ``get_random_transformation`` and
    ``transform_images`` for a rank-4 tensor in its ``data_format``. Called directly (as
    Keras code calls them), these two also take a rank-3 image or an array: the base
    wraps each subclass's own (``_takes_any_batch``) to batch such an input the same way
    and to return one image for one image, and to take Keras's ``training=`` and
    ``seed=`` keywords (see ``_takes_any_batch``). The last four return their input unchanged
    by default: a layer that only changes pixel values (a photometric layer) implements
    ``get_random_transformation`` and ``transform_images`` and nothing else, and its
    targets other than images pass through untouched (not even converted to tensors).
    Other dict keys pass through unchanged; a key that looks like a misspelt target
    raises. A random layer in ``eval()`` applies no transformation to any target
    (``_eval_params`` returns None) unless it overrides ``_eval_params`` (RandomCrop
    centre-crops). ``torch.channels_last`` memory format of a batch is kept.

    **Keras's ``training=`` keyword.** Every layer's ``forward`` (its own or this one) also
    takes ``training=None | True | False``, as Keras's ``layer(x, training=...)``: False
    runs a random layer as in ``eval()`` (the identity, or its ``_eval_params``) even in
    ``train()`` mode, True draws and transforms even in ``eval()``, None (the default)
    follows ``self.training``. The value holds for every layer the call runs (a
    ``Pipeline``'s, a composite layer's), in the calling thread only, and changes no
    module's ``training`` attribute; deterministic layers accept and ignore it. A layer
    of one's own that branches on the mode reads ``call_training(self)`` (this module),
    not ``self.training``, to follow the keyword. Anything but a bool or None raises
    ``ValueError``. Example:

        >>> import torch
        >>> from preprocessing import RandomFlip
        >>> x = torch.arange(4.0).view(1, 1, 1, 4)
        >>> flip = RandomFlip(seed=2)  # train() mode: draws
        >>> flip(x, training=False).tolist(), flip.eval()(x, training=True).tolist()
        ([[[[0.0, 1.0, 2.0, 3.0]]]], [[[[3.0, 2.0, 1.0, 0.0]]]])

    **Keras's base-layer arguments** (``**kwargs`` of every layer, as Keras's ``Layer``
    takes them): ``name`` (a str, kept as ``layer.name`` and in the config; None by
    default), ``trainable`` and ``autocast`` (bools, checked and ignored: the layers have
    no trainable weights, and the dtype policy decides every cast), ``input_shape`` /
    ``input_dim`` (ignored, as Keras ignores them outside a ``Sequential``), and
    ``activity_regularizer`` (only None: a preprocessing layer adds no loss), and, for a
    layer without a ``dtype`` of its own (``StringLookup``, ``IntegerLookup``,
    ``TextVectorization``, ``MaxNumBoundingBoxes``), ``dtype`` (None or ``"float32"``,
    what Keras's configs hold, as a name or Keras's serialized ``DTypePolicy``; checked
    and ignored: their output dtypes are fixed). Image layers also take Keras's
    ``bounding_box_format`` (checked against ``bounding_boxes.FORMATS``, kept in the
    config); a layer that moves no box (photometric layers, ``MaxNumBoundingBoxes``)
    ignores it, the geometric layers use it.
    The image layers whose Keras class takes its base layer's unused ``factor``
    (``Equalization``, CLAHE, ``MaxNumBoundingBoxes``, ``MixUp``, ``RandomCrop``,
    ``RandomColorJitter``) take it too: checked (a number or pair in [-1, 1]), ignored.

    Raises:
        ValueError: ``data_format`` is not ``"channels_first"`` / ``"channels_last"``,
            ``dtype`` is not a policy name, or a keyword argument is neither the layer's
            nor one of Keras's base-layer arguments (named, with the closest known one).
    """

    _checks_layout: bool = True  # a layer may set it per instance (Normalization)
    _image_layer: ClassVar[bool] = True  # False: a feature layer (no bounding_box_format)
    # True: Keras's class takes its base image layer's ``factor`` without using it.
    _keras_base_factor: ClassVar[bool] = False
    name: str | None = None  # Keras's layer name, when given
    _random: ClassVar[bool] = False  # True: identity in eval() (RandomLayer)
    _config_values: dict[str, Any]  # arguments get_config reports as set now (adapted state)
    # Keys Keras's get_config writes that report state the other keys build (the lookups'
    # ``vocabulary_size``): from_config takes them and checks them against the built
    # layer's method of that name (None: not checked, as Keras writes for no vocabulary).
    _keras_derived_keys: ClassVar[tuple[str, ...]] = ()

    _abstract: ClassVar[bool] = True  # abstract bases stay out of the registry

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_") and not cls.__dict__.get("_abstract", False):
            _REGISTRY[cls.__name__] = cls
        for hook in _BATCHED_HOOKS:
            fn = cls.__dict__.get(hook)
            if fn is not None and not hasattr(fn, "__wrapped__"):
                setattr(cls, hook, _takes_any_batch(fn, unbatch=hook == "transform_images"))
        forward = cls.__dict__.get("forward")
        if forward is not None and not getattr(forward, "_takes_training", False):
            cls.forward = _takes_training(forward)  # type: ignore[method-assign]

    def __init__(
        self, data_format: str | None = None, dtype: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__()
        self.data_format = resolve_data_format(data_format, type(self).__name__)
        if dtype is not None and "dtype" not in inspect.signature(type(self).__init__).parameters:
            kwargs["dtype"], dtype = dtype, None  # Keras's base-layer dtype: checked, no effect
        self.dtype = resolve_dtype(dtype, type(self).__name__)
        self._keras_config: dict[str, Any] = {}
        self._take_keras_kwargs(kwargs)

    @classmethod
    def _keras_kwargs(cls) -> tuple[str, ...]:
        """The Keras base-layer arguments this class takes through ``**kwargs``."""
        extra: tuple[str, ...] = KERAS_IMAGE_LAYER_KWARGS if cls._image_layer else ()
        if cls._keras_base_factor:
            extra += ("factor",)
        own = inspect.signature(cls.__init__).parameters
        return tuple(k for k in KERAS_LAYER_KWARGS + extra if k not in own)

    def _take_keras_kwargs(self, kwargs: dict[str, Any]) -> None:
        known = self._keras_kwargs()
        for key in kwargs:
            if key not in known:
                own = [p for p in inspect.signature(type(self).__init__).parameters][1:]
                close = difflib.get_close_matches(str(key), [*own, *known], n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ValueError(
                    f"{type(self).__name__}: unrecognized keyword argument {key!r}{hint} "
                    f"(Keras's base-layer arguments taken here: {list(known)})"
                )
        name = kwargs.get("name")
        if name is not None:
            if not isinstance(name, str):
                self._fail("name", "must be a str or None", name)
            self.name = self._keras_config["name"] = name
        if "dtype" in kwargs:  # a layer without its own dtype (StringLookup, ...)
            dtype = keras_dtype_name(kwargs["dtype"])
            if dtype not in (None, "float32"):
                self._fail(
                    "dtype",
                    "must be None or 'float32' (Keras's default, what its configs hold): "
                    "this layer's output dtypes are fixed",
                    kwargs["dtype"],
                )
        for flag in ("trainable", "autocast"):
            if flag in kwargs:
                check_bool(self, flag, kwargs[flag])
        if kwargs.get("activity_regularizer") is not None:
            self._fail(
                "activity_regularizer",
                "must be None (a preprocessing layer adds no loss)",
                kwargs["activity_regularizer"],
            )
        if "factor" in kwargs:  # Keras's base image layer stores it; nothing reads it
            factor_pair(self, "factor", kwargs["factor"], (-1.0, 1.0), "symmetric")
        box_format = kwargs.get("bounding_box_format")
        if box_format is not None:
            self._keras_config["bounding_box_format"] = check_format(self, box_format)

    # ----------------------------------------------------------------- errors
    def _fail(self, arg: str, what: str, got: Any) -> NoReturn:
        raise ValueError(f"{type(self).__name__}: {arg} {what}; got {got!r}")

    # ------------------------------------------- factor and value_range (Keras's base)
    def _set_factor(
        self,
        factor: Any,
        name: str = "factor",
        bounds: tuple[float, float] = (0.0, 1.0),
        number: str = "from_low",
    ) -> tuple[float, float]:
        """Keras's ``_set_factor`` (``BaseImagePreprocessingLayer``): check ``factor`` by
        ``factor_pair``'s rule, keep the argument as given as the attribute ``name`` (what
        ``get_config`` reports) and its ``(lower, upper)`` pair as ``_<name>`` (what the
        draw reads); returns the pair. Raises ``factor_pair``'s ``ValueError``."""
        pair = factor_pair(self, name, factor, bounds, number)
        setattr(self, name, _plain(factor))
        setattr(self, f"_{name}", pair)
        return pair

    def _set_value_range(self, value_range: Any) -> tuple[float, float]:
        """Keras's ``_set_value_range``: check ``value_range`` (``value_range_pair``: finite
        numbers, low < high, for every layer), keep it as given (numpy values as Python
        numbers) as ``value_range`` and as a ``(low, high)`` pair of floats as ``_range``;
        returns the pair.

        One rule for every layer: Keras takes ``low == high`` everywhere, and its layers
        then return zeros (RandomBrightness, RandomContrast), NaN (RandomHue), values
        outside the range (RandomInvert, RandomSaturation) or raise ZeroDivisionError
        (Equalization, RandAugment, AugMix); here it is refused at construction (D-K-39).
        """
        self._range = value_range_pair(self, value_range)
        self.value_range = _plain(value_range)
        return self._range

    # ----------------------------------------------------------------- config
    def get_config(self) -> dict[str, Any]:
        """Every constructor argument, as JSON-compatible values (tuples become lists)."""
        params = inspect.signature(type(self).__init__).parameters
        config = {}
        for name, p in params.items():
            if name == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            # A layer whose attribute of that name means something else at run time
            # (Normalization's mean buffer) keeps the argument in _config_values.
            overrides = self.__dict__.get("_config_values", {})
            value = overrides[name] if name in overrides else getattr(self, name)
            config[name] = _jsonable(value)
        config.update(self.__dict__.get("_keras_config", {}))  # name, bounding_box_format
        json.dumps(config)  # fail here, not when the user saves it
        return config

    @classmethod
    def from_config(cls: type[_L], config: dict[str, Any]) -> _L:
        """Rebuild a layer from ``get_config()``'s output.

        Raises:
            ValueError: ``config`` is not a dict, has a key the constructor does not take
                (named, with the closest known one), lacks a required one, holds a bad
                value (the constructor's message names the argument), or a key Keras
                derives (``_keras_derived_keys``: the lookups' ``vocabulary_size``) that
                disagrees with the layer the config builds.
        """
        name = cls.__name__
        if not isinstance(config, dict):
            raise ValueError(f"{name}.from_config: expected a dict, got {type(config).__name__}")
        params = inspect.signature(cls.__init__).parameters
        own = [p for p, v in params.items() if p != "self" and v.kind != v.VAR_KEYWORD]
        derived = {k: config[k] for k in cls._keras_derived_keys if k in config}
        config = {k: v for k, v in config.items() if k not in derived}
        known = own + list(cls._keras_kwargs())
        for key in config:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"its keys are {known}"
                raise ValueError(f"{name}.from_config: unknown key {key!r}; {hint}")
        missing = [
            k for k in own if params[k].default is inspect.Parameter.empty and k not in config
        ]
        if missing:
            raise ValueError(f"{name}.from_config: missing key(s) {missing}")
        try:
            layer = cls(**config)
        except TypeError as e:  # a value of a type the constructor cannot use at all
            raise ValueError(f"{name}.from_config: bad config {config!r}: {e}") from e
        for key, value in derived.items():  # Keras's reports of the state: must agree
            if value is not None and getattr(layer, key)() != value:
                raise ValueError(
                    f"{name}.from_config: {key} is {value!r} but the config builds a layer "
                    f"with {key}() == {getattr(layer, key)()!r}"
                )
        return layer

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())

    # ------------------------------------------------------------ dtype policy
    @property
    def dtype_policy(self) -> DTypePolicy | None:
        """The layer's ``DTypePolicy`` (None: float inputs keep their dtype; a feature
        layer's ``dtype`` names its output dtype, which is no policy)."""
        return None if self.dtype not in POLICY_NAMES else DTypePolicy(self.dtype)

    @property
    def compute_dtype(self) -> torch.dtype | None:
        """The dtype of image outputs (None: the input's float dtype, else float32)."""
        policy = self.dtype_policy
        return None if policy is None else policy.compute_dtype

    @property
    def variable_dtype(self) -> torch.dtype:
        """The dtype state (Normalization's statistics) is stored in (float64 if no policy)."""
        policy = self.dtype_policy
        return torch.float64 if policy is None else policy.variable_dtype

    def _to_float(self, images: torch.Tensor) -> torch.Tensor:
        """The policy's compute dtype; without a policy float dtypes are kept and anything
        else becomes float32 (Keras's layers computing uint8 input)."""
        if self.dtype is not None:
            return images.to(DTypePolicy(self.dtype).compute_dtype)
        return images if images.is_floating_point() else images.to(torch.float32)

    # ------------------------------------------------------------ shapes/dtype
    @property
    def _channel_axis(self) -> int:
        """The channel axis of a rank-4 batch in this layer's data_format."""
        return 1 if self.data_format == "channels_first" else 3

    @property
    def _spatial_axes(self) -> tuple[int, int]:
        """The (height, width) axes of a rank-4 batch in this layer's data_format."""
        return (2, 3) if self.data_format == "channels_first" else (1, 2)

    def _as_batch(self, images: Any) -> tuple[torch.Tensor, bool]:
        """Return (rank-4 tensor, was_single_image); numpy input becomes a tensor."""
        if not isinstance(images, torch.Tensor):
            images = _targets.as_tensor(images)
        if images.ndim == 3:
            images, single = images.unsqueeze(0), True
        elif images.ndim == 4:
            single = False
        else:
            raise ValueError(
                f"{type(self).__name__}: expected a rank-3 image or a rank-4 batch in "
                f"{self.data_format} layout; got shape {tuple(images.shape)}"
            )
        if self._checks_layout:
            check_layout(self, images, single)
        return images, single

    @staticmethod
    def _unbatch(images: torch.Tensor, single: bool) -> torch.Tensor:
        return images.squeeze(0) if single else images

    def _hw(self, batch: torch.Tensor) -> tuple[int, int]:
        if self.data_format == "channels_first":
            return batch.shape[2], batch.shape[3]
        return batch.shape[1], batch.shape[2]

    def _to_nchw(self, batch: torch.Tensor) -> torch.Tensor:
        return batch if self.data_format == "channels_first" else batch.permute(0, 3, 1, 2)

    def _from_nchw(self, batch: torch.Tensor) -> torch.Tensor:
        return batch if self.data_format == "channels_first" else batch.permute(0, 2, 3, 1)

    # ------------------------------------------------- draw once, many targets
    def get_random_transformation(self, images: torch.Tensor, generator: Any = None) -> Any:
        """The parameters of one call: a dict of tensors with leading dim B (one set per
        image), or None for a deterministic layer. ``images`` is the rank-4 batch."""
        return None

    def _eval_params(self, images: torch.Tensor) -> Any:
        """A random layer's parameters in ``eval()``; None: no transformation at all."""
        return None

    def transform_images(self, images: torch.Tensor, params: Any) -> torch.Tensor:
        """Apply ``params`` to a rank-4 batch (rank 3 is accepted too) of images."""
        raise NotImplementedError

    def transform_labels(self, labels: torch.Tensor, params: Any) -> torch.Tensor:
        """Labels ``(B, ...)``; unchanged unless a layer mixes samples (MixUp, CutMix)."""
        return labels

    def transform_bounding_boxes(self, bounding_boxes: dict, params: Any) -> dict:
        """``{"boxes": (B, N, 4) float in the layer's bounding_box_format, "labels": (B, N)}``;
        unchanged unless the layer moves pixels (``GeometricLayer``) or edits boxes."""
        return bounding_boxes

    def transform_segmentation_masks(self, masks: torch.Tensor, params: Any) -> torch.Tensor:
        """Masks as a rank-4 batch in ``data_format``, dtype kept; unchanged by default."""
        return masks

    def transform_keypoints(self, keypoints: torch.Tensor, params: Any) -> torch.Tensor:
        """Keypoints ``(B, K, D)``: x, y in pixels (pixel i spans [i, i + 1)), then any
        other columns; unchanged by default."""
        return keypoints

    def _overrides(self, method: str) -> bool:
        return getattr(type(self), method) is not getattr(Layer, method)

    def _call_hook(self, name: str, batch: Any, *args: Any) -> Any:
        """Call this layer's hook ``name`` (``get_random_transformation``,
        ``transform_images``, ``transform_bounding_boxes``, ...) on the batch form of its
        target: for the images, a batch that ``_as_batch`` has made and checked
        (``forward``'s, or a composite layer's handing its batch to a sub-layer). The
        wrapper that batches the input of a direct call (``_takes_any_batch``) is
        skipped: nothing is batched or checked twice. An instance attribute of that
        name (a patched method) is called as it is."""
        own = self.__dict__.get(name)
        if own is not None:
            return own(batch, *args)
        fn = getattr(type(self), name)
        return getattr(fn, "__wrapped__", fn)(self, batch, *args)

    def _params(self, batch: torch.Tensor, generator: Any) -> Any:
        if self._random and not call_training(self):
            params = self._eval_params(batch)
        else:
            params = self._call_hook("get_random_transformation", batch, generator)
            if params is None:  # a deterministic layer: transform with no parameters
                params = {}
        if isinstance(params, dict) and "input_shape" not in params:
            params["input_shape"] = tuple(batch.shape)  # Keras's key: the batch's shape
        return params

    def _images_out(self, batch: torch.Tensor, params: Any) -> torch.Tensor:
        if params is None:
            out = self._to_float(batch)
        else:
            out = self._call_hook("transform_images", batch, params)
        if (
            out.ndim == 4
            and not batch.is_contiguous()
            and batch.is_contiguous(memory_format=torch.channels_last)
        ):
            out = out.contiguous(memory_format=torch.channels_last)
        return out

    def forward(self, data: Any, generator: Any = None) -> Any:
        """Transform an image, a batch or a dict of targets (see the class docstring).

        ``generator``: a ``torch.Generator`` or a ``numpy.random.Generator`` to draw from
        (random layers; see ``RandomLayer``); deterministic layers ignore it.
        """
        is_dict = isinstance(data, dict)
        if is_dict:
            _targets.check_keys(self, data)
        # The one place a layer's input is batched and checked: the hooks get the batch.
        batch, single = self._as_batch(data["images"] if is_dict else data)
        params = self._params(batch, generator)
        if is_dict:
            return self._apply_targets(data, batch, single, params)
        return self._unbatch(self._images_out(batch, params), single)

    def _apply_targets(self, data: dict, batch: torch.Tensor, single: bool, params: Any) -> dict:
        """Apply one draw to every target of ``data`` (a new dict; the input is kept)."""
        out = dict(data)
        out["images"] = self._unbatch(self._images_out(batch, params), single)
        if params is None:
            return out
        n = batch.shape[0]
        if "labels" in data and self._overrides("transform_labels"):
            labels = self.transform_labels(_targets.batch_labels(data["labels"], single), params)
            out["labels"] = labels.squeeze(0) if single else labels
        if "bounding_boxes" in data and self._overrides("transform_bounding_boxes"):
            boxes = _targets.batch_boxes(self, data["bounding_boxes"], single, n)
            out["bounding_boxes"] = _targets.unbatch_boxes(
                self.transform_bounding_boxes(boxes, params), single
            )
        if "segmentation_masks" in data and self._overrides("transform_segmentation_masks"):
            masks, no_channel = _targets.batch_masks(
                self, data["segmentation_masks"], single, n, self._hw(batch)
            )
            masks = self.transform_segmentation_masks(masks, params)
            out["segmentation_masks"] = _targets.unbatch_masks(self, masks, single, no_channel)
        if "keypoints" in data and self._overrides("transform_keypoints"):
            points = _targets.batch_keypoints(self, data["keypoints"], single, n)
            points = self.transform_keypoints(points, params)
            out["keypoints"] = points.squeeze(0) if single else points
        return out


def check_layout(layer: Layer, batch: torch.Tensor, single: bool = False) -> None:
    """Raise when a rank-4 ``batch`` (or one image, ``single``) looks like the other layout
    than ``layer.data_format``: its channel axis wider than 4 while the axis at the other
    end is 1, 3 or 4 wide (a grey, RGB or RGBA image in the other layout). Mixing layouts
    raises nothing otherwise: a flip would swap colour channels, ``Resizing`` would resize
    the wrong axes, ``Normalization.adapt`` would compute per-row statistics."""
    first = layer.data_format == "channels_first"
    c_axis, other_axis = (1, 3) if first else (3, 1)
    c, other = batch.shape[c_axis], batch.shape[other_axis]
    theirs = looks_like_other_layout(tuple(batch.shape), layer.data_format)
    if theirs is not None:
        shape = tuple(batch.shape[1:] if single else batch.shape)
        raise ValueError(
            f"{type(layer).__name__}: data_format is {layer.data_format!r} but the input of "
            f"shape {shape} looks {theirs} ({other} channels, {c} pixels wide along the "
            f"channel axis); pass data_format={theirs!r} to the layer, set "
            f"preprocessing.set_image_data_format({theirs!r}) before creating the layers, or "
            "permute the input"
        )


# The base's own hooks (a deterministic layer's draw, None) take a direct call's keywords
# and inputs as a subclass's do.
for _hook in _BATCHED_HOOKS:
    setattr(Layer, _hook, _takes_any_batch(Layer.__dict__[_hook], _hook == "transform_images"))
Layer.forward = _takes_training(Layer.__dict__["forward"])  # type: ignore[method-assign]


def _check_seed(layer: Layer, seed: Any) -> None:
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, int) or not -(2**63) <= seed < 2**64
    ):
        # torch.Generator.manual_seed takes [-2**63, 2**64); fail here, not at first call.
        layer._fail("seed", "must be an int in [-2**63, 2**64) or None", seed)


class RandomLayer(Layer):
    """Base of random layers: ``get_random_transformation`` then the ``transform_*`` methods.

    Draws come, in order, from the ``generator`` argument of ``forward`` (a
    ``torch.Generator``, or a ``numpy.random.Generator`` as a data pipeline's ``random_map``
    hands out, from which one seed per draw is taken), inside a pipeline stage the
    element's key (below), the layer's ``seed``, or torch's global RNG when ``seed`` is
    None. A seeded layer draws without a generator object: draw
    number ``c`` is a hash of ``(seed, c)`` (``preprocessing._random``) and ``c`` is an int64
    buffer that counts the layer's draws, so draws run on the input's device, the same seed
    gives the same stream, and ``torch.compile(fullgraph=True)`` traces them (compiled and
    eager streams are identical). The counter is part of ``state_dict`` (as Keras saves its
    ``SeedGenerator``'s state), so a model restored from a checkpoint continues its stream
    (a checkpoint without it loads too, keeping the layer's count); a pickled or
    deep-copied layer starts afresh from its seed. In ``eval()`` mode the layer is the
    identity (apart from the dtype policy), like Keras's ``training=False``; the call
    keyword ``training=`` overrides the mode for one call (``Layer``).

    Inside a pipeline stage (the function of ``Dataset.map`` or ``Dataset.random_map``, on
    any executor) a layer called without ``generator`` draws by the element instead: draw
    ``c`` of this element is ``hashed_uniform(bits, c)``, with ``bits`` a pure function of
    (layer seed, the stage's key, the element's identity; ``datapipe._draws``), so
    ``ds.map(torch.nn.Sequential(RandomFlip(seed=1), RandomRotation(0.1, seed=2)),
    num_parallel_calls=N)`` gives the same bits for every ``N``, ``AUTOTUNE``, thread or
    process workers, ``deterministic=False`` (each element's own draws), two runs,
    ``ds[i]`` and a resume from the iterator's ``state_dict`` (the position is part of the
    pipeline's state; no layer state is needed); each epoch draws anew. The stage's key
    comes from the pipeline's seed rules (``random_map``'s ``seed``, else ``Options.seed``
    and the stage's position, else that position alone), so a seeded layer needs no
    ``Options.seed``; an unseeded layer draws from the key when ``Options.seed`` (or
    ``random_map``'s ``seed``) is set, else from torch's global generator as outside a
    stage (then it is not reproducible with parallel calls). The counter does not move in a
    stage; outside one (a model's forward, a torch ``Dataset.__getitem__``) and in a
    ``torch.compile``d graph the layer keeps its counter stream. Why by position and not
    by counter: a counter shared by a stage's threads hands draws out in thread order, and
    each worker process has its own copy of the layer; the element's position is the one
    number every executor, run and restored iterator agrees on (``random_map``'s
    generators are keyed by it too). The draw scope is the stage thread's: a layer the
    stage's function runs on a thread of its own (a ``ThreadPoolExecutor`` inside the
    function) draws from its counter, in that thread's order.

    The element's identity (``datapipe._identity``; docs/architecture.md, "The element's
    identity") is, in order: the map's ``key=`` function of the element; its index in the
    random-access source; the identity carried through a ``shuffle`` buffer, ``shard`` or
    auto-sharding (the element's pre-shuffle identity); else its position in a stream
    that nothing below shards. Never its position in this rank's or DataLoader worker's
    share: two ranks, two loader workers or a resume on another layout never repeat a
    draw, and a rank draws for an element what the single-process pipeline draws for it.
    Where a worker's elements have no identity (a ``filter`` of its share) a
    draw raises ``datapipe._draws.DrawKeyError`` naming ``key=``.

    Subclasses draw with ``_uniform(n, low, high, device, generator)`` (shape ``(n,)``),
    ``_rand(shape, device, generator)`` (U[0, 1)) and ``_randn(shape, device, generator)``
    (standard normal); every value is float32, and a custom layer drawing with them is
    keyed by the element in a stage as the built-in ones are. A layer with Keras's
    ``factor`` argument checks and keeps it with ``_set_factor`` (and its ``value_range`` with
    ``_set_value_range``) in its constructor, and draws one value per image from it with
    ``_draw_factor(images, generator)``.

    Example: a photometric layer is a draw and a pixel operation; every other target of a
    dict input passes through untouched (``Layer``'s default ``transform_*`` methods):

        >>> import torch
        >>> class _Negate(RandomLayer):  # a leading "_" keeps it out of the registry
        ...     def get_random_transformation(self, images, generator=None):
        ...         u = self._rand((images.shape[0],), images.device, generator)
        ...         return {"negate": u < 0.5}
        ...     def transform_images(self, images, params):
        ...         x = self._to_float(images)  # the dtype policy
        ...         return torch.where(params["negate"].view(-1, 1, 1, 1), -x, x)
        >>> boxes = {"boxes": torch.zeros(4, 1, 4), "labels": torch.zeros(4, 1)}
        >>> out = _Negate(seed=0)({"images": torch.ones(4, 1, 2, 2), "bounding_boxes": boxes})
        >>> out["bounding_boxes"] is boxes, out["images"][:, 0, 0, 0].tolist()
        (True, [1.0, -1.0, -1.0, 1.0])
    """

    _abstract = True
    _random = True

    # buffers (register_buffer), declared for type checkers
    _draws: torch.Tensor
    _factor: tuple[float, float]  # set by _set_factor, read by _draw_factor

    def __init__(
        self,
        seed: int | None = None,
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data_format=data_format, dtype=dtype, **kwargs)
        _check_seed(self, seed)
        self.seed = seed
        # Saved in state_dict (Keras saves its SeedGenerator's state with the weights): a
        # training job restored from a checkpoint continues the stream instead of replaying
        # the augmentations of its first steps.
        self.register_buffer("_draws", torch.zeros((), dtype=torch.int64))
        self._draw_lock = threading.Lock()

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, errors
    ):
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, errors
        )
        # A checkpoint from before the counter was saved: the layer keeps its own count.
        if prefix + "_draws" in missing_keys:
            missing_keys.remove(prefix + "_draws")

    def __getstate__(self) -> dict[str, Any]:
        # A copy starts afresh from its seed (as a torch.Generator-based layer did).
        state = self.__dict__.copy()
        buffers = dict(state["_buffers"])
        buffers["_draws"] = torch.zeros((), dtype=torch.int64)
        state["_buffers"] = buffers
        state.pop("_draw_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._draw_lock = threading.Lock()

    def _next_draw(self) -> torch.Tensor | int:
        """This draw's number; the counter moves on. Threads sharing the layer (a
        ``Dataset.map`` pool) each get their own number: the step is locked in eager
        mode (under ``torch.compile`` the graph does it, with no Python lock to trace).
        Eager with the counter on the CPU, the number comes back as an int (reading it
        costs nothing there, and ``hashed_uniform`` then draws on the host); elsewhere
        as a tensor, so a device counter is never read back."""
        if torch.compiler.is_compiling():
            c = self._draws.clone()
            self._draws.add_(1)
            return c
        with self._draw_lock:
            if self._draws.device.type == "cpu":
                number = int(self._draws)
                self._draws.fill_(number + 1)
                return number
            c = self._draws.clone()
            self._draws.add_(1)
        return c

    def _rand(self, shape: tuple[int, ...], device: torch.device, generator: Any) -> torch.Tensor:
        """float32 draws from U[0, 1) of ``shape`` on ``device`` without a host sync."""
        shape = tuple(shape)
        if isinstance(generator, torch.Generator):
            u = torch.rand(shape, generator=generator, device=generator.device)
            return u.to(device, non_blocking=True)
        if isinstance(generator, np.random.Generator):
            # A pipeline's per-element numpy RNG: the draw depends only on that RNG.
            return hashed_uniform(int(generator.integers(2**63)), 0, shape, device)
        if generator is not None:
            self._fail("generator", "must be a torch.Generator, numpy Generator or None", generator)
        if not torch.compiler.is_compiling():  # a pipeline stage is eager Python
            keyed = element_draw(self.seed)  # inside a map stage: by the element's identity
            if keyed is not None:
                return hashed_uniform(keyed[0], keyed[1], shape, device)
        if self.seed is None:
            return torch.rand(shape, device=device)
        return hashed_uniform(self.seed, self._next_draw(), shape, device)

    def _uniform(
        self, n: int, low: float, high: float, device: torch.device, generator: Any
    ) -> torch.Tensor:
        """``n`` float32 draws from U[low, high) on ``device`` without a host sync."""
        return low + (high - low) * self._rand((n,), device, generator)

    def _draw_factor(
        self, images: torch.Tensor, generator: Any, bounds: tuple[float, float] | None = None
    ) -> torch.Tensor:
        """One float32 draw per image of the batch ``images`` from U[lower, upper): the
        layer's ``_factor`` pair (``_set_factor``), or ``bounds``. Keras's draw of its
        ``factor`` (``uniform(shape=(batch_size,), minval=lower, maxval=upper)``)."""
        lo, hi = self._factor if bounds is None else bounds
        return self._uniform(images.shape[0], lo, hi, images.device, generator)

    def _randn(self, shape: tuple[int, ...], device: torch.device, generator: Any) -> torch.Tensor:
        """float32 standard normal draws of ``shape`` (Box-Muller from two uniform draws)."""
        u = self._rand((2, *shape), device, generator)
        return box_muller(u[0], u[1])


def ordered_pair(
    layer: Layer, name: str, value: Any, low: float, high: float, symmetric: bool
) -> tuple[float, float]:
    """A ``(lower, upper)`` pair of finite numbers within ``[low, high]`` with lower <=
    upper; with ``symmetric`` a single number ``f`` stands for ``(-|f|, |f|)``."""
    what = "a number or a pair of numbers" if symmetric else "a pair of numbers"
    items = _as_pair_items(value)
    if items is not None:
        if len(items) != 2 or not all(_is_number(v) for v in items):
            layer._fail(name, f"must be {what} (lower, upper)", value)
        lo, hi = float(items[0]), float(items[1])
        if lo > hi:
            layer._fail(name, "must be a pair (lower, upper) with lower <= upper", value)
    elif symmetric and _is_number(value):
        lo, hi = -abs(float(value)), abs(float(value))
    else:
        layer._fail(name, f"must be {what} (lower, upper)", value)
    if lo < low or hi > high:
        layer._fail(name, f"must lie in [{low}, {high}]", value)
    return lo, hi


#: How ``factor_pair`` reads a single number ``f`` (a pair is always taken as it is).
FACTOR_NUMBER_RULES = ("symmetric", "from_low", "both", "from_zero")


def factor_pair(
    layer: Layer,
    name: str,
    factor: Any,
    bounds: tuple[float, float] = (0.0, 1.0),
    number: str = "from_low",
) -> tuple[float, float]:
    """Keras's factor rule (``BaseImagePreprocessingLayer._set_factor``): ``factor`` as a
    ``(lower, upper)`` pair with every value in ``bounds``.

    A pair ``(lower, upper)`` is taken as it is. A pair with lower > upper is refused
    (Keras 3 sorts it silently; tf.keras 2 refused it): it is a mistake more often than
    not. A single number ``f`` reads, by ``number``:

    - ``"symmetric"``: ``(-|f|, |f|)``, Keras's reading with its default bounds (-1, 1)
      (``RandomBrightness``, ``RandomRotation``, ``RandomTranslation``, ``RandomZoom``);
    - ``"from_low"``: ``(low, f)``, Keras's reading with bounds (0, high): a probability
      or a magnitude (``f`` itself within the bounds);
    - ``"both"``: ``(f, f)``, two magnitudes at once (``RandomContrast``'s ``1 - lower``
      and ``1 + upper``);
    - ``"from_zero"``: ``(0, f)`` with ``f`` in ``[0, high]``, while a pair may reach down
      to ``low``: what Keras's docstrings say a number means where its code reads
      ``(-f, f)`` and writes that pair into the config (``RandomSaturation``,
      ``RandomColorDegeneration``: D-K-40), so such a config loads as Keras draws it.

    Raises:
        ValueError: not a number or a pair of numbers, a reversed pair, or a value outside
            ``bounds`` (naming the layer and ``name``).
    """
    low, high = bounds
    if number == "symmetric":
        return ordered_pair(layer, name, factor, low, high, symmetric=True)
    if _as_pair_items(factor) is not None:
        return ordered_pair(layer, name, factor, low, high, symmetric=False)
    if number == "from_zero":
        low = 0.0
    if number == "both":
        if not (_is_number(factor) and low <= factor <= high):
            layer._fail(
                name, f"must be a number in [{low:g}, {high:g}] or a pair of numbers", factor
            )
        return float(factor), float(factor)
    if not _is_number(factor):  # a number is allowed here: the message says so
        layer._fail(name, "must be a number or a pair of numbers (lower, upper)", factor)
    if not low <= factor <= high:
        layer._fail(name, f"must lie in [{low:g}, {high}]", factor)
    return float(low), float(factor)


def value_range_pair(layer: Layer, value_range: Any) -> tuple[float, float]:
    """Keras's ``value_range`` (``_set_value_range``): ``(low, high)``, finite numbers (numpy
    ones too, and a 1-d array of two) with low < high.

    Raises:
        ValueError: not a pair of finite numbers, or low >= high, naming the layer.
    """
    lo, hi = ordered_pair(layer, "value_range", value_range, -math.inf, math.inf, False)
    if not lo < hi:
        layer._fail("value_range", "must be a pair (low, high) with low < high", value_range)
    return lo, hi


def check_bool(layer: Layer, name: str, value: Any) -> bool:
    """``value`` must be a bool (``bool("False")`` is True: no silent conversion)."""
    if not isinstance(value, (bool, np.bool_)):
        layer._fail(name, "must be True or False", value)
    return bool(value)


# ---------------------------------------------------------------- size bounds
# Every size-like argument has an upper bound, checked at construction (so from_config
# and layer_from_config too, which build through the constructor) before anything is
# allocated: a config is data, and 10**9 in it must be a ValueError naming the argument,
# not gigabytes allocated over a minute before torch fails. Each bound is generous for
# real use (the reason is given with it) and stated in the layer's docstring.

#: Pixels per image side (Resizing, the crops): a 65,536 x 65,536 float32 image is 16 GiB
#: per channel.
MAX_SIDE = 1 << 16
#: Width of a dense encoding (one_hot / multi_hot / count / tf_idf outputs; CategoryEncoding
#: num_tokens, Hashing num_bins, lookups' padded max_tokens and OOV indices, Discretization
#: num_bins): 16,777,216 columns, a 64 MiB float32 row per sample; Keras's largest common
#: vocabularies and hashing spaces (~1M) fit 16 times.
MAX_ENCODING_DEPTH = 1 << 24
#: Samples per FFT frame (MelSpectrogram fft_length / sequence_length / sequence_stride):
#: 65,536 samples is 1.4 s at 48 kHz, 32x the usual 2,048.
MAX_FFT_LENGTH = 1 << 16
#: STFTSpectrogram frame_length / fft_length: its kernels (Keras's convolution form) hold
#: 2 x (fft_length / 2 + 1) x frame_length float32 values, 268 MiB at 8,192.
MAX_STFT_LENGTH = 1 << 13
#: Mel bands (MelSpectrogram num_mel_bins): the filterbank is (fft_length / 2 + 1) x bands
#: float32, 134 MiB at the largest FFT; speech and music use 40-256.
MAX_MEL_BINS = 1 << 10
#: Augmentation ops applied one after another to each image (RandAugment num_ops, AugMix
#: num_chains and chain_depth): the papers and Keras use 1-3; each op is a pass over the
#: batch (AugMix keeps a copy of it per chain).
MAX_OPS = 32
#: Blur kernel side (RandomGaussianBlur kernel_size): the image is padded by half of it;
#: 511 px is SimCLR's 10%-of-the-side kernel for a 5,000-px image.
MAX_KERNEL_SIZE = 511
#: CLAHE tiles per axis: 256 histogram bins per tile, per channel and image (1M bins at
#: 64 x 64); OpenCV's default is 8 x 8, and 64 tiles of a 224-px side are 3.5 px wide.
MAX_TILES = 64
#: Histogram bins (Equalization bins): 16-bit images have 65,536 levels.
MAX_BINS = 1 << 16
#: Boxes per image (MaxNumBoundingBoxes max_number): COCO's most crowded image has under
#: 100; the output is (batch, max_number, 4).
MAX_BOXES = 1 << 16
#: Tokens per sequence (TextVectorization output_sequence_length): the output is (batch,
#: length) int64; 1,048,576 tokens is a long book.
MAX_SEQUENCE_LENGTH = 1 << 20
#: The longest n-gram (TextVectorization ngrams): Keras's examples use 2 or 3.
MAX_NGRAM = 16
#: A count that allocates nothing (Hashing's int-mode bins, IntegerLookup max_tokens): the
#: int64 range the outputs live in.
MAX_INT64 = 2**63 - 1


@overload
def check_int(
    layer: Any,
    name: str,
    value: Any,
    low: int,
    optional: Literal[False] = False,
    high: int | None = None,
) -> int: ...
@overload
def check_int(
    layer: Any, name: str, value: Any, low: int, optional: bool, high: int | None = None
) -> int | None: ...


def check_int(
    layer: Any, name: str, value: Any, low: int, optional: bool = False, high: int | None = None
) -> int | None:
    """``value`` as an int in ``[low, high]`` (``high``: one of the bounds above for a
    size-like argument); None passes when ``optional``.

    Raises:
        ValueError: not an int (a bool neither), or outside the bounds; names the layer and
            the argument, and the bounds.
    """
    if value is None and optional:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, np.integer))
        or value < low
        or (high is not None and value > high)
    ):
        if high is None:
            what = f"must be an int >= {low}"
        elif high == MAX_INT64:  # the int64 range of the outputs
            what = f"must be an int in [{low}, 2**63 - 1]"
        else:
            what = f"must be an int >= {low} and <= {high}"
        layer._fail(name, what + (" or None" if optional else ""), value)
    return int(value)


def _is_number(x: Any) -> bool:
    """A finite real number: a Python int or float or a numpy scalar (``np.float32(0.5)``,
    ``np.int64(4)``: ``numbers.Real``, as Keras takes them), never a bool."""
    return (
        isinstance(x, numbers.Real)
        and not isinstance(x, (bool, np.bool_))
        and math.isfinite(float(x))
    )


def _as_pair_items(value: Any) -> list[Any] | None:
    """The items of a list, tuple or 1-d numpy array (a pair argument as Keras takes it:
    ``np.array([0, 255])`` too); None for anything else."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return list(value.tolist())  # numpy scalars -> Python numbers
    return None


def serialize_layer(layer: Layer) -> dict[str, Any]:
    """``{"class_name": ..., "config": ...}``: the JSON form ``layer_from_config`` reads."""
    return {"class_name": type(layer).__name__, "config": layer.get_config()}


# The keys of Keras 3's ``keras.saving.serialize_keras_object(layer)`` (a Pipeline's
# ``layers`` hold it): a built-in layer's module is ``keras.layers`` and its registered
# name None; ``build_config`` (input shapes) builds nothing here.
_KERAS_ENVELOPE = {"class_name", "config", "module", "registered_name", "build_config"}


def _keras_envelope_ok(config: dict[str, Any]) -> bool:
    module = config.get("module", "keras")
    return (
        isinstance(module, str)
        and module.split(".")[0] == "keras"
        and config.get("registered_name") is None
        and isinstance(config.get("build_config", {}), dict)
    )


def layer_from_config(config: dict[str, Any]) -> Layer:
    """Rebuild any layer of this package from ``serialize_layer``'s output.

    Only classes registered by this package can be built; nothing is unpickled or run.
    Keras 3's ``keras.saving.serialize_keras_object(layer)`` of a built-in layer loads too
    (its ``module``, ``registered_name`` and ``build_config`` are checked and dropped), and
    the configs of both may hold Keras's serialized ``DTypePolicy``.

    Raises:
        ValueError: the dict lacks ``class_name``/``config`` or has other keys (or a Keras
            key with another value: a module outside Keras, a registered custom class), names an
            unknown class, or its ``config`` is not a dict the class accepts (an unknown or
            missing key, a bad value: the message names it). Nothing fails later in torch.
    """
    if (
        not isinstance(config, dict)
        or not {"class_name", "config"} <= set(config) <= _KERAS_ENVELOPE
        or not _keras_envelope_ok(config)
    ):
        keys = sorted(map(str, config)) if isinstance(config, dict) else type(config).__name__
        raise ValueError(
            "layer_from_config: expected a dict with exactly the keys 'class_name' and "
            "'config' (what serialize_layer(layer) returns, not get_config() alone; Keras's "
            "serialize_keras_object form may add 'module' (keras...), 'registered_name' "
            f"(None) and 'build_config'); got {keys}"
        )
    name, inner = config["class_name"], config["config"]
    if not isinstance(name, str):
        raise ValueError(f"layer_from_config: 'class_name' must be a str; got {name!r}")
    cls = _REGISTRY.get(name)
    if cls is None:
        raise ValueError(
            f"layer_from_config: unknown layer class {name!r}; known: {sorted(_REGISTRY)}"
        )
    if not isinstance(inner, dict):
        raise ValueError(
            f"layer_from_config: 'config' must be a dict of {name}'s arguments; got "
            f"{type(inner).__name__}"
        )
    return cls.from_config({k: _keras_numpy(name, k, v) for k, v in inner.items()})


def _keras_numpy(layer_name: str, key: str, value: Any) -> Any:
    """A numpy argument in ``serialize_keras_object``'s form, ``{"class_name":
    "__numpy__", "config": {"value": [...], "dtype": "float64"}}`` (Keras's
    ``value_range=np.array([0, 1.0])``), as the array it stands for; other values as
    they are. Only bool, int and float dtypes: nothing else is built from a config.

    Raises:
        ValueError: a ``__numpy__`` entry with other keys, a non-numeric dtype, or a value
            numpy cannot read as that dtype (naming the layer and the argument).
    """
    if not (isinstance(value, dict) and value.get("class_name") == "__numpy__"):
        return value
    inner: Any = value.get("config")
    try:
        if set(value) != {"class_name", "config"} or not (
            isinstance(inner, dict) and set(inner) == {"value", "dtype"}
        ):
            raise ValueError("expected {'class_name', 'config': {'value', 'dtype'}}")
        dtype = np.dtype(inner["dtype"])
        if dtype.kind not in "biuf":
            raise ValueError(f"dtype {inner['dtype']!r} is not bool, int or float")
        return np.asarray(inner["value"], dtype=dtype)
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"layer_from_config: {layer_name}'s {key!r} is a Keras '__numpy__' entry "
            f"that does not load ({e}); got {value!r}"
        ) from None
