#pragma once
// The experts step on the GPU: routing kernels, the MoE GEMM, activation and reduction in the
// workspaces the planner lays out (the same plan as the CPU backend). Device pointers
// everywhere; enqueues on `stream` only: no sync, no allocation (CUDA-graph safe once every
// kernel of the layer has been loaded, e.g. by one warm-up call or `moeq compile`).
#include "moeq/experts.hpp"
#include "plan/workspace.hpp"

namespace moeq::api {

// Checks what the host can check without reading device memory: pointers, alignment, dtypes,
// strides. Values (ids, counts) are checked on the device (routing error word).
void validate_device_inputs(const ExpertsDesc& desc, Layout layout, const ExpertsInputs& inputs,
                            const ExpertsOutput& output);
// Every pointer the weights need is present and aligned (values are not read: device memory).
void validate_device_weights(const WeightDesc& desc, const WeightView& view, const char* name);

// Experts::warm_up on the CUDA backend: every kernel of the layer loaded (cuda/layer_kernels.hpp), for any weights,
// or (w13 and w2 given) for weights like those: their code layouts, MX scales' words and scale alignment.
void warm_up_cuda(const ExpertsDesc& desc, const TuningTable& tuning, bool fp8_tensor_cores = true,
                  bool fp8_wgmma = false, const WeightView* w13 = nullptr, const WeightView* w2 = nullptr);

void apply_cuda(const ExpertsDesc& desc, const plan::PlanShape& shape, const plan::WorkspacePlan& plan,
                const WeightView& w13, const WeightView& w2, const ExpertsInputs& inputs, const ExpertsOutput& output,
                void* workspace1, void* workspace2, void* stream);

}  // namespace moeq::api
