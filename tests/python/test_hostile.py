"""The Python cqlstream.Loader against every mode of the hostile fake CQL
server (tests/hostile/hostile_server.h): each mode must end in a clean
Python exception naming the problem, or in the honest dataset exactly; never
a signal, a hang past the bound, or runaway memory. The native dataset is
read shuffled and in order, one epoch; the attached one (key lookups and
foreign reads through the binding) shuffled, two epochs with 32 requests in
flight (the second epoch's rows are read in groups), judged by each mode's
attached expectation; the native dataset "tiny" (one row per sample)
shuffled, one epoch with 32 requests in flight, so that its samples are
read in coalesced groups, judged by each mode's tiny expectation.

The server is the standalone binary tests/hostile/cqlstream-hostile-server of
the build ($CQLSTREAM_HOSTILE_SERVER, else the first of $CQLSTREAM_BUILD_DIR,
build, build-dali that has it, as conftest.cli_path finds the CLI). Each read
runs in a child Python process, so that a crash or a hang is observed, not
suffered. Needs no Cassandra node.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import built_binary, cli_path, ctrl_c_after

BOUND_S = 100.0  # the Loader here retries for at most 5 s per sample
# The datasets read in groups, and the mode that lies to their grouped reads.
GROUP_LIES = {"attached": "foreign-group-lies", "tiny": "native-group-lies"}
RSS_BOUND_MB = 400  # the interpreter and numpy alone take ~60 MB

# Reads EPOCHS epochs, each exactly once, and says what came of it: OK n
# coalesced c retries r group_failures g timeouts t ignored_peer_rows p
# (exit 0), ERROR ... (exit 1) or WRONG ... (exit 3, a silently wrong
# result). argv: port, ordered, dataset JSON path, epochs,
# window (0: adaptive; else fixed at that many requests in flight).
CHILD = r"""
import atexit, json, sys
def _peak():
    # VmHWM belongs to this process's own memory since its exec; wait4's
    # ru_maxrss would also count the parent's size at fork (a pytest that
    # has imported torch and DALI is ~700 MB before this child runs a line).
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                sys.stderr.write("\nVMHWM_KB " + line.split()[1] + "\n")
atexit.register(_peak)
import cqlstream
port, ordered, truth = int(sys.argv[1]), sys.argv[2] == "1", json.load(open(sys.argv[3]))
epochs, window = int(sys.argv[4]), int(sys.argv[5])
want = {s["key"]: bytes.fromhex(s["hex"]) for s in truth["samples"]}
caps = dict(max_in_flight=window, initial_window=window, adaptive=False) if window else {}
try:
    loader = cqlstream.Loader(truth["dataset"], split=truth["split"], keyspace=truth["keyspace"],
                              hosts="127.0.0.1", port=port, batch_size=8, epochs=epochs, ordered=ordered,
                              rank=0, world_size=1, connect_timeout=2.0, request_timeout=1.0,
                              max_attempts=3, retry_budget=5.0, **caps)
    for epoch in range(epochs):
        seen = set()
        for batch in loader:
            data = bytes(batch.data)
            for i in range(len(batch)):
                k = int(batch.keys[i])
                key = f"{k >> 32}:{k & 0xffffffff}"
                got = data[int(batch.offsets[i]):int(batch.offsets[i]) + int(batch.sizes[i])]
                if key not in want or key in seen or got != want[key]:
                    print(f"WRONG epoch {epoch} sample {key}: {len(got)} bytes, seen before: {key in seen}")
                    sys.exit(3)
                seen.add(key)
        if len(seen) != len(want):
            print(f"WRONG epoch {epoch}: {len(seen)} of {len(want)} samples")
            sys.exit(3)
    m = loader.metrics()
    loader.close()
except Exception as e:  # every cqlstream error; a clean error is a result here
    print(f"ERROR {type(e).__name__}: {e}")
    sys.exit(1)
print(f"OK {len(want)} coalesced {m['coalesced_requests']} retries {m['retries']} "
      f"group_failures {m['group_failures']} timeouts {m['timeouts']} ignored_peer_rows {m['ignored_peer_rows']}")
