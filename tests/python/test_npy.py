"""cqlstream.decode_npy: .npy blobs (written by numpy itself) to numpy arrays.

Round trips for every supported dtype, 0-d and empty shapes, format versions
1.0/2.0/3.0, big-endian files (returned in native byte order), Fortran-order
files (returned F-contiguous, as numpy.load does), and refusals of hostile or
unsupported files: each raises InvalidArgumentError (a ValueError) whose
message names the problem. Needs no server.
"""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest

import cqlstream

DTYPES = ["?", "i1", "<i2", "<i4", "<i8", "u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8", "<c8", "<c16"]


def npy(a: np.ndarray, version: tuple[int, int] | None = None) -> bytes:
    f = io.BytesIO()
    np.lib.format.write_array(f, a, version=version, allow_pickle=False)
    return f.getvalue()


def raw_npy(header: str, data: bytes = b"", major: int = 1) -> bytes:
    """A .npy file with a hand-written header dict, laid out as numpy does
    (latin-1 text for 1.0 and 2.0, UTF-8 for 3.0)."""
    len_size = 2 if major == 1 else 4
    text = header.encode("utf-8" if major == 3 else "latin1")
    while (8 + len_size + len(text) + 1) % 64:
        text += b" "
    text += b"\n"
    length = struct.pack("<H" if major == 1 else "<I", len(text))
    return b"\x93NUMPY" + bytes([major, 0]) + length + text + data


def sample(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    values = np.arange(n) * 37 - 11
    if np.dtype(dtype).kind == "c":
        return (values + 1j * values[::-1]).astype(dtype).reshape(shape)
    return values.astype(dtype).reshape(shape)


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype.newbyteorder("=")
    assert got.dtype.isnative
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert np.load(io.BytesIO(npy(want))).tobytes() == want.tobytes()  # the fixture itself is sound


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_round_trips(dtype):
    a = sample(dtype, (3, 4))
    got = cqlstream.decode_npy(npy(a))
    assert_same(got, a)
    assert got.flags.c_contiguous and got.flags.writeable


@pytest.mark.parametrize("dtype", DTYPES)
def test_big_endian_comes_back_native(dtype):
    big = sample(dtype, (5,)).astype(np.dtype(dtype).newbyteorder(">"))
    blob = npy(big)
    assert (b"'>" in blob) == (big.dtype.itemsize > 1)
    got = cqlstream.decode_npy(blob)
    assert_same(got, big)
    assert got.dtype.byteorder in ("=", "|")


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_format_versions(version):
    a = sample("<f4", (2, 3, 4))
    blob = npy(a, version)
    assert blob[6:8] == bytes(version)
    assert_same(cqlstream.decode_npy(blob), a)


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (3, 0, 2), (1,), (7,), (1, 1, 1, 1), (2, 3, 4, 5)])
def test_shapes_including_0d_and_empty(shape):
    a = sample("<i8", shape)
    got = cqlstream.decode_npy(npy(a))
    assert_same(got, a)
    assert got.ndim == len(shape)


def test_32_dims():
    a = np.arange(2, dtype="<u2").reshape((1,) * 31 + (2,))
    assert_same(cqlstream.decode_npy(npy(a)), a)


@pytest.mark.parametrize("dtype", ["<i2", "<f8", "<c16", "?"])
def test_fortran_order_comes_back_f_contiguous(dtype):
    a = np.asfortranarray(sample(dtype, (3, 4, 2)))
    blob = npy(a)
    assert b"'fortran_order': True" in blob
    got = cqlstream.decode_npy(blob)
    assert_same(got, a)
    assert got.flags.f_contiguous and not got.flags.c_contiguous
    assert np.array_equal(got, np.load(io.BytesIO(blob)))


def test_result_is_a_writable_copy():
    blob = npy(np.arange(4, dtype="u1"))
    got = cqlstream.decode_npy(blob)
    got[0] = 200
    assert got[0] == 200
    assert cqlstream.decode_npy(blob)[0] == 0
    del blob
    assert got.tolist() == [200, 1, 2, 3]


def refused(blob: bytes, words: str) -> None:
    with pytest.raises(ValueError, match=words) as e:
        cqlstream.decode_npy(blob)
    assert isinstance(e.value, cqlstream.InvalidArgumentError)


def test_refuses_wrong_data_size():
    blob = npy(np.zeros(4, dtype="<f4"))
    refused(blob[:-1], "expected 16 bytes for the shape, got 15")
    refused(blob + b"\0", "expected 16 bytes for the shape, got 17")


def test_refuses_unsupported_dtypes():
    refused(raw_npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", b"\0" * 8), "object arrays")
    structured = npy(np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")]))
    refused(structured, "structured dtypes")
    refused(npy(np.array(["ab"])), "descr '<U2' is not supported")
    refused(npy(np.array([b"ab"])), "descr '|S2' is not supported")
    refused(npy(np.array([1], dtype="datetime64[s]")), "not supported")
    refused(npy(np.zeros(1, dtype=np.longdouble)), "not supported")


def test_refuses_pickled_object_arrays_without_running_them():
    f = io.BytesIO()
    np.lib.format.write_array(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    refused(f.getvalue(), "object arrays")


@pytest.mark.parametrize(
    "header, words",
    [
        ("{'descr': '<u2', 'fortran_order': False}", "no 'shape'"),
        ("{'descr': '<u2', 'fortran_order': False, 'shape': (1,), 'x': 1}", "unknown key 'x'"),
        ("{'descr': '<u2', 'descr': '<u2', 'fortran_order': False, 'shape': (1,)}", "repeats key 'descr'"),
        ("{'descr': '<u2', 'fortran_order': 1, 'shape': (1,)}", "not True or False"),
        ("{'descr': '<u2', 'fortran_order': False, 'shape': (1)}", "not a tuple"),
        ("{'descr': '<u2', 'fortran_order': False, 'shape': (-1,)}", "negative"),
        ("{'descr': '<u2', 'fortran_order': False, 'shape': (1,)} or __import__('os')", "text after the dict"),
        ("__import__('os').system('true')", "not a dict literal"),
        ("{'descr': '<u2', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", "does not fit in 64 bits"),
        ("{'descr': '<u2', 'fortran_order': False, 'shape': (99999999999999999999,)}", "2\\^63 or more"),
        ("{'descr': '<u2', 'fortran_order': False, 'shape': (" + "1," * 33 + ")}", "more than 32 dimensions"),
    ],
)
def test_refuses_hostile_headers(header, words):
    refused(raw_npy(header, b"\0\0"), words)


def test_refuses_bad_framing():
    good = npy(np.zeros(3, dtype="u1"))
    refused(b"", "not a .npy file")
    refused(b"\x89PNG\r\n\x1a\n", "not a .npy file")
    refused(good[:7], "ends inside the version")
    refused(good[:9], "ends inside the header length")
    refused(good[:40], "only 30 bytes follow")
    refused(good[:6] + b"\x04\x00" + good[8:], "format version 4.0 is not supported")
    refused(b"\x93NUMPY\x02\x00" + struct.pack("<I", 1 << 31) + b"{}", "larger than the 10000 allowed")
    refused(raw_npy("{'descr': '<u2', 'fortran_order': False, 'shape': (1,), 'é': 1}", b"\0\0", major=3), "byte 0xc3")
    refused(raw_npy("{'descr': '<u2', 'fortran_order': False, 'shape': (1,)}\0", b"\0\0"), "byte 0x00")


def test_refuses_non_bytes():
    with pytest.raises(TypeError):
        cqlstream.decode_npy("not bytes")  # type: ignore[arg-type]
