// Copyright (c) cqlstream authors.
#include "loader/npy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace cqlstream::loader {
namespace {

// A .npy file laid out as numpy.lib.format writes it: magic, version, length,
// the dict padded with spaces so that the data starts at a multiple of 64,
// '\n', then the data. ParseNpy's array views these bytes: tests keep them in a
// variable for as long as they read the array.
std::vector<uint8_t> Npy(int major, const std::string& dict, const std::string& data) {
  const size_t len_size = major == 1 ? 2 : 4;
  std::string header = dict;
  const size_t fixed = 8 + len_size;
  while ((fixed + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < len_size; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  out += data;
  return {out.begin(), out.end()};
}

std::string Dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape +
         ", }";
}

std::string AsString(std::span<const uint8_t> s) { return {s.begin(), s.end()}; }

// np.lib.format.write_array(f, np.array([1, -2, 0x01020304], dtype='>i4'), version=(3, 0))
const char kNumpyBigEndianV3[] =
    "\x93NUMPY\x03\x00t\x00\x00\x00{'descr': '>i4', 'fortran_order': False, 'shape': (3,), }"
    "                                                          \n"
    "\x00\x00\x00\x01\xff\xff\xff\xfe\x01\x02\x03\x04";

TEST(Npy, BytesWrittenByNumpyMatchTheHelperAndParse) {
  const std::vector<uint8_t> numpy(kNumpyBigEndianV3, kNumpyBigEndianV3 + sizeof(kNumpyBigEndianV3) - 1);
  EXPECT_EQ(numpy, Npy(3, Dict(">i4", "(3,)"), std::string("\x00\x00\x00\x01\xff\xff\xff\xfe\x01\x02\x03\x04", 12)));
  auto a = ParseNpy(numpy);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->dtype, NpyDtype::kInt32);
  EXPECT_EQ(a->version_major, 3);
  EXPECT_TRUE(a->byte_swapped);
  EXPECT_EQ(a->shape, std::vector<uint64_t>{3});
  ASSERT_EQ(a->data().size(), 12u);
  int32_t v[3];
  std::memcpy(v, a->data().data(), sizeof v);
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], -2);
  EXPECT_EQ(v[2], 0x01020304);
}

TEST(Npy, LittleEndianIsAViewOfTheInput) {
  const auto f = Npy(1, Dict("|u1", "(2, 3)"), std::string("\x00\x01\x02\x03\x04\x05", 6));
  auto a = ParseNpy(f);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->dtype, NpyDtype::kUInt8);
  EXPECT_EQ(a->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(a->num_items(), 6u);
  EXPECT_FALSE(a->fortran_order);
  EXPECT_FALSE(a->byte_swapped);
  EXPECT_EQ(a->data().data(), f.data() + f.size() - 6);
}

TEST(Npy, EveryDtype) {
  struct Case {
    const char* code;
    NpyDtype dtype;
    const char* name;
    size_t size;
  };
  const Case cases[] = {
      {"|b1", NpyDtype::kBool, "bool", 1},         {"|i1", NpyDtype::kInt8, "int8", 1},
      {"<i2", NpyDtype::kInt16, "int16", 2},       {"<i4", NpyDtype::kInt32, "int32", 4},
      {"<i8", NpyDtype::kInt64, "int64", 8},       {"|u1", NpyDtype::kUInt8, "uint8", 1},
      {"<u2", NpyDtype::kUInt16, "uint16", 2},     {"<u4", NpyDtype::kUInt32, "uint32", 4},
      {"<u8", NpyDtype::kUInt64, "uint64", 8},     {"<f2", NpyDtype::kFloat16, "float16", 2},
      {"<f4", NpyDtype::kFloat32, "float32", 4},   {"<f8", NpyDtype::kFloat64, "float64", 8},
      {"<c8", NpyDtype::kComplex64, "complex64", 8}, {"<c16", NpyDtype::kComplex128, "complex128", 16},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.code);
    const std::vector<uint8_t> a_bytes = Npy(2, Dict(c.code, "(2,)"), std::string(2 * c.size, '\x07'));
    auto a = ParseNpy(a_bytes);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->dtype, c.dtype);
    EXPECT_EQ(NpyDtypeName(a->dtype), c.name);
    EXPECT_EQ(NpyItemSize(a->dtype), c.size);
    EXPECT_EQ(a->data().size(), 2 * c.size);
  }
}

