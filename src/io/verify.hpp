#pragma once
// One GPU-against-reference check of the experts step, shared by `moeq verify` and tests/gpu:
// a synthetic problem, the CUDA backend with NaN-poisoned workspaces and output, the float64
// oracle, and the CONTRACT §8 verdict.
#include <cstdint>
#include <string>
#include <vector>

#include "moeq/experts.hpp"

namespace moeq::io {

struct VerifyCase {
  ExpertsDesc desc;           // global layer (num_experts = E_g); ep_size splits it
  Layout layout = Layout::indexed;
  int64_t num_tokens = 16;
  int ep_size = 1;            // > 1: this rank holds E_g / ep_size experts, expert_map has -1
  uint64_t seed = 0;
  std::string label() const;
};

struct VerifyResult {
  double rel_err = 0.0;
  double max_err_fraction = 0.0;  // largest element error / max|ref|
  bool finite = true;             // no NaN/Inf where the oracle has none
  bool passed = false;
  std::vector<uint8_t> output;    // the GPU result ([M, K], or [E, T, K] for masked)
};

// CONTRACT §8 bounds: rel <= 1e-2 (16-bit activations) / 2e-2, max element error <= 5%.
VerifyResult verify_on_gpu(const VerifyCase& c, const Options& options = Options{});

}  // namespace moeq::io
