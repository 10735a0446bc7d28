#pragma once
// A HostProblem copied to the GPU: the weights (canonical layout) and the inputs, with views
// that point at device memory, for the CUDA backend.
#include <vector>

#include "cuda/driver.hpp"
#include "io/problem.hpp"

namespace moeq::io {

struct DeviceProblem {
  std::vector<cuda::DeviceBuffer> buffers;  // owns everything below
  WeightView w13, w2;
  ExpertsInputs inputs;
};

// Synchronous uploads; needs a CUDA device (cuda::ensure_context is called). With
// CodeLayout::prepared the weight codes are also prepared on the GPU (moeq::prepare_codes) and
// the views point at the prepared copies.
DeviceProblem upload_problem(const HostProblem& p, CodeLayout codes = CodeLayout::canonical);

}  // namespace moeq::io
