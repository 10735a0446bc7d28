// Tuning tables: JSON in and out, range lookup, and their legality against a layer.
#include "plan/tuning.hpp"

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/embedded.hpp"
#include "common/json_text.hpp"
#include "cuda/moe_gemm.hpp"
#include "moeq/error.hpp"
#include "plan/legality.hpp"

namespace moeq {
namespace {

using nlohmann::json;

const json& field(const json& object, const char* name, const std::string& where) {
  const auto it = object.find(name);
  if (it == object.end()) throw Error("tuning table: " + where + " has no \"" + name + "\"");
  return *it;
}

int64_t integer_field(const json& object, const char* name, const std::string& where) {
  const json& v = field(object, name, where);
  // NOTE: nlohmann keeps integers above INT64_MAX unsigned; get<int64_t> would wrap them.
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}))
    throw Error("tuning table: " + where + "." + name + " = " + json_text(v) + " is not a 64-bit signed integer");
  return v.get<int64_t>();
}

std::string string_field(const json& object, const char* name, const std::string& where) {
  const json& v = field(object, name, where);
  if (!v.is_string()) throw Error("tuning table: " + where + "." + name + " = " + json_text(v) + " is not a string");
  return v.get<std::string>();
}

std::string range_of(const TuningEntry& e) {
  std::ostringstream s;
  s << "(" << e.min_m << ", " << e.max_m << "]";
  return s.str();
}

}  // namespace

const TuningEntry* TuningTable::find(int64_t valid_shape_m) const {
  for (const TuningEntry& e : entries)
    if (valid_shape_m > e.min_m && valid_shape_m <= e.max_m) return &e;
  // NOTE: M = 0 rows launch nothing; the first range serves it so the plan does not change shape.
  if (valid_shape_m <= 0 && !entries.empty() && entries.front().min_m == 0) return &entries.front();
  return nullptr;
}

std::string TuningTable::to_json() const {
  json rows = json::array();
  for (const TuningEntry& e : entries)
    rows.push_back({{"min_m", e.min_m}, {"max_m", e.max_m}, {"block_m", e.block_m}, {"gemm1_tile", e.gemm1_tile},
                    {"gemm2_tile", e.gemm2_tile}});
  json doc = {{"arch", arch}, {"layer", layer}, {"entries", rows}};
  if (!key.empty()) doc["key"] = key;
  if (layout != Layout::auto_select) doc["layout"] = std::string(to_string(layout));
  return doc.dump(2) + "\n";
}

TuningTable TuningTable::from_json(const std::string& text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // NOTE: out_of_range too: 1e400 or a 400-digit integer
    throw Error(std::string("tuning table: not JSON (") + e.what() + ")");
  }
  if (const auto key = first_duplicate_key(text.begin(), text.end()))
    throw Error("tuning table: field '" + *key + "' appears twice in one object");
  if (!doc.is_object()) throw Error("tuning table: the document is not an object");
  if (const auto key = first_unknown_key(doc, {"arch", "layer", "key", "layout", "entries"}))
    throw Error("tuning table: field '" + *key + "' is unknown (arch, layer, key, layout, entries)");
  TuningTable t;
  if (doc.contains("arch")) t.arch = string_field(doc, "arch", "the table");
  if (doc.contains("layer")) t.layer = string_field(doc, "layer", "the table");
  if (doc.contains("key")) t.key = string_field(doc, "key", "the table");
  if (doc.contains("layout")) {
    const std::string name = string_field(doc, "layout", "the table");
    const auto layout = parse_layout(name);
    if (!layout || *layout == Layout::auto_select)
      throw Error("tuning table: layout = \"" + name + "\" is not indexed, contiguous or masked");
    t.layout = *layout;
  }
  const json& rows = field(doc, "entries", "the table");
  if (!rows.is_array()) throw Error("tuning table: entries is not an array");
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string where = "entries[" + std::to_string(i) + "]";
    if (!rows[i].is_object()) throw Error("tuning table: " + where + " is not an object");
    if (const auto key = first_unknown_key(rows[i], {"min_m", "max_m", "block_m", "gemm1_tile", "gemm2_tile"}))
      throw Error("tuning table: " + where + ": field '" + *key + "' is unknown (min_m, max_m, block_m, gemm1_tile, gemm2_tile)");
    TuningEntry e;
    e.min_m = integer_field(rows[i], "min_m", where);
    e.max_m = integer_field(rows[i], "max_m", where);
    e.block_m = integer_field(rows[i], "block_m", where);
    e.gemm1_tile = string_field(rows[i], "gemm1_tile", where);
    e.gemm2_tile = string_field(rows[i], "gemm2_tile", where);
    t.entries.push_back(std::move(e));
  }
  return t;
}

