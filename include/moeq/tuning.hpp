#pragma once
// Kernel configs by token count (CONTRACT §7): a tuning table maps ranges (min_m, max_m] of
// valid_shape_m (the rows routed to this rank's experts, ceil(M * top_k * E / E_g)) to the GEMM
// block size and the tiles of GEMM1 and GEMM2. `moeq tune` writes them; Options::tuning hands one
// to a layer; an empty table leaves both to the planner's rules.
#include <cstdint>
#include <string>
#include <vector>

#include "moeq/types.hpp"

namespace moeq {

struct TuningEntry {
  int64_t min_m = 0;       // exclusive
  int64_t max_m = 0;       // inclusive
  int64_t block_m = 0;     // the GEMM M block, for both GEMMs (one routing serves both): 8, 16, 24, 32, 48, 64, 80, 96, 128 or 144
  std::string gemm1_tile;  // BMxBN/WMxWNxWK/S[/kN][/oN][/w, /p or /r], BM = block_m (e.g. "8x128/1x4x1/4/o4/r")
  std::string gemm2_tile;
};

struct TuningTable {
  std::string arch;   // the device it was measured on, e.g. "sm_90" (informative)
  std::string layer;  // what it was tuned for, e.g. "qwen3-30b-a3b mxfp4" (informative)
  // The layer's shape and formats (moeq::tuning_key) for the shipped tables' lookup; "" = none.
  std::string key;
  // The layout whose GEMMs it timed (`moeq tune --layout`): the plan follows it only for that
  // layout. auto_select (JSON: no "layout") = every layout.
  Layout layout = Layout::auto_select;
  // Ascending, not overlapping: each starts at or past the end of the one before (the first at 0 or
  // later). Where no range holds the rows (a gap, before the first or past the last one) the planner's
  // rules apply.
  std::vector<TuningEntry> entries;

  bool empty() const { return entries.empty(); }
  // Whether the plan follows this table for a step in `step_layout` (indexed, contiguous, masked).
  bool serves(Layout step_layout) const { return layout == Layout::auto_select || layout == step_layout; }
  // The entry whose range holds valid_shape_m, or null.
  const TuningEntry* find(int64_t valid_shape_m) const;
  // {"arch": ..., "layer": ..., "key": ..., "layout": ..., "entries": [{"min_m", "max_m", "block_m", "gemm1_tile",
  // "gemm2_tile"}, ...]}; "key" and "layout" are optional.
  std::string to_json() const;
  // Throws moeq::Error naming the field and the value that is wrong. The tiles' legality for a
  // layer is checked where the table meets the layer (can_implement).
  static TuningTable from_json(const std::string& text);
  static TuningTable load(const std::string& path);
};

}  // namespace moeq
