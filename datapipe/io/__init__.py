"""Reading files: file lists, text lines, images, Parquet / Arrow IPC / CSV, and saving.

Public names (also exported from ``datapipe``):

- ``list_files(pattern, shuffle=None, seed=None)`` (tf.data), ``TextLineDataset`` (tf.data),
  ``read_file`` (tf.io).
- Remote paths: every path argument also takes a URL (``s3://``, ``gs://``, ``https://``,
  ``memory://``, ...) read and written through fsspec (``pip install "datapipe-torch[remote]"``),
  with retries on transient errors (``set_remote_retries``); see ``datapipe.io._remote``.
  ``redact_url`` is what every message and log record that names a URL goes through
  (user info and secret query values become ``***``).
- Sharded record formats: ``TFRecordDataset`` (tf.data; CRCs checked), ``WebDataset``
  (WebDataset tar shards: one dict per sample) with ``TarShardWriter`` /
  ``write_webdataset`` and ``decode_sample``.
- Hostile files: readers open only regular files (a FIFO or a device is refused or, in
  a directory listing, skipped), and files read whole are at most ``max_file_bytes()``
  (1 GiB; ``set_max_file_bytes(n)`` changes it), see ``datapipe.io._safe_files``.
- ``decode_image`` / ``decode_jpeg`` / ``decode_png`` (tf.io names; Pillow decodes, or
  simplejpeg for JPEGs when installed), ``load_image(path)``, ``resize_image``
  (``tf.image.resize``'s bilinear kernel; OpenCV or torch computes it),
  ``image_dataset_from_directory`` (Keras).
- ``ParquetDataset`` / ``from_parquet``, ``ArrowIPCDataset`` / ``from_arrow_ipc`` /
  ``from_feather``, ``CsvDataset`` / ``from_csv`` (pyarrow reads them).
- ``save_dataset`` / ``load_dataset`` (``Dataset.save`` / ``Dataset.load``), and the
  on-disk ``cache(filename)``.
- ``FileSource``: the interface FILE auto-sharding uses (see ``file_source``).
- Errors: ``FileReadError`` and its subclasses ``ImageDecodeError``,
  ``SchemaMismatchError``, ``NullValueError``; each names the file (``.path``).
"""

from datapipe._redact import redact_url
from datapipe.errors import (
    FileReadError,
    ImageDecodeError,
    NullValueError,
    SchemaMismatchError,
)
from datapipe.io._remote import RetryPolicy, remote_retries, set_remote_retries
from datapipe.io._safe_files import max_file_bytes, set_max_file_bytes
from datapipe.io.arrow_ipc import ArrowIPCDataset, from_arrow_ipc, from_feather
from datapipe.io.csv import CsvDataset, from_csv
from datapipe.io.example import (
    FixedLenFeature,
    FixedLenSequenceFeature,
    SparseTensorValue,
    VarLenFeature,
    parse_example,
    parse_single_example,
)
from datapipe.io.file_source import FileSource
from datapipe.io.files import FileListDataset, list_files
from datapipe.io.image_folder import image_dataset_from_directory
from datapipe.io.image_resize import resize_image
from datapipe.io.images import decode_image, decode_jpeg, decode_png, load_image
from datapipe.io.parquet import ParquetDataset, from_parquet
from datapipe.io.read_file import read_file
from datapipe.io.save import load_dataset, save_dataset
from datapipe.io.tar_writer import TarShardWriter, write_webdataset
from datapipe.io.text import TextLineDataset
from datapipe.io.tfrecord import TFRecordDataset
from datapipe.io.webdataset import WebDataset, decode_sample

__all__ = [
    "ArrowIPCDataset",
    "CsvDataset",
    "FileListDataset",
    "FileReadError",
    "FileSource",
    "FixedLenFeature",
    "FixedLenSequenceFeature",
    "SparseTensorValue",
    "VarLenFeature",
    "parse_example",
    "parse_single_example",
    "ImageDecodeError",
    "NullValueError",
    "ParquetDataset",
    "RetryPolicy",
    "SchemaMismatchError",
    "TFRecordDataset",
    "TarShardWriter",
    "TextLineDataset",
    "WebDataset",
    "decode_image",
    "decode_sample",
    "decode_jpeg",
    "decode_png",
    "from_arrow_ipc",
    "from_csv",
    "from_feather",
    "from_parquet",
    "image_dataset_from_directory",
    "list_files",
    "load_dataset",
    "load_image",
    "max_file_bytes",
    "read_file",
    "redact_url",
    "resize_image",
    "remote_retries",
    "save_dataset",
    "set_max_file_bytes",
    "set_remote_retries",
    "write_webdataset",
]
