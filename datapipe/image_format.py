"""The image layout both packages follow: ``"channels_first"`` (default) or ``"channels_last"``.

Keras's ``keras.config.image_data_format()`` / ``set_image_data_format()``: one package-wide
default, read once, when a preprocessing layer or an ``image_dataset_from_directory``
pipeline is created with ``data_format=None`` (the default). An explicit ``data_format``
wins, and layers created earlier keep theirs (their config records it). It lives here,
without torch, so that ``datapipe.io`` follows it without importing the layers;
``preprocessing`` re-exports ``image_data_format`` and ``set_image_data_format``.

``"channels_first"`` means ``(..., C, H, W)`` (PyTorch's), ``"channels_last"`` means
``(..., H, W, C)`` (Keras's default; TensorFlow's ``NHWC``).

Example:
    >>> from datapipe import image_format
    >>> image_format.image_data_format()
    'channels_first'
    >>> image_format.resolve_data_format(None, "MyLoader")  # None: the package default
    'channels_first'
    >>> image_format.resolve_data_format("Channels_Last", "MyLoader")  # any case, as Keras
    'channels_last'
    >>> image_format.resolve_data_format("NHWC", "MyLoader")
    Traceback (most recent call last):
        ...
    ValueError: MyLoader: data_format must be one of ('channels_first', 'channels_last'); got 'NHWC'
"""

from __future__ import annotations

__all__ = [
    "DATA_FORMATS",
    "image_data_format",
    "looks_like_other_layout",
    "resolve_data_format",
    "set_image_data_format",
]

#: The two layouts, Keras's names.
DATA_FORMATS = ("channels_first", "channels_last")
_current = "channels_first"


def image_data_format() -> str:
    """The layout new layers and image loaders use when not told: ``"channels_first"``
    (``(..., C, H, W)``, PyTorch's) unless ``set_image_data_format`` changed it.

    Example:
        >>> from datapipe.image_format import image_data_format
        >>> image_data_format()
        'channels_first'
    """
    return _current


def set_image_data_format(data_format: str) -> None:
    """Set the layout of layers and image loaders created from now on (Keras's
    ``keras.config.set_image_data_format``); a process-wide setting, not per thread.

    Args:
        data_format: ``"channels_first"`` or ``"channels_last"``, in any case
            (``"CHANNELS_LAST"``), as Keras's ``standardize_data_format`` lowercases it.

    Example:
        >>> import preprocessing as pp
        >>> pp.set_image_data_format("channels_last")
        >>> pp.RandomFlip().data_format, pp.RandomFlip(data_format="channels_first").data_format
        ('channels_last', 'channels_first')
        >>> pp.set_image_data_format("channels_first")  # back to the default

    Raises:
        ValueError: ``data_format`` is not ``"channels_first"`` / ``"channels_last"``
            (None included, as Keras's ``set_image_data_format`` refuses it: there is no
            default to fall back to here).
    """
    global _current
    if data_format is None:
        raise ValueError(
            f"set_image_data_format: data_format must be one of {DATA_FORMATS}; got None"
        )
    _current = resolve_data_format(data_format, "set_image_data_format")


def resolve_data_format(data_format: str | None, who: str) -> str:
    """``data_format``, or the package default when it is None: what a layer or loader
    taking a ``data_format`` argument stores at construction.

    Args:
        data_format: ``"channels_first"``, ``"channels_last"`` (in any case: Keras's
            ``keras.src.backend.config.standardize_data_format`` lowercases it) or None.
        who: the layer, loader or function asking, named in the error.

    Returns:
        The lowercase name (what a config records).

    Raises:
        ValueError: not one of ``DATA_FORMATS`` in any case (names ``who`` and
            ``data_format``; a non-str, which Keras would turn into its ``str()``, is
            refused too).
    """
    if data_format is None:
        return _current
    lower = data_format.lower() if isinstance(data_format, str) else data_format
    if lower not in DATA_FORMATS:
        raise ValueError(f"{who}: data_format must be one of {DATA_FORMATS}; got {data_format!r}")
    return str(lower)


def looks_like_other_layout(shape: tuple[int, ...], data_format: str) -> str | None:
    """The other layout's name when an image (rank 3) or batch (rank 4) of ``shape`` looks
    like it rather than ``data_format``, else None.

    The rule (one for the layers and the image functions): the channel axis that
    ``data_format`` names is wider than 4 while the axis at the other end is 1, 3 or 4 wide
    (a grey, RGB or RGBA image in the other layout). A layout that cannot be told apart
    this way (a 3x3 image of 3 channels) is read as ``data_format`` says.

    Example:
        >>> looks_like_other_layout((3, 50, 40), "channels_last")  # CHW read as HWC
        'channels_first'
        >>> looks_like_other_layout((4, 50, 40, 3), "channels_last") is None
        True
    """
    if len(shape) not in (3, 4):
        return None
    first = data_format == "channels_first"
    c_axis, other_axis = (-3, -1) if first else (-1, -3)
    if shape[c_axis] > 4 and shape[other_axis] in (1, 3, 4):
        return "channels_last" if first else "channels_first"
    return None
