#include "reference/oracle.hpp"

#include <algorithm>
#include <functional>
#include <string>

#include "common/parallel.hpp"
#include "moeq/error.hpp"
#include "reference/activation.hpp"
#include "reference/quantize.hpp"
#include "reference/routing.hpp"
#include "reference/scalars.hpp"

namespace moeq::ref {
namespace {

// Dequantized weights and bias of one expert, float64-ready.
struct ExpertWeights {
  std::vector<float> w13, b13, w2, b2;
};

ExpertWeights load_expert(const ExpertsDesc& d, const WeightView& w13, const WeightView& w2, int64_t e) {
  const WeightDesc d13 = d.w13(), d2 = d.w2();
  ExpertWeights x;
  x.w13.resize(static_cast<size_t>(d13.n * d13.k));
  x.b13.resize(static_cast<size_t>(d13.n));
  x.w2.resize(static_cast<size_t>(d2.n * d2.k));
  x.b2.resize(static_cast<size_t>(d2.n));
  dequantize_expert(d13, w13, e, x.w13.data());
  bias_expert(d13, w13, e, x.b13.data());
  dequantize_expert(d2, w2, e, x.w2.data());
  bias_expert(d2, w2, e, x.b2.data());
  return x;
}

// The GEMM input as the kernels see it: the 16-bit values, or their quantize-dequantize.
std::vector<float> as_gemm_input(const ExpertsDesc& d, std::vector<float> x) {
  if (d.act_format == ActFormat::none) return x;
  const int64_t cols = static_cast<int64_t>(x.size());
  std::vector<uint8_t> codes(static_cast<size_t>(act_code_bytes(d.act_format, 1, cols)));
  std::vector<uint8_t> scales(static_cast<size_t>(act_scale_bytes(d.act_format, 1, cols)));
  quantize_activation(d.act_format, x.data(), 1, cols, codes.data(), scales.data());
  dequantize_activation(d.act_format, codes.data(), scales.data(), 1, cols, x.data());
  return x;
}

// ys[r][n] = round(sum_k w[n,k] xs[r][k] + b[n]) for every row r, with float64 accumulation in k order.
// NOTE: each (r, n) sum is the same sequence of operations as a loop over k for that row alone, so
// the result does not depend on how rows are blocked or which thread runs them.
// PERF: rows in blocks of kRowBlock against each weight row: the weight row is read once per block
// from cache instead of once per row from memory, and the block's sums are independent chains.
constexpr size_t kRowBlock = 4;
void dense_gemm_rows(const std::vector<float>& w, const std::vector<float>& b, const std::vector<std::vector<float>>& xs,
                     DType round_dtype, std::vector<std::vector<float>>& ys) {
  const size_t n_out = b.size(), rows = xs.size();
  ys.assign(rows, std::vector<float>(n_out));
  if (rows == 0) return;
  const size_t k_in = xs[0].size();
  for (size_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const float* x[kRowBlock];
    for (size_t u = 0; u < kRowBlock; ++u) x[u] = xs[std::min(r0 + u, rows - 1)].data();
    for (size_t n = 0; n < n_out; ++n) {
      const float* wn = w.data() + n * k_in;
      double acc[kRowBlock] = {};
      for (size_t k = 0; k < k_in; ++k) {
        const double wk = static_cast<double>(wn[k]);
        for (size_t u = 0; u < kRowBlock; ++u) acc[u] += wk * x[u][k];
      }
      for (size_t u = 0; u < kRowBlock && r0 + u < rows; ++u)
        ys[r0 + u][n] = round_to(round_dtype, static_cast<float>(acc[u] + b[n]));
    }
  }
}

// Rows through one expert: the rounded down projections [rows][K].
std::vector<std::vector<float>> expert_forward_rows(const ExpertsDesc& d, const ExpertWeights& w,
                                                    std::vector<std::vector<float>> xs) {
  const DType c = d.act_dtype;
  for (auto& x : xs) x = as_gemm_input(d, std::move(x));
  std::vector<std::vector<float>> gate_up;
  dense_gemm_rows(w.w13, w.b13, xs, c, gate_up);
  for (size_t r = 0; r < xs.size(); ++r) {
    std::vector<float> act(static_cast<size_t>(d.intermediate_size));
    apply_activation(d.activation, d.interleaved_gate_up, gate_up[r].data(), 1, d.intermediate_size, act.data());
    for (float& v : act) v = round_to(c, v);
    xs[r] = as_gemm_input(d, std::move(act));
  }
  std::vector<std::vector<float>> down;
  dense_gemm_rows(w.w2, w.b2, xs, c, down);
  return down;
}

std::vector<float> load_row(DType dtype, const void* base, int64_t row, int64_t stride, int64_t cols) {
  std::vector<float> x(static_cast<size_t>(cols));
  for (int64_t k = 0; k < cols; ++k) x[k] = load_float(dtype, base, row * stride + k);
  return x;
}

// Runs body(weights, rows_of[e]) for every local expert e with rows, the experts on parallel
// threads, each expert's dequantized weights held only while its rows run.
// PERF: the oracle was one thread holding every expert's float weights (~12.7 GB at gpt-oss-120b's
// shapes), each routed row alone against them. The oracle's time (`moeq run --backend cpu --check`
// less the same run without --check; Qwen3-30B-A3B MXFP4, M = 256, the 2-core build machine):
// 19.0 s before, 5.4 s after.
void for_each_busy_expert(const ExpertsDesc& d, const WeightView& w13, const WeightView& w2,
                          const std::vector<std::vector<int64_t>>& rows_of,
                          const std::function<void(const ExpertWeights&, const std::vector<int64_t>&)>& body) {
  std::vector<int64_t> busy;
  for (int64_t e = 0; e < static_cast<int64_t>(rows_of.size()); ++e)
    if (!rows_of[e].empty()) busy.push_back(e);
  parallel_for(static_cast<int64_t>(busy.size()), hardware_threads(), [&](int64_t i) {
    const int64_t e = busy[i];
    body(load_expert(d, w13, w2, e), rows_of[e]);
  });
}

}  // namespace

std::vector<double> oracle_experts(const ExpertsDesc& d, const WeightView& w13, const WeightView& w2,
                                   const ExpertsInputs& in) {
  const int64_t M = in.num_tokens, K = d.hidden_size;
  const int64_t stride = in.hidden_row_stride > 0 ? in.hidden_row_stride : K;
  const auto local = to_local_expert_ids(in.topk_ids, in.topk_ids_dtype, M, d.top_k, d.global_experts(),
                                         in.expert_map, d.num_experts);
  // Each expert's slots (t * top_k + j), their down projections into downs[slot], then the sums
  // over j in slot order (the order a loop over tokens and slots adds them).
  std::vector<std::vector<int64_t>> slots_of(static_cast<size_t>(d.num_experts));
  for (int64_t slot = 0; slot < M * d.top_k; ++slot)
    if (local[slot] >= 0) slots_of[local[slot]].push_back(slot);
  std::vector<float> downs(static_cast<size_t>(M * d.top_k * K));
  for_each_busy_expert(d, w13, w2, slots_of, [&](const ExpertWeights& w, const std::vector<int64_t>& slots) {
    std::vector<std::vector<float>> xs;
    xs.reserve(slots.size());
    for (int64_t slot : slots) xs.push_back(load_row(d.act_dtype, in.hidden, slot / d.top_k, stride, K));
    const auto down = expert_forward_rows(d, w, std::move(xs));
    for (size_t r = 0; r < slots.size(); ++r) std::copy(down[r].begin(), down[r].end(), downs.begin() + slots[r] * K);
  });
  std::vector<double> out(static_cast<size_t>(M * K), 0.0);
  for (int64_t slot = 0; slot < M * d.top_k; ++slot) {
    if (local[slot] < 0) continue;
    const int64_t t = slot / d.top_k;
    const double weight = load_float(in.topk_weights_dtype, in.topk_weights, slot);
    const float* down = downs.data() + slot * K;
    for (int64_t c = 0; c < K; ++c) out[t * K + c] += weight * down[c];
  }
  return out;
}

std::vector<double> oracle_experts_batched(const ExpertsDesc& d, const WeightView& w13,
                                           const WeightView& w2, const ExpertsInputs& in) {
  const int64_t E = d.num_experts, T = in.max_tokens_per_expert, K = d.hidden_size;
  const int64_t stride = in.hidden_row_stride > 0 ? in.hidden_row_stride : K;
  std::vector<double> out(static_cast<size_t>(E * T * K), 0.0);
  std::vector<std::vector<int64_t>> rows_of(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t count = in.expert_num_tokens_dtype == DType::i64
                              ? static_cast<const int64_t*>(in.expert_num_tokens)[e]
                              : static_cast<const int32_t*>(in.expert_num_tokens)[e];
    // NOTE: the threads write each expert's rows; a count past T would overlap the next expert's.
    if (count < 0 || count > T)
      throw Error("expert_num_tokens[" + std::to_string(e) + "] = " + std::to_string(count) + " is outside [0, T = " +
                  std::to_string(T) + "]");
    for (int64_t i = 0; i < count; ++i) rows_of[e].push_back(e * T + i);
  }
  for_each_busy_expert(d, w13, w2, rows_of, [&](const ExpertWeights& w, const std::vector<int64_t>& rows) {
    std::vector<std::vector<float>> xs;
    xs.reserve(rows.size());
    for (int64_t row : rows) xs.push_back(load_row(d.act_dtype, in.hidden, row, stride, K));
    const auto down = expert_forward_rows(d, w, std::move(xs));
    for (size_t r = 0; r < rows.size(); ++r) std::copy(down[r].begin(), down[r].end(), out.begin() + rows[r] * K);
  });
  return out;
}

}  // namespace moeq::ref
