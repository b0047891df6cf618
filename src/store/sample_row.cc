// Copyright (c) cqlstream authors.
#include "store/sample_row.h"

#include <fmt/format.h>

#include <utility>

#include "cql/wire.h"
#include "cqlstream/value.h"
#include "store/catalog.h"

namespace cqlstream::store {

void SampleRowCells::Fail(std::string what) {
  if (status_.ok()) status_ = Status::Corruption(fmt::format("sample {}: {}", FormatKey(key_), what));
}

void SampleRowCells::OnCell(int32_t row, int32_t col, std::optional<std::span<const uint8_t>> data) {
  if (col == kColSeg || col == kColIdx) {
    // Every row (page) must belong to the sample that was asked for.
    const int32_t want = col == kColSeg ? KeySegment(key_) : KeyIndex(key_);
    if (!data || data->size() != 4 || static_cast<int32_t>(cql::LoadU32(data->data())) != want) {
      key_mismatch_ = true;
    }
    return;
  }
  if (row != 0 || continuation_) return;
  // A static column: null, or exactly the width of its type.
  auto fixed = [&](const char* name, size_t width) -> bool {
    if (!data) return false;
    if (data->size() != width) {
      Fail(fmt::format("its {} column is {} bytes, not {}", name, data->size(), width));
      return false;
    }
    return true;
  };
  switch (col) {
    case kColSize:
      if (fixed("size", 8)) {
        statics_.size = static_cast<int64_t>(cql::LoadU64(data->data()));
        statics_.present = true;
      }
      break;
    case kColImageSize:
      if (fixed("image_size", 8)) statics_.image_size = static_cast<int64_t>(cql::LoadU64(data->data()));
      break;
    case kColChecksum:
      if (fixed("checksum", 8)) statics_.checksum = static_cast<int64_t>(cql::LoadU64(data->data()));
      break;
    case kColLabel:
      if (fixed("label", 4)) statics_.label = static_cast<int32_t>(cql::LoadU32(data->data()));
      break;
    case kColLabels:
      if (data) {
        auto v = DecodeCell(DataType::List(DataType::Simple(TypeId::kInt)), *data);
        if (!v.ok() || v->kind() != Value::Kind::kList) {
          Fail("its labels column is not a list<int>");
          break;
        }
        statics_.labels.clear();
        for (const auto& x : v->as_list()) statics_.labels.push_back(x.kind() == Value::Kind::kInt ? x.as_int() : -1);
      }
      break;
    default:
      break;
  }
}

Status CheckStatics(SampleKey key, const SampleStatics& s, const SampleHints& h) {
  auto bad = [&](std::string what) { return Status::Corruption(fmt::format("sample {}: {}", FormatKey(key), what)); };
  if (!s.present) return bad("its data row has no size");
  if (s.size < 0) return bad(fmt::format("its data row declares a negative size ({})", s.size));
  if (h.max_size >= 0 && s.size > h.max_size) {
    return bad(fmt::format("its data row declares {} bytes, more than its segment's max_size of {} in the catalog",
                           s.size, h.max_size));
  }
  if (s.image_size < -1 || s.image_size > s.size) {
    return bad(fmt::format("its image_size {} is not within its size of {} bytes", s.image_size, s.size));
  }
  if (h.classes >= 0) {
    auto in_range = [&](int32_t l) { return l >= -1 && l < h.classes; };
    if (h.label_kind == LabelKind::kClass && !in_range(s.label)) {
      return bad(fmt::format("its label {} is not one of the dataset's {} classes", s.label, h.classes));
    }
    if (h.label_kind == LabelKind::kMultiLabel) {
      for (int32_t l : s.labels) {
        if (l < 0 || l >= h.classes) {
          return bad(fmt::format("its labels hold {}, not one of the dataset's {} classes", l, h.classes));
        }
      }
    }
  }
  return Status::OK();
}

void ChunkPlacer::Begin(int64_t size, int32_t chunk_size) {
  size_ = size > 0 ? static_cast<uint64_t>(size) : 0;
  written_ = 0;
  chunk_size_ = chunk_size;
  short_seen_ = false;
}

StatusOr<uint64_t> ChunkPlacer::Place(SampleKey key, int64_t bytes) {
  auto bad = [&](std::string what) { return Status::Corruption(fmt::format("sample {}: {}", FormatKey(key), what)); };
  if (bytes < 0) return bad("a chunk of negative length");
  const uint64_t n = static_cast<uint64_t>(bytes);
  // Compared against what is left, never by adding to the offset.
  if (n > size_ - written_) {
    return bad(fmt::format("its chunks hold more than its size of {} bytes", size_));
  }
  if (short_seen_) return bad("a chunk follows a short chunk (a chunk is missing or out of order)");
  if (chunk_size_ > 0) {
    if (bytes > chunk_size_) {
      return bad(fmt::format("a chunk of {} bytes, more than the dataset's chunk size of {}", bytes, chunk_size_));
    }
    short_seen_ = bytes < chunk_size_;
  }
  const uint64_t at = written_;
  written_ += n;
  return at;
}

Status ChunkPlacer::Finish(SampleKey key) const {
  if (written_ != size_) {
    return Status::Corruption(
        fmt::format("sample {}: its chunks add up to {} bytes, its size is {}", FormatKey(key), written_, size_));
  }
  return Status::OK();
}

}  // namespace cqlstream::store
