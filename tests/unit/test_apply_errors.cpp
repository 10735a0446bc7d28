// Bad input to Experts::apply: a moeq::Error naming the argument and the value, and nothing
// written to the output.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "moeq/error.hpp"
#include "tests/unit/experts_test_util.hpp"

namespace moeq {
namespace {

using ::testing::HasSubstr;

struct Fixture {
  io::HostProblem p;
  std::vector<uint8_t> ws1, ws2, out;
  Options options;

  explicit Fixture(WeightFormat w = WeightFormat::int4, bool batched = false, int ep_size = 1) {
    ExpertsDesc d = test::small_desc(w, ActFormat::none, Activation::silu);
    d.num_experts *= ep_size;
    io::GenerateOptions g;
    g.num_tokens = 9;
    g.seed = 3;
    g.batched = batched;
    g.ep_size = ep_size;
    g.num_threads = 1;
    p = io::generate_problem(d, g);
    if (batched) options.layout = Layout::masked;
    const Experts experts(p.desc, options);
    const auto ws = experts.workspace_bytes(p.num_tokens, batched ? p.max_tokens_per_expert : 0);
    ws1.assign(ws.workspace1_bytes, 0);
    ws2.assign(ws.workspace2_bytes, 0);
    out.assign(dtype_bytes(p.desc.act_dtype, p.output_rows() * p.desc.hidden_size), 0xAB);
  }

  // Runs apply with possibly altered inputs; returns the error message ("" when it ran).
  std::string apply(const ExpertsInputs& in, const WeightView& w13, const WeightView& w2, void* out_ptr = nullptr) {
    try {
      Experts(p.desc, options).apply(w13, w2, in, {out_ptr ? out_ptr : out.data(), 0}, ws1.data(), ws2.data());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::string apply(const ExpertsInputs& in) { return apply(in, p.w13->view(), p.w2->view()); }
  bool output_untouched() const {
    return std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0xAB; });
  }
};

TEST(ApplyErrors, ExpertIdOutOfRange) {
  Fixture f;
  reinterpret_cast<int32_t*>(f.p.topk_ids.data())[3 * 3 + 1] = 301;
  EXPECT_THAT(f.apply(f.p.inputs()), HasSubstr("topk_ids[3,1] = 301 is outside [-1, 7)"));
  EXPECT_TRUE(f.output_untouched());
  reinterpret_cast<int32_t*>(f.p.topk_ids.data())[3 * 3 + 1] = -2;
  EXPECT_THAT(f.apply(f.p.inputs()), HasSubstr("topk_ids[3,1] = -2"));
  EXPECT_TRUE(f.output_untouched());
}

TEST(ApplyErrors, ExpertMapOutOfRange) {
  Fixture f(WeightFormat::int4, false, 2);
  f.p.expert_map[5] = 9;
  EXPECT_THAT(f.apply(f.p.inputs()), HasSubstr("expert_map[5] = 9 is outside [-1, 7)"));
  EXPECT_TRUE(f.output_untouched());
}

TEST(ApplyErrors, ExpertCountBeyondT) {
  Fixture f(WeightFormat::int4, true);
  f.p.expert_num_tokens[2] = static_cast<int32_t>(f.p.max_tokens_per_expert + 1);
  EXPECT_THAT(f.apply(f.p.inputs()), HasSubstr("expert_num_tokens[2] = " + std::to_string(f.p.max_tokens_per_expert + 1)));
  EXPECT_TRUE(f.output_untouched());
}

TEST(ApplyErrors, BadScalesAreNamed) {
  {
    Fixture f(WeightFormat::fp8_channel);
    reinterpret_cast<float*>(f.p.w13->scales.data())[5] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_THAT(f.apply(f.p.inputs()), HasSubstr("w13.scales[5] = nan"));
    EXPECT_TRUE(f.output_untouched());
  }
  {
    Fixture f(WeightFormat::fp8_block);
    reinterpret_cast<float*>(f.p.w2->scales.data())[1] = -0.5f;
    EXPECT_THAT(f.apply(f.p.inputs()), HasSubstr("w2.scales[1] = -0.5"));
    EXPECT_TRUE(f.output_untouched());
  }
  {
    Fixture f(WeightFormat::mxfp4);
    f.p.w2->scales[7] = 255;
    EXPECT_THAT(f.apply(f.p.inputs()), HasSubstr("w2.scales[7] = 255"));
  }
  {
    Fixture f(WeightFormat::nvfp4);
    f.p.w13->global_scales[0] = -2.0f;
    EXPECT_THAT(f.apply(f.p.inputs()), HasSubstr("w13.global_scales[0] = -2"));
    EXPECT_TRUE(f.output_untouched());
  }
}

TEST(ApplyErrors, MissingAndMisalignedPointers) {
  Fixture f;
  ExpertsInputs in = f.p.inputs();
  in.topk_weights = nullptr;
  EXPECT_THAT(f.apply(in), HasSubstr("topk_weights is null"));
  in = f.p.inputs();
  std::vector<uint8_t> shifted(f.p.hidden.size() + 2);
  in.hidden = shifted.data() + 1;
  EXPECT_THAT(f.apply(in), HasSubstr("hidden = "));
  EXPECT_THAT(f.apply(in), HasSubstr("is not aligned to 2 bytes"));
  WeightView w13 = f.p.w13->view();
  w13.scales = nullptr;
  EXPECT_THAT(f.apply(f.p.inputs(), w13, f.p.w2->view()), HasSubstr("w13.scales is null"));
  EXPECT_TRUE(f.output_untouched());
}

TEST(ApplyErrors, WrongDtypesAndStrides) {
  Fixture f;
  ExpertsInputs in = f.p.inputs();
  in.topk_ids_dtype = DType::f32;
  EXPECT_THAT(f.apply(in), HasSubstr("topk_ids dtype = f32 must be i32 or i64"));
  in = f.p.inputs();
  in.hidden_row_stride = 100;
  EXPECT_THAT(f.apply(in), HasSubstr("hidden_row_stride = 100 is smaller than K = 128"));
  in = f.p.inputs();
  in.num_tokens = -1;
  EXPECT_THAT(f.apply(in), HasSubstr("num_tokens = -1"));
  EXPECT_TRUE(f.output_untouched());
}

TEST(ApplyErrors, LayoutMustFitTheInput) {
  Fixture standard;
  standard.options.layout = Layout::masked;
  EXPECT_THAT(standard.apply(standard.p.inputs()), HasSubstr("layout = masked needs batched input"));
  Fixture batched(WeightFormat::int4, true);
  batched.options.layout = Layout::indexed;
  EXPECT_THAT(batched.apply(batched.p.inputs()), HasSubstr("layout = indexed cannot take batched input"));
  EXPECT_TRUE(standard.output_untouched());
  EXPECT_TRUE(batched.output_untouched());
}

TEST(ApplyErrors, IllegalLayersAreRefusedAtPlanTime) {
  ExpertsDesc d = test::small_desc(WeightFormat::mxfp4, ActFormat::none, Activation::silu);
  d.hidden_size = 2900;
  try {
    Experts e(d, Options{});
    FAIL() << "accepted K = 2900 for MXFP4";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("hidden_size (K) = 2900 is not a multiple of 32, required by mxfp4 weight scales"));
  }
  d = test::small_desc(WeightFormat::nvfp4, ActFormat::mxfp8, Activation::silu);
  EXPECT_THROW(Experts(d, Options{}), Error);
}

TEST(ApplyErrors, ZeroTokensWritesNothingAndNeedsNoWorkspace) {
  Fixture f;
  ExpertsInputs in = f.p.inputs();
  in.num_tokens = 0;
  in.hidden = nullptr;
  in.topk_ids = nullptr;
  in.topk_weights = nullptr;
  EXPECT_NO_THROW(Experts(f.p.desc, Options{}).apply(f.p.w13->view(), f.p.w2->view(), in, {nullptr, 0}, nullptr, nullptr));
}

}  // namespace
}  // namespace moeq

