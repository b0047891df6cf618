"""Secure-connect bundles and encrypted client keys from Python and the CLI, against the secure node.

Needs the secure node (scripts/test starts it and exports
CQLSTREAM_TEST_SECURE_HOST, CQLSTREAM_TEST_CERTS, CQLSTREAM_TEST_SECURE_USER,
CQLSTREAM_TEST_SECURE_PASSWORD). The test builds the bundles itself from the
node's CA and the client certificate: a direct-endpoint bundle, and one whose
contact_info routes through the SNI proxy of sni_proxy.py (the host id of the
node as TLS server name, as managed services do).
"""

from __future__ import annotations

import http.server
import json
import os
import ssl
import subprocess
import threading
import zipfile
from pathlib import Path

import pytest

import cqlstream
from conftest import cli_path, unique_name, write_image_set
from sni_proxy import SniProxy, server_name

SECURE_HOST = os.environ.get("CQLSTREAM_TEST_SECURE_HOST", "")
CERTS = Path(os.environ.get("CQLSTREAM_TEST_CERTS", "/nonexistent"))
USER = os.environ.get("CQLSTREAM_TEST_SECURE_USER", "cassandra")
PASSWORD = os.environ.get("CQLSTREAM_TEST_SECURE_PASSWORD", "cassandra")


@pytest.fixture(scope="module")
def secure(tmp_path_factory) -> Path:
    """A folder with the password file; fails (not skips) without the secure node."""
    if not SECURE_HOST or not (CERTS / "ca.crt").is_file():
        pytest.fail("CQLSTREAM_TEST_SECURE_HOST / CQLSTREAM_TEST_CERTS are not set: run through scripts/test, or "
                    "start scripts/cassandra up --profile secure and export them")
    d = tmp_path_factory.mktemp("secure")
    pw = d / "pw"
    pw.write_text(PASSWORD + "\n")
    pw.chmod(0o600)
    return d


