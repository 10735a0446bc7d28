// The experts step on the CPU backend, all three layouts, against the float64 oracle.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/experts_test_util.hpp"

namespace moeq {
namespace {

using test::make_problem;
using test::small_desc;

std::string label(const ExpertsDesc& d, Layout l, int64_t m) {
  return d.to_string() + " layout=" + std::string(to_string(l)) + " M=" + std::to_string(m);
}

// Runs the standard layouts and the masked one on the same tokens; checks each against the
// oracle, that the standard layouts are bit-identical, and that rows of tokens with no local
// expert are exactly zero.
void check_all_layouts(const ExpertsDesc& d, int64_t m, uint64_t seed, int ep_size = 1) {
  io::HostProblem p = make_problem(d, m, seed, false, ep_size);
  const auto want = ref::oracle_experts(p.desc, p.w13->view(), p.w2->view(), p.inputs());
  const auto local = ref::to_local_expert_ids(p.topk_ids.data(), DType::i32, m, d.top_k, p.desc.global_experts(),
                                              p.expert_map.empty() ? nullptr : p.expert_map.data(), p.desc.num_experts);
  std::vector<uint8_t> first;
  for (Layout layout : {Layout::indexed, Layout::contiguous}) {
    Options o;
    o.layout = layout;
    const auto out = test::run_cpu(p, o);
    const auto measured = test::measure(d.act_dtype, out, want, d.hidden_size, [](int64_t) { return true; });
    test::expect_within_contract(measured, p.desc, label(p.desc, layout, m));
    // Same rounding points as the oracle: only fp32 vs float64 accumulation differs, which moves
    // a rounding in well under 1% of the elements (measured 0.00-0.15%).
    EXPECT_GE(measured.exact_fraction, 0.99) << label(p.desc, layout, m);
    if (first.empty()) first = out;
    else EXPECT_EQ(out, first) << "indexed and contiguous differ: " << label(p.desc, layout, m);
    for (int64_t t = 0; t < m; ++t) {
      bool any_local = false;
      for (int64_t k = 0; k < d.top_k; ++k) any_local |= local[t * d.top_k + k] >= 0;
      if (any_local) continue;
      for (int64_t c = 0; c < d.hidden_size; ++c)
        ASSERT_EQ(ref::load_float(d.act_dtype, out.data(), t * d.hidden_size + c), 0.0f) << "token " << t;
    }
  }

  io::HostProblem pb = make_problem(d, m, seed, true, ep_size);
  Options o;
  o.layout = Layout::masked;
  const auto batched_out = test::run_cpu(pb, o);
  const auto want_batched = ref::oracle_experts_batched(pb.desc, pb.w13->view(), pb.w2->view(), pb.inputs());
  const int64_t T = pb.max_tokens_per_expert;
  test::expect_within_contract(
      test::measure(d.act_dtype, batched_out, want_batched, d.hidden_size,
                    [&](int64_t r) { return r % T < pb.expert_num_tokens[r / T]; }),
      pb.desc, label(pb.desc, Layout::masked, m) + " [E,T,K]");
  if (m > 0) EXPECT_EQ(test::combine(pb, batched_out), first) << "masked + combine differs: " << label(pb.desc, Layout::masked, m);
}

class EveryPairAndActivation : public ::testing::TestWithParam<std::tuple<QuantPair, Activation>> {};

// M = 0, 1, 7, 129; experts with no tokens (M = 1 routes to 3 of 7 experts); expert_map with
// -1 (two ranks: this rank holds 7 of 14 experts, so some tokens have no local expert).
TEST_P(EveryPairAndActivation, LayoutsMatchOracle) {
  const auto [pair, act] = GetParam();
  const ExpertsDesc d = small_desc(pair.weight, pair.act, act);
  for (int64_t m : {0, 1, 7, 129}) check_all_layouts(d, m, 100 + m);
  for (int64_t m : {7, 64}) check_all_layouts(d, m, 200 + m, /*ep_size=*/2);
}

std::string pair_name(const ::testing::TestParamInfo<std::tuple<QuantPair, Activation>>& info) {
  const auto [pair, act] = info.param;
  std::string s = std::string(to_string(pair.weight)) + "_" + std::string(to_string(pair.act)) + "_" +
                  std::string(to_string(act));
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Experts, EveryPairAndActivation,
                         ::testing::Combine(::testing::ValuesIn(supported_pairs()),
                                            ::testing::ValuesIn(all_values<Activation>())),
                         pair_name);

TEST(Experts, WarmUpOnTheCpuBackendHasNothingToLoad) {
  Options o;
  o.backend = Backend::cpu;
  const Experts experts(small_desc(WeightFormat::int4, ActFormat::none, Activation::silu), o);
  EXPECT_NO_THROW(experts.warm_up());
}

TEST(Experts, VariantsOfTheLayer) {
  // gpt-oss style: interleaved gate/up, SWIGLUOAI with its own alpha/limit, f32 bias.
  ExpertsDesc oss = small_desc(WeightFormat::mxfp4, ActFormat::none, Activation::swiglu_oai);
  oss.interleaved_gate_up = true;
  oss.bias_dtype = DType::f32;
  oss.activation.swiglu_alpha = 1.5f;
  oss.activation.swiglu_limit = 5.0f;
  check_all_layouts(oss, 33, 1);
  // SILU with clamp; fp16 activations with bf16... f16 bias; INT4 with zero point and f16 scales.
  ExpertsDesc clamp = small_desc(WeightFormat::int4, ActFormat::none, Activation::silu);
  clamp.activation.silu_clamp = 0.5f;
  clamp.act_dtype = DType::f16;
  clamp.bias_dtype = DType::f16;
  clamp.has_zero_point = true;
  clamp.group_size = 32;
  check_all_layouts(clamp, 33, 2);
  // NVFP4 with separate gate and up global scales; INT8 per channel with f32 scales.
  ExpertsDesc nv = small_desc(WeightFormat::nvfp4, ActFormat::fp8_token, Activation::gelu);
  nv.num_global_scales_w13 = 2;
  check_all_layouts(nv, 33, 3);
  ExpertsDesc i8 = small_desc(WeightFormat::int8, ActFormat::none, Activation::swiglu_step);
  i8.group_size = 0;
  i8.scale_dtype = DType::f32;
  check_all_layouts(i8, 33, 4);
}

TEST(Experts, Int64IdsAndBf16WeightsGiveTheSameResult) {
  const ExpertsDesc d = small_desc(WeightFormat::mxfp8, ActFormat::none, Activation::silu);
  io::HostProblem p = make_problem(d, 19, 5, false);
  const auto base = test::run_cpu(p, Options{});
  std::vector<int64_t> ids64(p.topk_ids.size() / 4);
  for (size_t i = 0; i < ids64.size(); ++i) ids64[i] = reinterpret_cast<const int32_t*>(p.topk_ids.data())[i];
  p.topk_ids.assign(reinterpret_cast<uint8_t*>(ids64.data()), reinterpret_cast<uint8_t*>(ids64.data() + ids64.size()));
  p.topk_ids_dtype = DType::i64;
  EXPECT_EQ(test::run_cpu(p, Options{}), base);
}

TEST(Experts, CpuThreadsGiveTheSameBytes) {
  const ExpertsDesc d = small_desc(WeightFormat::nvfp4, ActFormat::fp8_token, Activation::swiglu_oai);
  for (bool batched : {false, true}) {
    const io::HostProblem p = make_problem(d, 41, 13, batched, 2);  // E = 14 global, 7 here: some slots remote
    for (Layout layout : batched ? std::vector<Layout>{Layout::masked} : std::vector<Layout>{Layout::indexed, Layout::contiguous}) {
      Options o;
      o.backend = Backend::cpu;
      o.layout = layout;
      o.cpu_threads = 1;
      const auto one = test::run_cpu(p, o);
      for (int threads : {3, 0}) {
        o.cpu_threads = threads;
        EXPECT_EQ(test::run_cpu(p, o), one) << to_string(layout) << ", cpu_threads = " << threads;
      }
    }
  }
  Options o;
  o.cpu_threads = -2;
  EXPECT_THAT(can_implement(d, o), testing::Contains(testing::HasSubstr("cpu_threads = -2 must be >= 0")));
}

TEST(Experts, BatchInvariantRowsDoNotDependOnTheBatch) {
  const ExpertsDesc d = small_desc(WeightFormat::int4, ActFormat::fp8_token, Activation::silu);
  Options o;
  o.batch_invariant = true;
  for (Layout layout : {Layout::indexed, Layout::contiguous}) {
    o.layout = layout;
    const io::HostProblem full = make_problem(d, 129, 9, false);
    const io::HostProblem prefix = make_problem(d, 7, 9, false);  // same seed: the same first 7 tokens
    const auto out_full = test::run_cpu(full, o), out_prefix = test::run_cpu(prefix, o);
    const size_t prefix_bytes = out_prefix.size();
    EXPECT_TRUE(std::equal(out_prefix.begin(), out_prefix.end(), out_full.begin()))
        << "layout " << to_string(layout) << ": first " << prefix_bytes << " bytes differ";
  }
}

TEST(Experts, StaleWorkspaceNeverReachesTheOutput) {
  // Poison is NaN in test::run_cpu; here the workspaces hold large finite garbage instead,
  // which NaN checks would not catch: results must not change at all.
  const ExpertsDesc d = small_desc(WeightFormat::mxfp4, ActFormat::mxfp8, Activation::gelu_tanh);
  for (Layout layout : {Layout::indexed, Layout::contiguous}) {
    io::HostProblem p = make_problem(d, 23, 7, false, 2);
    Options o;
    o.layout = layout;
    const Experts experts(p.desc, o);
    const auto ws = experts.workspace_bytes(p.num_tokens);
    std::vector<uint8_t> ws1(ws.workspace1_bytes, 0x47), ws2(ws.workspace2_bytes, 0x47);
    std::vector<uint8_t> out(dtype_bytes(d.act_dtype, p.num_tokens * d.hidden_size));
    experts.apply(p.w13->view(), p.w2->view(), p.inputs(), {out.data(), 0}, ws1.data(), ws2.data());
    EXPECT_EQ(out, test::run_cpu(p, o)) << to_string(layout);
  }
}

}  // namespace
}  // namespace moeq
