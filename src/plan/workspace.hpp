#pragma once
// Workspace planning (CONTRACT §7, reference-notes §3): the buffers one experts step needs,
// placed in two ping-pong workspaces so no stage reads and writes the same workspace.
#include <cstdint>
#include <string>
#include <vector>

#include "moeq/experts.hpp"

namespace moeq::plan {

struct BufferPlacement {
  std::string name;
  int workspace = 1;          // 1 or 2
  int64_t offset_bytes = 0;
  std::vector<int64_t> shape;  // elements; 4-bit codes count elements, not bytes
  DType dtype = DType::none;
  int64_t bytes = 0;
};

struct WorkspacePlan {
  std::vector<BufferPlacement> buffers;
  int64_t workspace1_bytes = 0;
  int64_t workspace2_bytes = 0;

  const BufferPlacement* find(const std::string& name) const;
  const BufferPlacement& get(const std::string& name) const;  // throws Error if absent
  std::string to_string() const;
};

// Rows of the problem: standard input has num_tokens rows; batched input has E*T rows.
struct PlanShape {
  Layout layout = Layout::indexed;  // resolved, never auto
  int64_t num_tokens = 0;           // M (standard)
  int64_t max_tokens_per_expert = 0;  // T (masked)
  int64_t block_m = 64;             // GEMM M block: indexed alignment and segment-table size
  // batch_invariant: the GEMM tile may not depend on the batch (each row's sum over K, and so
  // its bits, depend on the tile), so block_m is fixed and the tile is chosen without M.
  bool batch_invariant = false;
  // The tuning table's entry for these rows (Options::tuning), or null: then its block_m and tiles
  // replace the planner's.
  const TuningEntry* tuned = nullptr;
  bool fp8_tensor_cores = true;  // Options::fp8_tensor_cores
  bool fp8_wgmma = false;        // Options::fp8_wgmma
};

// The spec buffers (quanted_gate_up_input, gate_up_output, activation_output,
// quanted_down_input, down_output, output) each at offset 0 of the workspace the reverse
// ping-pong walk gives it. moeq adds, past the largest buffer of a workspace:
//   *.scales (activation scales of a quantized buffer, right after its codes),
//   permuted_hidden (contiguous layout) at offset 0 of workspace 1: its readers write workspace 2,
//   routing metadata in workspace 2 (error_flags, local_ids, route_chunk_counts, sorted_ids, expert_ids,
//   num_tokens_padded, expert_offsets, inv_permuted_idx, permuted_src, and the GEMM block_table
//   and num_blocks of the segment layouts), alive through the whole step.
WorkspacePlan plan_workspaces(const ExpertsDesc& desc, const PlanShape& shape);

// Rows routed to this rank's experts, as the tuning tables are indexed (CONTRACT §7):
// ceil(global_tokens * top_k * E / E_g).
int64_t valid_shape_m(const ExpertsDesc& desc, int64_t global_tokens);

// The GEMMs' M block (and the indexed layout's alignment): 8 below 90% of 8 expected rows per
// expert, else the smallest of {16, 24 (4-bit codes), 32, 48, 64} that keeps the expected rows per
// expert under 90% of a block; beyond, 80, 96, 128 or 144, whichever gives the fewest expected rows
// per expert with a block's fixed cost counted in rows (expected_block_rows).
int64_t choose_block_m(const ExpertsDesc& desc, int64_t num_tokens);
// The rows an expert's blocks of `block_m` span, plus `overhead_rows` per block, expected when its
// routed rows are Normal(mean, sqrt(mean)) (uniform routing of many tokens); infinity for a mean that
// is not finite.
double expected_block_rows(double mean_rows, int64_t block_m, double overhead_rows);
// block_m in batch-invariant mode (Options::block_m may set another).
constexpr int64_t kBatchInvariantBlockM = 16;

// Layout for `auto`: masked for batched input, else indexed at every M.
// PERF: the contiguous layout's permute kernel costs more than GEMM1's row gather saves: the whole
// step with indexed against contiguous on the H200, same process, alternating (session 27,
// bench/results/2026-12-03-h200-layouts.md): Qwen3-30B-A3B MXFP4 M = 512 / 1024 / 2048 / 4096
// -2% / -4.5% / -6.5% / -8%, INT4 M = 4096 -8%, gpt-oss-120b M = 2048 / 4096 -5%, DeepSeek-V3
// MXFP4 M = 4096 -5%. (Contiguous from 64 rows per expert was a guess, never measured.)
Layout choose_layout(const ExpertsDesc& desc, Layout requested, int64_t num_tokens, bool batched);

}  // namespace moeq::plan
