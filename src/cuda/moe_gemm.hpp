#pragma once
// Host side of the quantized MoE GEMM (device/moeq_dev/kernels/moe_gemm.cuh), version 7:
// mma.sync m16n8k16 (or on sm_90a wgmma: `/w` tiles, and the warp-specialized `/p` tiles of
// kernels/moe_gemm_ws.cuh; the direct-load `/r` tiles of kernels/moe_gemm_direct.cuh keep their
// codes in registers) with bf16/f16 activations, a cp.async ring of K tiles, weight codes
// in the canonical layout of CONTRACT §4 or the prepared one (moeq::CodeLayout), dequantized
// into the MMA's A fragments. Enqueues only (no sync, no allocation, no compile after a config's
// first use): CUDA-graph safe.
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "jit/compiler.hpp"
#include "moeq/types.hpp"
#include "moeq/weights.hpp"
#include "reference/routing.hpp"

namespace moeq::cuda {

// One CTA's tile: block_m tokens x block_n channels, K tiles of 64, warps_m x warps_n x warps_k
// warps (warps_k groups take turns over the K tiles), a ring of `stages` stages (a multiple of
// warps_k); split_k CTAs (a cluster, sm_90) share one output tile, each over a part of K;
// wgmma tiles multiply with the Hopper warpgroup MMA (the launch falls back to mma.sync on other
// devices); min_ctas > 0 asks the compiler for registers that let that many CTAs share an SM
// (__launch_bounds__; it may spill).
struct GemmTile {
  int block_m = 16;  // rows (tokens) per CTA: 8, 16, 24 (direct tiles), 32, 48, 64, 80, 96, 128 or 144 (48, 80-144: /p wgmma tiles)
  int block_n = 128;
  int warps_m = 1;
  int warps_n = 4;
  int warps_k = 1;
  int stages = 4;
  int split_k = 1;  // 1, 2 or 4; below sm_90 (no clusters) the launch runs the tile with 1
  // 0 (no cap; NOTE: the kernel then declares a minimum of 1 CTA per SM, which itself raises
  // ptxas's register counts, docs/perf-notes.md v5) or 1 to 16 CTAs per SM
  int min_ctas = 0;
  bool wgmma = false;  // wgmma.mma_async (sm_90a; 64-token blocks of one warpgroup), else mma.sync
  // Warp-specialized (sm_90a): with wgmma (kernels/moe_gemm_ws.cuh) a producer warpgroup besides
  // the warps_n = 8 consumer warps (two warpgroups), 48, 64, 80, 96, 128 or 144 tokens x 128 or 256 channels; with
  // mma.sync (up to 32 tokens, kernels/moe_gemm.cuh) one copy warp besides the compute warps.
  bool producer = false;
  // Direct loads (`/r`, kernels/moe_gemm_direct.cuh): 8, 16, 24 or 32 tokens, warps along N (and K groups)
  // only; each lane loads its codes into a register ring of `stages` K tiles, no shared-memory ring.
  bool direct = false;
  // Persistent (`/s` after `/p`, warp-specialized wgmma tiles only): one resident CTA per SM loops
  // over the output tiles, so the next tile's loads overlap this one's MMAs and epilogue.
  bool persistent = false;
  // Tokens in the MMA's K order (`/t` after `/p` or `/p/s`, 16-bit A values, K % 64 == 0): the A rows come
  // with each 64-k tile permuted as mma_order_position says, so the warp-specialized tile's wgmma reads its
  // copy ring directly (no permute warps). The caller lays the rows out so (moeq_dev::mma_order_position).
  bool mma_order_tokens = false;
  int threads() const { return 32 * warps_m * warps_n * warps_k + (producer ? (wgmma ? 128 : 32) : 0); }
  std::string to_string() const;
};

// The planner's tile for a weight format, block size (8, 16, 24, 32, 48, 64, 80, 96, 128 or 144 tokens) and routed rows
// (M * top_k); kTileForAnyRows gives one that does not depend on the rows (batch-invariant mode).
// few_ctas (gemm_few_ctas): the few-rows tile would leave the SMs short of CTAs.
// alt_fewer_waves (gemm_alt_fewer_waves): the format's alternative many-rows 8-row tile replaces its
// primary one, which would run more waves of CTAs.
// mx_pass_scales (gemm_mx_pass_scales): MXFP4's many-rows 8-row tile is the 4-deep one, which reads
// its scales per pass of 2 K tiles; ahead of alt_fewer_waves.
GemmTile gemm_tile_for(WeightFormat format, int block_m, int64_t num_slots, bool few_ctas = false,
                       bool alt_fewer_waves = false, bool mx_pass_scales = false);
// Whether num_slots routed rows (at most kFewRoutedRows), one 8-row block each at worst, over a
// GEMM's n channels in 64-channel blocks make fewer than 2.5 CTAs per SM: then the planner's
// few-rows tile for that GEMM is one of 32 channels and 4 K groups (twice the CTAs, a quarter of
// each warp's K tiles).
// PERF (H200, 132 SMs; calls D-E of bench/results/2026-12-01-h200-gemm-v15.md), 8x32/1x1x4/2/r
// against 8x64/1x2x2/2/r at M = 1: Qwen3-30B-A3B GEMM1 (8 x 24 = 192 CTAs) 21-25% less time,
// GEMM2 (256) 8-13% less; gpt-oss-120b GEMM2 (4 x 45 = 180) 22-28% less, but GEMM1 (360) 10-14%
// more; DeepSeek-V3 (512 and 896) -3% to +6%; Qwen3 M = 2 GEMM1 (384) 12% more.
bool gemm_few_ctas(int64_t num_slots, int64_t n, int num_sms);
// Expected 8-row blocks of num_slots routed rows: num_slots / top_k tokens, each routed to top_k
// distinct experts of num_experts uniformly, hit E (1 - (1 - top_k / E)^tokens) experts; at least
// num_slots / 8.
double expected_row_blocks(int64_t num_slots, int64_t top_k, int64_t num_experts);
// Waves of a grid of `ctas` CTAs at ctas_per_sm resident CTAs on each of num_sms SMs.
int64_t gemm_waves(double ctas, int ctas_per_sm, int num_sms);
// MXFP4's primary waves up to which its alternative tile may replace it: beyond, the last partial
// wave is a small share and the primary's faster steady state wins.
// PERF (H200, call 2 of bench/results/2026-12-02-h200-gemm-v19.md): gpt-oss-120b MXFP4 GEMM1
// M = 32-64 (6-8 waves of 8x128/1x4x1/2/r) 2-3% faster than 8x256/1x4x1/2/r despite one wave less.
constexpr int64_t kMxfp4AltMaxWaves = 4;
// Whether num_slots routed rows (more than kFewRoutedRows) over a GEMM's n channels, in 8-row blocks
// of expected_row_blocks, run the format's alternative many-rows tile instead of its primary one
// because it takes fewer waves of CTAs (with few waves the last, partial one is a large share of
// the time). CTAs per SM from the tiles' registers (sm_90, prepared codes):
// - INT4: primary 8x128/1x4x1/4/o4/r (127 registers: 4 per SM), alternative 8x128/1x4x1/2/r (95: 5)
//   only where the alternative runs one wave and the primary two or more. The 4-deep ring's steady
//   state is the faster one: where the 2-deep tile ran 2-3 waves against the 4-deep one's 3-4
//   (Qwen3 GEMM2 M = 12-48), it won twice by 6-8% and lost three times by 10-12%.
// - MXFP4 with bf16 activations: primary 8x128/1x4x1/2/r (92: 5), alternative 8x256/1x4x1/2/r (167: 3),
//   whose 64-channel warps share each token fragment and scale set-up over twice the channels,
//   wherever it runs fewer waves and the primary at most kMxfp4AltMaxWaves. (With f16 activations
//   the alternative takes 186 registers, 2 CTAs per SM; not timed, so no alternative.)
// - other formats: no alternative.
// PERF (H200, calls 2-4 of bench/results/2026-12-02-h200-gemm-v19.md): Qwen3-30B-A3B INT4 GEMM1
// M = 4 / 6 (one wave of either) 21.9 -> 18.2 and 25.5 -> 22.5 us on the primary, M = 8 (one wave
// against two) 35.4 -> 28.5 on the alternative; MXFP4 GEMM1 M = 10 (one wave against two) 44.3 ->
// 34.5, M = 32 / 48 / 64 (two against three) 60.1 -> 57.7, 70.1 -> 65.1 and 70.1 -> 65.2, GEMM2
// M = 64 (three against four) 41.1 -> 38.4; gpt-oss-120b MXFP4 GEMM1 M = 16 (three against four)
// 139.0 -> 133.9.
bool gemm_alt_fewer_waves(WeightFormat format, DType act_dtype, int64_t num_slots, int64_t top_k,
                          int64_t num_experts, int64_t n, int num_sms);
// Whether MXFP4 with bf16 activations over depth k runs the 4-deep 8-row tile 8x128/1x4x1/4/o4/r, whose
// scales come per pass of 2 K tiles (one 4-byte load per fragment row and pass, issued with the
// pass's codes; kernels/direct_pass_scales.cuh): where k is whole passes (a multiple of 128; elsewhere
// the kernel would fall back to per-tile scale loads, where the 4-deep ring gained nothing in GEMM v16).
// Not with f16 activations (168 registers uncapped: not timed) nor MXFP8 (164).
// PERF (H200, call 2 of bench/results/2026-12-02-h200-gemm-v20.md; uncapped /4/r, 128 registers), against
// v19's picks in the same run: Qwen3-30B-A3B GEMM1 M = 4 / 12 / 16 / 24 23.5 -> 20.8, 45.7 -> 40.4,
// 48.6 -> 45.4 and 53.4 -> 51.4 us; GEMM2 M = 8 / 16 / 48 21.8 -> 19.6, 30.6 -> 27.4 and 41.1 -> 37.9;
// DeepSeek-V3 M = 16 GEMM1 491 -> 453, GEMM2 248 -> 233; but GEMM1 M = 10 34.5 -> 35.8 (the 64-channel
// tile's one wave against two) and GEMM2 M = 12 24.1 -> 24.7.
// PERF (GEMM v21, call 3 of the same file): the capped tile since the pass ring's token loads lost
// their K predicate (134 registers uncapped: 3 CTAs per SM, 3-14% slower; 128 under /o4, no spills):
// Qwen3 GEMM1 M = 16 45.4 -> 42.9 us (76% of copy), M = 64 65.1 -> 60.9.
bool gemm_mx_pass_scales(WeightFormat format, DType act_dtype, int64_t k);
// gemm_tile_for a GEMM of n channels and depth k over num_experts experts, top_k per token, on the
// current device (few_ctas and alt_fewer_waves from its SM count, mx_pass_scales from k): the tile
// Experts::apply and `moeq bench` launch.
GemmTile gemm_tile_for_channels(WeightFormat format, DType act_dtype, int block_m, int64_t num_slots, int64_t top_k,
                                int64_t n, int64_t k, int64_t num_experts);
constexpr int64_t kTileForAnyRows = int64_t{1} << 62;
// Up to this many routed rows the planner takes a tile of K groups (few CTAs).
// PERF: 16 (M <= 2 at top_k 8) since GEMM v13 (bench/results/2026-12-01-h200-gemm-v13.md): at
// Qwen3 M = 4 (32 rows) 8x128/1x4x1/2/r takes 5-26% less time than the K-group tile 8x64/1x2x2/4/r
// (call D) and 5-14% less than 8x64/1x2x2/2/r (GEMM v14, call B of
// bench/results/2026-12-01-h200-gemm-v14.md); at M = 2 the K-group tile 8x64/1x2x2/2/r takes 14-32% less.
constexpr int64_t kFewRoutedRows = 16;
// Every tile gemm_tile_for can return for the format (each once): what tests/jit, `moeq
// compile` and the candidate list must cover.
std::vector<GemmTile> planner_tiles(WeightFormat format);
// The tile as this device runs it: split K off below sm_90 (no clusters), wgmma off but on sm_90a
// (warp-specialized tiles become the mma.sync tile of the same M block).
GemmTile tile_for_device(GemmTile tile);
// The tile as it runs over these scales: a 512-channel tile copies the MX scales in 4-byte words
// (kernels/moe_gemm_ws.cuh, kStagedScales), so with scales off a 4-byte boundary (ue8m0 needs byte
// alignment only) it runs 256 channels wide, the same products (MoeGemmGpu.WideTiles*).
GemmTile tile_for_scales(GemmTile tile, CUdeviceptr scales);
// The tile tile_for_scales runs over unaligned scales (the tile itself below 512 channels): the kernel
// loaders (load_moe_gemm, `moeq compile`) take it too, so no launch compiles after a warm-up.
GemmTile unaligned_scales_tile(GemmTile tile);
// The mma.sync tile that runs a wgmma tile's M block where there is no wgmma (tile_for_device).
GemmTile mma_sync_tile_of(GemmTile tile);
// The tile without `/t`: what runs a `/t` tile's GEMM of weights w where its input cannot come in the MMA's
// K order (the masked layout's 16-bit GEMM1, e4m3 input, K off a multiple of 64), with fewer stages where its permuted token
// tiles would not fit beside the ring. The kernel loaders take it beside the `/t` tile.
GemmTile permuting_tile(GemmTile tile, const WeightDesc& w);
// The M block the GPU GEMM of this device runs for the planner's block_m (plan::choose_block_m):
// 48 -> 64 (48-row tiles run where a tuning table names them: not measured against 64 for every format),
// 80-144 -> 64 where there is no wgmma (those blocks are warp-specialized wgmma tiles; mma.sync runs
// 64-row ones faster).
int64_t gemm_block_m(int64_t planned_block_m);
// Every reason the tile is not a legal kernel config (shapes, warps, shared memory); empty if legal.
std::vector<std::string> gemm_tile_reasons(const GemmTile& tile, const WeightDesc& w);
// "16x128/1x4x2/4": block_m x block_n / warps_m x warps_n x warps_k / stages, then "/k2" or
// "/k4" when K is split over a cluster of CTAs, "/oN" for min_ctas = N and "/w" for wgmma or
// "/p" for the warp-specialized tiles (producer; wgmma from 64 tokens) or "/r" for direct loads, then "/s"
// (persistent) and "/t" (tokens in the MMA's K order) after "/p", in that order (the
// format of to_string; the K tile is always 64). Throws moeq::Error naming the text when it
// does not parse.
GemmTile parse_gemm_tile(const std::string& text);
// The tiles `moeq bench --tile` sweeps and tests/gpu checks one by one: the planner's and the
// candidates for tuning.
std::vector<GemmTile> gemm_tile_candidates();
// Static shared memory of the kernel (row maps and the block's expert).
int64_t gemm_static_smem_bytes(const GemmTile& tile);

// One GEMM's weights in device memory (WeightDesc documents each tensor); codes canonical or
// prepared as MoeGemmArgs::prepared_codes says.
struct GemmWeights {
  CUdeviceptr codes = 0, scales = 0, global_scales = 0, zero_points = 0, bias = 0;
};

// What a GEMM's A operand holds: compile-time in the kernel (MoeGemmCfg::kRowScales, kActE4m3).
enum class GemmInput : uint8_t {
  values,             // act_dtype activations
  row_scaled_values,  // FP8 per-token codes as their exact act_dtype values; each output row times its
                      // A row's f32 scale (MoeGemmArgs::a_row_scales), before the bias
  row_scaled_e4m3,    // FP8 per-token e4m3 codes (1 byte each) into e4m3 MMAs (gemm_takes_e4m3); row
                      // scales as above
};
// Dynamic shared memory of the tile (reading `input`: e4m3 tokens bring 128 k of codes per
// stage on the warp-specialized tiles): its ring or its epilogue (mirror of MoeGemmShape::kSmemBytes;
// the generated source static_asserts that they agree, so tests/jit enforces it).
int64_t gemm_smem_bytes(const GemmTile& tile, const WeightDesc& w, GemmInput input = GemmInput::values);
// Whether a GEMM of these weights on this tile (as it runs: e4m3_tile_of) can read e4m3
// activation codes on a device of compute capability `sm` (10 major + minor):
// - FP8 per-channel weights (their codes are the A fragments, the channel scale stays in the
//   epilogue) on the direct tiles (kernels/moe_gemm_direct.cuh), sm_89 or later (mma.sync
//   m16n8k32 e4m3), either code layout;
// - canonical MXFP4 codes on the warp-specialized wgmma tiles of 128 channels
//   (kernels/moe_gemm_ws_e4m3.cuh: 64 or 128 x 128), sm_90 or later (wgmma e4m3), K a multiple
//   of 128 (whole MX windows per K tile) and at most 32768.
bool gemm_takes_e4m3(const WeightDesc& w, const GemmTile& tile, int sm, bool prepared_codes);
// The tile an e4m3 GEMM runs where `tile` was planned: a warp-specialized tile takes 128 channels
// (same block, stages; gemm_takes_e4m3 says why), and none is persistent (the e4m3 consumers run one
// tile per CTA); every other tile is itself.
GemmTile e4m3_tile_of(const GemmTile& tile);
// The device's compute capability as gemm_takes_e4m3 takes it.
int device_sm();
// Whether the kernel of this GEMM compiles in the caller's word that every MX scale is at most 2
// (MoeGemmArgs::mx_scales_at_most_two): MXFP4 codes with bf16 activation values (not e4m3) on the
// warp-specialized wgmma tiles, which then multiply each pair of codes once (scale x 2^126) instead
// of twice, and on the mma.sync and direct tiles with prepared codes, which then fold without their
// per-warp vote. Other GEMMs have no such multiply.
bool gemm_folds_mx_scales(const WeightDesc& w, DType act_dtype, const GemmTile& tile, bool prepared_codes,
                          GemmInput input);

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
};

