#pragma once
// The planner's GEMM tiles: which tile runs a GEMM of a weight format, M block and routed rows, and
// the tile as the current device runs it. Every choice carries its measurement (gemm_planner.cpp).
#include <cstdint>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/gemm_tile.hpp"
#include "moeq/types.hpp"
#include "moeq/weights.hpp"

namespace moeq::cuda {

// The planner's tile for a weight format, block size (8, 16, 24, 32, 48, 64, 80, 96, 128 or 144 tokens) and routed rows
// (M * top_k); kTileForAnyRows gives one that does not depend on the rows (batch-invariant mode).
// few_ctas (gemm_few_ctas): the few-rows tile would leave the SMs short of CTAs.
// alt_fewer_waves (gemm_alt_fewer_waves): the format's alternative many-rows 8-row tile replaces its
// primary one, which would run more waves of CTAs.
// mx_pass_scales (gemm_mx_pass_scales): MXFP4's many-rows 8-row tile is the 4-deep one, which reads
// its scales per pass of 2 K tiles; ahead of alt_fewer_waves.
// few_ctas_ring (gemm_few_ctas_ring): 8, the few-rows tile's 8-deep ring (MXFP4 and INT4 only; other formats keep
// their default); 0 its default.
GemmTile gemm_tile_for(WeightFormat format, int block_m, int64_t num_slots, bool few_ctas = false,
                       bool alt_fewer_waves = false, bool mx_pass_scales = false, int few_ctas_ring = 0);
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
// Where the few-rows tile (gemm_few_ctas) holds MXFP4 or INT4 codes, the depth of its register ring: 8 where each of
// its 4 K groups streams at least 32 K tiles and the expected CTAs are at most 2 per SM (the 8-deep ring's registers
// allow 2), else 0 (the tile's default ring).
// PERF (whole steps O N N O with `--no-shipped-tuning`, bench/results/2026-12-05-self-route-ring.md): H100, call 1,
// Mixtral-8x7B M = 1 (GEMM2, K = 14336: 56 tiles a group, 1.9 CTAs per SM) MXFP4 111.6 -> 90.1 us, INT4 101.3 -> 90.5;
// H200, call 2 (beside a self-routed GEMM1), MXFP4 95.6 -> 78.8, INT4 87.8 -> 77.8. NVFP4 is left out: 111.4 -> 109.6
// (H100, less than its baseline pair's 2.8 us spread), 106.0 -> 106.4 (H200). A 6-deep ring for 8+ tiles over at most
// 4 CTAs per SM (session 48's GEMM sweep: Mixtral M = 2 GEMM2 34.7 against 47.1 us) showed no clear step gain (Mixtral
// M = 2 MXFP4 +8.4 us, NVFP4 +15.5, Qwen3-30B-A3B M = 1 +1.3; gpt-oss-120b M = 1 at most -0.6 against ~-2.7
// predicted), though that binary also held the self-route patch's run-time flag and route_fused's new wait order
// (unchanged plans moved by -0.4 to +1.5 us): left out until a step shows a gain.
int gemm_few_ctas_ring(WeightFormat format, int64_t num_slots, int64_t top_k, int64_t num_experts, int64_t n,
                       int64_t k, int num_sms);
// gemm_tile_for a GEMM of n channels and depth k over num_experts experts, top_k per token, on the
// current device (few_ctas and alt_fewer_waves from its SM count, mx_pass_scales from k): the tile
// Experts::apply and `moeq bench` launch.
GemmTile gemm_tile_for_channels(WeightFormat format, DType act_dtype, int block_m, int64_t num_slots, int64_t top_k,
                                int64_t n, int64_t k, int64_t num_experts);
// The same on a device of num_sms SMs, present or not (plan_step_gemms).
GemmTile gemm_tile_for_channels(WeightFormat format, DType act_dtype, int block_m, int64_t num_slots, int64_t top_k,
                                int64_t n, int64_t k, int64_t num_experts, int num_sms);
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
// Whether the device runs wgmma tiles as they are (sm_90), rather than their mma.sync stand-ins.
bool device_has_wgmma(const DeviceInfo& device);
// The tile as this device runs it: split K off below sm_90 (no clusters), wgmma off but on sm_90a
// (warp-specialized tiles become the mma.sync tile of the same M block).
GemmTile tile_for_device(GemmTile tile);
GemmTile tile_for_device(GemmTile tile, const DeviceInfo& device);
// The tile as it runs over these scales: a 512-channel tile copies the MX scales in 4-byte words
// (kernels/moe_gemm_ws_shape.cuh, kStagedScales), so with scales off a 4-byte boundary (ue8m0 needs byte
// alignment only) it runs 256 channels wide, the same products (MoeGemmGpu.WideTiles*).
GemmTile tile_for_scales(GemmTile tile, CUdeviceptr scales);
// Whether scales at this address are off a 4-byte boundary: what tile_for_scales (and GemmWeightsKind) go by.
bool scales_off_word_boundary(CUdeviceptr scales);
// The M block the GPU GEMM of this device runs for the planner's block_m (plan::choose_block_m):
// 48 -> 64 (48-row tiles run where a tuning table names them: not measured against 64 for every format),
// 80-144 -> 64 where there is no wgmma (those blocks are warp-specialized wgmma tiles; mma.sync runs
// 64-row ones faster).
int64_t gemm_block_m(int64_t planned_block_m);
int64_t gemm_block_m(int64_t planned_block_m, const DeviceInfo& device);
// The device's compute capability as gemm_takes_e4m3 takes it.
int device_sm();
int device_sm(const DeviceInfo& device);

}  // namespace moeq::cuda
