"""cqlstream: image datasets in Apache Cassandra / ScyllaDB, streamed into training.

The compiled core is the private module ``cqlstream._core`` (nanobind); this
package re-exports it with a Pythonic :class:`Loader` on top. The PyTorch
adapter is :mod:`cqlstream.torch`. User guide: docs/python.md.
"""

from __future__ import annotations

from . import _core
from ._core import Batch, decode_image, decode_images, decode_npy, describe_state, format_key, make_key
from ._loader import DecodeSpec, InsecureTlsWarning, Loader, parse_keys
from .dataset import Dataset
from .selection import Selection
from .writer import Writer
from .errors import (
    AlreadyExistsError,
    AuthError,
    CancelledError,
    ConnectionError,
    CorruptionError,
    Error,
    FileSystemError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OverloadedError,
    ProtocolError,
    ServerError,
    TimeoutError,
    TlsError,
    UnsupportedError,
)

__version__ = "0.1.0"

__all__ = [
    "Loader", "Batch", "DecodeSpec", "parse_keys", "InsecureTlsWarning", "decode_image", "decode_images", "decode_npy",
    "describe_state",
    "format_key", "make_key", "Dataset", "Selection", "Writer",
    "Error", "InvalidArgumentError", "NotFoundError", "AlreadyExistsError", "CorruptionError",
    "FileSystemError", "TimeoutError", "ConnectionError", "TlsError", "AuthError", "ProtocolError",
    "ServerError", "OverloadedError", "CancelledError", "UnsupportedError", "InternalError",
]
