#pragma once
// Tuning tables against a layer (include/moeq/tuning.hpp).
#include <string>
#include <vector>

#include "moeq/experts.hpp"
#include "moeq/tuning.hpp"

namespace moeq::plan {

// Why options.tuning cannot serve this layer: ranges not contiguous from 0, a block size the GEMMs
// do not take, a tile that does not parse, whose rows are not the entry's block_m or that is not
// legal for the GEMM's weights (cuda::gemm_tile_reasons); a table with batch_invariant or with
// Options::block_m. Empty for an empty table.
std::vector<std::string> tuning_reasons(const ExpertsDesc& desc, const Options& options);

// A range end above every M a layer sees (a one-entry table that serves every M).
constexpr int64_t kTuningLastMaxM = int64_t{1} << 30;

// The config `moeq tune` chose at one sampled valid_shape_m.
struct TunedPoint {
  int64_t valid_shape_m = 0;
  int64_t block_m = 0;
  std::string gemm1_tile, gemm2_tile;
};

// A table from points sampled at increasing valid_shape_m v_1 < v_2 < ... < v_n: point i serves
// (v_{i-1}, v_i] (v_0 = 0), past v_n the planner's rules apply (nothing was timed there), and
// neighbours with the same config share one range (as Humming builds its heuristic tables, reference-notes §6.6). Points
// at a valid_shape_m already taken (two M with the same routed rows) keep the first.
TuningTable tuning_table_from_points(const std::vector<TunedPoint>& points);

// Where a point sampled at valid_shape_m `rows` starts its range when merged into an existing table
// (`moeq tune --update`): the nearest below `rows` of the table's range ends, top_k times a power of
// two (the shipped tables' samples) and `samples` (the other rows of the same tune); 0 if none is.
int64_t tuned_range_start(const TuningTable& table, int64_t rows, int64_t top_k, const std::vector<int64_t>& samples);
// The rows (min_m, max_m] of `table` left to the planner's rules (a gap): the entries there cut back.
void clear_tuning_rows(TuningTable& table, int64_t min_m, int64_t max_m);
// `entry` into `table`: the entries overlapping (entry.min_m, entry.max_m] cut back to their rows
// outside it (one reaching past both ends split in two); ascending order kept, and touching
// neighbours with the same config joined.
void put_tuning_entry(TuningTable& table, const TuningEntry& entry);

// `moeq tune --update`'s result: `base` with each of `gap_rows` (a sampled valid_shape_m where the
// planner's tiles beat the entry) left to the planner's rules and each pick put in, every one from its
// tuned_range_start (against `base`, top_k and `samples`, the tune's sampled rows) up to its rows.
TuningTable update_tuning_table(const TuningTable& base, const std::vector<TunedPoint>& picks,
                                const std::vector<int64_t>& gap_rows, int64_t top_k, const std::vector<int64_t>& samples);

// The shipped table (tuning/<arch>/*.json, embedded in the library) whose key is the layer's, else,
// for quantized activations, the one whose key is the layer's with 16-bit activations (the same
// GEMM tiles), or null. `arch` as "sm_90".
const TuningTable* shipped_tuning(const ExpertsDesc& desc, const std::string& arch);
// The shipped table a GPU of `arch` plans this layer with under `options`: null where the options
// choose for themselves (a table, block_m, batch_invariant, shipped_tuning = false), where there is
// none, or where it is not legal for the layer (a key shared by a layer it was not made for).
const TuningTable* shipped_tuning_for(const ExpertsDesc& desc, const Options& options, const std::string& arch);
// Every shipped table: its path under tuning/ and the table.
const std::vector<std::pair<std::string, TuningTable>>& shipped_tuning_tables();

}  // namespace moeq::plan
