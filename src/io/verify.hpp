#pragma once
// One GPU-against-reference check of the experts step, shared by `moeq verify` and tests/gpu:
// a synthetic problem, the CUDA backend with NaN-poisoned workspaces and output, the float64
// oracle, and the CONTRACT §8 verdict.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/problem.hpp"
#include "moeq/experts.hpp"

namespace moeq::io {

// A result against the float64 oracle (CONTRACT §8).
struct OracleComparison {
  double rel_err = 0.0;           // ||got - ref|| / ||ref||
  double max_err = 0.0;           // largest element error
  double max_err_fraction = 0.0;  // max_err / max|ref|
  double exact_fraction = 1.0;    // elements equal to the oracle rounded once to the dtype
  bool finite = true;             // NaN/Inf exactly where the oracle has them (inputs holding some)
  // rel <= 1e-2 (16-bit activations) or 2e-2 (quantized), max element error <= 5% of max|ref|.
  bool within_contract(ActFormat act) const;
};

// got: `dtype` values [rows, cols]; want: float64 [rows, cols]; rows where row_valid is false
// are skipped.
OracleComparison compare(DType dtype, const std::vector<uint8_t>& got, const std::vector<double>& want,
                         int64_t cols, const std::function<bool(int64_t)>& row_valid);
// The float64 oracle of `p`: [M, K] (standard) or [E, T, K] (batched).
std::vector<double> oracle_of(const HostProblem& p);
// The oracle of `p` (batched: over rows below each count) vs got; or against one computed before.
OracleComparison compare_with_oracle(const HostProblem& p, const std::vector<uint8_t>& got);
OracleComparison compare_with_oracle(const HostProblem& p, const std::vector<uint8_t>& got,
                                     const std::vector<double>& oracle);

struct VerifyCase {
  ExpertsDesc desc;           // global layer (num_experts = E_g); ep_size splits it
  Layout layout = Layout::indexed;
  int64_t num_tokens = 16;
  int ep_size = 1;            // > 1: this rank holds E_g / ep_size experts, expert_map has -1
  uint64_t seed = 0;
  CodeLayout codes = CodeLayout::canonical;  // prepared: the weights go through prepare_codes
  // Changes the generated problem before its upload and oracle (e.g. scales no quantizer would
  // choose); not in the label.
  std::function<void(HostProblem&)> edit = nullptr;
  std::string label() const;
};

struct VerifyResult {
  OracleComparison error;
  bool passed = false;
  std::vector<uint8_t> output;    // the GPU result ([M, K], or [E, T, K] for masked)
};

// CONTRACT §8 bounds: rel <= 1e-2 (16-bit activations) / 2e-2, max element error <= 5%.
VerifyResult verify_on_gpu(const VerifyCase& c, const Options& options = Options{});

// One case's problem, its upload and its oracle, made once, against which several option sets
// run (e.g. `moeq tune` checking tile after tile): run(o) is verify_on_gpu(c, o).
class GpuVerifier {
 public:
  explicit GpuVerifier(const VerifyCase& c);
  ~GpuVerifier();
  VerifyResult run(const Options& options) const;
  // The same problem and oracle in another layout that takes the same input (indexed, contiguous
  // and auto a standard batch, masked a batched one) and another code layout, uploaded once each:
  // what verify_on_gpu gives for the case with that layout and codes (`moeq verify` shares them).
  VerifyResult run_as(const Options& options, Layout layout, CodeLayout codes) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace moeq::io