"""


def server_path() -> Path:
    return built_binary("tests/hostile/cqlstream-hostile-server", "CQLSTREAM_HOSTILE_SERVER",
                        "cqlstream-hostile-server")


def list_modes() -> list[tuple[str, str, str, str, str]]:
    """(name, expectation for the native dataset, for the attached one, for tiny, problem words)."""
    try:
        p = server_path()
    except pytest.fail.Exception:
        return [("server-not-built", "correct", "correct", "correct", "")]
    out = subprocess.run([str(p), "--list-modes"], capture_output=True, text=True, check=True, timeout=30).stdout
    modes = []
    for line in out.splitlines():
        name, expect, _connect, attached, tiny, problem = line.split(" ", 5)
        modes.append((name, expect, attached, tiny, "" if problem == "-" else problem))
    return modes


def cases() -> list:
    """Every mode against the native dataset (shuffled and ordered), the attached one and tiny (shuffled)."""
    out = []
    for name, expect, attached, tiny, problem in list_modes():
        for ordered in (False, True):
            out.append(pytest.param(name, "native", expect, problem, ordered,
                                    id=f"{name}-{'ordered' if ordered else 'ooo'}"))
        out.append(pytest.param(name, "attached", attached, problem, False, id=f"{name}-attached"))
        out.append(pytest.param(name, "tiny", tiny, problem, False, id=f"{name}-tiny"))
    return out


@pytest.fixture(scope="module")
def truths(tmp_path_factory) -> dict[str, Path]:
    """The honest datasets ("native", "attached", "tiny") as JSON files for the child."""
    out = {}
    for which in ("native", "attached", "tiny"):
        path = tmp_path_factory.mktemp("hostile") / f"{which}.json"
        text = subprocess.run([str(server_path()), "--print-dataset", which], capture_output=True, text=True,
                              check=True, timeout=30).stdout
        assert json.loads(text)["samples"], which
        path.write_text(text)
        out[which] = path
    return out


def start_server(mode: str) -> tuple[subprocess.Popen, int]:
    p = subprocess.Popen([str(server_path()), "--mode", mode, "--listen", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("listening "):
        p.kill()
        pytest.fail(f"hostile server did not start: {line!r} {p.stderr.read()}")
    return p, int(line.rsplit(":", 1)[1])


def run_child(port: int, ordered: bool, truth: Path, epochs: int = 1, window: int = 0) -> dict:
    """Runs CHILD under BOUND_S; returns exit code / signal / hang / output / the child's peak RSS."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(port), "1" if ordered else "0", str(truth),
                              str(epochs), str(window)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    start = time.monotonic()
    status, rss_kb, hung = None, 0, False
    while status is None:
        pid, st, ru = os.wait4(child.pid, os.WNOHANG)
        if pid == child.pid:
            status, rss_kb = st, ru.ru_maxrss
            break
        if time.monotonic() - start > BOUND_S:
            child.kill()
            _, status, ru = os.wait4(child.pid, 0)
            rss_kb, hung = ru.ru_maxrss, True
            break
        time.sleep(0.05)
    child.returncode = 0  # reaped above; keep Popen from waiting again
    out, err = child.stdout.read(), child.stderr.read()
    # The child's own peak when it ended by itself; else wait4's figure,
    # which can only overstate it (the test fails on the hang or signal anyway).
    for line in reversed(err.splitlines()):
        if line.startswith("VMHWM_KB "):
            rss_kb = int(line.split()[1])
            break
    return {
        "hung": hung,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) and not hung else 0,
        "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "out": out,
        "err": err,
        "rss_mb": rss_kb // 1024,
        "seconds": time.monotonic() - start,
    }


