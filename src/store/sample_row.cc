// Copyright (c) cqlstream authors.
#include "store/sample_row.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "cqlstream/value.h"

namespace cqlstream::store {

SampleHints HintsFor(const DatasetInfo& d, int64_t max_size) {
  SampleHints h;
  h.max_size = max_size;
  h.chunk_size = d.chunk_size;
  h.label_kind = d.label_kind;
  h.classes = d.class_names.empty() ? -1 : static_cast<int64_t>(d.class_names.size());
  return h;
}

void SampleRowCells::Fail(std::string what) {
  if (status_.ok()) status_ = Status::Corruption(fmt::format("sample {}: {}", FormatKey(key_), what));
}

void SampleRowCells::OnCell(int32_t row, int32_t col, std::optional<std::span<const uint8_t>> data) {
  if (col == kColSeg || col == kColIdx) {
    // Every row (page) must belong to the sample that was asked for.
    const int32_t want = col == kColSeg ? KeySegment(key_) : KeyIndex(key_);
    if (!data || DecodeIntCell(*data) != want) {
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
        statics_.size = *DecodeBigintCell(*data);
        statics_.present = true;
      }
      break;
    case kColImageSize:
      if (fixed("image_size", 8)) statics_.image_size = *DecodeBigintCell(*data);
      break;
    case kColChecksum:
      if (fixed("checksum", 8)) {
        statics_.checksum = *DecodeBigintCell(*data);
        statics_.checksum_present = true;
      }
      break;
    case kColLabel:
      if (fixed("label", 4)) statics_.label = *DecodeIntCell(*data);
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
  if (chunk_size_ > 0 && bytes > chunk_size_) {
    return bad(fmt::format("a chunk of {} bytes, more than the dataset's chunk size of {}", bytes, chunk_size_));
  }
  // A chunk shorter than the chunk size ends the sample; so does a chunk of
  // no bytes, whatever the chunk size (rows without data cannot go on).
  short_seen_ = bytes == 0 || (chunk_size_ > 0 && bytes < chunk_size_);
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

SampleRowDecoder::SampleRowDecoder(SampleKey key, const SampleHints& hints, bool keep_bytes)
    : key_(key), hints_(hints), keep_bytes_(keep_bytes), hash_(XXH64_createState(), &XXH64_freeState) {
  XXH64_reset(hash_.get(), 0);
}

void SampleRowDecoder::Reset() {
  cells_.reset();
  rows_ = 0;
  claimed_ = false;
  statics_ = SampleStatics();
  placer_ = ChunkPlacer();
  buf_.reset();
  data_bytes_ = 0;
  XXH64_reset(hash_.get(), 0);
  status_ = Status::OK();
  another_key_ = false;
}

void SampleRowDecoder::AddPage(const cql::Rows& page) {
  BeginPage();
  if (page.column_count() <= kColData) {
    if (status_.ok() && page.row_count() > 0) {
      status_ = Status::Corruption(fmt::format("sample {}: the data read answered {} columns, not {}",
                                               FormatKey(key_), page.column_count(), kColData + 1));
    }
    rows_ += page.row_count();
    return;
  }
  for (int32_t row = 0; row < page.row_count(); ++row) {
    for (int32_t col = 0; col <= kColData; ++col) OnCell(row, col, page.cell(row, col));
  }
}

void SampleRowDecoder::BeginPage() {
  // Statics are read from the first row of the answer, whichever page holds it.
  cells_.emplace(key_, rows_ > 0);
}

void SampleRowDecoder::OnCell(int32_t row, int32_t col, std::optional<std::span<const uint8_t>> cell) {
  if (!cells_) BeginPage();
  if (col == kColData) return OnData(cell);
  if (col == kColSeg) ++rows_;
  cells_->OnCell(row, col, cell);
}

// The current page's key and static cells are sound (else status_ says why).
bool SampleRowDecoder::CellsOk() {
  if (cells_->key_mismatch()) {
    another_key_ = true;
    status_ = Status::Corruption(
        fmt::format("sample {}: the answer holds a row of another sample's key", FormatKey(key_)));
    return false;
  }
  if (!cells_->status().ok()) {
    status_ = cells_->status();
    return false;
  }
  return true;
}

void SampleRowDecoder::OnData(std::optional<std::span<const uint8_t>> cell) {
  const std::span<const uint8_t> chunk = cell ? *cell : std::span<const uint8_t>();
  data_bytes_ += static_cast<int64_t>(chunk.size());
  if (!chunk.empty()) XXH64_update(hash_.get(), chunk.data(), chunk.size());
  if (!claimed_) statics_ = cells_->statics();  // the first row's, whatever happens next
  if (!status_.ok() || !CellsOk()) return;
  if (!claimed_) {
    // The first chunk claims the sample: its statics must pass the hints
    // before anything is placed (or a buffer of their size allocated).
    claimed_ = true;
    status_ = CheckStatics(key_, statics_, hints_);
    if (!status_.ok()) return;
    placer_.Begin(statics_.size, hints_.chunk_size);
    if (keep_bytes_) buf_.reset(new uint8_t[static_cast<size_t>(std::max<int64_t>(1, statics_.size))]);
  }
  // A null or empty cell is a chunk of no bytes, placed as the loader's
  // decoder places it: one may end a sample, a second is out of place (so
  // rows without data cannot go on without end).
  auto at = placer_.Place(key_, static_cast<int64_t>(chunk.size()));
  if (!at.ok()) {
    status_ = at.status();
    return;
  }
  if (keep_bytes_ && !chunk.empty()) std::memcpy(buf_.get() + *at, chunk.data(), chunk.size());
}

Status SampleRowDecoder::Finish() {
  if (status_.ok() && claimed_) status_ = placer_.Finish(key_);
  return status_;
}

std::span<const uint8_t> SampleRowDecoder::bytes() const {
  if (!keep_bytes_ || !claimed_ || !status_.ok() || buf_ == nullptr) return {};
  return {buf_.get(), static_cast<size_t>(statics_.size)};
}

}  // namespace cqlstream::store
