// Copyright (c) cqlstream authors.
#include "hostile/answer_lies.h"

#include <array>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "net/routing/murmur3.h"

namespace cqlstream::hostile {

int ColumnOf(const Table& t, const char* name) {
  for (size_t i = 0; i < t.columns.size(); ++i) {
    if (t.columns[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

void SetCell(Table* t, size_t row, const char* col, Value v) {
  const int c = ColumnOf(*t, col);
  if (c >= 0) t->rows[row][static_cast<size_t>(c)] = std::move(v);
}

void LieAboutSystem(Mode mode, const Select& sel, Answer* a) {
  if (sel.keyspace != "system" || sel.table != "local" || a->error_code != 0) return;
  if (mode == Mode::kLocalMissingColumns) {
    Table t{a->table.keyspace, a->table.name, {{"key", DataType::Simple(TypeId::kVarchar)}}, {}};
    for (size_t i = 0; i < a->table.rows.size(); ++i) t.rows.push_back({Value::Text("local")});
    a->table = std::move(t);
  } else if (mode == Mode::kLocalMistypedColumns) {
    for (auto& c : a->table.columns) c.type = DataType::Simple(TypeId::kInt);
    for (auto& r : a->table.rows) {
      for (auto& v : r) v = Value::Int(7);
    }
  }
}

bool LieAboutPeers(Mode mode, const Select& sel, Answer* a) {
  if (mode != Mode::kPeersRepeatHosts || sel.keyspace != "system" || a->error_code != 0 ||
      (sel.table != "peers" && sel.table != "peers_v2")) {
    return false;
  }
  struct Peer {
    std::vector<uint8_t> address;
    uint8_t host_id;  // UuidOf's byte
    const char* token;
  };
  for (const Peer& p : {Peer{{127, 0, 0, 1}, 0x33, "100"}, Peer{{10, 9, 9, 9}, kLocalHostIdByte, "0"}}) {
    std::vector<Value> row;
    for (const auto& c : a->table.columns) {
      const std::string& n = c.name;
      row.push_back(n == "peer" || n == "native_address" || n == "rpc_address" ? Value::Blob(p.address)
                    : n == "data_center"                                       ? Value::Text("dc1")
                    : n == "rack"                                              ? Value::Text("rack1")
                    : n == "release_version"                                   ? Value::Text("5.0.2")
                    : n == "host_id"                                           ? UuidOf(p.host_id)
                    : n == "tokens"                                            ? Value::List({Value::Text(p.token)})
                    : n == "schema_version"                                    ? UuidOf(0x22)
                                                                               : Value::Null());
    }
    a->table.rows.push_back(std::move(row));
  }
  return true;
}

void LieAboutCatalog(Mode mode, const Select& sel, Answer* a) {
  if (mode != Mode::kCatalogHugeMaxSize || sel.table != "segments" || a->error_code != 0) return;
  for (size_t i = 0; i < a->table.rows.size(); ++i) {
    SetCell(&a->table, i, "max_size", Value::Bigint(int64_t{1} << 62));
    SetCell(&a->table, i, "bytes", Value::Bigint(int64_t{1} << 62));
  }
}

void LieAboutGroupedRows(Table* t, int32_t past_end, int64_t lie) {
  switch (lie % 4) {
    case 0: {
      std::vector<Value> extra = t->rows.front();
      extra[1] = Value::Int(past_end);
      t->rows.push_back(std::move(extra));
      break;
    }
    case 1:
      t->rows.push_back(t->rows.front());
      break;
    case 2:
      t->rows.front()[0] = Value::Int(1);
      break;
    default:
      t->columns[1].type = DataType::Simple(TypeId::kBigint);
      for (auto& r : t->rows) r[1] = Value::Bigint(r[1].as_int());
      break;
  }
}

void LieAboutForeignGroup(Table* t, int64_t lie) {
  switch (lie % 4) {
    case 0: {  // a key not asked for (one the table does not even hold)
      std::vector<Value> extra = t->rows.front();
      extra[0] = Value::Int(ForeignKeyOf(kAttachedSamples + 7));
      t->rows.push_back(std::move(extra));
      break;
    }
    case 1:  // one sample's row twice
      t->rows.push_back(t->rows.front());
      break;
    case 2:  // one sample's row left out (as if it were deleted)
      t->rows.erase(t->rows.begin());
      break;
    default:  // a null key cell
      t->rows.back()[0] = Value::Null();
      break;
  }
}

bool LieAboutMetaScan(Mode mode, const Select& sel, int64_t above, int64_t at_most, Answer* a, int64_t lie) {
  Table& t = a->table;
  if (mode != Mode::kMetaScanLies || sel.token_of.empty() || sel.table != std::string("m_") + kTinyDataset ||
      a->error_code != 0 || t.rows.empty() || ColumnOf(t, "seg") != 0 || ColumnOf(t, "block") != 1 ||
      ColumnOf(t, "idx") != 2) {
    return false;
  }
  switch (lie % 3) {
    case 0:  // the first row again (a page sent twice)
      t.rows.push_back(t.rows.front());
      break;
    case 1: {  // a row of a partition outside the range: the first segment whose (seg, block 0) lies outside
      for (int32_t seg = 1; seg < 1000; ++seg) {
        std::array<uint8_t, 4> sb{}, bb{};
        cql::StoreU32(sb.data(), static_cast<uint32_t>(seg));
        const int64_t token =
            routing::PartitionKeyToken({std::span<const uint8_t>(sb), std::span<const uint8_t>(bb)}).value();
        if (token > above && token <= at_most) continue;
        std::vector<Value> extra = t.rows.back();
        extra[0] = Value::Int(seg);
        extra[1] = Value::Int(0);
        extra[2] = Value::Int(0);
        t.rows.push_back(std::move(extra));
        break;
      }
      break;
    }
    default:  // an idx outside its block (block 0 holds idx 0..1023)
      t.rows.back()[2] = Value::Int(5000);
      break;
  }
  return true;
}

}  // namespace cqlstream::hostile
