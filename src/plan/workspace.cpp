#include "plan/workspace.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "cuda/routing.hpp"
#include "moeq/error.hpp"
#include "reference/quantize.hpp"
#include "reference/routing.hpp"

namespace moeq::plan {
namespace {

constexpr int64_t kAlignBytes = 256;
int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

BufferPlacement make_buffer(std::string name, std::vector<int64_t> shape, DType dtype) {
  BufferPlacement b;
  b.name = std::move(name);
  int64_t elems = 1;
  for (int64_t d : shape) elems *= d;
  b.shape = std::move(shape);
  b.dtype = dtype;
  b.bytes = dtype_bytes(dtype, elems);
  return b;
}

int64_t workspace_end(const std::vector<BufferPlacement>& buffers, int ws) {
  int64_t end = 0;
  for (const auto& b : buffers)
    if (b.workspace == ws) end = std::max(end, b.offset_bytes + b.bytes);
  return end;
}

}  // namespace

const BufferPlacement* WorkspacePlan::find(const std::string& name) const {
  for (const auto& b : buffers)
    if (b.name == name) return &b;
  return nullptr;
}

const BufferPlacement& WorkspacePlan::get(const std::string& name) const {
  if (const auto* b = find(name)) return *b;
  throw Error("workspace plan has no buffer '" + name + "'");
}

std::string WorkspacePlan::to_string() const {
  std::ostringstream s;
  s << "workspace1 " << workspace1_bytes << " B, workspace2 " << workspace2_bytes << " B\n";
  for (const auto& b : buffers) {
    s << "  ws" << b.workspace << " +" << b.offset_bytes << " " << b.name << " [";
    for (size_t i = 0; i < b.shape.size(); ++i) s << (i ? ", " : "") << b.shape[i];
    s << "] " << moeq::to_string(b.dtype) << " (" << b.bytes << " B)\n";
  }
  return s.str();
}

WorkspacePlan plan_workspaces(const ExpertsDesc& d, const PlanShape& p) {
  const bool batched = p.layout == Layout::masked;
  const bool quantized = d.act_format != ActFormat::none;
  const int64_t E = d.num_experts, K = d.hidden_size, I = d.intermediate_size;
  const int64_t rows = batched ? E * p.max_tokens_per_expert : p.num_tokens * d.top_k;
  const int64_t gemm1_input_rows = p.layout == Layout::indexed ? p.num_tokens : rows;
  const DType c = d.act_dtype;
  const DType q = act_format_code_dtype(d.act_format);

  // The required list in stage order (reference-notes §3.2).
  std::vector<BufferPlacement> required;
  if (quantized) required.push_back(make_buffer("quanted_gate_up_input", {gemm1_input_rows, K}, q));
  required.push_back(make_buffer("gate_up_output", {rows, d.gemm1_n()}, c));
  required.push_back(make_buffer("activation_output", {rows, I}, c));
  if (quantized) required.push_back(make_buffer("quanted_down_input", {rows, I}, q));
  if (batched)
    required.push_back(make_buffer("down_output", {E, p.max_tokens_per_expert, K}, c));
  else
    required.push_back(make_buffer("down_output", {rows, K}, c));
  if (!batched) required.push_back(make_buffer("output", {p.num_tokens, K}, c));

  // Reverse walk: the i-th buffer from the end goes to workspace 1 when i is even.
  for (size_t i = 0; i < required.size(); ++i)
    required[required.size() - 1 - i].workspace = (i % 2 == 0) ? 1 : 2;

  WorkspacePlan plan;
  plan.buffers = required;
  // Activation scales sit right after their codes, in the same workspace.
  for (const auto& b : required) {
    if (b.name != "quanted_gate_up_input" && b.name != "quanted_down_input") continue;
    BufferPlacement s;
    s.name = b.name + ".scales";
    s.workspace = b.workspace;
    s.offset_bytes = align_up(b.bytes, kAlignBytes);
    s.shape = {b.shape[0], d.act_format == ActFormat::fp8_token ? 1 : b.shape[1] / 32};
    s.dtype = d.act_format == ActFormat::fp8_token ? DType::f32 : DType::ue8m0;
    s.bytes = ref::act_scale_bytes(d.act_format, b.shape[0], b.shape[1]);
    plan.buffers.push_back(s);
    // The CUDA backend's 16-bit MMAs read the quantized activations as 16-bit values
    // (cuda::dequantize_activation): past the scales, in the same workspace, whose other buffers
    // are dead by then and whose partner holds the GEMM's output.
    const bool down = b.name == "quanted_down_input";
    BufferPlacement v = make_buffer(down ? "dequantized_down_input" : "dequantized_gate_up_input", b.shape, c);
    v.workspace = b.workspace;
    v.offset_bytes = align_up(s.offset_bytes + s.bytes, kAlignBytes);
    if (down) {
      // NOTE: GEMM2's values and their own scales are written by one kernel that still reads
      // gate_up_output (cuda::activation_quantize_values), which shares this workspace: both
      // past it.
      for (const auto& g : required)
        if (g.name == "gate_up_output" && g.workspace == v.workspace)
          v.offset_bytes = std::max(v.offset_bytes, align_up(g.offset_bytes + g.bytes, kAlignBytes));
      BufferPlacement vs = s;
      vs.name = "dequantized_down_input.scales";
      vs.offset_bytes = align_up(v.offset_bytes + v.bytes, kAlignBytes);
      plan.buffers.push_back(v);
      plan.buffers.push_back(vs);
      continue;
    }
    plan.buffers.push_back(v);
  }
  // NOTE: the permuted hidden states are read by the first stage (GEMM1, or with quantized
  // activations the permute of the dequantized token rows the CUDA backend keeps here as [M, K]),
  // whose output is in workspace 2 in both chains, so they go to workspace 1, where
  // activation_output later overwrites them after their last reader.
  if (p.layout == Layout::contiguous) {
    auto b = make_buffer("permuted_hidden", {rows, K}, c);
    b.workspace = 1;
    plan.buffers.push_back(b);
  }

  // GEMM1's input rewritten in the MMA's K order for `/t` tiles (cuda::order_rows_for_mma; the contiguous
  // layout rewrites permuted_hidden in place, the masked one never does): read only by GEMM1, whose output is in
  // the other workspace. Past activation_output in its workspace: a GEMM1 with the activation in its epilogue
  // writes activation_output while other CTAs still read this (its `/t` tiles at any M).
  if (p.layout == Layout::indexed && !quantized) {
    auto b = make_buffer("mma_ordered_hidden", {p.num_tokens, K}, c);
    for (const auto& g : required)
      if (g.name == "gate_up_output") b.workspace = 3 - g.workspace;
    for (const auto& a : required)
      if (a.name == "activation_output" && a.workspace == b.workspace)
        b.offset_bytes = align_up(a.offset_bytes + a.bytes, kAlignBytes);
    plan.buffers.push_back(b);
  }
  // Routing metadata lives through the whole step, past everything else in workspace 2.
  std::vector<BufferPlacement> meta;
  meta.push_back(make_buffer("error_flags", {1}, DType::i32));
  if (!batched) {
    meta.push_back(make_buffer("local_ids", {rows}, DType::i32));
    // The chunked routing kernels' per-chunk bucket counts (cuda::map_and_align, permute_indices).
    meta.push_back(make_buffer("route_chunk_counts", {cuda::route_chunk_counts_elems(rows, E)}, DType::i32));
  }
  if (p.layout == Layout::indexed) {
    const int64_t cap = ref::align_capacity(rows, E, p.block_m);
    meta.push_back(make_buffer("sorted_ids", {cap}, DType::i32));
    meta.push_back(make_buffer("expert_ids", {cap / p.block_m}, DType::i32));
    meta.push_back(make_buffer("num_tokens_padded", {1}, DType::i32));
  } else if (p.layout == Layout::contiguous) {
    meta.push_back(make_buffer("expert_offsets", {E + 1}, DType::i64));
    meta.push_back(make_buffer("inv_permuted_idx", {rows}, DType::i32));
    meta.push_back(make_buffer("permuted_src", {rows}, DType::i32));
  }
  if (p.layout != Layout::indexed) {
    // GEMM blocks of the segment layouts: {expert, first row, rows} each (cuda/moe_gemm.hpp).
    const int64_t max_blocks = ref::segment_capacity(rows, E, p.block_m);
    meta.push_back(make_buffer("block_table", {max_blocks, 3}, DType::i32));
    meta.push_back(make_buffer("num_blocks", {1}, DType::i32));
  }
  int64_t offset = align_up(workspace_end(plan.buffers, 2), kAlignBytes);
  for (auto& b : meta) {
    b.workspace = 2;
    b.offset_bytes = offset;
    offset = align_up(offset + b.bytes, kAlignBytes);
    plan.buffers.push_back(b);
  }
  plan.workspace1_bytes = workspace_end(plan.buffers, 1);
  plan.workspace2_bytes = workspace_end(plan.buffers, 2);
  return plan;
}

int64_t valid_shape_m(const ExpertsDesc& d, int64_t global_tokens) {
  const int64_t eg = d.global_experts();
  return (global_tokens * d.top_k * d.num_experts + eg - 1) / eg;
}

int64_t choose_block_m(const ExpertsDesc& d, int64_t num_tokens) {
  const double rows_per_expert =
      static_cast<double>(valid_shape_m(d, num_tokens)) / static_cast<double>(d.num_experts);
  // PERF: 8-row blocks halve the padded MMAs at a few rows per expert; since GEMM v13's direct-load
  // tiles (bench/results/2026-12-01-h200-gemm-v13.md) for 8-bit codes too: Qwen3 FP8-block GEMM1
  // M = 64 (4 rows per expert) 95.9 us with 8x128/1x4x1/2/r (call C) against 110.9 with the 16-row
  // planner tile (call D), GEMM2 54.0 against 66.0; DeepSeek-V3 M = 64 (2 rows per expert) took 16-row
  // blocks at 1779 us, 8-row copy-warp ones 1644 (call D). (Session 9 had kept 8-bit codes in
  // 16-row blocks from two rows per expert: then the 8-row tile had a copy warp.)
  if (rows_per_expert < 0.9 * 8) return 8;
  // PERF: 24-row blocks for 4-bit codes (the direct tile 24x128/1x4x1/4/r, session 25): at ~16 rows
  // per expert a 16-row block sends ~43% of the experts (Poisson) to two blocks, each reading and
  // dequantizing the whole expert, and a 32-row one pads half its MMAs. H200, Qwen3-30B-A3B M = 256
  // (bench/results/2026-12-02-h200-block24.md, call 1): GEMM1 / GEMM2 MXFP4 92.7 / 59.6 us against
  // 112.2 / 63.2 for 16x128/1x4x1/2/r and 117.5 / 66.4 for 32x128/1x8x1/4/o3; INT4 92.5 / 61.7
  // against 111.7 / 66.6 (16x128/1x4x1/4) and 120.4 / 69.8. 8-bit codes were not timed there.
  const bool four_bit = dtype_bits(weight_format_code_dtype(d.weight_format)) == 4;
  for (int64_t bm : {16, 24, 32, 48, 64})
    if ((bm != 24 || four_bit) && rows_per_expert / static_cast<double>(bm) < 0.9) return bm;
  // PERF: from 90% of 64 rows per expert the warp-specialized wgmma blocks (GEMM v7; the CUDA backend caps
  // them at 64 where the device has no wgmma, cuda::gemm_block_m) of 80, 96, 128 or 144 rows, whichever
  // gives the fewest expected rows per expert (64 rows never do from there), a block's fixed cost (row
  // tables, ring fill, epilogue) counted as kBlockOverheadRows: fitted to session 26's call 5 at ~64 rows
  // per expert (64-, 80-, 96- and 128-row tiles: 60-100 rows; bench/results/2026-12-03-h200-block144.md).
  // H200, Qwen3: at 64 rows per expert (M = 1024) 128-row blocks tied GEMM1 and lost GEMM2 by 18% (160 us
  // against 135); at 256 (M = 4096) GEMM1 INT4 took 488 us against 590 for 64 rows, GEMM2 311 against 390
  // (GEMM v7). 144 rows near 128 or 256 per expert, where half the experts would spill into one more
  // 128-row block (session 26: gpt-oss-120b M = 4096 GEMMs -18% / -13%, bench/results/2026-12-03-h200-block144.md);
  // 80 and 96 near 64 the same way (the same file).
  constexpr double kBlockOverheadRows = 70.0;
  int64_t best = 80;
  for (int64_t bm : {96, 128, 144})
    if (expected_block_rows(rows_per_expert, bm, kBlockOverheadRows) <
        expected_block_rows(rows_per_expert, best, kBlockOverheadRows))
      best = bm;
  return best;
}

double expected_block_rows(double mean_rows, int64_t block_m, double overhead_rows) {
  if (!std::isfinite(mean_rows) || block_m <= 0) return std::numeric_limits<double>::infinity();
  // E[ceil(X / b)] = sum over j >= 0 of P(X > j b); the terms 10 sigma below the mean are 1.
  const double sigma = std::sqrt(std::max(mean_rows, 1.0));
  const int64_t first = static_cast<int64_t>(std::max(0.0, std::floor((mean_rows - 10.0 * sigma) / static_cast<double>(block_m))));
  double blocks = static_cast<double>(first);
  for (int64_t j = first;; ++j) {
    const double z = (static_cast<double>(j * block_m) - mean_rows) / sigma;
    const double above = 0.5 * std::erfc(z / std::sqrt(2.0));
    if (above < 1e-9) break;
    blocks += above;
  }
  return blocks * (static_cast<double>(block_m) + overhead_rows);
}

// NOTE: desc and num_tokens are kept for rules by shape; none is measured to beat indexed yet.
Layout choose_layout(const ExpertsDesc& /*desc*/, Layout requested, int64_t /*num_tokens*/, bool batched) {
  if (batched) return Layout::masked;
  if (requested != Layout::auto_select) return requested;
  return Layout::indexed;
}

}  // namespace moeq::plan
