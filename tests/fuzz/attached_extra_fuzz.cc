// Copyright (c) cqlstream authors.
//
// libFuzzer target for the extra of an attached dataset's metadata rows
// (store/attached_extra.h): a metadata table's cell of any bytes (or null),
// rendered as one of the column types such a table may have (text, ascii,
// blob, int, bigint, uuid, timestamp, boolean, double, list<text>,
// set<int>, map<text, int>, a nested list, a tuple), and a text cut.
//
// Checked: nothing throws or traps (ASan/UBSan); a null cell gives no
// entry; every rendered value is at most kMaxExtraValueBytes plus the cut
// note ("...[cut: N bytes]", N at most 20 digits), whatever the cell's size;
// a cut text keeps a prefix of its input.
//
// Input (FuzzedDataProvider): the type, null or not, the cell bytes, then
// a text and a limit for CutExtraText.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "store/attached_extra.h"
#include "fuzz_check.h"

namespace {

using cqlstream::fuzz::Check;

cqlstream::DataType Types(size_t i) {
  using cqlstream::DataType;
  using cqlstream::TypeId;
  DataType t;
  switch (i) {
    case 0: t.id = TypeId::kVarchar; break;
    case 1: t.id = TypeId::kAscii; break;
    case 2: t.id = TypeId::kBlob; break;
    case 3: t.id = TypeId::kInt; break;
    case 4: t.id = TypeId::kBigint; break;
    case 5: t.id = TypeId::kUuid; break;
    case 6: t.id = TypeId::kTimestamp; break;
    case 7: t.id = TypeId::kBoolean; break;
    case 8: t.id = TypeId::kDouble; break;
    case 9: t.id = TypeId::kList; t.params = {Types(0)}; break;
    case 10: t.id = TypeId::kSet; t.params = {Types(3)}; break;
    case 11: t.id = TypeId::kMap; t.params = {Types(0), Types(3)}; break;
    case 12: t.id = TypeId::kList; t.params = {Types(9)}; break;
    default: t.id = TypeId::kTuple; t.params = {Types(0), Types(3), Types(2)}; break;
  }
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cqlstream::store;
  FuzzedDataProvider in(data, size);
  const cqlstream::DataType type = Types(in.ConsumeIntegralInRange<size_t>(0, 13));
  const bool null = in.ConsumeIntegralInRange<int>(0, 7) == 0;
  const std::vector<uint8_t> cell = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 4096));
  constexpr size_t kNote = 40;  // "...[cut: " + 20 digits + " bytes]"
  auto text = RenderExtraCell(type, null ? std::nullopt : std::optional<std::span<const uint8_t>>(cell));
  if (null) {
    Check(!text);
  } else if (text) {
    Check(text->size() <= kMaxExtraValueBytes + kNote);
  }
  const size_t limit = in.ConsumeIntegralInRange<size_t>(0, 300);
  const std::string s = in.ConsumeRemainingBytesAsString();
  const std::string cut = CutExtraText(s, limit, s.size());
  Check(cut.size() <= std::max(limit, s.size()) + kNote);
  if (cut.size() > s.size() || cut != s) Check(s.starts_with(cut.substr(0, std::min(cut.find("...[cut: "), s.size()))));
  return 0;
}
