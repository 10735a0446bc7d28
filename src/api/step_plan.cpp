#include "api/step_plan.hpp"

#include <sstream>
#include <tuple>

#include "cuda/gemm_planner.hpp"
#include "plan/legality.hpp"
#include "plan/tuning.hpp"

namespace moeq::api {

TuningTable effective_tuning(const ExpertsDesc& desc, const Options& options, const cuda::DeviceInfo* device) {
  if (device == nullptr) return options.tuning;
  const TuningTable* shipped =
      plan::shipped_tuning_for(desc, options, "sm_" + std::to_string(device->cc_major) + std::to_string(device->cc_minor));
  return shipped != nullptr ? *shipped : options.tuning;
}

plan::PlanShape step_shape(const ExpertsDesc& desc, const Options& options, const TuningTable& tuning,
                           const cuda::DeviceInfo* device, int64_t num_tokens, int64_t tokens_per_expert,
                           bool batched) {
  plan::PlanShape p;
  p.layout = plan::choose_layout(desc, options.layout, num_tokens, batched);
  p.num_tokens = num_tokens;
  p.max_tokens_per_expert = tokens_per_expert;
  // NOTE: batched input sizes its blocks by T alone (num_tokens is not part of that input), so
  // workspace_bytes(M, T) and apply agree whatever M the caller passes.
  const int64_t block_m_tokens = batched ? tokens_per_expert * desc.global_experts() / desc.top_k : num_tokens;
  p.batch_invariant = options.batch_invariant;
  p.fp8_tensor_cores = options.fp8_tensor_cores;
  p.fp8_wgmma = options.fp8_wgmma;
  p.tuned = tuning.serves(p.layout) ? tuning.find(plan::valid_shape_m(desc, block_m_tokens)) : nullptr;
  if (p.tuned != nullptr) {
    p.block_m = p.tuned->block_m;  // as the caller's block_m: its tiles run it on every device
    return p;
  }
  p.block_m = options.block_m > 0            ? options.block_m
              : options.batch_invariant ? plan::kBatchInvariantBlockM
                                        : plan::choose_block_m(desc, block_m_tokens);
  // NOTE: align uses the GEMM's block size: the planner's choice as this device's GEMM runs it
  // (cuda::gemm_block_m); a block size the caller set is kept (128 runs on mma.sync off Hopper).
  if (device != nullptr && options.block_m == 0) p.block_m = cuda::gemm_block_m(p.block_m, *device);
  return p;
}

std::string gemm_plan_text(const ExpertsDesc& desc, const cuda::GemmPlan& plan) {
  std::string reads;
  switch (plan.input) {
    case cuda::GemmInput::values:
      reads = std::string(to_string(desc.act_dtype));
      if (desc.act_format != ActFormat::none) reads += " values of " + std::string(to_string(desc.act_format));
      break;
    case cuda::GemmInput::row_scaled_values:
      reads = std::string(to_string(desc.act_dtype)) + " values of " + std::string(to_string(desc.act_format)) +
              ", row scales";
      break;
    case cuda::GemmInput::row_scaled_e4m3: reads = "e4m3 codes, row scales"; break;
    case cuda::GemmInput::quantized_rows:
      reads = std::string(to_string(desc.act_dtype)) + " rows quantized to " + std::string(to_string(desc.act_format)) +
              " in the GEMM, row scales";
      break;
  }
  return plan.tile.to_string() + " " + reads;
}

std::string step_gemms_text(const ExpertsDesc& desc, const plan::PlanShape& shape, const cuda::DeviceInfo& device) {
  const cuda::StepGemmPlans prepared = cuda::plan_step_gemms(desc, shape, true, true, device);
  const cuda::StepGemmPlans canonical = cuda::plan_step_gemms(desc, shape, false, false, device);
  std::ostringstream s;
  for (const auto& [name, a, b] : {std::tuple{"gemm1", prepared.gemm1, canonical.gemm1},
                                   std::tuple{"gemm2", prepared.gemm2, canonical.gemm2}}) {
    s << "  " << name << " " << gemm_plan_text(desc, a);
    if (b.tile.to_string() != a.tile.to_string() || b.input != a.input)
      s << " (canonical codes: " << gemm_plan_text(desc, b) << ")";
    s << "\n";
  }
  return s.str();
}

std::string explain_step(const ExpertsDesc& desc, const Options& options, const TuningTable& tuning, Backend backend,
                         const cuda::DeviceInfo* device, int64_t num_tokens) {
  const plan::PlanShape shape = step_shape(desc, options, tuning, device, num_tokens, 0, false);
  std::ostringstream s;
  s << "experts " << desc.to_string() << "\n"
    << "options " << options.to_string() << "\n"
    << "backend " << to_string(backend) << ", layout " << to_string(shape.layout);
  if (shape.layout == Layout::indexed) s << " (block_m " << shape.block_m << ")";
  s << " for M = " << num_tokens << " (valid_shape_m " << plan::valid_shape_m(desc, num_tokens) << ")\n";
  if (shape.tuned != nullptr)
    s << (options.tuning.empty() ? "shipped table " + tuning.arch + " " + tuning.layer + ", " : "")
      << "tuned (" << shape.tuned->min_m << ", " << shape.tuned->max_m << "]: block_m " << shape.tuned->block_m
      << ", gemm1 " << shape.tuned->gemm1_tile << ", gemm2 " << shape.tuned->gemm2_tile << "\n";
  if (device != nullptr)
    s << "on sm_" << device->cc_major << device->cc_minor << " (" << device->num_sms << " SMs), "
      << "GEMMs from " << (shape.tuned != nullptr ? "the table" : "the planner's rules") << ":\n"
      << step_gemms_text(desc, shape, *device);
  s << plan::plan_workspaces(desc, shape).to_string();
  return s.str();
}

}  // namespace moeq::api