@pytest.mark.parametrize("mode,dataset,expect,problem,ordered", cases())
def test_loader_against_hostile_server(mode: str, dataset: str, expect: str, problem: str, ordered: bool,
                                       truths: dict[str, Path]) -> None:
    server, port = start_server(mode)
    try:
        # The attached dataset as the C++ probe reads it: two epochs, 32 in
        # flight, so that the second epoch's rows (their keys known) are read
        # in groups and the lies told to grouped reads are heard.
        attached = dataset == "attached"
        r = run_child(port, ordered, truths[dataset], epochs=2 if attached else 1,
                      window=32 if dataset in ("attached", "tiny") else 0)
    finally:
        server.terminate()
        server.wait(timeout=30)
    what = (f"mode {mode} ({dataset}, ordered={ordered}): exit {r['exit']}, signal {r['signal']}, hung {r['hung']}, "
            f"{r['seconds']:.1f} s, peak RSS {r['rss_mb']} MB\nstdout: {r['out'][-1500:]}\nstderr: {r['err'][-1500:]}")
    assert not r["hung"], "a hang past the bound: " + what
    assert r["signal"] == 0, "killed by a signal: " + what
    assert r["rss_mb"] <= RSS_BOUND_MB, "runaway memory: " + what
    assert r["exit"] != 3, "a silently wrong result: " + what
    assert r["exit"] in (0, 1), "neither a result nor a clean Python exception: " + what
    correct = r["exit"] == 0 and r["out"].startswith("OK ")
    if expect == "correct":
        assert correct, "expected the honest dataset: " + what
    elif expect == "error":
        assert r["exit"] == 1, "expected a clean error: " + what
        words = [w for w in problem.split("|") if w]
        text = (r["out"] + r["err"]).lower()
        assert not words or any(w.lower() in text for w in words), f"error does not name the problem ({problem}): " + what
    else:
        assert correct or r["exit"] == 1, "expected a clean error or the honest dataset: " + what
    # system.peers rows naming a listed host are left out and counted: the
    # node twice in peers-repeat-hosts, none in the honest world.
    if mode in ("honest", "peers-repeat-hosts"):
        fields = r["out"].split()
        want = 2 if mode == "peers-repeat-hosts" else 0
        assert int(fields[fields.index("ignored_peer_rows") + 1]) == want, what
    # Grouped reads (the attached dataset's foreign reads, tiny's coalesced
    # reads) were sent; where each told a lie, the Loader refused it and read
    # the samples again alone. Only a request that timed out (a busy machine)
    # fails an honest group's samples.
    lies = GROUP_LIES.get(dataset)
    if lies and mode in ("honest", lies):
        fields = r["out"].split()
        count = {name: int(fields[fields.index(name) + 1]) for name in ("coalesced", "retries", "group_failures",
                                                                         "timeouts")}
        assert count["coalesced"] > 0, "no grouped read: " + what
        if mode == lies:
            assert count["retries"] > 0, "no lie refused: " + what
            assert count["group_failures"] > 0, "no grouped read failed: " + what
        else:
            assert count["group_failures"] == 0 or count["timeouts"] > 0, "an honest grouped read failed: " + what


@pytest.mark.parametrize("call", ["next", "fetch"])
@pytest.mark.parametrize("decode", [None, (8, 8)], ids=["raw", "decoded"])
def test_ctrl_c_ends_a_loader_waiting_on_reads_that_never_end(truths, decode, call):
    # A stalled cluster (here a server that never answers a data read)
    # holds next() or fetch() until the reads time out; Ctrl-C ends the
    # wait at once with KeyboardInterrupt (it waited the request timeout
    # first), and close() then returns. Decoded: next()'s wait is on the
    # decoded queue.
    import cqlstream

    truth = json.loads(truths["native"].read_text())
    server, port = start_server("silent-data")
    try:
        loader = cqlstream.Loader(truth["dataset"], split=truth["split"], keyspace=truth["keyspace"],
                                  hosts="127.0.0.1", port=port, batch_size=8, connect_timeout=2.0,
                                  request_timeout=20.0, max_attempts=1, retry_budget=30.0, decode=decode)
        with ctrl_c_after(0.5) as t, pytest.raises(KeyboardInterrupt):
            if call == "next":
                next(iter(loader))
            else:
                loader.fetch([sample["key"] for sample in truth["samples"][:4]])
        assert t["waited"] < 5.0, f"{call}() held Ctrl-C for {t['waited']:.1f} s"
        start = time.monotonic()
        loader.close()
        assert time.monotonic() - start < 10.0
    finally:
        server.kill()
        server.wait()


@pytest.mark.parametrize("opening", ["Dataset", "Loader", "Writer"])
def test_ctrl_c_ends_an_opening_waiting_on_a_server_that_never_answers(opening):
    # A host that accepts and never answers (a stalled node, a port that is
    # not CQL's) held the opening's Ctrl-C for the connect time-out (10 s
    # here) on each of three attempts; it now ends the wait at once with
    # KeyboardInterrupt. The signal goes once the server has swallowed the
    # connection's first request: the opening is waiting in the core.
    import signal
    import threading

    import cqlstream

    server, port = start_server("silent")
    where = dict(hosts="127.0.0.1", port=port, keyspace="cqlstream_hostile", connect_timeout=10.0)
    sent: dict = {}

    def ctrl_c_once_waiting() -> None:
        if server.stdout.readline() == "lie told\n":
            time.sleep(0.2)
            sent["at"] = time.monotonic()
            os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    watcher = threading.Thread(target=ctrl_c_once_waiting, daemon=True)
    try:
        watcher.start()
        with pytest.raises(KeyboardInterrupt):
            if opening == "Dataset":
                cqlstream.Dataset("toy", **where)
            elif opening == "Loader":
                cqlstream.Loader("toy", batch_size=8, **where)
            else:
                cqlstream.Writer("toy", source_id="interrupted-opening", **where)
        assert "at" in sent, "the interrupt came before the opening waited on the server"
        waited = time.monotonic() - sent["at"]
        assert waited < 2.0, f"{opening}() held Ctrl-C for {waited:.1f} s"
    finally:
        signal.signal(signal.SIGINT, previous)
        server.kill()
        server.wait()
        watcher.join(timeout=5)