namespace moeq {
namespace {

TEST(ApplyErrors, PreparedCodesNeedTheCudaBackend) {
  Fixture f;
  WeightView w13 = f.p.w13->view();
  w13.code_layout = CodeLayout::prepared;
  EXPECT_THAT(f.apply(f.p.inputs(), w13, f.p.w2->view()), HasSubstr("w13: code_layout = prepared needs the CUDA backend"));
}

// WeightView::mx_scales_at_most_two is checked wherever the scales are on the host: it runs where it
// holds, and names the first scale above 2, or the format that has no MX scales.
TEST(ApplyErrors, MxScalesAtMostTwoIsCheckedOnHostWeights) {
  Fixture mx(WeightFormat::mxfp4);
  WeightView w13 = mx.p.w13->view();
  ASSERT_TRUE(mx_scales_at_most_two_host(mx.p.desc.w13(), w13.scales));
  w13.mx_scales_at_most_two = true;
  EXPECT_EQ(mx.apply(mx.p.inputs(), w13, mx.p.w2->view()), "");
  const auto* first = static_cast<const uint8_t*>(w13.scales);
  std::vector<uint8_t> raised(first, first + mx.p.desc.w13().scale_elems());
  raised[5] = 130;
  w13.scales = raised.data();
  EXPECT_THAT(mx.apply(mx.p.inputs(), w13, mx.p.w2->view()),
              HasSubstr("w13.scales[5] = 130 (2^3) is above 2, but mx_scales_at_most_two is set"));
  w13.mx_scales_at_most_two = false;
  EXPECT_EQ(mx.apply(mx.p.inputs(), w13, mx.p.w2->view()), "");

  Fixture int4(WeightFormat::int4);
  WeightView w2 = int4.p.w2->view();
  w2.mx_scales_at_most_two = true;
  EXPECT_THAT(int4.apply(int4.p.inputs(), int4.p.w13->view(), w2),
              HasSubstr("w2.mx_scales_at_most_two is set for int4 weights (MX formats only)"));
}

}  // namespace
}  // namespace moeq