// Every reason this GEMM cannot run the weights (K % 32, N % 2, sizes); empty when it can.
std::vector<std::string> moe_gemm_reasons(const WeightDesc& w, DType act_dtype);
void moe_gemm(const MoeGemmArgs& args, CUstream stream);

// Segment table of the contiguous / masked layouts: segment_capacity (reference/routing.hpp)
// blocks of {expert, first row, rows}, int32 x 3 each, plus the count (int32 [1]).
using ref::segment_capacity;
// offsets: int64 [E+1] (contiguous), or 0 with counts [E] (i32/i64) and rows_per_expert = T;
// a count outside [0, T] is clamped and ORs kRoutingErrorBatchedOverflow into *error_flags
// (int32; 0 = no error word). input: the GEMM's A operand (the builder runs from the GEMM's own
// module, so a layer loads one module per tile).
void build_segments(const WeightDesc& w, DType act_dtype, const GemmTile& tile, CUdeviceptr offsets,
                    CUdeviceptr counts, DType counts_dtype, int64_t rows_per_expert, int64_t num_experts,
                    CUdeviceptr block_table, CUdeviceptr num_blocks, CUdeviceptr error_flags, CUstream stream,
                    GemmInput input = GemmInput::values);

// input: what A holds (GemmInput); compile-time, so 16-bit layers keep the epilogue without row
// scales. row_scaled_e4m3 needs a tile and weights gemm_takes_e4m3 admits (else moeq::Error).
// mx_scales_at_most_two: MoeGemmArgs's; it changes the source only where gemm_folds_mx_scales.
jit::KernelSpec moe_gemm_kernel_spec(const WeightDesc& w, DType act_dtype, const GemmTile& tile, bool prepared_codes = false,
                                     GemmInput input = GemmInput::values, bool mx_scales_at_most_two = false);
