#pragma once
// Host side of the quantized MoE GEMM (device/moeq_dev/kernels/moe_gemm.cuh and the bodies it includes), version 7:
// mma.sync m16n8k16 (or on sm_90a wgmma: `/w` tiles, and the warp-specialized `/p` tiles of
// kernels/moe_gemm_ws.cuh; the direct-load `/r` tiles of kernels/moe_gemm_direct.cuh keep their
// codes in registers) with bf16/f16 activations, a cp.async ring of K tiles, weight codes
// in the canonical layout of CONTRACT §4 or the prepared one (moeq::CodeLayout), dequantized
// into the MMA's A fragments. Enqueues only (no sync, no allocation, no compile after a config's
// first use): CUDA-graph safe.
// The tile (gemm_tile.hpp), the planner's choice of it (gemm_planner.hpp) and the generated source
// (gemm_codegen.hpp) have headers of their own, included here.
#include <cstdint>
#include <optional>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/gemm_codegen.hpp"
#include "cuda/gemm_planner.hpp"
#include "cuda/gemm_tile.hpp"
#include "moeq/experts.hpp"
#include "moeq/types.hpp"
#include "moeq/weights.hpp"
#include "reference/routing.hpp"

namespace moeq::cuda {

// One GEMM's weights in device memory (WeightDesc documents each tensor); codes canonical or
// prepared as MoeGemmArgs::prepared_codes says.
struct GemmWeights {
  CUdeviceptr codes = 0, scales = 0, global_scales = 0, zero_points = 0, bias = 0;
};

struct MoeGemmArgs {
  WeightDesc weights_desc;
  GemmWeights weights;
  DType act_dtype = DType::bf16;  // A and C
  bool prepared_codes = false;    // weights.codes in the prepared layout (moeq::CodeLayout)
  // MX weights: every scale byte <= 128 (moeq::WeightView::mx_scales_at_most_two, which the caller
  // vouches for); where gemm_folds_mx_scales, the kernel that takes it.
  bool mx_scales_at_most_two = false;
  CUdeviceptr a = 0;
  int64_t a_row_stride = 0;  // elements
  // f32 per row of A (FP8 per-token activations, A holding the codes' exact 16-bit values): each
  // output row's products times its A row's scale, before the bias; 0 = none.
  CUdeviceptr a_row_scales = 0;
  // With a_row_scales: A row r's scale is a_row_scales[a_scale_rows[r] / a_scale_row_divisor]
  // (int32; the contiguous layout's permuted_src and top_k: A holds the permuted rows, the scales
  // stay per token); 0 = a_row_scales[r].
  CUdeviceptr a_scale_rows = 0;
  int64_t a_scale_row_divisor = 1;
  // A holds FP8 e4m3 codes, 1 byte each (a_row_stride in bytes, a multiple of 16), and needs
  // a_row_scales; only where gemm_takes_e4m3 holds for the device (GemmInput::row_scaled_e4m3).
  bool a_e4m3 = false;
  CUdeviceptr c = 0;
  int64_t c_row_stride = 0;  // elements
  GemmTile tile;
  bool gather = true;  // indexed layout; else segments (contiguous, masked)
  // gather: align outputs built with block_m == tile.block_m
  CUdeviceptr sorted_ids = 0, expert_ids = 0, num_tokens_padded = 0;
  int64_t num_slots = 0;         // M * top_k
  int64_t src_row_divisor = 1;   // top_k for GEMM1 (A is [M, K]), 1 for GEMM2
  int64_t sorted_capacity = 0;   // entries of sorted_ids (a multiple of block_m)
  // segments: from build_segments
  CUdeviceptr block_table = 0, num_blocks = 0;
  int64_t max_blocks = 0;
  // Persistent (/s) tiles: at most this many CTAs (0: one per SM). Tests take a few so that each
  // CTA runs many tiles through its rings.
  int64_t max_ctas = 0;
  // Self-routed GEMM1 (gather, an 8-row direct tile over 16-bit A (gemm_self_routes), num_slots <= kMaxSelfRoutedSlots,
  // each expert's slots in one block), a kernel of its own (MoeGemmCfg::kSelfRouted): each CTA finds its block's rows
  // from topk_ids (int32 or int64) and expert_map (0: the identity) itself and waits for the kernel before it only in
  // its epilogue. The kernel before it must be one that waited for its own
  // predecessor before letting GEMM1 launch (route_fused), and must write the same sorted_ids the later kernels read.
  bool self_route = false;
  CUdeviceptr topk_ids = 0;
  DType topk_ids_dtype = DType::i32;
  CUdeviceptr expert_map = 0;
  int64_t num_global_experts = 0, num_local_experts = 0;
  // GEMM1 with the activation in its epilogue (over 16-bit A, gemm_fuses_activation: an 8-row direct tile, plain or
  // self-routed, or a warp-specialized one: interleaved, [gate | up] or non-gated rows), a kernel of its own
  // (MoeGemmCfg::kEpilogueActivation): C is GEMM2's input [rows, I] (I = N / 2 for the gated kinds, else N), what
  // `activation` (cuda/elementwise.hpp) writes from the plain GEMM's C, bit for bit; from a `/t` tile in the MMA's K
  // order (`activation`'s mma_order; I % 64 == 0). Gated [gate | up] rows (not interleaved) need I % 16 == 0. C must
  // not overlap A: other CTAs still read A while it is written.
  bool epilogue_activation = false;
  ActivationParams activation;
  bool interleaved_gate_up = false;
  // An FP8 per-token layer's GEMM making its input itself (GemmInput::quantized_rows, gemm_quantizes_rows: a direct
  // tile, K % 8 == 0): A holds 16-bit rows; each CTA quantizes its block's rows as the quantizer kernels would (bit for
  // bit the same values and row scales), so no quantizer runs for this GEMM. a_row_scales and a_e4m3 stay unset.
  // - rows_activation (GEMM2): A is GEMM1's output [rows, N13] (dense: a_row_stride = N13, 2K gated, else K), and
  //   `activation` (interleaved_gate_up as above) applies to each row first: the activation-quantize kernel's work.
  // - else a self-routed GEMM1 (self_route): A is the caller's x [M, K] (any row stride): the quantizer's work, which
  //   otherwise rides on the routing's first launch and keeps GEMM1 from starting before it.
  bool quantize_rows = false;
  bool rows_activation = false;
};
constexpr int64_t kMaxSelfRoutedSlots = 32;  // one warp's lanes (self_routed_block_rows)
// The most GEMM1 rows (slots) at which apply runs the activation epilogue on an 8-row direct tile (cuda_backend.cpp;
// PERF there): every direct row of the shipped sm_90 tables (at most 1280 slots).
constexpr int64_t kActivationEpilogueMaxRows = 2048;
// The most GEMM2 rows (slots) at which apply lets an FP8 per-token layer's direct GEMM2 make its input itself
// (MoeGemmArgs::quantize_rows; env MOEQ_GEMM2_QUANTIZES_MAX_ROWS): 0, never, until the whole GPU suite has run with
// it on (its oracle tests reach weight formats the bit-equality test does not: fp8-channel, int8, mxfp8); then 16,
// Qwen3-30B-A3B's M = 1 and 2. Each CTA of a block's N tiles redoes its rows' activation and quantization, which
// pays only while blocks hold a row or two.
// PERF: session 68 (H100, bench/results/2026-12-07-h100-s68-rows-quantized.md), a warp a row: +0.4 to +0.9 us a step
// at M = 1-4 against the activation-quantize kernel, +2.7 to +3.3 at M = 16. Session 69 (H100, the CTA's threads
// sharing the rows, bench/results/2026-12-07-h100-s69-small-m-split.md, one round): -0.6 / -0.2 / -0.1 us at M = 1 /
// 2 / 4, +1.1 / +1.5 at M = 8 / 16; under ncu at M = 1 GEMM2 took 10.3 us against 8.2 + 4.3 for it and the kernel.
constexpr int64_t kQuantizingGemm2MaxRows = 0;

// The kernels a GEMM may launch besides its plain one (apply decides per step), which the warm lists load too (their
// gemm_* rules admitting the tile): self-routed (self_route: a 16-bit layer's GEMM1, gemm_self_routes) and with the
// activation in the epilogue (activation.on: its GEMM1, gemm_fuses_activation; plain and, with self_route,
// self-routed).
// rows_activation.on: an FP8 per-token layer's GEMM2 reading GEMM1's rows; quantized_self_route: its GEMM1
// self-routed, quantizing the caller's rows (both gemm_quantizes_rows; their input is GemmInput::quantized_rows, not
// the plan's).
struct GemmVariantUse {
  bool self_route = false;
  EpilogueActivation activation;
  EpilogueActivation rows_activation;
  bool quantized_self_route = false;
};
// One kernel a GEMM may run as besides its plain one; quantized_rows: reading GemmInput::quantized_rows (`activation` is
// then the rows' activation), else the plan's input.
struct GemmKernelVariant {
  GemmVariant variant = GemmVariant::plain;
  EpilogueActivation activation;
  bool quantized_rows = false;
  // The input this kernel reads, for a GEMM planned to read `planned`.
  GemmInput input(GemmInput planned) const { return quantized_rows ? GemmInput::quantized_rows : planned; }
};
// The kernels of `use` that this tile and input admit (gemm_self_routes, gemm_fuses_activation): what load_moe_gemm
// and the warm lists (layer_kernel_specs) add beside each plain kernel.
std::vector<GemmKernelVariant> gemm_extra_variants(const GemmTile& tile, const WeightDesc& w, GemmInput input,
                                                   const GemmVariantUse& use);

void moe_gemm(const MoeGemmArgs& args, CUstream stream);
// Whether GEMM1 with `epilogue` in its epilogue fits as many CTAs on an SM, by registers, as the plain kernel moe_gemm
// runs for `args` (epilogue_activation off). Loads both kernels.
// PERF: session 52 (H100): Mixtral-8x7B's M = 1 tile (8x256/1x8x1/4/r) takes 128 registers plain, 145 with the
// epilogue, so one CTA an SM instead of two: its step lost 6.3 us (77.1 -> 83.4); gpt-oss-120b's 8x64/1x4x1/2/r, 56
// -> 62, nine CTAs -> eight, was session 51's +4.0 us at M = 16.
// NOTE: registers only: the two kernels share the tile's shared memory and threads, so their other limits are the same.
// Where another limit binds both (threads, shared memory, CTAs an SM), fewer register-bound CTAs may not lose any, and
// the answer is conservative (no fusion). The direct tiles seen so far take 56-244 registers (ptxas, session 52),
// where registers bind.
bool activation_epilogue_keeps_occupancy(const MoeGemmArgs& args, const EpilogueActivation& epilogue);
// CTAs of `threads` threads whose `registers` each an SM's register file holds: it is allocated per warp, in units of
// 256 registers.
int ctas_per_sm_for_registers(int registers, int threads, int registers_per_sm);

// Segment table of the contiguous / masked layouts: segment_capacity (reference/routing.hpp)
// blocks of {expert, first row, rows}, int32 x 3 each, plus the count (int32 [1]).
using ref::segment_capacity;
// offsets: int64 [E+1] (contiguous), or 0 with counts [E] (i32/i64) and rows_per_expert = T;
// a count outside [0, T] is clamped and ORs kRoutingErrorBatchedOverflow into *error_flags
// (int32; 0 = no error word). input: the GEMM's A operand (the builder runs from the canonical,
// unfolded module of the tile and input, whatever the weights: GemmWeightsKind lists it).
void build_segments(const WeightDesc& w, DType act_dtype, const GemmTile& tile, CUdeviceptr offsets,
                    CUdeviceptr counts, DType counts_dtype, int64_t rows_per_expert, int64_t num_experts,
                    CUdeviceptr block_table, CUdeviceptr num_blocks, CUdeviceptr error_flags, CUstream stream,
                    GemmInput input = GemmInput::values);

// What of a GEMM's weights picks its kernel only at apply time (the WeightView): the code layout, the MX scales'
// word (MoeGemmArgs::mx_scales_at_most_two) and whether the scales are 4-byte aligned (tile_for_scales). Set: kernels
// for such weights only; unset: for both values (the warm lists' default, for any weights).
struct GemmWeightsKind {
  std::optional<bool> prepared_codes, mx_scales_at_most_two, unaligned_scales;
  // The kind of these weights (every field set).
  static GemmWeightsKind of(const WeightView& view);
  // The values `field` admits: itself where set, else false and true.
  static std::vector<bool> admitted(const std::optional<bool>& field);
};

// Loads (compiling what the disk cache lacks) the kernels a GEMM of this tile launches on this
// device, for both code layouts (the layouts gemm_takes_e4m3 admits, for e4m3 input) and, where
// gemm_folds_mx_scales, with and without MoeGemmArgs::mx_scales_at_most_two, over aligned and
// unaligned scales (each narrowed to `kind`), and its segment-table builder, exactly as their
// first launches would (shared-memory limit included), so that later launches load nothing, and
// the variants `use` names where the tile admits them.
void load_moe_gemm(const WeightDesc& w, DType act_dtype, const GemmTile& tile, GemmInput input = GemmInput::values,
                   const GemmVariantUse& use = {}, const GemmWeightsKind& kind = {});

}  // namespace moeq::cuda
