// Copyright (c) cqlstream authors.
//
// The option kit's fields (loader::OptionArgs) as attributes of a binding's
// argument class, bound once for every class that derives from it
// (OpenArgs, DatasetArgs, ...), in the kit's order (kOptionArgNames).
//
// Thread-safety: called while the module is created.
#ifndef CQLSTREAM_PYTHON_BIND_OPTIONS_H_
#define CQLSTREAM_PYTHON_BIND_OPTIONS_H_

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "loader/option_kit.h"

namespace cqlstream::python {

// The connection options: hosts ... connect_timeout_s.
template <typename T>
void DefConnectionOptions(nanobind::class_<T>& c) {
  static_assert(std::is_base_of_v<loader::OptionArgs, T>);
  c.def_rw("hosts", &T::hosts)
      .def_rw("port", &T::port)
      .def_rw("keyspace", &T::keyspace)
      .def_rw("username", &T::username)
      .def_rw("password_file", &T::password_file)
      .def_rw("tls_ca", &T::tls_ca)
      .def_rw("tls_cert", &T::tls_cert)
      .def_rw("tls_key", &T::tls_key)
      .def_rw("tls_server_name", &T::tls_server_name)
      .def_rw("tls_key_passphrase_file", &T::tls_key_passphrase_file)
      .def_rw("tls_insecure_skip_verify", &T::tls_insecure_skip_verify)
      .def_rw("secure_bundle", &T::secure_bundle)
      .def_rw("local_dc", &T::local_dc)
      .def_rw("connections_per_host", &T::connections_per_host)
      .def_rw("max_shard_connections", &T::max_shard_connections)
      .def_rw("io_threads", &T::io_threads)
      .def_rw("connect_timeout_s", &T::connect_timeout_s);
}

// The loader's throttles: max_in_flight ... retry_budget_s, coalesce.
template <typename T>
void DefThrottleOptions(nanobind::class_<T>& c) {
  static_assert(std::is_base_of_v<loader::OptionArgs, T>);
  c.def_rw("max_in_flight", &T::max_in_flight)
      .def_rw("initial_window", &T::initial_window)
      .def_rw("max_connections_per_host", &T::max_connections_per_host)
      .def_rw("max_attempts", &T::max_attempts)
      .def_rw("request_timeout_s", &T::request_timeout_s)
      .def_rw("retry_budget_s", &T::retry_budget_s)
      .def_rw("coalesce", &T::coalesce);
}

}  // namespace cqlstream::python

#endif  // CQLSTREAM_PYTHON_BIND_OPTIONS_H_