// The segment-table builder lives in the same module as the GEMM of that config.
jit::KernelSpec moe_gemm_segments_kernel_spec(const WeightDesc& w, DType act_dtype, const GemmTile& tile,
                                              bool prepared_codes = false, GemmInput input = GemmInput::values);
// The compile-time config of a GEMM (or of its segment-table builder) as one integer: equal keys
// <=> equal generated sources (moe_gemm_kernel_spec). The launch path finds loaded functions by
// it, so a launch builds no source text (PERF: 1.4 us per GEMM launch on the host). The tile
// must be legal (gemm_tile_reasons empty): its fields are packed in fixed widths.
uint64_t gemm_config_key(const WeightDesc& w, DType act_dtype, const GemmTile& tile, bool prepared_codes, bool segments,
                         GemmInput input = GemmInput::values, bool mx_scales_at_most_two = false);
// Loads (compiling what the disk cache lacks) the kernels a GEMM of this tile launches on this
// device, for both code layouts (the layouts gemm_takes_e4m3 admits, for e4m3 input) and, where
// gemm_folds_mx_scales, with and without MoeGemmArgs::mx_scales_at_most_two, and its
// segment-table builder, exactly as their first launches would (shared-memory limit included),
// so that later launches load nothing.
void load_moe_gemm(const WeightDesc& w, DType act_dtype, const GemmTile& tile, GemmInput input = GemmInput::values);
// Every config the planner can emit (planner_tiles, canonical and prepared codes, bf16 and f16,
// INT scales in the activation dtype, MX scales at most 2 or not where gemm_folds_mx_scales),
// plus the other INT scale dtypes and zero points on one tile, the row-scale epilogue on each GEMM body once, the e4m3 input on FP8 per-channel direct
// tiles and on each MXFP4 warp-specialized tile e4m3_tile_of gives; the source text does not
// depend on bias, global scales or the layout.
std::vector<jit::KernelSpec> moe_gemm_kernel_specs();

}  // namespace moeq::cuda
