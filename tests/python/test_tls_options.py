"""Every connection option in every front end, under one name (issue 12 §3).

The list is loader::kOptionArgNames (src/loader/option_kit.h; a C++
static_assert ties it to the OptionArgs fields). This test checks it against
the Python Loader's keywords, the OpenArgs binding, cqlstream.dali's accepted
keywords, the DALI operators' schema (cqlstreamLoaderBase) and the CLI's
connection flags, so that they cannot drift apart again.
"""

from __future__ import annotations

import inspect
import re
import subprocess

import pytest

import cqlstream
import cqlstream.dali as cd
from cqlstream import _core
from conftest import ROOT, cli_path

# Options every front end takes; the CLI's connection flags stop at the last
# connection option (its loader throttles are `bench` flags in milliseconds).
LAST_CONNECTION_OPTION = "connect_timeout"


def option_names() -> list[str]:
    text = (ROOT / "src/loader/option_kit.h").read_text()
    m = re.search(r"kOptionArgNames\[\] = \{(.*?)\};", text, re.S)
    assert m, "kOptionArgNames not found in src/loader/option_kit.h"
    names = re.findall(r'"([a-z_]+)"', m.group(1))
    assert len(names) >= 20 and len(set(names)) == len(names), names
    return names


def test_python_loader_takes_every_option():
    params = inspect.signature(cqlstream.Loader.__init__).parameters
    missing = [n for n in option_names() if n not in params]
    assert not missing, f"cqlstream.Loader lacks {missing}"


def test_open_args_binding_has_every_field():
    # A *_s field keeps its unit in the binding (connect_timeout -> connect_timeout_s).
    args = _core.OpenArgs()
    missing = [n for n in option_names() if not (hasattr(args, n) or hasattr(args, n + "_s"))]
    assert not missing, f"_core.OpenArgs lacks {missing}"


def test_dali_wrapper_accepts_every_option():
    assert set(cd._CONNECTION_ARGS) == set(option_names())


def test_dali_schema_has_every_option():
    assert cd.load_plugin(), cd.plugin_error()
    from nvidia.dali import backend

    schema = backend.GetSchema("cqlstreamLoaderBase")
    have = set(schema.GetArgumentNames())
    missing = [n for n in option_names() if n not in have]
    assert not missing, f"the DALI schema cqlstreamLoaderBase lacks {missing}"


def test_cli_has_every_connection_flag():
    names = option_names()
    connection = names[:names.index(LAST_CONNECTION_OPTION) + 1]
    out = subprocess.run([str(cli_path()), "ping", "--help"], capture_output=True, text=True, timeout=60).stdout
    missing = ["--" + n.replace("_", "-") for n in connection if "--" + n.replace("_", "-") not in out]
    assert not missing, f"cqlstream ping lacks {missing}"


def test_python_dataset_takes_every_connection_option():
    names = option_names()
    connection = names[:names.index(LAST_CONNECTION_OPTION) + 1]
    params = inspect.signature(cqlstream.Dataset.__init__).parameters
    missing = [n for n in connection if n not in params]
    assert not missing, f"cqlstream.Dataset lacks {missing}"


def test_python_writer_takes_every_connection_option():
    names = option_names()
    connection = names[:names.index(LAST_CONNECTION_OPTION) + 1]
    params = inspect.signature(cqlstream.Writer.__init__).parameters
    missing = [n for n in connection if n not in params]
    assert not missing, f"cqlstream.Writer lacks {missing}"
    # A *_s field keeps its unit in the binding (connect_timeout -> connect_timeout_s).
    args = _core.WriterArgs()
    missing = [n for n in connection if not (hasattr(args, n) or hasattr(args, n + "_s"))]
    assert not missing, f"_core.WriterArgs lacks {missing}"


@pytest.mark.parametrize("flag, value, message", [
    ("--max-shard-connections", "0", "--max-shard-connections must be in [1, 65535], got 0"),
    ("--max-shard-connections", "65536", "--max-shard-connections must be in [1, 65535], got 65536"),
    # Given as 0, these were taken as not given (the default) before.
    ("--connections", "0", "--connections-per-host must be in [1, 64], got 0"),
    ("--port", "0", "--port must be in [1, 65535], got 0"),
    ("--connect-timeout", "0", "--connect-timeout must be a finite number of seconds in (0, 86400], got 0"),
    ("--timeout-ms", "0", "--timeout-ms must be in [1, 86400000], got 0"),
    # An empty value (an unset shell variable) meant the default too.
    ("--port", "", "--port: Failed parsing"),
    ("--timeout-ms", "", "--timeout-ms: Failed parsing"),
])
def test_cli_refuses_a_connection_number_out_of_range(flag, value, message):
    # Refused before anything connects (the host below does not exist).
    r = subprocess.run([str(cli_path()), "ping", "--hosts", "192.0.2.1", flag, value], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr, r.stderr


def test_python_front_ends_refuse_a_shard_cap_out_of_range():
    # Refused before anything connects (the host does not exist).
    for make in (cqlstream.Dataset, cqlstream.Loader,
                 lambda name, **kw: cqlstream.Writer(name, source_id="s", **kw)):
        with pytest.raises(ValueError, match=r"^max_shard_connections must be an int in \[1, 65535\]"):
            make("ds", hosts="192.0.2.1", max_shard_connections=65536)


def test_the_core_checks_the_shard_cap_each_binding_gives_it():
    # The value reaches the option kit through each binding's arguments
    # (bypassing the Python-side check): the kit names it.
    for handle, args in ((_core.Loader, _core.OpenArgs), (_core.DatasetHandle, _core.DatasetArgs),
                         (_core.WriterHandle, _core.WriterArgs)):
        a = args()
        a.dataset = "ds"
        a.hosts = ["192.0.2.1"]
        a.max_shard_connections = 70000
        with pytest.raises(cqlstream.InvalidArgumentError, match=r"^max_shard_connections must be in \[1, 65535\], "
                                                                   r"got 70000$"):
            handle(a)
