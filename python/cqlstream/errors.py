"""cqlstream's exceptions.

Inside the C++ core errors are ``Status`` values; they become exceptions
only at the Python edge, here. Every exception is a :class:`cqlstream.Error`
whose ``code`` names the Status code (``"NotFound"``, ``"Timeout"``, ...),
and most are also the standard exception one would catch for that kind of
failure:

=====================  ==============================  ==========================
Status code            class                           also a
=====================  ==============================  ==========================
InvalidArgument        InvalidArgumentError            ValueError
NotFound               NotFoundError                   LookupError
AlreadyExists          AlreadyExistsError              ValueError
Corruption             CorruptionError                 --
IOError                FileSystemError                 OSError
Timeout                TimeoutError                    builtins.TimeoutError
ConnectFailed,         ConnectionError                 builtins.ConnectionError
ConnectionLost
TlsError               TlsError                        builtins.ConnectionError
AuthError              AuthError                       PermissionError
ProtocolError,         ProtocolError                   --
FrameTooLarge
ServerError            ServerError                     --
Overloaded             OverloadedError                 --
Cancelled              CancelledError                  --
Unsupported            UnsupportedError                NotImplementedError
Internal               InternalError                   RuntimeError
=====================  ==============================  ==========================

Messages are the Status messages: a sample that cannot be read names its
key and path, a sample that cannot be decoded names its key.
"""

from __future__ import annotations

import builtins

__all__ = [
    "Error", "InvalidArgumentError", "NotFoundError", "AlreadyExistsError", "CorruptionError",
    "FileSystemError", "TimeoutError", "ConnectionError", "TlsError", "AuthError", "ProtocolError",
    "ServerError", "OverloadedError", "CancelledError", "UnsupportedError", "InternalError",
]


class Error(Exception):
    """Base class of every error raised by cqlstream's compiled core."""

    #: The Status code name of this error (e.g. "NotFound").
    code: str = "Unknown"


class InvalidArgumentError(Error, ValueError):
    """Bad input: options, identifiers, files, checkpoints."""

    code = "InvalidArgument"


class NotFoundError(Error, LookupError):
    """A named thing (dataset, split, sample, file) does not exist."""

    code = "NotFound"


class AlreadyExistsError(Error, ValueError):
    code = "AlreadyExists"


class CorruptionError(Error):
    """Bytes that do not match their checksum or size, or an image that cannot be decoded."""

    code = "Corruption"


class FileSystemError(Error, OSError):
    """A local file-system error (e.g. an unreadable password or selection file)."""

    code = "IOError"


class TimeoutError(Error, builtins.TimeoutError):  # noqa: A001 - cqlstream.TimeoutError
    code = "Timeout"


class ConnectionError(Error, builtins.ConnectionError):  # noqa: A001
    """No host could be reached (ConnectFailed) or a connection broke (ConnectionLost)."""

    code = "ConnectFailed"


class TlsError(ConnectionError):
    code = "TlsError"


class AuthError(Error, PermissionError):
    code = "AuthError"


class ProtocolError(Error):
    code = "ProtocolError"


class ServerError(Error):
    code = "ServerError"


class OverloadedError(Error):
    code = "Overloaded"


class CancelledError(Error):
    """The operation was cancelled, e.g. the loader was closed while waiting."""

    code = "Cancelled"


class UnsupportedError(Error, NotImplementedError):
    """A feature the data or the server needs is missing (e.g. WebP decoding)."""

    code = "Unsupported"


class InternalError(Error, RuntimeError):
    """A bug in cqlstream."""

    code = "Internal"


_BY_CODE: dict[str, type[Error]] = {
    "InvalidArgument": InvalidArgumentError,
    "NotFound": NotFoundError,
    "AlreadyExists": AlreadyExistsError,
    "Corruption": CorruptionError,
    "IOError": FileSystemError,
    "Timeout": TimeoutError,
    "ConnectionLost": ConnectionError,
    "ConnectFailed": ConnectionError,
    "TlsError": TlsError,
    "AuthError": AuthError,
    "ProtocolError": ProtocolError,
    "FrameTooLarge": ProtocolError,
    "ServerError": ServerError,
    "Overloaded": OverloadedError,
    "Cancelled": CancelledError,
    "Unsupported": UnsupportedError,
    "Internal": InternalError,
}


def error_class(code: str) -> type[Error]:
    """The exception class for a Status code name."""
    return _BY_CODE.get(code, Error)


def from_status(code: str, message: str) -> Error:
    """The exception for a Status (used by the compiled core)."""
    exc = error_class(code)(message)
    exc.code = code
    return exc
