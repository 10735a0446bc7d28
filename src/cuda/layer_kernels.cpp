#include "cuda/layer_kernels.hpp"

#include <set>
#include <string>

#include "cuda/elementwise.hpp"
#include "cuda/prepare.hpp"
#include "cuda/routing.hpp"
#include "moeq/error.hpp"

namespace moeq::cuda {
namespace {

// The GEMM tiles of the layer: the planner's (and, unless wgmma_device_only, the mma.sync tiles that run its wgmma
// ones on other devices, for `moeq compile --arch`), then the extra ones.
std::vector<GemmTile> layer_tiles(const ExpertsDesc& d, const std::vector<GemmTile>& extra_tiles,
                                  bool wgmma_device_only) {
  std::vector<GemmTile> tiles = planner_tiles(d.weight_format);
  for (size_t i = 0, n = tiles.size(); i < n && !wgmma_device_only; ++i)
    if (tiles[i].wgmma) tiles.push_back(mma_sync_tile_of(tiles[i]));
  for (const GemmTile& tile : extra_tiles) {
    if (const auto reasons = gemm_tile_reasons(tile, d.w13()); !reasons.empty()) throw Error(reasons.front());
    tiles.push_back(tile);
  }
  return tiles;
}

// The kernels that are not GEMMs.
std::vector<jit::KernelSpec> other_kernel_specs(const ExpertsDesc& d) {
  std::vector<jit::KernelSpec> specs = routing_kernel_specs();
  specs.push_back(prepare_kernel_spec());
  specs.push_back(activation_kernel_spec(d.activation.kind, d.interleaved_gate_up, d.act_dtype));
  if (d.act_format == ActFormat::none) {
    // GEMM1's input on `/t` tiles: the order pass alone (contiguous, chunked routing), or folded into the routing's
    // first launch (indexed; on the chunked path only with MOEQ_FOLD_ORDER=2, whose kernels are here too).
    specs.push_back(order_rows_kernel_spec());
    for (jit::KernelSpec& spec : folded_order_routing_kernel_specs(d.act_dtype)) specs.push_back(std::move(spec));
  }
  if (d.act_format != ActFormat::none) {
    // The 16-bit GEMMs' inputs (cuda_backend.cpp): GEMM1's by quantize_activation_values, GEMM2's
    // by activation_quantize_values (the plain activation kernel above serves 16-bit layers).
    // GEMM1's quantizer runs in the routing's first launch (indexed, contiguous), or alone (masked).
    // NOTE: not the folded chunk counts: apply never folds on the chunked path (cuda_backend.cpp).
    auto add_folded = [&](bool values_out) {
      for (jit::KernelSpec& spec : folded_routing_kernel_specs(d.act_format, d.act_dtype, values_out))
        if (spec.entry != "moeq_route_chunk_count") specs.push_back(std::move(spec));
    };
    specs.push_back(quantize_kernel_spec(d.act_format, d.act_dtype, true));
    add_folded(true);
    specs.push_back(activation_quantize_kernel_spec(d.activation.kind, d.interleaved_gate_up, d.act_format, d.act_dtype));
    // The e4m3 GEMMs' inputs (GemmInput::row_scaled_e4m3): the codes themselves.
    if (d.act_format == ActFormat::fp8_token &&
        (d.weight_format == WeightFormat::fp8_channel || d.weight_format == WeightFormat::mxfp4)) {
      specs.push_back(quantize_kernel_spec(d.act_format, d.act_dtype, false));
      add_folded(false);
      specs.push_back(
          activation_quantize_kernel_spec(d.activation.kind, d.interleaved_gate_up, d.act_format, d.act_dtype, false));
    }
  }
  return specs;
}

// A GEMM's kernel, and the others a launch of it may run as (known only at apply time): folded where the
// weights' MX scales come with WeightView::mx_scales_at_most_two, 256 channels wide over unaligned scales
// (unaligned_scales_tile), without `/t` where the input cannot come in the MMA's order (permuting_tile), with
// its segment-table builder, and the variants `use` names (layer_gemm_variants) where the tile admits them.
// `moeq compile` warms them all, as load_moe_gemm loads them (both narrowed to `kind`); `add` keeps each source once.
template <class Add>
void add_gemm(const Add& add, const WeightDesc& w, DType act_dtype, const GemmPlan& plan, bool prepared,
              const GemmVariantUse& use, const GemmWeightsKind& kind) {
  const GemmTile twin = gemm_runs_permuting_twin(plan.tile, plan.input) ? permuting_tile(plan.tile, w) : plan.tile;
  for (const GemmTile& ordered : {plan.tile, twin}) {
    for (bool unaligned : GemmWeightsKind::admitted(kind.unaligned_scales))
      for (bool mx_scales_at_most_two : GemmWeightsKind::admitted(kind.mx_scales_at_most_two)) {
        const GemmTile tile = unaligned ? unaligned_scales_tile(ordered) : ordered;
        add(moe_gemm_kernel_spec(w, act_dtype, tile, prepared, plan.input, mx_scales_at_most_two));
        for (const GemmKernelVariant& v : gemm_extra_variants(tile, w, plan.input, use))
          add(moe_gemm_kernel_spec(w, act_dtype, tile, prepared, v.input(plan.input), mx_scales_at_most_two, v.variant,
                                   v.activation));
      }
    // NOTE: canonical and unfolded whatever the weights, as build_segments loads it (the builder reads no weights).
    add(moe_gemm_segments_kernel_spec(w, act_dtype, ordered, false, plan.input));
  }
}

}  // namespace

bool activation_epilogue_fits(const ExpertsDesc& d) {
  const int64_t I = d.intermediate_size;
  const bool pairs_halves = is_gated(d.activation.kind) && !d.interleaved_gate_up;
  return d.act_format == ActFormat::none && I % 2 == 0 && (!pairs_halves || I % 16 == 0);
}

bool step_fuses_activation(const ExpertsDesc& d, const GemmTile& tile1, GemmInput input1, const GemmTile& tile2,
                           int64_t rows, bool overlaps_a, const std::function<bool()>& keeps_occupancy,
                           int64_t max_direct_rows) {
  if (overlaps_a || !activation_epilogue_fits(d) ||
      !gemm_fuses_activation(tile1, input1, EpilogueActivation{true, d.activation.kind, d.interleaved_gate_up}))
    return false;
  if (tile1.producer) return tile1.mma_order_tokens == tile2.mma_order_tokens;
  return rows <= max_direct_rows && !tile2.mma_order_tokens && keeps_occupancy();
}

bool step_quantizes_rows(const ExpertsDesc& d, const WeightDesc& w2, const GemmTile& tile2, GemmInput input2,
                         int64_t rows, int64_t max_rows) {
  return d.act_format == ActFormat::fp8_token && input2 == GemmInput::row_scaled_values && rows <= max_rows &&
         gemm_quantizes_rows(tile2, w2);
}

int64_t quantizing_gemm2_max_rows() {
  static const int64_t max_rows = env_integer("MOEQ_GEMM2_QUANTIZES_MAX_ROWS", 0, 1L << 30, kQuantizingGemm2MaxRows);
  return max_rows;
}

GemmVariantUse layer_gemm_variants(const ExpertsDesc& d, bool gemm1, int64_t gemm2_quantizing_max_rows) {
  GemmVariantUse use;
  if (d.act_format == ActFormat::fp8_token) {
    if (gemm1) {
      use.quantized_self_route = true;
    } else if ((gemm2_quantizing_max_rows < 0 ? quantizing_gemm2_max_rows() : gemm2_quantizing_max_rows) > 0) {
      use.rows_activation = EpilogueActivation{true, d.activation.kind, d.interleaved_gate_up};
    }
    return use;
  }
  if (d.act_format != ActFormat::none || !gemm1) return use;
  use.self_route = true;
  if (activation_epilogue_fits(d)) use.activation = EpilogueActivation{true, d.activation.kind, d.interleaved_gate_up};
  return use;
}

GemmPlan gemm_plan(const ExpertsDesc& d, const WeightDesc& w, const GemmTile& requested, int sm, bool prepared_codes,
                   bool wgmma_e4m3) {
  // NOTE: the order permutes whole 64-k tiles: K off a multiple of 64 runs `/t` tiles as their twins. The
  // quantizers write their 16-bit values in that order where asked (quantize_activation_values, activation_
  // quantize_values), and e4m3 codes in the e4m3 consumers' order of 128-k tiles (gemm_takes_e4m3: K % 128 == 0).
  const GemmTile tile = w.k % 64 == 0 ? requested : permuting_tile(requested, w);
  if (d.act_format != ActFormat::fp8_token) return {tile, GemmInput::values};
  const GemmTile e4m3 = e4m3_tile_of(tile);
  if (gemm_takes_e4m3(w, e4m3, sm, prepared_codes) && (!e4m3.producer || wgmma_e4m3))
    return {e4m3, GemmInput::row_scaled_e4m3};
  return {tile, GemmInput::row_scaled_values};
}

std::vector<GemmPlan> gemm_plans(const ExpertsDesc& d, const WeightDesc& w, const GemmTile& tile, bool prepared_codes) {
  // Without e4m3 MMAs (sm 0) and with every kind of them (sm_90: mma.sync and wgmma e4m3).
  const GemmPlan without = gemm_plan(d, w, tile, 0, prepared_codes),
                 with = gemm_plan(d, w, tile, 90, prepared_codes, true);
  if (without.input == with.input) return {without};
  return {without, with};
}

std::vector<GemmTile> layer_tiles_legal_for(const ExpertsDesc& desc, const std::vector<GemmTile>& tiles) {
  std::vector<GemmTile> legal;
  for (const GemmTile& tile : tiles)
    if (gemm_tile_reasons(tile, desc.w13()).empty() && gemm_tile_reasons(tile, desc.w2()).empty()) legal.push_back(tile);
  return legal;
}

LayerKernelScope LayerKernelScope::of(const WeightView& w13, const WeightView& w2, bool wgmma_device) {
  return {GemmWeightsKind::of(w13), GemmWeightsKind::of(w2), wgmma_device};
}

std::vector<jit::KernelSpec> layer_kernel_specs(const ExpertsDesc& d, const std::vector<GemmTile>& extra_tiles,
                                                const LayerKernelScope& scope) {
  std::vector<jit::KernelSpec> specs = other_kernel_specs(d);
  // NOTE: GEMM1's and GEMM2's configs usually give the same text (N, K and the bias dtype are
  // run-time), and `moeq compile` would count the copy as a cache hit: each spec once.
  std::set<std::string> seen;
  const auto add = [&](jit::KernelSpec spec) {
    if (seen.insert(spec.entry + "\n" + spec.source).second) specs.push_back(std::move(spec));
  };
  for (const GemmTile& tile : layer_tiles(d, extra_tiles, scope.wgmma_device_only))
    for (bool gemm1 : {true, false}) {
      const WeightDesc w = gemm1 ? d.w13() : d.w2();
      const GemmWeightsKind& kind = gemm1 ? scope.w13 : scope.w2;
      for (bool prepared : GemmWeightsKind::admitted(kind.prepared_codes))
        for (const GemmPlan& plan : gemm_plans(d, w, tile, prepared))
          add_gemm(add, w, d.act_dtype, plan, prepared, layer_gemm_variants(d, gemm1), kind);
    }
  return specs;
}

std::vector<jit::KernelSpec> tuned_kernel_specs(const ExpertsDesc& d, const TuningTable& tuning,
                                                const LayerKernelScope& scope) {
  std::vector<jit::KernelSpec> specs;
  std::set<std::string> seen;
  const auto add = [&](jit::KernelSpec spec) {
    if (seen.insert(spec.entry + "\n" + spec.source).second) specs.push_back(std::move(spec));
  };
  for (const TuningEntry& e : tuning.entries)
    for (bool second : {false, true}) {
      const GemmTile tile = parse_gemm_tile(second ? e.gemm2_tile : e.gemm1_tile);
      const WeightDesc w = second ? d.w2() : d.w13();
      const GemmWeightsKind& kind = second ? scope.w2 : scope.w13;
      std::vector<GemmTile> tiles{tile};
      if (tile.wgmma && !scope.wgmma_device_only) tiles.push_back(mma_sync_tile_of(tile));
      for (const GemmTile& t : tiles)
        for (bool prepared : GemmWeightsKind::admitted(kind.prepared_codes))
          for (const GemmPlan& plan : gemm_plans(d, w, t, prepared))
            add_gemm(add, w, d.act_dtype, plan, prepared, layer_gemm_variants(d, !second), kind);
    }
  return specs;
}

void load_layer_kernels(const ExpertsDesc& d, int sm, bool wgmma_e4m3, const LayerKernelScope& scope) {
  for (const jit::KernelSpec& spec : other_kernel_specs(d)) jit::kernel_cache().function(spec);
  // NOTE: through the GEMM's own loader: it also raises the shared-memory limit of each
  // function, which a first launch would otherwise do (under a graph capture).
  // (load_moe_gemm loads the tile this device runs, so the mma.sync stand-ins need no entry.)
  for (const GemmTile& tile : planner_tiles(d.weight_format))
    for (bool gemm1 : {true, false}) {
      const WeightDesc w = gemm1 ? d.w13() : d.w2();
      const GemmWeightsKind& kind = gemm1 ? scope.w13 : scope.w2;
      for (bool prepared : GemmWeightsKind::admitted(kind.prepared_codes)) {
        const GemmPlan plan = gemm_plan(d, w, tile_for_device(tile), sm, prepared, wgmma_e4m3);
        // NOTE: for any weights, each layout's plan also loads the other layout's kernels: a superset, proven by the
        // warm-up tests; narrowing it is left to a kind that names the layout.
        load_moe_gemm(w, d.act_dtype, plan.tile, plan.input, layer_gemm_variants(d, gemm1), kind);
      }
    }
}

}  // namespace moeq::cuda