TuningTable TuningTable::load(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error("tuning table: " + path + " is a directory, not a JSON file");
  std::ifstream in(path);
  if (!in) throw Error("tuning table: cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return from_json(text.str());
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

namespace plan {

std::vector<std::string> tuning_reasons(const ExpertsDesc& d, const Options& o) {
  std::vector<std::string> r;
  const TuningTable& t = o.tuning;
  if (t.empty()) return r;
  if (o.batch_invariant)
    r.push_back("tuning: a table picks tiles by M, and batch_invariant needs one tile for every M; give one or the other");
  if (o.block_m != 0) r.push_back("tuning: block_m = " + std::to_string(o.block_m) + " and a table both set the block size");
  if (t.layout != Layout::auto_select && t.layout != Layout::indexed && t.layout != Layout::contiguous &&
      t.layout != Layout::masked)
    r.push_back("tuning: layout = " + std::to_string(static_cast<int>(t.layout)) + " is not a Layout");
  // NOTE: a table `moeq tune` wrote names its layer; one of another layer would pick tiles timed on other shapes. Quantized
  // activations may take their weights' 16-bit table (shipped_tuning's rule). A table without a key is the caller's word.
  if (!t.key.empty() && t.key != d.tuning_key()) {
    ExpertsDesc sixteen_bit = d;
    sixteen_bit.act_format = ActFormat::none;
    if (t.key != sixteen_bit.tuning_key())
      r.push_back("tuning: the table's key \"" + t.key + "\" is not this layer's (\"" + d.tuning_key() +
                  "\"): it was tuned for another layer");
  }
  // NOTE: gaps between ranges are allowed: the planner's rules serve them (as past the last range).
  int64_t previous_max = 0;
  for (size_t i = 0; i < t.entries.size(); ++i) {
    const TuningEntry& e = t.entries[i];
    const std::string where = "tuning entries[" + std::to_string(i) + "] " + range_of(e);
    if (e.min_m < previous_max)
      r.push_back(where + ": min_m = " + std::to_string(e.min_m) + " is below " + std::to_string(previous_max) +
                  " (the ranges ascend without overlapping: each starts at or past the end of the one before)");
    if (e.max_m <= e.min_m) r.push_back(where + ": max_m = " + std::to_string(e.max_m) + " is not above min_m");
    previous_max = e.max_m;
    if (!is_gpu_block_m(e.block_m)) {
      r.push_back(where + ": block_m = " + std::to_string(e.block_m) + " must be " + kGpuBlockMs);
      continue;
    }
    struct Gemm {
      const char* name;
      const std::string* text;
      bool second;
    };
    for (const auto& [name, text, second] : {Gemm{"gemm1_tile", &e.gemm1_tile, false}, Gemm{"gemm2_tile", &e.gemm2_tile, true}}) {
      cuda::GemmTile tile;
      try {
        tile = cuda::parse_gemm_tile(*text);
      } catch (const Error& err) {
        r.push_back(where + ": " + name + " = '" + *text + "': " + err.what());
        continue;
      }
      if (tile.block_m != e.block_m)
        r.push_back(where + ": " + name + " = '" + *text + "' has " + std::to_string(tile.block_m) +
                    "-row blocks, not block_m = " + std::to_string(e.block_m));
      if (d.hidden_size <= 0 || d.intermediate_size <= 0 || d.num_experts <= 0) continue;
      const WeightDesc w = second ? d.w2() : d.w13();
      for (const std::string& why : cuda::gemm_tile_reasons(tile, w))
        r.push_back(where + ": " + name + " = '" + *text + "': " + why);
    }
  }
  return r;
}

TuningTable tuning_table_from_points(const std::vector<TunedPoint>& points) {
  TuningTable t;
  int64_t start = 0;
  for (const TunedPoint& p : points) {
    if (p.valid_shape_m <= start) continue;
    const bool same = !t.entries.empty() && t.entries.back().block_m == p.block_m &&
                      t.entries.back().gemm1_tile == p.gemm1_tile && t.entries.back().gemm2_tile == p.gemm2_tile;
    if (same) {
      t.entries.back().max_m = p.valid_shape_m;
    } else {
      t.entries.push_back({start, p.valid_shape_m, p.block_m, p.gemm1_tile, p.gemm2_tile});
    }
    start = p.valid_shape_m;
  }
  return t;
}

int64_t tuned_range_start(const TuningTable& table, int64_t rows, int64_t top_k, const std::vector<int64_t>& samples) {
  int64_t start = 0;
  auto consider = [&](int64_t bound) {
    if (bound < rows) start = std::max(start, bound);
  };
  for (const TuningEntry& e : table.entries) {
    consider(e.min_m);
    consider(e.max_m);
  }
  for (int64_t power = std::max<int64_t>(top_k, 1); power < rows; power *= 2) consider(power);
  for (const int64_t sample : samples) consider(sample);
  return start;
}

void clear_tuning_rows(TuningTable& table, int64_t min_m, int64_t max_m) {
  std::vector<TuningEntry> kept;
  for (const TuningEntry& e : table.entries) {
    if (e.max_m <= min_m || e.min_m >= max_m) {
      kept.push_back(e);
      continue;
    }
    if (e.min_m < min_m) {
      TuningEntry below = e;
      below.max_m = min_m;
      kept.push_back(below);
    }
    if (e.max_m > max_m) {
      TuningEntry above = e;
      above.min_m = max_m;
      kept.push_back(above);
    }
  }
  table.entries = std::move(kept);
}

void put_tuning_entry(TuningTable& table, const TuningEntry& entry) {
  clear_tuning_rows(table, entry.min_m, entry.max_m);
  std::vector<TuningEntry> all = std::move(table.entries);
  all.push_back(entry);
  std::sort(all.begin(), all.end(), [](const TuningEntry& a, const TuningEntry& b) { return a.min_m < b.min_m; });
  // Touching neighbours with the same config become one range.
  table.entries.clear();
  for (const TuningEntry& e : all) {
    if (!table.entries.empty()) {
      TuningEntry& last = table.entries.back();
      if (last.max_m == e.min_m && last.block_m == e.block_m && last.gemm1_tile == e.gemm1_tile &&
          last.gemm2_tile == e.gemm2_tile) {
        last.max_m = e.max_m;
        continue;
      }
    }
    table.entries.push_back(e);
  }
}

TuningTable update_tuning_table(const TuningTable& base, const std::vector<TunedPoint>& picks,
                                const std::vector<int64_t>& gap_rows, int64_t top_k, const std::vector<int64_t>& samples) {
  TuningTable table = base;
  for (const int64_t rows : gap_rows) clear_tuning_rows(table, tuned_range_start(base, rows, top_k, samples), rows);
  for (const TunedPoint& p : picks)
    put_tuning_entry(table, {tuned_range_start(base, p.valid_shape_m, top_k, samples), p.valid_shape_m, p.block_m,
                             p.gemm1_tile, p.gemm2_tile});
  return table;
}

const std::vector<std::pair<std::string, TuningTable>>& shipped_tuning_tables() {
  static const auto* tables = [] {
    auto* v = new std::vector<std::pair<std::string, TuningTable>>();
    for (const EmbeddedFile& f : embedded_tuning_tables()) {
      try {
        v->emplace_back(std::string(f.path), TuningTable::from_json(std::string(f.data)));
      } catch (const Error& e) {
        throw Error("shipped tuning table tuning/" + std::string(f.path) + ": " + e.what());
      }
    }
    return v;
  }();
  return *tables;
}

const TuningTable* shipped_tuning(const ExpertsDesc& desc, const std::string& arch) {
  auto find = [&](const std::string& key) -> const TuningTable* {
    for (const auto& entry : shipped_tuning_tables())
      if (entry.second.arch == arch && entry.second.key == key) return &entry.second;
    return nullptr;
  };
  if (const TuningTable* own = find(desc.tuning_key())) return own;
  if (desc.act_format == ActFormat::none) return nullptr;
  // NOTE: quantized activations run the same GEMM tiles as the 16-bit ones (their values, or the
  // e4m3 codes on the same direct tiles), and `moeq tune` times the 16-bit form: such a layer
  // without a table of its own takes its weights' 16-bit table.
  // PERF: with the Qwen3 MXFP4 table against the planner, the MXFP4 x FP8-token, MXFP8 and MXFP4
  // activation layers moved as the bf16 layer did, within ~1.2 us at M = 16 to 1024 (M = 4096:
  // inside its +-4 us spread; call 4 of bench/results/2026-12-02-h200-quantizer-warps.md).
  ExpertsDesc sixteen_bit = desc;
  sixteen_bit.act_format = ActFormat::none;
  return find(sixteen_bit.tuning_key());
}

const TuningTable* shipped_tuning_for(const ExpertsDesc& desc, const Options& options, const std::string& arch) {
  if (!options.tuning.empty() || !options.shipped_tuning || options.batch_invariant || options.block_m != 0)
    return nullptr;
  const TuningTable* shipped = shipped_tuning(desc, arch);
  if (shipped == nullptr) return nullptr;
  Options with_table = options;
  with_table.tuning = *shipped;
  return tuning_reasons(desc, with_table).empty() ? shipped : nullptr;
}

}  // namespace plan
}  // namespace moeq
