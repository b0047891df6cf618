"""Loader arguments from Python: every bad number is a ValueError or TypeError
naming the parameter (never nanobind's "incompatible function arguments", a
silent truncation or an undefined float conversion), and an insecure TLS
setting warns as the CLI does. None of these tests needs a server: the
arguments are refused before a connection is opened (the TLS test connects to
a closed local port)."""

from __future__ import annotations

import math
import socket
import warnings

import numpy as np
import pytest

import cqlstream


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("name", ["request_timeout", "retry_budget", "connect_timeout"])
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 1e300, -1.0, 0, 0.0, 86400.5])
def test_timeouts_must_be_finite_positive_and_bounded(name, value):
    with pytest.raises(ValueError, match=name) as e:
        cqlstream.Loader("ds", **{name: value})
    assert "finite number of seconds" in str(e.value)


@pytest.mark.parametrize("name", ["request_timeout", "retry_budget", "connect_timeout"])
@pytest.mark.parametrize("value", ["5", True, [1.0]])
def test_timeouts_must_be_numbers(name, value):
    with pytest.raises(TypeError, match=name):
        cqlstream.Loader("ds", **{name: value})


@pytest.mark.parametrize(
    "name, value",
    [
        ("seed", -1),
        ("seed", 1 << 64),
        ("batch_size", 1 << 31),
        ("batch_size", 0),
        ("rank", -1),
        ("rank", 1 << 31),
        ("world_size", 0),
        ("epochs", 1 << 63),
        ("memory_bytes", -1),
        ("memory_bytes", 1 << 63),
        ("port", 0),
        ("port", 65536),
        ("connections_per_host", 1 << 40),
        ("max_shard_connections", 0),
        ("max_shard_connections", 65536),
        ("io_threads", -1),
        ("max_in_flight", 1 << 31),
        ("initial_window", 0),
        ("max_connections_per_host", -5),
        ("max_attempts", 1 << 32),
        ("coalesce", -1),
        ("coalesce", 101),
        ("prefetch", 0),
        ("decode_threads", -1),
    ],
)
def test_out_of_range_ints_name_the_parameter(name, value):
    with pytest.raises(ValueError, match=rf"^{name} must be an int in \[") as e:
        cqlstream.Loader("ds", **{name: value})
    assert "incompatible function arguments" not in str(e.value)


@pytest.mark.parametrize(
    "name, value",
    [("seed", 1.5), ("seed", "7"), ("batch_size", 16.0), ("rank", 0.0), ("epochs", True), ("port", "9042"),
     ("max_in_flight", 2.5), ("world_size", 1.0), ("coalesce", 8.0)],
)
def test_wrong_types_name_the_parameter(name, value):
    with pytest.raises(TypeError, match=rf"^{name} must be an int"):
        cqlstream.Loader("ds", **{name: value})


def test_numpy_ints_are_ints():
    # Accepted as arguments (the failure is the missing server, not the type).
    with pytest.raises(cqlstream.ConnectionError):
        cqlstream.Loader("ds", seed=np.uint64((1 << 64) - 1), batch_size=np.int32(8), hosts=["127.0.0.1"],
                         port=closed_port(), connect_timeout=1)


def test_decode_options_are_checked():
    with pytest.raises(ValueError, match="decode max_pixels"):
        cqlstream.Loader("ds", decode={"size": 8, "max_pixels": (1 << 28) + 1})
    with pytest.raises(TypeError, match="decode channels"):
        cqlstream.Loader("ds", decode={"size": 8, "channels": 1.5})


def test_insecure_tls_warns_like_the_cli(capfd):
    with pytest.warns(cqlstream.InsecureTlsWarning, match=r"DISABLED \(tls_insecure_skip_verify\)"):
        with pytest.raises(cqlstream.Error):
            cqlstream.Loader("ds", tls_insecure_skip_verify=True, hosts=["127.0.0.1"], port=closed_port(),
                             connect_timeout=1)
    err = capfd.readouterr().err
    assert ("cqlstream: WARNING: TLS certificate verification is DISABLED (tls_insecure_skip_verify); "
            "the server's identity is not checked") in err


def test_secure_tls_does_not_warn(capfd):
    with warnings.catch_warnings():
        warnings.simplefilter("error", cqlstream.InsecureTlsWarning)
        with pytest.raises(cqlstream.Error):
            cqlstream.Loader("ds", hosts=["127.0.0.1"], port=closed_port(), connect_timeout=1)
    assert "WARNING" not in capfd.readouterr().err
