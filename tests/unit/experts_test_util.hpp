#pragma once
// Shared helpers of the experts-step tests: small legal layers, running the CPU backend with
// poisoned buffers, and comparing against the float64 oracle with the CONTRACT §8 bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "io/problem.hpp"
#include "io/verify.hpp"
#include "moeq/experts.hpp"
#include "reference/oracle.hpp"
#include "reference/routing.hpp"
#include "reference/scalars.hpp"

namespace moeq::test {

// E_g = 7 experts (not a power of two), top-3, K = 128, I = 64: every format's groups fit
// (FP8 128x128 blocks are partial along I).
inline ExpertsDesc small_desc(WeightFormat w, ActFormat a, Activation act) {
  ExpertsDesc d;
  d.num_experts = 7;
  d.top_k = 3;
  d.hidden_size = 128;
  d.intermediate_size = 64;
  d.weight_format = w;
  d.act_format = a;
  d.group_size = 64;
  d.activation.kind = act;
  return d;
}

// The synthetic problem of a layer whose rank holds d.num_experts of d.num_experts * ep_size experts
// (rank ep_rank), on one thread.
inline io::HostProblem make_problem(const ExpertsDesc& d, int64_t m, uint64_t seed, bool batched, int ep_size = 1,
                                    int ep_rank = 0) {
  io::GenerateOptions g;
  g.num_tokens = m;
  g.seed = seed;
  g.batched = batched;
  g.ep_size = ep_size;
  g.ep_rank = ep_rank;
  g.num_threads = 1;
  ExpertsDesc global = d;
  global.num_experts = d.num_experts * ep_size;
  return io::generate_problem(global, g);
}

using Measured = io::OracleComparison;

// Output of the CPU backend, with output and both workspaces poisoned (all bytes 0xFF: NaN
// for every float type, -1 for indices) before the run.
inline std::vector<uint8_t> run_cpu(const io::HostProblem& p, const Options& options) {
  const Experts experts(p.desc, options);
  const bool batched = p.is_batched();
  const WorkspaceSizes ws = experts.workspace_bytes(p.num_tokens, batched ? p.max_tokens_per_expert : 0);
  std::vector<uint8_t> ws1(static_cast<size_t>(ws.workspace1_bytes), 0xFF);
  std::vector<uint8_t> ws2(static_cast<size_t>(ws.workspace2_bytes), 0xFF);
  std::vector<uint8_t> out(static_cast<size_t>(dtype_bytes(p.desc.act_dtype, p.output_rows() * p.desc.hidden_size)), 0xFF);
  experts.apply(p.w13->view(), p.w2->view(), p.inputs(), {out.data(), 0}, ws1.data(), ws2.data());
  return out;
}

// Batched results weighted and reduced back to [M, K] by the public combine_batched.
inline std::vector<uint8_t> combine(const io::HostProblem& p, const std::vector<uint8_t>& batched_out) {
  std::vector<uint8_t> out(static_cast<size_t>(dtype_bytes(p.desc.act_dtype, p.num_tokens * p.desc.hidden_size)), 0xFF);
  combine_batched(p.desc, p.inputs(), batched_out.data(), {out.data(), 0});
  return out;
}

// Compares rows of `got` (act_dtype) with `want` (float64); `row_valid` filters rows.
template <typename RowValid>
Measured measure(DType dtype, const std::vector<uint8_t>& got, const std::vector<double>& want, int64_t cols,
                 RowValid row_valid) {
  return io::compare(dtype, got, want, cols, row_valid);
}

// CONTRACT §8: no NaN/Inf where the reference has none, relative error <= 1e-2 (16-bit
// activations) or 2e-2 (quantized), largest element error <= 5% of max|ref|.
inline void expect_within_contract(const Measured& m, const ExpertsDesc& d, const std::string& what) {
  const double rel_bound = d.act_format == ActFormat::none ? 1e-2 : 2e-2;
  EXPECT_TRUE(m.finite) << what << ": non-finite output";
  EXPECT_LE(m.rel_err, rel_bound) << what;
  EXPECT_LE(m.max_err_fraction, 0.05) << what;
}

}  // namespace moeq::test