class MetadataService:
    """The HTTPS metadata service of a managed cluster: GET /metadata answers `answer` (JSON), to clients whose
    certificate the test CA signed (mutual TLS, as the real services require)."""

    def __init__(self, answer: dict):
        self.requests: list[str] = []
        body = json.dumps(answer).encode()
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the http.server name)
                service.requests.append(self.path)
                code = 200 if self.path == "/metadata" else 404
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body) if code == 200 else 0))
                self.end_headers()
                if code == 200:
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(CERTS / "server.crt", CERTS / "server.key")
        ctx.load_verify_locations(CERTS / "ca.crt")
        ctx.verify_mode = ssl.CERT_REQUIRED
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def __enter__(self) -> "MetadataService":
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def make_bundle(path: Path, config: dict, ca: str = "ca.crt") -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("config.json", json.dumps(config))
        z.write(CERTS / ca, "ca.crt")
        z.write(CERTS / "client.crt", "cert")
        z.write(CERTS / "client.key", "key")
    return path


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([str(cli_path()), *args], capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"cqlstream {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def node_host_id() -> str:
    """system.local's host_id of the secure node, asked with the reference Python driver."""
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import Cluster

    ctx = ssl.create_default_context(cafile=str(CERTS / "ca.crt"))
    ctx.load_cert_chain(CERTS / "client.crt", CERTS / "client.key")  # for a node started with --client-auth
    cluster = Cluster([SECURE_HOST], ssl_context=ctx, auth_provider=PlainTextAuthProvider(USER, PASSWORD),
                      protocol_version=4, connect_timeout=30, control_connection_timeout=30)
    try:
        return str(cluster.connect().execute("SELECT host_id FROM system.local").one().host_id)
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
def direct_bundle(secure) -> Path:
    return make_bundle(secure / "direct.zip", {"host": SECURE_HOST, "cql_port": 9042})


@pytest.fixture(scope="module")
def secure_dataset(secure, direct_bundle, tmp_path_factory):
    """A small dataset ingested into the secure node through the CLI with --secure-bundle."""
    root = tmp_path_factory.mktemp("secure_images")
    samples = write_image_set(root, {"train": 2})
    name = unique_name("py_sec")
    auth = ("--secure-bundle", str(direct_bundle), "--username", USER, "--password-file", str(secure / "pw"))
    cli("ingest", "--dataset", name, str(root), *auth)
    yield name, len(samples)
    cli("drop", name, "--yes", *auth, check=False)


def read_all(name: str, **kwargs) -> int:
    n = 0
    with cqlstream.Loader(name, batch_size=4, shuffle=False, epochs=1, **kwargs) as loader:
        for batch in loader:
            n += len(batch)
    return n


def test_loader_reads_through_a_direct_bundle(secure, direct_bundle, secure_dataset):
    name, count = secure_dataset
    assert read_all(name, secure_bundle=direct_bundle, username=USER, password_file=secure / "pw") == count


def test_dali_reader_through_a_direct_bundle(secure, direct_bundle, secure_dataset):
    """fn.cqlstream.reader takes the same secure_bundle argument (resolved by the same C++ code)."""
    import cqlstream.dali as cd
    from nvidia.dali import pipeline_def

    assert cd.load_plugin(), cd.plugin_error()
    name, count = secure_dataset

    @pipeline_def(batch_size=count, num_threads=1, device_id=None)
    def pipe():
        return cd.reader(name, secure_bundle=direct_bundle, username=USER, password_file=secure / "pw",
                         shuffle=False, output_keys=True)

    p = pipe()
    p.build()
    data, labels, keys = p.run()
    got = {int(keys.at(i)[0]) if keys.at(i).ndim else int(keys.at(i)) for i in range(len(keys))}
    assert len(got) == count
    assert all(data.at(i).size > 0 for i in range(len(data)))


def test_bundle_cannot_be_combined_with_hosts(secure, direct_bundle):
    with pytest.raises(Exception, match="secure_bundle cannot be combined with hosts"):
        cqlstream.Loader("x", secure_bundle=direct_bundle, hosts="127.0.0.1", username=USER,
                         password_file=secure / "pw")


def test_passphrase_is_never_a_keyword(secure):
    with pytest.raises(TypeError, match="tls_key_passphrase_file"):
        cqlstream.Loader("x", tls_key_passphrase="hunter2")


def test_encrypted_key_with_a_wrong_passphrase_names_the_key(secure, tmp_path):
    key = tmp_path / "client.enc.key"
    subprocess.run(["openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", str(CERTS / "client.key"),
                    "-out", str(key), "-passout", "pass:right-one"], check=True, capture_output=True)
    wrong = tmp_path / "wrong"
    wrong.write_text("wrong-xyzzy\n")
    wrong.chmod(0o600)
    with pytest.raises(Exception) as e:
        cqlstream.Loader("x", hosts=SECURE_HOST, tls_ca=CERTS / "ca.crt", tls_cert=CERTS / "client.crt",
                         tls_key=key, tls_key_passphrase_file=wrong, username=USER, password_file=secure / "pw")
    assert f"cannot decrypt TLS client key '{key}'" in str(e.value)
    assert "xyzzy" not in str(e.value)


def test_sni_proxy_routes_by_host_id(secure, secure_dataset):
    name, count = secure_dataset
    host_id = node_host_id()
    with SniProxy({host_id: (SECURE_HOST, 9042)}) as proxy:
        bundle = make_bundle(secure / "sni.zip", {"contact_info": {
            "type": "sni_proxy", "local_dc": "dc1", "contact_points": [host_id],
            "sni_proxy_address": proxy.address()}})
        assert read_all(name, secure_bundle=bundle, username=USER, password_file=secure / "pw") == count
        r = cli("ping", "--secure-bundle", str(bundle), "--username", USER, "--password-file", str(secure / "pw"))
        # The node is known by its host id (the address it is reached at is the proxy's).
        assert host_id in r.stdout and " up " in r.stdout, r.stdout
        # Every connection (control and pools, Python and CLI) named the node by its host id.
        assert proxy.names and set(proxy.names) == {host_id}, proxy.names


def test_metadata_service_then_sni_proxy(secure, secure_dataset):
    """The managed-service flow: config.json names the metadata service; its answer names the proxy and nodes."""
    name, count = secure_dataset
    host_id = node_host_id()
    with SniProxy({host_id: (SECURE_HOST, 9042)}) as proxy, MetadataService({
            "version": 1, "region": "test", "contact_info": {
                "type": "sni_proxy", "local_dc": "dc1", "contact_points": [host_id],
                "sni_proxy_address": proxy.address()}}) as meta:
        bundle = make_bundle(secure / "cloud.zip", {"host": "127.0.0.1", "port": meta.port, "cql_port": 29042,
                                                    "keyspace": "cqlstream", "localDC": "dc1"})
        assert read_all(name, secure_bundle=bundle, username=USER, password_file=secure / "pw") == count
        assert meta.requests and set(meta.requests) == {"/metadata"}
        assert proxy.names and set(proxy.names) == {host_id}, proxy.names


def test_metadata_service_errors_name_the_service(secure):
    with MetadataService({"version": 1}) as meta:  # no contact_info
        bundle = make_bundle(secure / "cloud_bad.zip", {"host": "127.0.0.1", "port": meta.port})
        r = cli("ping", "--secure-bundle", str(bundle), "--username", USER, "--password-file", str(secure / "pw"),
                check=False)
        assert r.returncode != 0
        assert "metadata service answer has no contact_info" in r.stderr, r.stderr
    # Nobody listening any more: a connection error naming the service, not a hang.
    r = cli("ping", "--secure-bundle", str(bundle), "--username", USER, "--password-file", str(secure / "pw"),
            "--connect-timeout", "2", check=False)
    assert r.returncode != 0
    assert f"https://127.0.0.1:{meta.port}/metadata" in r.stderr, r.stderr


@pytest.mark.parametrize("front", ["Dataset", "Loader", "cli"])
def test_ctrl_c_ends_a_metadata_fetch_that_waits(secure, tmp_path, front):
    """A metadata service that accepts and never answers (the TLS handshake waits) held Ctrl-C for the connect
    time-out, 10 s here. The fetch now ends at it: KeyboardInterrupt from Python, exit 130 from the CLI, within
    2 s. The signal goes once the connection is accepted (the CLI has its handler by then)."""
    import signal
    import socket
    import time

    from conftest import ctrl_c_after

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        silent.settimeout(30)
        bundle = make_bundle(tmp_path / "silent.zip", {"host": "127.0.0.1", "port": silent.getsockname()[1]})
        auth = dict(secure_bundle=bundle, username=USER, password_file=secure / "pw", connect_timeout=10.0)
        if front == "cli":
            child = subprocess.Popen([str(cli_path()), "verify", "any", "--secure-bundle", str(bundle), "--username",
                                      USER, "--password-file", str(secure / "pw"), "--connect-timeout", "10"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                accepted, _ = silent.accept()  # kept open, never answered
                time.sleep(0.2)  # well into the handshake
                assert child.poll() is None, child.communicate()
                child.send_signal(signal.SIGINT)
                start = time.monotonic()
                out, err = child.communicate(timeout=15)
                waited = time.monotonic() - start
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait()
                if "accepted" in locals():
                    accepted.close()
            assert child.returncode == 130, out + err
            assert "verify interrupted while opening the dataset" in err, err
        else:
            with ctrl_c_after(0.5) as t, pytest.raises(KeyboardInterrupt):
                if front == "Dataset":
                    cqlstream.Dataset("any", **auth)
                else:
                    cqlstream.Loader("any", batch_size=8, **auth)
            waited = t["waited"] - 0.5
        assert waited < 2.0, f"{front} held Ctrl-C for {waited:.1f} s"


def test_sni_proxy_refuses_unknown_host_ids(secure):
    with SniProxy({}) as proxy:
        bundle = make_bundle(secure / "sni_unknown.zip", {"contact_info": {
            "contact_points": ["00000000-0000-0000-0000-000000000000"], "sni_proxy_address": proxy.address()}})
        r = cli("ping", "--secure-bundle", str(bundle), "--username", USER, "--password-file", str(secure / "pw"),
                check=False)
        assert r.returncode != 0
        # The proxy closes the stream: a lost connection (retried like one), not a TLS failure.
        assert proxy.names and set(proxy.names) == {"00000000-0000-0000-0000-000000000000"}, proxy.names
        assert "closed the connection during the TLS handshake" in r.stderr, r.stderr
        assert "00000000-0000-0000-0000-000000000000" in r.stderr, r.stderr


def test_an_unknown_first_contact_point_does_not_stop_the_connect(secure):
    """The proxy closes the stream for a host id it cannot route (a node that is down): the client sees the peer
    close during the TLS handshake, a lost connection rather than a TLS failure, and goes on to the next contact
    point."""
    host_id = node_host_id()
    unknown = "00000000-0000-0000-0000-000000000000"
    with SniProxy({host_id: (SECURE_HOST, 9042)}) as proxy:
        bundle = make_bundle(secure / "sni_first_unknown.zip", {"contact_info": {
            "type": "sni_proxy", "local_dc": "dc1", "contact_points": [unknown, host_id],
            "sni_proxy_address": proxy.address()}})
        r = cli("ping", "--secure-bundle", str(bundle), "--username", USER, "--password-file", str(secure / "pw"))
        assert host_id in r.stdout and " up " in r.stdout, r.stdout
        assert proxy.names[:2] == [unknown, host_id], proxy.names


def test_server_name_parser_on_a_real_client_hello():
    """sni_proxy.server_name against the ClientHello Python's ssl module writes."""
    ctx = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="abc-123.example")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    assert server_name(outgoing.read()) == "abc-123.example"
    with pytest.raises(ValueError):
        server_name(b"\x16\x03\x01\x00\x05\x02\x00\x00\x00\x00")
