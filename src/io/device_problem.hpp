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

// Synchronous uploads; needs a CUDA device (cuda::ensure_context is called).
DeviceProblem upload_problem(const HostProblem& p);

}  // namespace moeq::io
