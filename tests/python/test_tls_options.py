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
