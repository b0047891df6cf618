// Copyright (c) cqlstream authors.
#include "reader_checkpoint.h"

#include <array>
#include <cstring>

namespace cqlstream::dali_plugin {
namespace {

constexpr std::string_view kMagic = "CQDALI01";
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  bool U8(uint8_t* v) {
    if (b_.size() < 1) return false;
    *v = static_cast<uint8_t>(b_[0]);
    b_.remove_prefix(1);
    return true;
  }
  bool U32(uint32_t* v) {
    if (b_.size() < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) *v |= static_cast<uint32_t>(static_cast<uint8_t>(b_[i])) << (8 * i);
    b_.remove_prefix(4);
    return true;
  }
  bool U64(uint64_t* v) {
    if (b_.size() < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i) *v |= static_cast<uint64_t>(static_cast<uint8_t>(b_[i])) << (8 * i);
    b_.remove_prefix(8);
    return true;
  }
  bool Bytes(size_t n, std::string* v) {
    if (b_.size() < n) return false;
    v->assign(b_.substr(0, n));
    b_.remove_prefix(n);
    return true;
  }
  size_t left() const { return b_.size(); }

 private:
  std::string_view b_;
};

}  // namespace

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const uint32_t v = (static_cast<uint32_t>(static_cast<uint8_t>(in[i])) << 16) |
                       (static_cast<uint32_t>(static_cast<uint8_t>(in[i + 1])) << 8) |
                       static_cast<uint32_t>(static_cast<uint8_t>(in[i + 2]));
    for (int k = 3; k >= 0; --k) out.push_back(kAlphabet[(v >> (6 * k)) & 63]);
  }
  if (i < in.size()) {
    uint32_t v = static_cast<uint32_t>(static_cast<uint8_t>(in[i])) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint32_t>(static_cast<uint8_t>(in[i + 1])) << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

StatusOr<std::string> Base64Decode(std::string_view in) {
  std::array<int, 256> rev;
  rev.fill(-1);
  for (int k = 0; k < 64; ++k) rev[static_cast<uint8_t>(kAlphabet[k])] = k;
  if (in.size() % 4 != 0) return Status::InvalidArgument("checkpoint: base64 text length is not a multiple of 4");
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + static_cast<size_t>(k)];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0 || rev[static_cast<uint8_t>(c)] < 0) {
        return Status::InvalidArgument("checkpoint: not base64 text");
      }
      v[k] = rev[static_cast<uint8_t>(c)];
    }
    const uint32_t x = (static_cast<uint32_t>(v[0]) << 18) | (static_cast<uint32_t>(v[1]) << 12) |
                       (static_cast<uint32_t>(v[2]) << 6) | static_cast<uint32_t>(v[3]);
    out.push_back(static_cast<char>((x >> 16) & 0xff));
    if (pad < 2) out.push_back(static_cast<char>((x >> 8) & 0xff));
    if (pad < 1) out.push_back(static_cast<char>(x & 0xff));
  }
  return out;
}

std::string ReaderCheckpoint::Encode() const {
  std::string b(kMagic);
  PutU32(&b, static_cast<uint32_t>(shard_id));
  PutU32(&b, static_cast<uint32_t>(num_shards));
  PutU32(&b, static_cast<uint32_t>(batch_size));
  PutU64(&b, samples);
  PutU64(&b, slot);
  PutU64(&b, real);
  b.push_back(static_cast<char>((loader_ended ? 1 : 0) | (has_last ? 2 : 0)));
  PutU64(&b, last_key);
  PutU32(&b, static_cast<uint32_t>(pending.size()));
  for (SampleKey k : pending) PutU64(&b, k);
  PutU32(&b, static_cast<uint32_t>(loader_state.size()));
  b += loader_state;
  return Base64Encode(b);
}

StatusOr<ReaderCheckpoint> ReaderCheckpoint::Decode(std::string_view text) {
  CQLS_ASSIGN_OR_RETURN(std::string bytes, Base64Decode(text));
  if (bytes.compare(0, kMagic.size(), kMagic) != 0) {
    return Status::InvalidArgument("checkpoint: not a cqlstream DALI reader checkpoint (bad magic)");
  }
  Reader r(std::string_view(bytes).substr(kMagic.size()));
  ReaderCheckpoint c;
  uint32_t shard = 0, shards = 0, batch = 0, npending = 0, nstate = 0;
  uint8_t flags = 0;
  const auto truncated = [] { return Status::InvalidArgument("checkpoint: truncated"); };
  if (!r.U32(&shard) || !r.U32(&shards) || !r.U32(&batch) || !r.U64(&c.samples) || !r.U64(&c.slot) ||
      !r.U64(&c.real) || !r.U8(&flags) || !r.U64(&c.last_key) || !r.U32(&npending)) {
    return truncated();
  }
  if (flags > 3) return Status::InvalidArgument("checkpoint: unknown flags");
  c.shard_id = static_cast<int32_t>(shard);
  c.num_shards = static_cast<int32_t>(shards);
  c.batch_size = static_cast<int32_t>(batch);
  c.loader_ended = (flags & 1) != 0;
  c.has_last = (flags & 2) != 0;
  if (npending > r.left() / 8) return truncated();
  c.pending.resize(npending);
  for (auto& k : c.pending) {
    if (!r.U64(&k)) return truncated();
  }
  if (!r.U32(&nstate) || !r.Bytes(nstate, &c.loader_state)) return truncated();
  if (r.left() != 0) return Status::InvalidArgument("checkpoint: trailing bytes");
  return c;
}

}  // namespace cqlstream::dali_plugin
