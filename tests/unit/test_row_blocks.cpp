// The float64 oracle and the reference backend's GEMM run rows in blocks against each weight row;
// their bytes must be those of the one-row-at-a-time loops they replaced.
#include <gtest/gtest.h>

#include <cstring>

#include "moeq/error.hpp"
#include "reference/activation.hpp"
#include "reference/experts.hpp"
#include "reference/oracle.hpp"
#include "reference/quantize.hpp"
#include "reference/routing.hpp"
#include "reference/scalars.hpp"
#include "tests/unit/experts_test_util.hpp"

namespace moeq {
namespace {

// The plain loop: every (token, slot) row alone through its expert, the expert dequantized again.
std::vector<float> one_row_gemm(const std::vector<float>& w, const std::vector<float>& b, const std::vector<float>& x,
                                DType round_dtype) {
  std::vector<float> y(b.size());
  for (size_t n = 0; n < b.size(); ++n) {
    double acc = 0.0;
    for (size_t k = 0; k < x.size(); ++k) acc += static_cast<double>(w[n * x.size() + k]) * x[k];
    y[n] = ref::round_to(round_dtype, static_cast<float>(acc + b[n]));
  }
  return y;
}

std::vector<float> quantize_dequantize(const ExpertsDesc& d, std::vector<float> x) {
  if (d.act_format == ActFormat::none) return x;
  const int64_t cols = static_cast<int64_t>(x.size());
  std::vector<uint8_t> codes(static_cast<size_t>(ref::act_code_bytes(d.act_format, 1, cols)));
  std::vector<uint8_t> scales(static_cast<size_t>(ref::act_scale_bytes(d.act_format, 1, cols)));
  ref::quantize_activation(d.act_format, x.data(), 1, cols, codes.data(), scales.data());
  ref::dequantize_activation(d.act_format, codes.data(), scales.data(), 1, cols, x.data());
  return x;
}

std::vector<float> one_row_forward(const ExpertsDesc& d, const WeightView& w13, const WeightView& w2, int64_t e,
                                   std::vector<float> x) {
  const WeightDesc d13 = d.w13(), d2 = d.w2();
  std::vector<float> a(static_cast<size_t>(d13.n * d13.k)), ab(static_cast<size_t>(d13.n));
  std::vector<float> c(static_cast<size_t>(d2.n * d2.k)), cb(static_cast<size_t>(d2.n));
  ref::dequantize_expert(d13, w13, e, a.data());
  ref::bias_expert(d13, w13, e, ab.data());
  ref::dequantize_expert(d2, w2, e, c.data());
  ref::bias_expert(d2, w2, e, cb.data());
  const auto gate_up = one_row_gemm(a, ab, quantize_dequantize(d, std::move(x)), d.act_dtype);
  std::vector<float> act(static_cast<size_t>(d.intermediate_size));
  ref::apply_activation(d.activation, d.interleaved_gate_up, gate_up.data(), 1, d.intermediate_size, act.data());
  for (float& v : act) v = ref::round_to(d.act_dtype, v);
  return one_row_gemm(c, cb, quantize_dequantize(d, std::move(act)), d.act_dtype);
}

std::vector<float> row_of(const io::HostProblem& p, int64_t row) {
  const int64_t K = p.desc.hidden_size;
  std::vector<float> x(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) x[k] = ref::load_float(p.desc.act_dtype, p.inputs().hidden, row * K + k);
  return x;
}

std::vector<double> one_row_oracle(const io::HostProblem& p) {
  const ExpertsDesc& d = p.desc;
  const ExpertsInputs in = p.inputs();
  const int64_t M = in.num_tokens, K = d.hidden_size;
  const auto local = ref::to_local_expert_ids(in.topk_ids, in.topk_ids_dtype, M, d.top_k, d.global_experts(),
                                              in.expert_map, d.num_experts);
  std::vector<double> out(static_cast<size_t>(M * K), 0.0);
  for (int64_t t = 0; t < M; ++t)
    for (int64_t j = 0; j < d.top_k; ++j) {
      const int32_t e = local[t * d.top_k + j];
      if (e < 0) continue;
      const auto down = one_row_forward(d, p.w13->view(), p.w2->view(), e, row_of(p, t));
      const double weight = ref::load_float(in.topk_weights_dtype, in.topk_weights, t * d.top_k + j);
      for (int64_t c = 0; c < K; ++c) out[t * K + c] += weight * down[c];
    }
  return out;
}

std::vector<double> one_row_oracle_batched(const io::HostProblem& p) {
  const ExpertsDesc& d = p.desc;
  const int64_t T = p.max_tokens_per_expert, K = d.hidden_size;
  std::vector<double> out(static_cast<size_t>(d.num_experts * T * K), 0.0);
  for (int64_t e = 0; e < d.num_experts; ++e)
    for (int64_t i = 0; i < p.expert_num_tokens[e]; ++i) {
      const auto down = one_row_forward(d, p.w13->view(), p.w2->view(), e, row_of(p, e * T + i));
      for (int64_t c = 0; c < K; ++c) out[(e * T + i) * K + c] = down[c];
    }
  return out;
}

bool same_bytes(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

// Layers that take every path of the oracle: gated and not, interleaved with a bias, quantized
// activations of each format, experts with no tokens, expert_map with -1; M = 0, 1, 6 (rows not
// a multiple of the row block) and 129.
// NOTE: this catches a row sent to the wrong slot, expert or place and any change of value, but
// seldom a change of summation order: each GEMM output is rounded to the 16-bit dtype and the
// weighted sums of those are nearly always exact in float64. The order is kept by construction
// (dense_gemm_rows' NOTE); ReferenceGemmRows below stores fp32 sums and does see the order.
TEST(Oracle, EqualsTheOneRowLoopBitForBit) {
  struct Layer {
    WeightFormat w;
    ActFormat a;
    Activation act;
    bool bias_interleaved;
  };
  const Layer layers[] = {{WeightFormat::mxfp4, ActFormat::none, Activation::silu, false},
                          {WeightFormat::int4, ActFormat::fp8_token, Activation::gelu_no_mul, false},
                          {WeightFormat::nvfp4, ActFormat::none, Activation::swiglu_oai, true},
                          {WeightFormat::mxfp4, ActFormat::mxfp4, Activation::relu2_no_mul, false},
                          {WeightFormat::mxfp4, ActFormat::mxfp8, Activation::silu, false},
                          {WeightFormat::fp8_block, ActFormat::fp8_token, Activation::silu, false}};
  for (const Layer& l : layers) {
    ExpertsDesc d = test::small_desc(l.w, l.a, l.act);
    if (l.bias_interleaved) {
      d.bias_dtype = DType::f32;
      d.interleaved_gate_up = true;
    }
    for (int64_t m : {0, 1, 6, 129})
      for (int ep_size : {1, 2}) {
        const std::string what = d.to_string() + " M=" + std::to_string(m) + " ep=" + std::to_string(ep_size);
        const io::HostProblem p = test::make_problem(d, m, 900 + static_cast<uint64_t>(m), false, ep_size);
        EXPECT_TRUE(same_bytes(ref::oracle_experts(p.desc, p.w13->view(), p.w2->view(), p.inputs()), one_row_oracle(p)))
            << what;
        const io::HostProblem pb = test::make_problem(d, m, 900 + static_cast<uint64_t>(m), true, ep_size);
        EXPECT_TRUE(same_bytes(ref::oracle_experts_batched(pb.desc, pb.w13->view(), pb.w2->view(), pb.inputs()),
                               one_row_oracle_batched(pb)))
            << what << " batched";
      }
  }
}

// The oracle's threads write each expert's rows of [E, T, K]: a count past T is refused, not raced.
TEST(Oracle, BatchedCountPastTIsRefused) {
  const ExpertsDesc d = test::small_desc(WeightFormat::int4, ActFormat::none, Activation::silu);
  io::HostProblem p = test::make_problem(d, 7, 3, true);
  p.expert_num_tokens[2] = static_cast<int32_t>(p.max_tokens_per_expert + 1);
  EXPECT_THROW(ref::oracle_experts_batched(p.desc, p.w13->view(), p.w2->view(), p.inputs()), Error);
}

// The reference backend's GEMM over 1-9 rows (blocks of 4 and short ones), rows gathered out of
// order, against the one-row loop of its contract (reference/experts.hpp).
TEST(ReferenceGemmRows, EqualsTheOneRowLoopBitForBit) {
  const ExpertsDesc d = test::small_desc(WeightFormat::int4, ActFormat::none, Activation::silu);
  const io::HostProblem p = test::make_problem(d, 16, 31, false);
  const WeightDesc wd = p.desc.w13();
  const ref::ActivationRows a{ActFormat::none, p.desc.act_dtype, p.hidden.data(), wd.k, nullptr, wd.k};
  std::vector<float> weights(static_cast<size_t>(wd.n * wd.k)), bias(static_cast<size_t>(wd.n)), scratch;
  for (int64_t e : {0, 4}) {
    ref::dequantize_expert(wd, p.w13->view(), e, weights.data());
    ref::bias_expert(wd, p.w13->view(), e, bias.data());
    for (int64_t count = 1; count <= 9; ++count) {
      std::vector<ref::RowPair> rows;
      for (int64_t r = 0; r < count; ++r) rows.push_back({(7 * r + 3) % 16, count - 1 - r});
      std::vector<float> got(static_cast<size_t>(count * wd.n)), want(got.size());
      ref::gemm_rows(wd, p.w13->view(), e, a, rows, got.data(), DType::f32, wd.n, scratch);
      for (const ref::RowPair& r : rows) {
        const auto x = row_of(p, r.src);
        for (int64_t n = 0; n < wd.n; ++n) {
          float acc = 0.0f;
          for (int64_t k = 0; k < wd.k; ++k) acc += x[k] * weights[n * wd.k + k];
          want[r.dst * wd.n + n] = acc + bias[n];
        }
      }
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << "expert " << e << ", " << count << " rows";
    }
  }
}

}  // namespace
}  // namespace moeq