TEST(Npy, ScalarAndEmptyShapes) {
  const std::vector<uint8_t> scalar_bytes =
      Npy(1, Dict("<f8", "()"), std::string("\x00\x00\x00\x00\x00\x00\xd0\x3f", 8));
  auto scalar = ParseNpy(scalar_bytes);
  ASSERT_TRUE(scalar.ok()) << scalar.status().ToString();
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->num_items(), 1u);
  double d = 0;
  std::memcpy(&d, scalar->data().data(), 8);
  EXPECT_EQ(d, 0.25);

  const std::vector<uint8_t> empty_bytes = Npy(1, Dict("|u1", "(0, 3)"), "");
  auto empty = ParseNpy(empty_bytes);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->shape, (std::vector<uint64_t>{0, 3}));
  EXPECT_EQ(empty->num_items(), 0u);
  EXPECT_TRUE(empty->data().empty());
}

TEST(Npy, FortranOrderIsReportedAndTheDataKept) {
  // np.asfortranarray(np.arange(6, dtype='<i2').reshape(2, 3))
  const std::string data("\x00\x00\x03\x00\x01\x00\x04\x00\x02\x00\x05\x00", 12);
  const std::vector<uint8_t> a_bytes = Npy(1, Dict("<i2", "(2, 3)", true), data);
  auto a = ParseNpy(a_bytes);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->fortran_order);
  EXPECT_EQ(AsString(a->data()), data);
}

TEST(Npy, BigEndianComplexSwapsEachHalf) {
  // np.array([1+2j], dtype='>c8')
  const std::vector<uint8_t> a_bytes = Npy(1, Dict(">c8", "(1,)"), std::string("\x3f\x80\x00\x00\x40\x00\x00\x00", 8));
  auto a = ParseNpy(a_bytes);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  float v[2];
  std::memcpy(v, a->data().data(), 8);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 2.0f);
  // A copy keeps its own swapped buffer.
  NpyArray copy = *a;
  a = Status::InvalidArgument("gone");
  std::memcpy(v, copy.data().data(), 8);
  EXPECT_EQ(v[1], 2.0f);
}

TEST(Npy, HeaderVariantsNumpyAccepts) {
  const char* dicts[] = {
      "{\"descr\": \"<u2\", \"fortran_order\": False, \"shape\": (2,)}",
      "{'shape': (2,), 'fortran_order': False, 'descr': '<u2'}",
      "{'descr':'<u2','fortran_order':False,'shape':(2 , ),}",
      "{'descr': '<u2', 'fortran_order': False, 'shape': (2L,), }",  // Python 2 numpy, v1.0
  };
  for (const char* d : dicts) {
    SCOPED_TRACE(d);
    const std::vector<uint8_t> a_bytes = Npy(1, d, "abcd");
    auto a = ParseNpy(a_bytes);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->shape, std::vector<uint64_t>{2});
  }
  EXPECT_FALSE(ParseNpy(Npy(2, "{'descr': '<u2', 'fortran_order': False, 'shape': (2L,), }", "abcd")).ok());
}

void ExpectRefused(const std::vector<uint8_t>& f, const std::string& words) {
  auto a = ParseNpy(f);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(a.status().message().find(words), std::string::npos) << a.status().message();
}

TEST(Npy, RefusesDataOfTheWrongSize) {
  ExpectRefused(Npy(1, Dict("<f4", "(2,)"), std::string(7, 'x')), "expected 8 bytes for the shape, got 7");
  ExpectRefused(Npy(1, Dict("<f4", "(2,)"), std::string(9, 'x')), "expected 8 bytes for the shape, got 9");
  ExpectRefused(Npy(1, Dict("|u1", "(0,)"), "x"), "expected 0 bytes for the shape, got 1");
}

