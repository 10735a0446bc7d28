#pragma once
// The kernels of one layer's experts step: what `moeq compile` puts in the disk cache and what
// Experts::warm_up loads into the process, so that no apply compiles or loads anything after it
// (CUDA-graph capture).
#include <functional>
#include <vector>

#include "cuda/moe_gemm.hpp"
#include "jit/compiler.hpp"
#include "moeq/experts.hpp"

namespace moeq::cuda {

// What a layer's GEMM of weights `w` planned on `tile` runs: the tile and what it reads as A
// (GemmInput), on a device of compute capability sm with these code layouts. 16-bit activations:
// `tile`, values. FP8 per-token activations (both GEMM inputs quantized per token, rows scaled in
// the epilogue): the e4m3 codes on e4m3_tile_of(tile) where gemm_takes_e4m3 admits it, else
// their 16-bit values on `tile`. The warp-specialized e4m3 body (canonical MXFP4) only with
// wgmma_e4m3 (Options::fp8_wgmma: measured slower than the values path). K off a multiple of 64 runs a
// `/t` tile as permuting_tile; e4m3 input keeps `/t` (the quantizers write its codes in that order) and needs
// no twin (K % 128 == 0).
struct GemmPlan {
  GemmTile tile;
  GemmInput input = GemmInput::values;
};
GemmPlan gemm_plan(const ExpertsDesc& desc, const WeightDesc& w, const GemmTile& tile, int sm, bool prepared_codes,
                   bool wgmma_e4m3 = false);
// Every plan a tile can take on some device or with some options (both FP8 per-token forms where
// the tile admits e4m3): what the kernel lists compile.
std::vector<GemmPlan> gemm_plans(const ExpertsDesc& desc, const WeightDesc& w, const GemmTile& tile, bool prepared_codes);
// Whether the layer admits GEMM1's activation epilogue (MoeGemmArgs::epilogue_activation) at all: 16-bit activations,
// an even I (GEMM2's input rows are its C rows), and I % 16 == 0 for [gate | up] rows (whole 16-channel halves).
bool activation_epilogue_fits(const ExpertsDesc& desc);
// Whether apply runs the layer's GEMM1 (launched as `tile1`, reading `input1`) with the activation in its epilogue,
// GEMM2 running `tile2`, over `rows` GEMM1 rows: activation_epilogue_fits, gemm_fuses_activation, activation_output
// not overlapping GEMM1's A (`overlaps_a`: other CTAs still read A while it is written), and
// - a warp-specialized GEMM1: at any rows, where GEMM2 reads its input in the order the epilogue writes it (both
//   `/t` or neither);
// - an 8-row direct GEMM1: at most `max_direct_rows` rows (apply: kActivationEpilogueMaxRows, or env
//   MOEQ_FUSED_ACTIVATION_MAX_ROWS), GEMM2 not `/t`, and `keeps_occupancy()` (called only then; it loads both
//   kernels: activation_epilogue_keeps_occupancy).
bool step_fuses_activation(const ExpertsDesc& desc, const GemmTile& tile1, GemmInput input1, const GemmTile& tile2,
                           int64_t rows, bool overlaps_a, const std::function<bool()>& keeps_occupancy,
                           int64_t max_direct_rows = kActivationEpilogueMaxRows);
// Whether apply runs the layer's GEMM2 (launched as `tile2` on weights `w2`, planned to read `input2`) making its own
// input from GEMM1's rows (MoeGemmArgs::quantize_rows) over `rows` GEMM2 rows: FP8 per-token activations, input2
// row-scaled values, gemm_quantizes_rows, and at most `max_rows` rows (apply: quantizing_gemm2_max_rows()).
bool step_quantizes_rows(const ExpertsDesc& desc, const WeightDesc& w2, const GemmTile& tile2, GemmInput input2,
                         int64_t rows, int64_t max_rows);
// apply's bound for step_quantizes_rows: env MOEQ_GEMM2_QUANTIZES_MAX_ROWS where set, else kQuantizingGemm2MaxRows
// (read once a process).
int64_t quantizing_gemm2_max_rows();
// The variants apply may launch a layer's GEMM1 (gemm1) or GEMM2 as: with 16-bit activations, GEMM1 self-routed and,
// where activation_epilogue_fits, with the layer's activation in its epilogue; with FP8 per-token activations, GEMM1
// self-routed quantizing the caller's rows, and GEMM2 reading GEMM1's rows (step_quantizes_rows) only where
// `gemm2_quantizing_max_rows` > 0 (-1: apply's, quantizing_gemm2_max_rows(), read only for such a layer's GEMM2;
// where it is 0 apply never launches them, and warming them would cost compiles for nothing); none otherwise.
GemmVariantUse layer_gemm_variants(const ExpertsDesc& desc, bool gemm1, int64_t gemm2_quantizing_max_rows = -1);

// Which of a layer's kernels the warm lists hold: the GEMMs' for weights of these kinds (GemmWeightsKind; default:
// any weights), and with wgmma_device_only none of the mma.sync tiles that stand in for wgmma ones on devices
// without wgmma: for a device that has it (a cache for sm_90a, a warm-up on an H100 / H200).
// PERF: users' complaint 3 (shared/design/USERS.md: first-use compiles). Qwen3-30B-A3B MXFP4 x bf16, `moeq compile
// --arch sm_90a -j 2` on this project's 2-core machine: 341 GEMM kernels for any weights before (1.27 s of NVRTC each
// on average; the front end takes ~0.1 s of a 2.2-s kernel, NVVM and ptxas the rest), 220 s; prepared codes with the
// MX word, aligned scales: 86 GEMMs (plus 36 canonical modules the segment builder runs from), 67 s
// (bench/results/2026-12-08-cpu-warm-scope.md).
struct LayerKernelScope {
  GemmWeightsKind w13, w2;
  bool wgmma_device_only = false;
  // The scope of Experts::warm_up(w13, w2) on a device with (or without) wgmma.
  static LayerKernelScope of(const WeightView& w13, const WeightView& w2, bool wgmma_device);
};

// Every kernel the layer's experts step can launch, for any M, layout and ids dtype: routing
// (align, permute, reduce; every ids and weights dtype), both GEMMs at every tile the planner
// can pick for the format (gemm_tile_for over block sizes and row counts), with canonical and
// prepared codes, and their segment-table builders, the code transform, the activation and the
// activation quantizer; the GEMMs narrowed to `scope`. `extra_tiles` (legal for the layer, else
// moeq::Error) are added to the GEMM tiles, e.g. ahead of `moeq bench --tile`.
std::vector<jit::KernelSpec> layer_kernel_specs(const ExpertsDesc& desc, const std::vector<GemmTile>& extra_tiles = {},
                                                const LayerKernelScope& scope = {});
// The tiles legal for both of the layer's GEMMs (gemm_tile_reasons empty for w13 and w2), in order: what
// `moeq compile --tile candidates` and `moeq tune` take of the tuning candidates.
std::vector<GemmTile> layer_tiles_legal_for(const ExpertsDesc& desc, const std::vector<GemmTile>& tiles);

// The GEMM kernels of a tuning table's entries: each entry's GEMM1 tile for w13 and GEMM2 tile for
// w2 (the mma.sync stand-ins of wgmma tiles too unless scope.wgmma_device_only), the code layouts
// and weights `scope` admits, with their segment-table builders; what `moeq compile --tuning` adds
// to layer_kernel_specs.
std::vector<jit::KernelSpec> tuned_kernel_specs(const ExpertsDesc& desc, const TuningTable& tuning,
                                                const LayerKernelScope& scope = {});

// Loads every kernel of layer_kernel_specs (no extra tiles) on the current device, compiling
// what the disk cache lacks, as their first launches would, each GEMM as gemm_plan(desc, w, tile,
// sm, either code layout, wgmma_e4m3) runs it: sm is the device's (device_sm), or 0 where the
// caller turned the e4m3 GEMMs off.
// Its GEMMs narrowed to `scope`'s weights (wgmma_device_only changes nothing: this device's tiles are loaded).
void load_layer_kernels(const ExpertsDesc& desc, int sm, bool wgmma_e4m3 = false, const LayerKernelScope& scope = {});

}  // namespace moeq::cuda