def interrupt_cli_once_told(args: list[str], server: subprocess.Popen) -> tuple[int, str, str, float]:
    """Runs the CLI with `args`, sends it SIGINT 0.2 s after the hostile
    server said "lie told" (the command is waiting on a request the server
    swallowed, its interrupt handler installed), and returns its exit code,
    stdout, stderr and the seconds from the signal to its end."""
    import select
    import signal

    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([server.stdout], [], [], 30)
        assert ready and server.stdout.readline() == "lie told\n", "no request reached the server"
        time.sleep(0.2)  # well into the wait
        assert child.poll() is None, child.communicate()
        child.send_signal(signal.SIGINT)
        start = time.monotonic()
        out, err = child.communicate(timeout=15)
        return child.returncode, out, err, time.monotonic() - start
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.parametrize("command", ["ingest", "attach", "verify", "export", "pack"])
def test_ctrl_c_ends_a_cli_command_waiting_to_connect(tmp_path, command):
    # Each command that writes or reads a dataset takes its interrupt flag
    # before it connects: a first Ctrl-C while a host that never answers held
    # the connect (the connect time-out, 10 s here, on each of three
    # attempts) was heard only after it (ingest, attach), or ended the
    # process at once by the signal's default action, without the command's
    # line (verify, export, pack). It now ends the command at once: exit 130
    # and "<command> interrupted while connecting" (verify, export, pack:
    # "while opening the dataset"), nothing written. (The server's first
    # swallowed request is the connection's OPTIONS.)
    if command == "ingest":
        src = tmp_path / "src"
        src.mkdir()
        (src / "a.bin").write_bytes(b"x" * 100)
        args = [str(cli_path()), "ingest", "--dataset", "toy", str(src), "--labels", "none"]
    elif command == "attach":
        args = [str(cli_path()), "attach", "--dataset", "toy2", "--table", "cqlstream_hostile.images", "--key-column",
                "id", "--data-column", "img"]
    else:
        args = [str(cli_path()), command, "toy"]
        if command == "export":
            args.append(str(tmp_path / "out"))
    server, port = start_server("silent")
    try:
        args += ["--hosts", "127.0.0.1", "--port", str(port), "--keyspace", "cqlstream_hostile", "--connect-timeout",
                 "10"]
        code, out, err, waited = interrupt_cli_once_told(args, server)
        assert code == 130, out + err
        said = "while connecting" if command in ("ingest", "attach") else "while opening the dataset"
        assert f"{command} interrupted {said}" in err, err
        assert waited < 3.0, f"{command} held Ctrl-C for {waited:.1f} s"
        assert not (tmp_path / "out").exists()
    finally:
        server.kill()
        server.wait()


@pytest.mark.parametrize("dataset", ["native", "attached"])
@pytest.mark.parametrize("command", ["verify", "export"])
def test_ctrl_c_ends_a_cli_read_waiting_on_a_page_that_never_comes(truths, tmp_path, command, dataset):
    # verify / export read each sample page by page; a server that holds a
    # page (here: never answers a data read) held their Ctrl-C for the
    # request timeout (20 s here) and each read again. The wait ends at the
    # interrupt: exit 130 at once, with the command's line. Attached: the
    # foreign row's read.
    truth = json.loads(truths[dataset].read_text())
    server, port = start_server("silent-data")
    try:
        args = [str(cli_path()), command, truth["dataset"]]
        if command == "export":
            args.append(str(tmp_path / "out"))
        args += ["--hosts", "127.0.0.1", "--port", str(port), "--keyspace", truth["keyspace"], "--timeout-ms",
                 "20000"]
        code, out, err, waited = interrupt_cli_once_told(args, server)  # told: the first data read swallowed
        assert code == 130, out + err
        assert f"{command} interrupted" in err, err
        assert waited < 3.0, f"{command} held Ctrl-C for {waited:.1f} s"
    finally:
        server.kill()
        server.wait()
