#pragma once
// The two GEMMs of one experts step as Experts::apply launches them, on a device that need not be
// present: apply runs this plan, and Experts::explain and `moeq info -M` print it.
#include "cuda/driver.hpp"
#include "cuda/layer_kernels.hpp"
#include "plan/workspace.hpp"

namespace moeq::cuda {

struct StepGemmPlans {
  GemmPlan gemm1;  // w13: [rows, K] -> [rows, 2I] (or I, non-gated)
  GemmPlan gemm2;  // w2: [rows, I] -> [rows, K]
};

// Each GEMM's tile is the shape's tuning entry's or the planner's (gemm_tile_for_channels over the step's
// routed rows: M * top_k, or E * T batched; any rows in batch-invariant mode) as `device` runs it
// (tile_for_device), then gemm_plan with the code layouts (prepared or canonical) and, unless
// shape.fp8_tensor_cores is off, the device's e4m3 MMAs. The masked layout's 16-bit GEMM1 reads the
// caller's slabs as they are, so a `/t` tile runs as its permuting twin there.
// NOTE: a 512-channel tile over scales off a 4-byte boundary still runs 256 channels wide at launch
// (tile_for_scales: the pointer is not part of the plan).
StepGemmPlans plan_step_gemms(const ExpertsDesc& desc, const plan::PlanShape& shape, bool prepared_codes1,
                              bool prepared_codes2, const DeviceInfo& device);

}  // namespace moeq::cuda
