// Copyright (c) cqlstream authors.
//
// cqlstreamLoaderBase: the DALI schema of the arguments every cqlstream
// operator shares (dataset, connection, loader, outputs). fn.cqlstream.reader
// and fn.cqlstream.keys_reader inherit it (AddParent). The connection
// arguments mirror loader::OptionArgs (src/loader/option_kit.h), which
// resolves them for the CLI and Python too; op_common.cc reads them.
// The schema is the documentation: help(fn.cqlstream.reader) shows it.
//
// Thread-safety: static registration only (runs at library load).
#include <cstdint>
#include <string>
#include <vector>

#include "dali/pipeline/operator/op_schema.h"

DALI_SCHEMA(cqlstreamLoaderBase)
    .DocStr("Arguments shared by the cqlstream operators (connection, dataset, outputs).")
    .AddArg("dataset", "Name of the cqlstream dataset (as given to `cqlstream ingest --dataset`).",
            DALI_STRING)
    .AddOptionalArg("split", R"(Split to read (fn.cqlstream.reader) or to open the loader on
(fn.cqlstream.keys_reader, which may fetch keys of any split).)",
                    "train")
    .AddOptionalArg(
        "hosts", "Contact points (IP addresses or names). Default: $CQLSTREAM_HOSTS, else 127.0.0.1.",
        std::vector<std::string>{})
    .AddOptionalArg("port", "CQL native port. Default: $CQLSTREAM_PORT, else 9042.", 9042)
    .AddOptionalArg("keyspace", "Keyspace of the datasets. Default: $CQLSTREAM_KEYSPACE, else cqlstream.",
                    "cqlstream")
    .AddOptionalArg("username", "User name for password authentication. Default: $CQLSTREAM_USERNAME.", "")
    .AddOptionalArg("password_file", R"(File whose first line is the password. Default:
$CQLSTREAM_PASSWORD_FILE or $CQLSTREAM_PASSWORD. There is deliberately no password argument:
operator arguments are stored in serialized pipelines.)",
                    "")
    .AddOptionalArg("tls_ca", R"(PEM CA bundle that verifies the server; setting any tls_* argument
turns TLS on. Default: $CQLSTREAM_TLS_CA.)",
                    "")
    .AddOptionalArg("tls_cert", "Client certificate (PEM). Default: $CQLSTREAM_TLS_CERT.", "")
    .AddOptionalArg("tls_key", "Private key of tls_cert (PEM). Default: $CQLSTREAM_TLS_KEY.", "")
    .AddOptionalArg("tls_server_name", "Name checked against the server certificate (default: the address).",
                    "")
    .AddOptionalArg("tls_key_passphrase_file", R"(File whose first line is the passphrase of an encrypted
tls_key. Default: $CQLSTREAM_TLS_KEY_PASSPHRASE_FILE or $CQLSTREAM_TLS_KEY_PASSPHRASE. There is
deliberately no passphrase argument (operator arguments are stored in serialized pipelines).)",
                    "")
    .AddOptionalArg("secure_bundle", R"(Cloud secure-connect bundle (zip): endpoint, CA, client
certificate and key; replaces hosts, port, tls_ca, tls_cert and tls_key. Default:
$CQLSTREAM_SECURE_BUNDLE. See docs/security.md.)",
                    "")
    .AddOptionalArg("local_dc", "Data center whose hosts are tried first. Default: $CQLSTREAM_LOCAL_DC.", "")
    .AddOptionalArg("tls_insecure_skip_verify", R"(INSECURE: use TLS without verifying the server
certificate (anyone on the path can impersonate the server; throwaway test nodes only). Warns on
stderr as the CLI and Python do.)",
                    false)
    .AddOptionalArg("connections_per_host", "Connections opened per host at start (1..64). Default: 2.", 2)
    .AddOptionalArg("max_shard_connections", R"(ScyllaDB: the most shards of a node that get a connection of
their own through its shard-aware port (1..65535). Default: 256.)",
                    256)
    .AddOptionalArg("io_threads", "I/O threads of the connection pool (0..64; 0: min(4, cores)).", 0)
    .AddOptionalArg("max_in_flight", R"(Most requests in flight (the adaptive window's ceiling); caps the
load on a shared cluster. 0: automatic.)",
                    0)
    .AddOptionalArg("max_connections_per_host", R"(Most connections per host the loader may open as it
adapts (1..1024). 0: automatic (grows with the path, up to a safety limit of 256).)",
                    0)
    .AddOptionalArg("connect_timeout", "Seconds to open a connection. 0: the default (5).", 0.f)
    .AddOptionalArg("initial_window", "The adaptive window's first size. 0: automatic.", 0)
    .AddOptionalArg("max_attempts", "Attempts per sample before it fails. 0: automatic.", 0)
    .AddOptionalArg("request_timeout", "Seconds one request may take. 0: automatic.", 0.f)
    .AddOptionalArg("retry_budget", R"(Seconds a sample may spend in retries before it fails.
0: automatic.)",
                    0.f)
    .AddOptionalArg("coalesce", R"(Keys per coalesced read of small samples (at most one chunk and
16 KiB each): samples of one segment share a request (0..100). 0: automatic (64, at most a quarter
of the window); 1: off, one request per sample.)",
                    0)
    .AddOptionalArg("verify_checksums", "Check each sample's xxh64 checksum (a mismatch is an error naming it).",
                    false)
    .AddOptionalArg("memory_bytes", R"(Byte budget of the loader (bytes in flight, assembled
batches and batches that DALI still holds). 0: max(1 GiB, 8 batches).)",
                             int64_t{0})
    .AddOptionalArg("zero_copy", R"(True: the `data` (and `target`) outputs point into the loader's
batch memory, where the bytes were received from the socket; no copy. False: one copy into
contiguous buffers that DALI allocates.)",
                    true)
    .AddOptionalArg("output_target", R"(Add an output with each sample's blob target (datasets of label
kind "target"; the payload is image bytes then target bytes).)",
                    false)
    .AddOptionalArg("output_keys", "Add an int64 output with each sample's key (seg << 32 | idx).", false)
    .AddOptionalArg("output", R"(What the `data` output holds: "bytes" (each sample's stored bytes, uint8
1-D) or "npy" (datasets of sample kind "blob" holding .npy files: each sample decoded to a typed
tensor of its .npy dtype and shape, in native byte order). With "npy" the samples of one batch
must share dtype and number of dimensions (shapes may differ); bool, int8..64, uint8..64 and
float16/32/64 are supported, complex and Fortran-order arrays are refused, and a sample that is
not a valid .npy file fails the iteration naming its key. Decoded outputs are copied into
buffers DALI allocates (zero_copy applies to the bytes outputs).)",
                    "bytes")
    .AddOptionalArg("target_output", R"(What the `target` output holds (output_target=True): "bytes" or
"npy" (each target decoded from .npy, e.g. segmentation masks; the rules of ``output``).)",
                    "bytes");