TEST(Npy, RefusesHostileShapes) {
  ExpectRefused(Npy(1, Dict("<f8", "(4294967296, 4294967296)"), ""), "does not fit in 64 bits");
  ExpectRefused(Npy(1, Dict("<f8", "(1152921504606846976,)"), ""), "does not fit in 64 bits");
  ExpectRefused(Npy(1, Dict("|u1", "(9223372036854775808,)"), ""), "2^63 or more");
  ExpectRefused(Npy(1, Dict("|u1", "(99999999999999999999999,)"), ""), "2^63 or more");
  ExpectRefused(Npy(1, Dict("|u1", "(-1,)"), ""), "negative");
  ExpectRefused(Npy(1, Dict("|u1", "(3)"), "xxx"), "not a tuple");
  ExpectRefused(Npy(1, Dict("|u1", "[3]"), "xxx"), "not a tuple");
  std::string dims = "(";
  for (int i = 0; i < 33; ++i) dims += "1,";
  ExpectRefused(Npy(1, Dict("|u1", dims + ")"), "x"), "more than 32 dimensions");
  // Zero dims do not hide an overflow of the others from numpy's limit.
  ExpectRefused(Npy(1, Dict("<f8", "(0, 4294967296, 4294967296)"), ""), "does not fit in 64 bits");
}

TEST(Npy, RefusesUnsupportedDtypes) {
  ExpectRefused(Npy(1, Dict("|O", "(1,)"), "12345678"), "object arrays");
  ExpectRefused(Npy(1, "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }", "1234"),
                "structured dtypes");
  ExpectRefused(Npy(1, Dict("<U3", "(1,)"), std::string(12, 'x')), "descr '<U3' is not supported");
  ExpectRefused(Npy(1, Dict("<f16", "(1,)"), std::string(16, 'x')), "descr '<f16' is not supported");
  ExpectRefused(Npy(1, Dict("<M8[ns]", "(1,)"), std::string(8, 'x')), "not supported");
  ExpectRefused(Npy(1, Dict("f4", "(1,)"), "1234"), "no byte order");
  ExpectRefused(Npy(1, Dict("|f4", "(1,)"), "1234"), "'|' (no byte order) for a 4-byte type");
}

TEST(Npy, RefusesMalformedHeaders) {
  ExpectRefused(Npy(1, "{'descr': '<u2', 'fortran_order': False}", ""), "no 'shape'");
  ExpectRefused(Npy(1, "{'descr': '<u2', 'shape': (1,), 'fortran_order': False, 'extra': 1}", "ab"),
                "unknown key 'extra'");
  ExpectRefused(Npy(1, "{'descr': '<u2', 'descr': '<u2', 'fortran_order': False, 'shape': (1,)}", "ab"),
                "repeats key 'descr'");
  ExpectRefused(Npy(1, Dict("<u2", "(1,)") + " x", "ab"), "text after the dict");
  ExpectRefused(Npy(1, "{'descr': '<u2', 'fortran_order': 0, 'shape': (1,)}", "ab"), "not True or False");
  ExpectRefused(Npy(1, "{'descr': '<\\u2', 'fortran_order': False, 'shape': (1,)}", "ab"), "unsupported character");
  ExpectRefused(Npy(1, "{'descr': '<u2", ""), "unterminated");
  ExpectRefused(Npy(1, "'descr'", ""), "not a dict literal");
  ExpectRefused(Npy(1, "{'descr': '<u2' 'fortran_order': False}", ""), "expected ',' or '}'");
  ExpectRefused(Npy(3, "{'descr': '\xc3\xa9', 'fortran_order': False, 'shape': (1,)}", ""), "byte 0xc3");
  ExpectRefused(Npy(1, std::string("{'descr': '<u2'\0", 16), ""), "byte 0x00");
}

TEST(Npy, RefusesBadFraming) {
  ExpectRefused({}, "not a .npy file");
  ExpectRefused({0x89, 'P', 'N', 'G'}, "not a .npy file");
  auto f = Npy(1, Dict("|u1", "(1,)"), "x");
  ExpectRefused({f.begin(), f.begin() + 7}, "ends inside the version");
  ExpectRefused({f.begin(), f.begin() + 9}, "ends inside the header length");
  ExpectRefused({f.begin(), f.begin() + 30}, "only 20 bytes follow");
  auto v4 = f;
  v4[6] = 4;
  ExpectRefused(v4, "format version 4.0 is not supported");
  auto v11 = f;
  v11[7] = 1;
  ExpectRefused(v11, "format version 1.1");
  auto big = Npy(2, Dict("|u1", "(1,)"), "x");
  big[8] = 0x11;  // header length 0x2711 = 10001
  big[9] = 0x27;
  ExpectRefused(big, "larger than the 10000 allowed");
}

}  // namespace
}  // namespace cqlstream::loader
