#pragma once
// The MoE GEMM's generated source: one NVRTC program per config (weights, activation dtype, tile,
// code layout, input), its integer key, and every config the planner can emit.
#include <cstdint>
#include <vector>

#include "cuda/gemm_tile.hpp"
#include "jit/compiler.hpp"
#include "moeq/types.hpp"
#include "moeq/weights.hpp"

namespace moeq::cuda {

// input: what A holds (GemmInput); compile-time, so 16-bit layers keep the epilogue without row
// scales. row_scaled_e4m3 needs a tile and weights gemm_takes_e4m3 admits (else moeq::Error).
// mx_scales_at_most_two: MoeGemmArgs's; it changes the source only where gemm_folds_mx_scales.
// variant: the self-routed GEMM1's kernel (MoeGemmArgs::self_route), only where gemm_self_routes (else moeq::Error);
// activation (on): a GEMM1's kernel that applies it in the epilogue (MoeGemmArgs::epilogue_activation), plain or
// self-routed, only where gemm_fuses_activation (else moeq::Error). Neither is part of gemm_config_key (its 64 bits are
// spent): moe_gemm keys the variants apart, and whether w has a bias (the source names it: the epilogue loads the
// bias first) too.
jit::KernelSpec moe_gemm_kernel_spec(const WeightDesc& w, DType act_dtype, const GemmTile& tile, bool prepared_codes = false,
                                     GemmInput input = GemmInput::values, bool mx_scales_at_most_two = false,
                                     GemmVariant variant = GemmVariant::plain,
                                     const EpilogueActivation& activation = {});
// The segment-table builder lives in the same module as the GEMM of that config.
jit::KernelSpec moe_gemm_segments_kernel_spec(const WeightDesc& w, DType act_dtype, const GemmTile& tile,
                                              bool prepared_codes = false, GemmInput input = GemmInput::values);
// The compile-time config of a GEMM (or of its segment-table builder) as one integer: for weights alike in having a
// bias or not, equal keys <=> equal generated sources (moe_gemm_kernel_spec; the bias, which names one line of the
// source, has no bit left here: moe_gemm keys it apart). The launch path finds loaded functions by it, so a launch builds
// no source text (PERF: 1.4 us per GEMM launch on the host). The tile must be legal (gemm_tile_reasons empty): its
// fields are packed in fixed widths.
uint64_t gemm_config_key(const WeightDesc& w, DType act_dtype, const GemmTile& tile, bool prepared_codes, bool segments,
                         GemmInput input = GemmInput::values, bool mx_scales_at_most_two = false);
// Every config the planner can emit (planner_tiles, canonical and prepared codes, bf16 and f16,
// INT scales in the activation dtype, MX scales at most 2 or not where gemm_folds_mx_scales),
// plus the other INT scale dtypes and zero points on one tile, the row-scale epilogue on each GEMM body once, the e4m3 input on FP8 per-channel direct
// tiles and on each MXFP4 warp-specialized tile e4m3_tile_of gives, the self-routed GEMM1 once per format, GEMM1 with
// the activation in its epilogue (every kind once), and a bias on each format's first and last planner tile; the source
// depends on whether there is a bias (not its dtype), not on global scales or the layout.
std::vector<jit::KernelSpec> moe_gemm_kernel_specs();

}  // namespace moeq::cuda
