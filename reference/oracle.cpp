#include "reference/oracle.hpp"

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

// out[n] = round(sum_k w[n,k] x[k] + b[n]) with float64 accumulation.
std::vector<float> dense_gemm(const std::vector<float>& w, const std::vector<float>& b,
                              const std::vector<float>& x, DType round_dtype) {
  const size_t n_out = b.size(), k_in = x.size();
  std::vector<float> y(n_out);
  for (size_t n = 0; n < n_out; ++n) {
    double acc = 0.0;
    for (size_t k = 0; k < k_in; ++k) acc += static_cast<double>(w[n * k_in + k]) * x[k];
    y[n] = round_to(round_dtype, static_cast<float>(acc + b[n]));
  }
  return y;
}

// One token through one expert: rounded down projection [K].
std::vector<float> expert_forward(const ExpertsDesc& d, const ExpertWeights& w, std::vector<float> x) {
  const DType c = d.act_dtype;
  const auto gate_up = dense_gemm(w.w13, w.b13, as_gemm_input(d, std::move(x)), c);
  std::vector<float> act(static_cast<size_t>(d.intermediate_size));
  apply_activation(d.activation, d.interleaved_gate_up, gate_up.data(), 1, d.intermediate_size, act.data());
  for (float& v : act) v = round_to(c, v);
  return dense_gemm(w.w2, w.b2, as_gemm_input(d, std::move(act)), c);
}

std::vector<float> load_row(DType dtype, const void* base, int64_t row, int64_t stride, int64_t cols) {
  std::vector<float> x(static_cast<size_t>(cols));
  for (int64_t k = 0; k < cols; ++k) x[k] = load_float(dtype, base, row * stride + k);
  return x;
}

}  // namespace

std::vector<double> oracle_experts(const ExpertsDesc& d, const WeightView& w13, const WeightView& w2,
                                   const ExpertsInputs& in) {
  const int64_t M = in.num_tokens, K = d.hidden_size;
  const int64_t stride = in.hidden_row_stride > 0 ? in.hidden_row_stride : K;
  const auto local = to_local_expert_ids(in.topk_ids, in.topk_ids_dtype, M, d.top_k, d.global_experts(),
                                         in.expert_map, d.num_experts);
  std::vector<double> out(static_cast<size_t>(M * K), 0.0);
  std::vector<ExpertWeights> cache(static_cast<size_t>(d.num_experts));
  std::vector<bool> loaded(static_cast<size_t>(d.num_experts), false);
  for (int64_t t = 0; t < M; ++t) {
    for (int64_t j = 0; j < d.top_k; ++j) {
      const int32_t e = local[t * d.top_k + j];
      if (e < 0) continue;
      if (!loaded[e]) cache[e] = load_expert(d, w13, w2, e), loaded[e] = true;
      const auto down = expert_forward(d, cache[e], load_row(d.act_dtype, in.hidden, t, stride, K));
      const double weight = load_float(in.topk_weights_dtype, in.topk_weights, t * d.top_k + j);
      for (int64_t c = 0; c < K; ++c) out[t * K + c] += weight * down[c];
    }
  }
  return out;
}

std::vector<double> oracle_experts_batched(const ExpertsDesc& d, const WeightView& w13,
                                           const WeightView& w2, const ExpertsInputs& in) {
  const int64_t E = d.num_experts, T = in.max_tokens_per_expert, K = d.hidden_size;
  const int64_t stride = in.hidden_row_stride > 0 ? in.hidden_row_stride : K;
  std::vector<double> out(static_cast<size_t>(E * T * K), 0.0);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t count = in.expert_num_tokens_dtype == DType::i64
                              ? static_cast<const int64_t*>(in.expert_num_tokens)[e]
                              : static_cast<const int32_t*>(in.expert_num_tokens)[e];
    if (count == 0) continue;
    const ExpertWeights w = load_expert(d, w13, w2, e);
    for (int64_t i = 0; i < count; ++i) {
      const auto down = expert_forward(d, w, load_row(d.act_dtype, in.hidden, e * T + i, stride, K));
      for (int64_t c = 0; c < K; ++c) out[(e * T + i) * K + c] = down[c];
    }
  }
  return out;
}

}  // namespace moeq::ref
