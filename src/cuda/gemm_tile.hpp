#pragma once
// The MoE GEMM's tile (one CTA's shape and kernel body, GemmTile) and what a tile needs and allows:
// its text form, shared memory, legality with human-readable reasons (and the weights' own, moe_gemm_reasons),
// the e4m3-input rule and the tiles a tile runs as elsewhere. Pure functions of their arguments (no device queries).
#include <cstdint>
#include <string>
#include <vector>

#include "moeq/types.hpp"
#include "moeq/weights.hpp"

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
  // mma.sync (up to 32 tokens, kernels/moe_gemm_sync.cuh) one copy warp besides the compute warps.
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

// What a GEMM's A operand holds: compile-time in the kernel (MoeGemmCfg::kRowScales, kActE4m3).
enum class GemmInput : uint8_t {
  values,             // act_dtype activations
  row_scaled_values,  // FP8 per-token codes as their exact act_dtype values; each output row times its
                      // A row's f32 scale (MoeGemmArgs::a_row_scales), before the bias
  row_scaled_e4m3,    // FP8 per-token e4m3 codes (1 byte each) into e4m3 MMAs (gemm_takes_e4m3); row
                      // scales as above
  quantized_rows,     // FP8 per-token activations on a direct tile (gemm_quantizes_rows): A holds 16-bit rows the
                      // kernel quantizes itself, each of its block's (kernels/direct_row_quantize.cuh), then
                      // multiplies as row_scaled_values. GEMM2: GEMM1's output [rows, N13], its activation applied
                      // first (MoeGemmArgs::rows_activation); a self-routed GEMM1: the caller's rows of x
};
// Static shared memory of the kernel (row maps and the block's expert; e4m3 input adds the scan's slots).
int64_t gemm_static_smem_bytes(const GemmTile& tile, GemmInput input = GemmInput::values);

// Whether a GEMM1 of this tile and input may run self-routed (MoeGemmArgs::self_route): an 8-row direct tile over
// 16-bit activations, or FP8 per-token ones it quantizes itself (GemmInput::quantized_rows, with gemm_quantizes_rows).
// Only these get a self-routed kernel in the warm lists, so apply asks for no other.
bool gemm_self_routes(const GemmTile& tile, GemmInput input);
// A config's kernels besides the plain one, each a source of its own (moe_gemm_kernel_spec): the self-routed GEMM1
// (gemm_self_routes).
enum class GemmVariant : uint8_t { plain, self_routed };
// The activation a GEMM1 kernel applies in its epilogue (on), part of its source like GemmVariant (a plain or a
// self-routed GEMM1 may take one): the kind and whether the w13 rows are interleaved gate / up pairs.
struct EpilogueActivation {
  bool on = false;
  Activation kind = Activation::silu;
  bool interleaved = false;
};
// Whether a GEMM1 of this tile and input may apply `activation` in its epilogue (MoeGemmArgs::epilogue_activation),
// over 16-bit activations:
// - an 8-row direct tile whose channels split into whole 16-channel halves (block_n % 32 == 0), any kind and rows;
// - a warp-specialized wgmma tile (`/p`, persistent or not), any kind and rows: with [gate | up] rows its copy warps
//   load the block's gate rows and then the same up rows (epilogue_weight_row). A `/t` one writes its outputs in the
//   MMA's K order (GEMM2's `/t` input; I % 64 == 0).
// `activation` is the kind and row layout asked for (every one is admitted today).
bool gemm_fuses_activation(const GemmTile& tile, GemmInput input, const EpilogueActivation& activation);

// Whether a GEMM of FP8 per-token activations on this tile may read GemmInput::quantized_rows (MoeGemmArgs::
// quantize_rows) for weights `w` (GEMM2: K = I; a self-routed GEMM1: K = the hidden size, gemm_self_routes too): a direct
// tile (any rows), K % 8 == 0 (16-byte vectors) and the staged rows within kMaxStagedRowsBytes. Only these get such a
// kernel in the warm lists.
bool gemm_quantizes_rows(const GemmTile& tile, const WeightDesc& w);
// Shared memory a direct tile reading GemmInput::quantized_rows stages its rows in, past the epilogue's (0 for any other
// input): block_m rows of K rounded up to 64, plus 8, 16-bit values (direct_row_quantize.cuh staged_row_stride).
int64_t gemm_staged_rows_bytes(const GemmTile& tile, const WeightDesc& w, GemmInput input);
// NOTE: a bound, not a measured optimum (the staged rows take 12.4 KB for Qwen3-30B-A3B's I = 768 on 8 rows): larger
// rows keep the activation-quantize kernel.
constexpr int64_t kMaxStagedRowsBytes = 48 * 1024;

