#pragma once
// The one place that says what moeq accepts, with reasons in words. Used by can_implement,
// the Experts constructor, the CLI (`moeq info`) and the tests.
#include <cstdint>
#include <string>
#include <vector>

#include "moeq/experts.hpp"

namespace moeq::plan {

// ExpertsDesc's bounds, far above any model, which keep every size computation inside int64: experts, K and I.
// A WeightDesc's n reaches 2 I (a gated layer's w13).
inline constexpr int64_t kMaxExperts = int64_t{1} << 16;
inline constexpr int64_t kMaxDim = int64_t{1} << 20;
inline constexpr int64_t kMaxWeightRows = 2 * kMaxDim;
// Whether a WeightDesc's sizes are within those bounds (E and k in [1, bound], n in [1, kMaxWeightRows]); else why not.
std::string weight_size_reason(int64_t num_experts, int64_t n, int64_t k);

std::vector<std::string> desc_reasons(const ExpertsDesc& desc);
// Why a WeightDesc built by hand (validate_weights) is not one an ExpertsDesc could give: an unknown enum, sizes
// outside weight_size_reason's bounds, a group size, scale dtype, zero point or global-scale count its format does
// not take.
std::vector<std::string> weight_desc_reasons(const WeightDesc& desc);
std::vector<std::string> option_reasons(const ExpertsDesc& desc, const Options& options);
// Why the CUDA backend cannot run this layer (no device, pairs and shapes not there yet).
std::vector<std::string> cuda_reasons(const ExpertsDesc& desc, const Options& options);
// cuda_reasons but the device's presence: why the CUDA kernels could not run the layer on any GPU
// (`moeq info -M` plans for one that is not there).
std::vector<std::string> cuda_kernel_reasons(const ExpertsDesc& desc, const Options& options);

// The GEMM M blocks of the CUDA backend: 8, 16, 24, 32, 48, 64, 80, 96, 128 or 144 rows.
inline constexpr int64_t kGpuBlockSizes[] = {8, 16, 24, 32, 48, 64, 80, 96, 128, 144};
inline constexpr const char* kGpuBlockMs = "8, 16, 24, 32, 48, 64, 80, 96, 128 or 144";
inline bool is_gpu_block_m(int64_t block_m) {
  for (int64_t b : kGpuBlockSizes)
    if (b == block_m) return true;
  return false;
}

// Throws moeq::Error listing every reason when desc/options cannot run.
void require_implementable(const ExpertsDesc& desc, const Options& options);

}  // namespace moeq::plan
