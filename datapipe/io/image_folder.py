"""``image_dataset_from_directory``: a labelled image dataset from a folder per class
(``keras.utils.image_dataset_from_directory``'s semantics, built from datapipe's own ops)."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from datapipe._redact import redact_url
from datapipe._validate import check_bool, check_int, check_seed
from datapipe.dataset_ops import AUTOTUNE, Dataset
from datapipe.image_format import resolve_data_format
from datapipe.io import _remote as remote
from datapipe.io._path_list import PathList, PathListBuilder
from datapipe.io._remote import is_url
from datapipe.io.files import FileListDataset
from datapipe.io.image_resize import resize_image
from datapipe.io.images import load_image

logger = logging.getLogger("datapipe")
_OP = "image_dataset_from_directory"

ALLOWLIST_FORMATS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")
_CHANNELS = {"grayscale": 1, "rgb": 3, "rgba": 4}
# "bilinear" and "nearest" are computed as tf.image.resize does (datapipe.io.resize_image /
# _nearest); the other names are Pillow's filters.
_RESAMPLE = {
    "bilinear": Image.Resampling.BILINEAR,
    "nearest": Image.Resampling.NEAREST,
    "bicubic": Image.Resampling.BICUBIC,
    "area": Image.Resampling.BOX,
    "lanczos3": Image.Resampling.LANCZOS,
    "hamming": Image.Resampling.HAMMING,
}


def _class_dirs(directory: str, class_names: Sequence[str] | None) -> list[str]:
    if is_url(directory):  # s3://, https://, memory://: listed through fsspec
        subdirs = [d for d in remote.subdirectories(directory, _OP) if not d.startswith(".")]
    else:
        subdirs = sorted(
            d
            for d in os.listdir(directory)
            if os.path.isdir(os.path.join(directory, d)) and not d.startswith(".")
        )
    if class_names is None:
        return subdirs
    if not set(class_names) <= set(subdirs):
        raise ValueError(
            f"image_dataset_from_directory: class_names {list(class_names)} do not match the "
            f"subdirectories of {redact_url(directory)!r}: {subdirs} (or a subset of them)"
        )
    return list(class_names)


def _ancestors(path: str) -> frozenset:
    """(device, inode) of ``path`` and of every directory above it."""
    keys, path = set(), os.path.abspath(path)
    while True:
        st = os.stat(path)
        keys.add((st.st_dev, st.st_ino))
        parent = os.path.dirname(path)
        if parent == path:
            return frozenset(keys)
        path = parent


def _walk(root: str, follow_links: bool, top: str) -> list[tuple[str, list[str], list[str]]]:
    """``(dirpath, image names, skipped names)`` of every directory below ``root``, sorted
    by path, each list of names sorted. Image names end in an allowed extension and are
    regular files after following links; skipped ones are not (a FIFO would block
    ``open`` for ever, a device never ends; broken links). ``os.scandir``'s entry types
    tell regular files without a ``stat`` per file (only links are followed). With
    ``follow_links``, a directory link that leads back to a directory above it (up to and
    past ``top``, the dataset's directory) is a loop and is not entered: it would list the
    same images over and over (or other classes' images as this one's)."""
    out: list = []
    stack = [(root, _ancestors(top) if follow_links else frozenset())]
    while stack:
        dirpath, above = stack.pop()
        st = os.stat(dirpath)
        key = (st.st_dev, st.st_ino)
        if key in above:
            logger.warning("image_dataset_from_directory: %r is a link loop; skipped", dirpath)
            continue
        chain = above | {key} if follow_links else above
        try:
            entries = list(os.scandir(dirpath))
        except OSError:  # os.walk's default: an unreadable directory is passed over
            continue
        images, skipped = [], []
        for e in entries:
            name = e.name
            if name.lower().endswith(ALLOWLIST_FORMATS) and e.is_file():
                images.append(name)  # the common case first: one type check per image
            elif e.is_dir():
                if follow_links or not e.is_symlink():
                    stack.append((e.path, chain))
            elif name.lower().endswith(ALLOWLIST_FORMATS):
                skipped.append(name)
        out.append((dirpath, sorted(images), skipped))
    return sorted(out, key=lambda x: x[0])


def _walk_images(root: str, follow_links: bool, top: str, into: PathListBuilder) -> int:
    """Add the image files below ``root`` to ``into`` (see ``_walk``), by directory, then
    name; return how many. Below a URL: the objects fsspec lists as files, in the same
    order."""
    if is_url(root):
        found = remote.find(root, _OP)
        found.sort(key=lambda f: (f[0].rpartition("/")[0], f[0].rpartition("/")[2]))
        urls = [url for rel, url in found if rel.lower().endswith(ALLOWLIST_FORMATS)]
        into.add_paths(urls)
        return len(urls)
    count = 0
    skipped: list = []
    for dirpath, images, bad in _walk(root, follow_links, top):
        into.add(os.path.join(dirpath, ""), images, is_sorted=True)
        count += len(images)
        skipped += [os.path.join(dirpath, b) for b in bad]
    if skipped:
        logger.warning(
            "image_dataset_from_directory: skipped %d entries that are not regular files "
            "(FIFOs, devices, broken links), e.g. %r",
            len(skipped),
            sorted(skipped)[0],
        )
    return count


def index_directory(
    directory: str,
    labels: Any,
    class_names: Sequence[str] | None,
    follow_links: bool = False,
) -> tuple[PathList, np.ndarray | None, list[str] | None]:
    """Keras's file index: classes in sorted (or ``class_names``) order, files sorted by
    ``os.walk`` within each class. Returns ``(paths, labels int64 or None, class_names)``;
    the paths are a ``PathList`` (numpy buffers: ~35 bytes a file, not ~120)."""
    builder = PathListBuilder()
    if labels == "inferred":
        names = _class_dirs(directory, class_names)
        counts = [
            _walk_images(os.path.join(directory, name), follow_links, directory, builder)
            for name in names
        ]
        idx = np.repeat(np.arange(len(names), dtype=np.int64), counts)
        return builder.build(), idx, names
    if class_names is not None:
        raise ValueError(
            "image_dataset_from_directory: class_names can only be given with labels='inferred'"
        )
    top = os.path.dirname(os.path.abspath(directory))
    _walk_images(directory, follow_links, top, builder)
    paths = builder.build()
    if labels is None:
        return paths, None, None
    if isinstance(labels, str) or len(labels) != len(paths):
        got = labels if isinstance(labels, str) else f"{len(labels)} labels"
        raise ValueError(
            f"image_dataset_from_directory: labels must be 'inferred', None or one label per "
            f"file; got {got} for {len(paths)} files in {redact_url(directory)!r}"
        )
    lab = np.asarray(labels, dtype=np.int64)
    return paths, lab, [str(v) for v in sorted(set(lab.tolist()))]


def _split(paths: PathList, labels: Any, validation_split: float | None, subset: str | None):
    if not validation_split:
        return paths, labels
    num_val = int(validation_split * len(paths))
    cut = (
        slice(0, len(paths) - num_val)
        if subset == "training"
        else slice(len(paths) - num_val, None)
    )
    return paths[cut], None if labels is None else labels[cut]


def _nearest(size: int, out: int) -> np.ndarray:
    """tf.image.resize's nearest source indices (half-pixel centres, no rounding up)."""
    return np.minimum(np.floor((np.arange(out) + 0.5) * (size / out)), size - 1).astype(np.intp)


class ImageFolderLoader:
    """The map function: read, decode (JPEG draft-downscaled), crop/pad, resize, encode label.

    Images come out ``float32`` in [0, 255], ``(height, width, channels)`` (or channels
    first). ``bilinear`` and ``nearest`` resize as Keras's loader does
    (``tf.image.resize``: half-pixel centres, no antialiasing, unrounded floats); the
    other ``interpolation`` names use Pillow's filters of those names.
    """

    def __init__(
        self, image_size, channels, interpolation, crop, pad, data_format, label_mode, num_classes
    ):
        self.size = (int(image_size[0]), int(image_size[1]))
        self.channels, self.interpolation = channels, interpolation
        self.crop, self.pad, self.channels_first = crop, pad, data_format == "channels_first"
        self.label_mode, self.num_classes = label_mode, num_classes

    def _region(self, h: int, w: int) -> tuple[int, int]:
        """Height and width of the area that is resized to ``size`` (after crop or pad)."""
        th, tw = self.size
        if self.crop:
            return min(h, int(w * th / tw)), min(w, int(h * tw / th))
        if self.pad:
            return max(h, int(w * th / tw)), max(w, int(h * tw / th))
        return h, w

    def _draft(self, h: int, w: int) -> tuple[int, int]:
        """Smallest full-image size whose crop/pad region still covers ``size``."""
        rh, rw = self._region(h, w)
        th, tw = self.size
        return math.ceil(h * th / max(rh, 1)), math.ceil(w * tw / max(rw, 1))

    def image(self, path: str) -> np.ndarray:
        arr = load_image(path, channels=self.channels, draft_size=self._draft)
        h, w = arr.shape[:2]  # the draft may have downscaled
        rh, rw = self._region(h, w)
        th, tw = self.size
        if self.crop:
            top, left = (h - rh) // 2, (w - rw) // 2
            arr = arr[top : top + rh, left : left + rw]
        elif self.pad:
            canvas = np.zeros((rh, rw, arr.shape[2]), np.uint8)
            top, left = (rh - h) // 2, (rw - w) // 2
            canvas[top : top + h, left : left + w] = arr
            arr = canvas
        out = self._resize(arr) if arr.shape[:2] != self.size else arr.astype(np.float32)
        return np.ascontiguousarray(out.transpose(2, 0, 1)) if self.channels_first else out

    def _resize(self, arr: np.ndarray) -> np.ndarray:
        """``arr`` (uint8 HWC) resized to ``size`` as float32, unrounded as in Keras."""
        th, tw = self.size
        if self.interpolation == "bilinear":
            return resize_image(arr, self.size, dtype=np.float32)
        if self.interpolation == "nearest":
            h, w = arr.shape[:2]
            return arr[_nearest(h, th)][:, _nearest(w, tw)].astype(np.float32)
        img = Image.fromarray(arr[..., 0] if arr.shape[2] == 1 else arr)
        resized = img.resize((tw, th), _RESAMPLE[self.interpolation])
        return np.asarray(resized).reshape(th, tw, -1).astype(np.float32)

    def label(self, y: Any) -> np.ndarray:
        if self.label_mode == "int":
            # int64, torch's class-index dtype (``F.cross_entropy`` refuses int32 targets);
            # Keras gives int32 (docs/guides/differences.md, D-K-38).
            return np.int64(y)
        if self.label_mode == "binary":
            return np.asarray([y], dtype=np.float32)
        out = np.zeros(self.num_classes, np.float32)
        out[int(y)] = 1.0
        return out

    def __call__(self, path: str, y: Any = None) -> Any:
        img = self.image(path)
        return img if y is None or self.label_mode is None else (img, self.label(y))


def _check_types(image_size, validation_split, seed, **flags) -> None:
    """Types Python would otherwise convert silently (``bool("False")``, ``int("8")``)."""
    for name, flag in flags.items():
        check_bool(_OP, name, flag)
    check_seed(_OP, seed)
    if not isinstance(image_size, (list, tuple)) or len(image_size) != 2:
        raise ValueError(f"{_OP}: image_size must be a pair (height, width), got {image_size!r}")
    for name, v in zip(("height", "width"), image_size):
        check_int(_OP, f"image_size {name}", v, minimum=1)
    split = validation_split
    if split is not None and (isinstance(split, bool) or not isinstance(split, (int, float))):
        raise TypeError(f"{_OP}: validation_split must be a float or None, got {split!r}")


def _check_args(
    labels,
    label_mode,
    color_mode,
    interpolation,
    validation_split,
    subset,
    shuffle,
    seed,
    crop,
    pad,
    data_format,
):
    if label_mode not in ("int", "categorical", "binary", None):
        raise ValueError(
            f"image_dataset_from_directory: label_mode must be 'int', 'categorical', 'binary' "
            f"or None, got {label_mode!r}"
        )
    if color_mode not in _CHANNELS:
        raise ValueError(
            f"image_dataset_from_directory: color_mode must be 'grayscale', 'rgb' or 'rgba', "
            f"got {color_mode!r}"
        )
    if interpolation not in _RESAMPLE:
        raise ValueError(
            f"image_dataset_from_directory: interpolation must be one of {sorted(_RESAMPLE)}, "
            f"got {interpolation!r}"
        )
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(
            f"image_dataset_from_directory: data_format must be 'channels_last' or "
            f"'channels_first', got {data_format!r}"
        )
    if crop and pad:
        raise ValueError(
            "image_dataset_from_directory: only one of crop_to_aspect_ratio and "
            "pad_to_aspect_ratio can be True"
        )
    if validation_split and not 0 < validation_split < 1:
        raise ValueError(
            "image_dataset_from_directory: validation_split must be in (0, 1), "
            f"got {validation_split}"
        )
    if bool(validation_split) != bool(subset):
        raise ValueError(
            "image_dataset_from_directory: subset and validation_split must be given together"
        )
    if subset not in ("training", "validation", "both", None):
        raise ValueError(
            f"image_dataset_from_directory: subset must be 'training', 'validation' or 'both', "
            f"got {subset!r}"
        )
    if validation_split and shuffle and seed is None:
        raise ValueError(
            "image_dataset_from_directory: with validation_split and shuffle=True, give a seed "
            "so that the training and validation subsets do not overlap"
        )


def _build(paths, labels, loader, batch_size, shuffle, seed, num_parallel_calls, class_names):
    source = FileListDataset(paths, labels if loader.label_mode else None, shuffle, seed)
    ds: Dataset = source.map(loader, num_parallel_calls=num_parallel_calls, name="load_image")
    if batch_size is not None:
        ds = ds.batch(batch_size)
    ds = ds.prefetch(AUTOTUNE)
    ds.class_names = class_names  # Keras sets both attributes on the returned dataset
    ds.file_paths = paths  # a PathList: a read-only sequence of str (Keras: a list)
    return ds


def image_dataset_from_directory(
    directory: str | os.PathLike,
    labels: str | Sequence[int] | None = "inferred",
    label_mode: str | None = "int",
    class_names: Sequence[str] | None = None,
    color_mode: str = "rgb",
    batch_size: int | None = 32,
    image_size: tuple[int, int] = (256, 256),
    shuffle: bool = True,
    seed: int | None = None,
    validation_split: float | None = None,
    subset: str | None = None,
    interpolation: str = "bilinear",
    follow_links: bool = False,
    crop_to_aspect_ratio: bool = False,
    pad_to_aspect_ratio: bool = False,
    data_format: str | None = None,
    verbose: bool = True,
    num_parallel_calls: int | None = AUTOTUNE,
) -> Dataset | tuple[Dataset, Dataset]:
    """Images in ``directory/<class>/...`` with their labels, as Keras builds them.

    The pipeline is datapipe's own graph — ``list of files -> per-epoch shuffle ->
    map(read + decode + resize, num_parallel_calls) -> batch -> prefetch(AUTOTUNE)`` — so it
    runs in parallel, autotunes, shards by file (the source is a ``FileSource``) and
    checkpoints like any pipeline.

    Args:
        directory: with ``labels="inferred"``, one subdirectory per class (searched
            recursively); otherwise the images anywhere below it. Files ending in .bmp,
            .gif, .jpeg, .jpg or .png (any case) are used. A URL (``s3://bucket/train``,
            ``memory://``, ...) is listed and read through fsspec (``datapipe-torch[remote]``).
        labels: ``"inferred"`` (class = subdirectory), ``None``, or one int per file in
            the sorted ``os.walk`` order of the file paths.
        label_mode: ``"int"`` (``int64`` scalar: torch's class-index dtype, which
            ``F.cross_entropy`` needs; Keras gives ``int32``, see D-K-38 in
            docs/guides/differences.md), ``"categorical"`` (``float32`` one-hot of
            length ``num_classes``), ``"binary"`` (``float32`` of shape ``(1,)``; exactly 2
            classes), or ``None`` (elements are images only; as in Keras this means
            ``labels=None``: every image below ``directory`` is used, ``class_names`` is None).
        class_names: the subdirectories to use, in label order (default: all, sorted).
        color_mode: ``"grayscale"``, ``"rgb"`` or ``"rgba"`` (1, 3 or 4 channels).
        batch_size: images per batch (default 32); ``None`` yields single images.
        image_size: ``(height, width)`` every image is resized to (required, as Keras does,
            because a batch needs one size). JPEGs decode in Pillow's draft mode at the
            smallest 1/2, 1/4, 1/8 scale still covering this size.
        shuffle: shuffle the file order (once, with ``seed``, as Keras does before the
            split) and again every epoch (a permutation of the whole file list).
        seed: seed of both shuffles; required with ``validation_split`` and ``shuffle``.
        validation_split, subset: keep the last ``int(validation_split * n)`` files of the
            shuffled index for ``"validation"``, the rest for ``"training"``; ``"both"``
            returns ``(training, validation)``; the validation set is not reshuffled.
        interpolation: ``"bilinear"``, ``"nearest"`` (both as Keras's ``tf.image.resize``,
            without antialiasing), ``"bicubic"``, ``"area"``, ``"lanczos3"``,
            ``"hamming"`` (Pillow's filters of those names, antialiased).
        follow_links: follow symbolic links to directories; a link leading back to a
            directory above it (a loop) is skipped with a warning. Only regular files are
            listed: FIFOs, devices and broken links are skipped with a warning, and each
            file read is at most ``datapipe.io.max_file_bytes()`` (an error names it).
        crop_to_aspect_ratio / pad_to_aspect_ratio: center-crop (Keras's ``smart_resize``)
            or zero-pad to the target aspect ratio before resizing.
        data_format: ``"channels_first"`` (``(c, h, w)``, PyTorch's layout) or
            ``"channels_last"`` (``(h, w, c)``, Keras's); None (default): the package
            default, ``preprocessing.image_data_format()`` (``"channels_first"`` unless
            ``set_image_data_format`` changed it), so the images fit the layers.
        verbose: print "Found N files belonging to C classes." as Keras does.
        num_parallel_calls: decoding parallelism of the map (default ``AUTOTUNE``).

    Returns:
        A Dataset of ``(images, labels)`` batches (``images``: ``float32``
        ``(batch, c, h, w)``, or ``(batch, h, w, c)`` channels-last, in [0, 255]), or of
        images only when ``label_mode`` or ``labels`` is None; with attributes
        ``class_names`` and ``file_paths`` (a read-only sequence of ``str`` held in
        numpy buffers, ``datapipe.io._path_list.PathList``; ``list(ds.file_paths)``
        for a list, which Keras returns).

    Raises:
        ValueError: bad arguments (as Keras), no images found, ``binary`` without exactly
            two classes.
        PipelineError (at iteration): an unreadable image, naming its path (``.path``);
            skip them with ``.ignore_errors()``.

    Example:
        >>> import datapipe as dp, numpy as np, os, tempfile
        >>> from PIL import Image
        >>> d = tempfile.mkdtemp()
        >>> for c in ["cat", "dog"]:
        ...     os.makedirs(os.path.join(d, c))
        ...     Image.fromarray(np.zeros((5, 7, 3), np.uint8)).save(os.path.join(d, c, "0.png"))
        >>> ds = dp.image_dataset_from_directory(d, image_size=(4, 4), shuffle=False,
        ...     verbose=False, num_parallel_calls=None)
        >>> images, labels = next(iter(ds))
        >>> images.shape, images.dtype, labels.tolist()
        ((2, 3, 4, 4), dtype('float32'), [0, 1])
    """
    directory = os.fspath(directory)
    data_format = resolve_data_format(data_format, "image_dataset_from_directory")
    _check_types(
        image_size,
        validation_split,
        seed,
        shuffle=shuffle,
        follow_links=follow_links,
        crop_to_aspect_ratio=crop_to_aspect_ratio,
        pad_to_aspect_ratio=pad_to_aspect_ratio,
        verbose=verbose,
    )
    _check_args(
        labels,
        label_mode,
        color_mode,
        interpolation,
        validation_split,
        subset,
        shuffle,
        seed,
        crop_to_aspect_ratio,
        pad_to_aspect_ratio,
        data_format,
    )
    if labels is None or label_mode is None:  # Keras: no labels means no class folders
        labels, label_mode = None, None
    paths, labs, names = index_directory(directory, labels, class_names, follow_links)
    if verbose:
        what = f" belonging to {len(names)} classes" if names is not None else ""
        print(f"Found {len(paths)} files{what}.")
    if label_mode == "binary" and len(names or []) != 2:
        raise ValueError(
            f"image_dataset_from_directory: label_mode='binary' needs exactly 2 classes, "
            f"got {names}"
        )
    if shuffle:  # Keras's global shuffle of the index, so that the split is the same as Keras's
        s = int(np.random.randint(1_000_000)) if seed is None else seed
        order = np.random.RandomState(s).permutation(len(paths))
        paths = paths.take(order)
        labs = None if labs is None else labs[order]
    loader = ImageFolderLoader(
        image_size,
        _CHANNELS[color_mode],
        interpolation,
        crop_to_aspect_ratio,
        pad_to_aspect_ratio,
        data_format,
        label_mode,
        len(names or []),
    )
    subsets = ["training", "validation"] if subset == "both" else [subset]
    out = []
    for sub in subsets:
        p, lab = _split(paths, labs, validation_split, sub)
        if not p:
            raise ValueError(
                f"image_dataset_from_directory: no {sub or ''} images found in "
                f"{redact_url(directory)!r} "
                f"(allowed formats: {', '.join(ALLOWLIST_FORMATS)})".replace("no  ", "no ")
            )
        if verbose and validation_split:
            print(f"Using {len(p)} files for {sub}.")
        reshuffle = shuffle and sub != "validation"
        out.append(_build(p, lab, loader, batch_size, reshuffle, seed, num_parallel_calls, names))
    return tuple(out) if subset == "both" else out[0]
