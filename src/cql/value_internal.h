// Copyright (c) cqlstream authors.
//
// Helpers shared by value.cc, value_encode.cc and value_decode.cc (the CQL
// value model, its encoder and its decoder). Not part of the public API.
//
// Thread-safety: pure functions.
#ifndef CQLSTREAM_CQL_VALUE_INTERNAL_H_
#define CQLSTREAM_CQL_VALUE_INTERNAL_H_

#include <string_view>

#include "cqlstream/value.h"

namespace cqlstream::value_internal {

// The name of a value's kind as errors spell it ("int", "blob", ...).
std::string_view KindName(Value::Kind k);
// Whether a value holds blob bytes (owned or a borrowed view).
bool IsBlobKind(Value::Kind k);
// The size a cell of a fixed-size type must have, or -1.
int FixedSize(TypeId id);

}  // namespace cqlstream::value_internal

#endif  // CQLSTREAM_CQL_VALUE_INTERNAL_H_
