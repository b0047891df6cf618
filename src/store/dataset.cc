// Copyright (c) cqlstream authors.
#include "cqlstream/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "util/cql_keywords.h"

namespace cqlstream {

std::string_view LabelKindName(LabelKind k) {
  switch (k) {
    case LabelKind::kNone: return "none";
    case LabelKind::kClass: return "class";
    case LabelKind::kMultiLabel: return "multilabel";
    case LabelKind::kTarget: return "target";
  }
  return "none";
}

StatusOr<LabelKind> ParseLabelKind(std::string_view s) {
  if (s == "none") return LabelKind::kNone;
  if (s == "class") return LabelKind::kClass;
  if (s == "multilabel") return LabelKind::kMultiLabel;
  if (s == "target") return LabelKind::kTarget;
  return Status::InvalidArgument(fmt::format("unknown label kind '{}' (none, class, multilabel, target)", s));
}

std::string_view SampleKindName(SampleKind k) { return k == SampleKind::kBlob ? "blob" : "image"; }

StatusOr<SampleKind> ParseSampleKind(std::string_view s) {
  if (s == "image") return SampleKind::kImage;
  if (s == "blob") return SampleKind::kBlob;
  return Status::InvalidArgument(fmt::format("unknown sample kind '{}' (image, blob)", s));
}

std::string FormatKey(SampleKey k) { return fmt::format("{}:{}", KeySegment(k), KeyIndex(k)); }

std::vector<std::string> DatasetInfo::splits() const {
  std::set<std::string> s;
  for (const auto& g : segments) s.insert(g.split);
  return {s.begin(), s.end()};
}

std::vector<SegmentInfo> DatasetInfo::SplitSegments(std::string_view split) const {
  std::vector<SegmentInfo> out;
  for (const auto& g : segments) {
    if (g.split == split && g.count > 0) out.push_back(g);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.seg < b.seg; });
  return out;
}

int64_t DatasetInfo::Count(std::string_view split) const {
  int64_t n = 0;
  for (const auto& g : segments) n += g.split == split ? g.count : 0;
  return n;
}

int64_t DatasetInfo::Bytes(std::string_view split) const {
  int64_t n = 0;
  for (const auto& g : segments) n += g.split == split ? g.bytes : 0;
  return n;
}

int64_t DatasetInfo::MaxSize(std::string_view split) const {
  int64_t n = 0;
  for (const auto& g : segments) n = g.split == split ? std::max(n, g.max_size) : n;
  return n;
}

namespace {

Status ValidateName(std::string_view what, std::string_view name, size_t max_len) {
  bool ok = !name.empty() && name.size() <= max_len && name[0] >= 'a' && name[0] <= 'z';
  for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  if (ok) return Status::OK();
  return Status::InvalidArgument(fmt::format(
      "invalid {} name '{}': use a lowercase letter followed by up to {} lowercase letters, digits or '_'", what,
      name, max_len - 1));
}

}  // namespace

Status ValidateKeyspaceName(std::string_view name) {
  CQLS_RETURN_IF_ERROR(ValidateName("keyspace", name, 32));
  // Generated CQL does not quote identifiers: a reserved word (select,
  // token) would be a server syntax error far from its cause.
  return RefuseReservedWord("keyspace", name);
}
Status ValidateDatasetName(std::string_view name) { return ValidateName("dataset", name, 24); }

}  // namespace cqlstream
