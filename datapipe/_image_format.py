"""The package-wide image layout: ``"channels_first"`` (default) or ``"channels_last"``.

Keras's ``keras.config.image_data_format()`` / ``set_image_data_format()``, exported as
``preprocessing.image_data_format`` / ``preprocessing.set_image_data_format``. It is read
once, when a layer or an ``image_dataset_from_directory`` pipeline is created with
``data_format=None`` (the default): an explicit ``data_format`` wins, and layers created
earlier keep theirs (their config records it). Kept here, without torch, so that
``datapipe.io`` can follow it without importing the layers.
"""

from __future__ import annotations

DATA_FORMATS = ("channels_first", "channels_last")
_current = "channels_first"


def image_data_format() -> str:
    """The layout new layers and image loaders use when not told: ``"channels_first"``
    (``(..., C, H, W)``, PyTorch's) unless ``set_image_data_format`` changed it.

    Example:
        >>> import preprocessing as pp
        >>> pp.image_data_format()
        'channels_first'
    """
    return _current


def set_image_data_format(data_format: str) -> None:
    """Set the layout of layers and image loaders created from now on.

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
    """``data_format``, or the package default when it is None.

    Raises:
        ValueError: not one of ``DATA_FORMATS`` (names ``who`` and ``data_format``).
    """
    if data_format is None:
        return _current
    if data_format not in DATA_FORMATS:
        raise ValueError(f"{who}: data_format must be one of {DATA_FORMATS}; got {data_format!r}")
    return data_format