// Every reason the tile is not a legal kernel config (shapes, warps, shared memory); empty if legal.
std::vector<std::string> gemm_tile_reasons(const GemmTile& tile, const WeightDesc& w);
// Every reason this GEMM cannot run the weights (K % 32, N % 2, sizes); empty when it can.
std::vector<std::string> moe_gemm_reasons(const WeightDesc& w, DType act_dtype);
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
//   (kernels/moe_gemm_ws_e4m3.cuh: 64 or 128 x 128), an even ring, persistent only with `/t`, sm_90 or
//   later (wgmma e4m3), K a multiple of 128 (whole MX windows per K tile) and at most 32768.
bool gemm_takes_e4m3(const WeightDesc& w, const GemmTile& tile, int sm, bool prepared_codes);
// What gemm_takes_e4m3 admits, for the errors that name a refused config.
inline constexpr char kE4m3Rule[] =
    "e4m3 activations need FP8 per-channel weights on a direct tile (sm_89+) or canonical MXFP4 codes on a "
    "warp-specialized tile of 64 or 128 tokens and 128 channels (an even number of stages; persistent only with /t; "
    "sm_90+, K % 128 == 0, its ring within 227 KB)";
// The tile an e4m3 GEMM runs where `tile` was planned: a warp-specialized tile takes 128 channels
// (same block, stages, token order: `/t` tiles read codes the quantizers wrote in the e4m3 consumers' K
// order; gemm_takes_e4m3 says why), persistent only with `/t` (the consumers carry one ring state, each stage
// its own token buffer); every other tile is itself.
GemmTile e4m3_tile_of(const GemmTile& tile);
// Whether the kernel of this GEMM compiles in the caller's word that every MX scale is at most 2
// (MoeGemmArgs::mx_scales_at_most_two): MXFP4 codes with bf16 activation values (not e4m3) on the
// warp-specialized wgmma tiles, which then multiply each pair of codes once (scale x 2^126) instead
// of twice, and on the mma.sync and direct tiles with prepared codes, which then fold without their
// per-warp vote. Other GEMMs have no such multiply.
bool gemm_folds_mx_scales(const WeightDesc& w, DType act_dtype, const GemmTile& tile, bool prepared_codes,
                          GemmInput input);
// The tile tile_for_scales runs over unaligned scales (the tile itself below 512 channels): the kernel
// loaders (load_moe_gemm, `moeq compile`) take it too, so no launch compiles after a warm-up.
GemmTile unaligned_scales_tile(GemmTile tile);
// The mma.sync tile that runs a wgmma tile's M block where there is no wgmma (tile_for_device); for 16-32 rows the
// direct tile (/r) of the block.
GemmTile mma_sync_tile_of(GemmTile tile);
// The tile without `/t`: what runs a `/t` tile's GEMM of weights w where its input cannot come in the MMA's
// K order (the masked layout's 16-bit GEMM1, K off a multiple of 64), with fewer stages where its permuted token
// tiles would not fit beside the ring; a 16- to 32-row `/t` tile's is the direct tile (/r) of its block. The kernel
// loaders take it beside the `/t` tile where gemm_runs_permuting_twin says a launch may run it.
GemmTile permuting_tile(GemmTile tile, const WeightDesc& w);
// Whether a GEMM planned on `tile` reading `input` may run as permuting_tile at apply time: `/t` tiles over 16-bit
// input. e4m3 input never does: its `/t` tiles need K % 128 == 0 (gemm_takes_e4m3), in every layout.
bool gemm_runs_permuting_twin(const GemmTile& tile, GemmInput input);

}  // namespace moeq::cuda
