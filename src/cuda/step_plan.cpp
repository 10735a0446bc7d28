#include "cuda/step_plan.hpp"

#include "cuda/gemm_planner.hpp"

namespace moeq::cuda {

StepGemmPlans plan_step_gemms(const ExpertsDesc& d, const plan::PlanShape& shape, bool prepared_codes1,
                              bool prepared_codes2, const DeviceInfo& device) {
  const int64_t routed_rows =
      shape.layout == Layout::masked ? d.num_experts * shape.max_tokens_per_expert : shape.num_tokens * d.top_k;
  // Each GEMM's own tile, the same block size (one routing serves both; gemm_few_ctas,
  // gemm_alt_fewer_waves, gemm_mx_pass_scales).
  const auto tile_of = [&](bool second, int64_t n, int64_t k) {
    if (shape.tuned != nullptr) return parse_gemm_tile(second ? shape.tuned->gemm2_tile : shape.tuned->gemm1_tile);
    return gemm_tile_for_channels(d.weight_format, d.act_dtype, static_cast<int>(shape.block_m),
                                  shape.batch_invariant ? kTileForAnyRows : routed_rows, d.top_k, n, k, d.num_experts,
                                  device.num_sms);
  };
  // NOTE: sm 0 admits no e4m3 GEMM (Options::fp8_tensor_cores false).
  const int sm = shape.fp8_tensor_cores ? device_sm(device) : 0;
  const auto plan = [&](const WeightDesc& w, const GemmTile& tile, bool prepared) {
    return gemm_plan(d, w, tile_for_device(tile, device), sm, prepared, shape.fp8_wgmma);
  };
  StepGemmPlans plans{plan(d.w13(), tile_of(false, d.gemm1_n(), d.hidden_size), prepared_codes1),
                      plan(d.w2(), tile_of(true, d.hidden_size, d.intermediate_size), prepared_codes2)};
  if (shape.layout == Layout::masked && plans.gemm1.tile.mma_order_tokens && d.act_format == ActFormat::none)
    plans.gemm1.tile = permuting_tile(plans.gemm1.tile, d.w13());
  return plans;
}

}  // namespace moeq::cuda
