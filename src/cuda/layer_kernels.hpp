#pragma once
// The kernels of one layer's experts step: what `moeq compile` puts in the disk cache and what
// Experts::warm_up loads into the process, so that no apply compiles or loads anything after it
// (CUDA-graph capture).
#include <vector>

#include "cuda/moe_gemm.hpp"
#include "jit/compiler.hpp"
#include "moeq/experts.hpp"

namespace moeq::cuda {

// What the layer's GEMM on `tile` reads as A (GemmInput) on a device of compute capability sm:
// 16-bit activations; with FP8 per-token activations (both GEMM inputs quantized per token, rows
// scaled in the epilogue) the e4m3 codes where gemm_takes_e4m3 admits the tile, else their 16-bit
// values. (w13 and w2 share the weight format, so one answer serves both GEMMs.)
GemmInput gemm_input(const ExpertsDesc& desc, const GemmTile& tile, int sm);
// Every GemmInput a tile of the layer can take on some device (both FP8 per-token forms where the
// tile admits e4m3): what the kernel lists compile.
std::vector<GemmInput> gemm_inputs(const ExpertsDesc& desc, const GemmTile& tile);

// Every kernel the layer's experts step can launch, for any M, layout and ids dtype: routing
// (align, permute, reduce; every ids and weights dtype), both GEMMs at every tile the planner
// can pick for the format (gemm_tile_for over block sizes and row counts), with canonical and
// prepared codes, and their segment-table builders, the code transform, the activation and the
// activation quantizer. `extra_tiles` (legal for the layer, else moeq::Error) are added to the
// GEMM tiles, e.g. ahead of `moeq bench --tile`.
std::vector<jit::KernelSpec> layer_kernel_specs(const ExpertsDesc& desc, const std::vector<GemmTile>& extra_tiles = {});

// The GEMM kernels of a tuning table's entries: each entry's GEMM1 tile for w13 and GEMM2 tile for
// w2 (the mma.sync stand-ins of wgmma tiles too, as layer_kernel_specs), both code layouts, with
// their segment-table builders; what `moeq compile --tuning` adds to layer_kernel_specs.
std::vector<jit::KernelSpec> tuned_kernel_specs(const ExpertsDesc& desc, const TuningTable& tuning);

// Loads every kernel of layer_kernel_specs (no extra tiles) on the current device, compiling
// what the disk cache lacks, as their first launches would, each GEMM with gemm_input(desc, tile,
// sm): sm is the device's (device_sm), or 0 where the caller turned the e4m3 GEMMs off.
void load_layer_kernels(const ExpertsDesc& desc, int sm);

}  // namespace moeq::cuda
