// can_implement / the Experts constructor: every rejection path of plan/legality.cpp gives a
// reason that names the field and its value (CONTRACT §9).
#include "plan/legality.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "moeq/error.hpp"
#include "moeq/experts.hpp"

namespace moeq {
namespace {

using ::testing::HasSubstr;

ExpertsDesc base_desc(WeightFormat w = WeightFormat::int4, ActFormat a = ActFormat::none) {
  ExpertsDesc d;
  d.num_experts = 8;
  d.hidden_size = 256;
  d.intermediate_size = 128;
  d.top_k = 2;
  d.weight_format = w;
  d.act_format = a;
  d.group_size = 128;
  return d;
}

std::string joined(const std::vector<std::string>& reasons) {
  std::string s;
  for (const auto& r : reasons) s += "\n  " + r;
  return s;
}

// Exactly one reason, and it contains every one of `parts`.
void expect_single_reason(const ExpertsDesc& d, const Options& o, const std::vector<std::string>& parts) {
  const auto reasons = can_implement(d, o);
  ASSERT_EQ(reasons.size(), 1u) << d.to_string() << joined(reasons);
  for (const auto& p : parts) EXPECT_THAT(reasons[0], HasSubstr(p)) << d.to_string();
}
void expect_single_reason(const ExpertsDesc& d, const std::vector<std::string>& parts) {
  expect_single_reason(d, Options{}, parts);
}

// Some reason contains every one of `parts` (several rules may fire together).
void expect_some_reason(const ExpertsDesc& d, const std::vector<std::string>& parts) {
  const auto reasons = can_implement(d, Options{});
  bool found = false;
  for (const auto& r : reasons) {
    bool all = true;
    for (const auto& p : parts) all = all && r.find(p) != std::string::npos;
    found = found || all;
  }
  EXPECT_TRUE(found) << d.to_string() << " reasons:" << joined(reasons);
}

TEST(Legality, EverySupportedPairIsImplementable) {
  ASSERT_EQ(supported_pairs().size(), 16u);
  for (const auto& pair : supported_pairs()) {
    for (DType act_dtype : {DType::bf16, DType::f16}) {
      ExpertsDesc d = base_desc(pair.weight, pair.act);
      d.act_dtype = act_dtype;
      EXPECT_TRUE(can_implement(d, Options{}).empty()) << d.to_string() << joined(can_implement(d, Options{}));
      EXPECT_NO_THROW(Experts(d, Options{})) << d.to_string();
    }
  }
}

TEST(Legality, ValidVariantsAreAccepted) {
  ExpertsDesc d = base_desc();
  d.num_global_experts = 64;
  d.top_k = 64;  // top_k may reach E_g
  d.has_zero_point = true;
  d.group_size = 32;
  d.scale_dtype = DType::f16;
  d.bias_dtype = DType::f32;
  EXPECT_TRUE(can_implement(d, Options{}).empty()) << joined(can_implement(d, Options{}));

  d = base_desc(WeightFormat::int8);
  d.scale_dtype = DType::f32;
  d.group_size = 0;
  d.bias_dtype = DType::bf16;  // = act_dtype
  EXPECT_TRUE(can_implement(d, Options{}).empty()) << joined(can_implement(d, Options{}));

  d = base_desc(WeightFormat::nvfp4);
  d.num_global_scales_w13 = 2;
  d.activation.kind = Activation::swiglu_oai;
  EXPECT_TRUE(can_implement(d, Options{}).empty()) << joined(can_implement(d, Options{}));
  // Gate and up global scales apply to the [gate; up] halves, so interleaved rows are refused.
  d.interleaved_gate_up = true;
  expect_single_reason(d, {"num_global_scales_w13 = 2", "interleaved"});

  d = base_desc(WeightFormat::mxfp4);
  d.scale_dtype = DType::ue8m0;  // the format's own scale dtype may be spelled out
  d.activation.silu_clamp = 7.0f;
  EXPECT_TRUE(can_implement(d, Options{}).empty()) << joined(can_implement(d, Options{}));
}

TEST(Legality, Fp8BlockAcceptsPartialBlocks) {
  ExpertsDesc d = base_desc(WeightFormat::fp8_block);
  d.hidden_size = 200;
  d.intermediate_size = 300;
  EXPECT_TRUE(can_implement(d, Options{}).empty()) << joined(can_implement(d, Options{}));
  d.act_format = ActFormat::fp8_token;
  d.hidden_size = 2900;
  d.intermediate_size = 77;
  EXPECT_TRUE(can_implement(d, Options{}).empty()) << joined(can_implement(d, Options{}));
  EXPECT_NO_THROW(Experts(d, Options{}));
}

TEST(Legality, UnsupportedPair) {
  expect_single_reason(base_desc(WeightFormat::nvfp4, ActFormat::mxfp8), {"(nvfp4, mxfp8)", "not a supported"});
  expect_single_reason(base_desc(WeightFormat::int4, ActFormat::mxfp4), {"(int4, mxfp4)"});
  expect_single_reason(base_desc(WeightFormat::fp8_block, ActFormat::mxfp8), {"(fp8-block, mxfp8)"});
}

TEST(Legality, ShapeAndCountFields) {
  ExpertsDesc d = base_desc();
  d.num_experts = 0;
  expect_some_reason(d, {"num_experts = 0"});
  d = base_desc();
  d.num_global_experts = 4;
  expect_single_reason(d, {"num_global_experts = 4", "num_experts = 8"});
  d = base_desc();
  d.num_global_experts = -1;
  expect_single_reason(d, {"num_global_experts = -1"});
  d = base_desc();
  d.hidden_size = -256;
  expect_single_reason(d, {"hidden_size = -256", "positive"});
  d = base_desc();
  d.intermediate_size = 0;
  expect_single_reason(d, {"intermediate_size = 0", "positive"});
  d = base_desc();
  d.act_dtype = DType::f32;
  expect_single_reason(d, {"act_dtype = f32"});
}

TEST(Legality, TopKRange) {
  ExpertsDesc d = base_desc();
  d.top_k = 0;
  expect_single_reason(d, {"top_k = 0", "[1, 8]"});
  d.top_k = 9;
  expect_single_reason(d, {"top_k = 9", "[1, 8]"});
  d.top_k = 8;
  EXPECT_TRUE(can_implement(d, Options{}).empty());
  d.num_global_experts = 32;
  d.top_k = 33;
  expect_single_reason(d, {"top_k = 33", "[1, 32]"});
}

TEST(Legality, GroupSize) {
  for (int g : {1, 16, 48, 96, 256, -32}) {
    for (WeightFormat w : {WeightFormat::int4, WeightFormat::int8}) {
      ExpertsDesc d = base_desc(w);
      d.hidden_size = 768;  // a multiple of every tried size, so only the group rule fires
      d.intermediate_size = 768;
      d.group_size = g;
      expect_single_reason(d, {"group_size = " + std::to_string(g), "32, 64, 128"});
    }
  }
  // group_size is ignored by the formats whose group is fixed.
  ExpertsDesc d = base_desc(WeightFormat::mxfp8);
  d.group_size = 48;
  EXPECT_TRUE(can_implement(d, Options{}).empty()) << joined(can_implement(d, Options{}));
}

TEST(Legality, ReductionDimMustBeAMultipleOfTheGroup) {
  ExpertsDesc d = base_desc(WeightFormat::mxfp4);
  d.hidden_size = 2900;
  expect_single_reason(d, {"hidden_size (K) = 2900", "not a multiple of 32", "mxfp4"});

  d = base_desc(WeightFormat::mxfp8);
  d.intermediate_size = 2900;
  expect_single_reason(d, {"intermediate_size (I) = 2900", "not a multiple of 32", "mxfp8"});

  d = base_desc(WeightFormat::nvfp4);
  d.hidden_size = 2904;  // even, a multiple of 8 but not of 16
  expect_single_reason(d, {"hidden_size (K) = 2904", "not a multiple of 16", "nvfp4"});
  d.hidden_size = 2896;
  EXPECT_TRUE(can_implement(d, Options{}).empty());

  d = base_desc(WeightFormat::int4);
  d.group_size = 128;
  d.intermediate_size = 1856;  // multiple of 64 but not of 128
  expect_single_reason(d, {"intermediate_size (I) = 1856", "not a multiple of 128", "int4"});
  d.group_size = 64;
  EXPECT_TRUE(can_implement(d, Options{}).empty());

  d = base_desc(WeightFormat::int8);
  d.group_size = 32;
  d.hidden_size = 80;
  expect_single_reason(d, {"hidden_size (K) = 80", "not a multiple of 32", "int8"});
  d.group_size = 0;  // per channel: any K
  d.hidden_size = 81;
  EXPECT_TRUE(can_implement(d, Options{}).empty()) << joined(can_implement(d, Options{}));
}

TEST(Legality, OddKForFourBitCodes) {
  ExpertsDesc d = base_desc(WeightFormat::int4);
  d.group_size = 0;
  d.hidden_size = 257;
  expect_single_reason(d, {"hidden_size (K) = 257", "odd", "int4"});
  d.hidden_size = 256;
  d.intermediate_size = 129;
  expect_single_reason(d, {"intermediate_size (I) = 129", "odd"});
  d.intermediate_size = 130;
  EXPECT_TRUE(can_implement(d, Options{}).empty());

  // NVFP4 with odd K: both the group and the packing rule fire.
  d = base_desc(WeightFormat::nvfp4);
  d.hidden_size = 255;
  expect_some_reason(d, {"hidden_size (K) = 255", "odd", "nvfp4"});
  expect_some_reason(d, {"hidden_size (K) = 255", "not a multiple of 16"});
}

TEST(Legality, MxActivationsNeedMultiplesOf32) {
  for (ActFormat a : {ActFormat::mxfp8, ActFormat::mxfp4}) {
    ExpertsDesc d = base_desc(WeightFormat::mxfp4, a);
    d.hidden_size = 272;  // multiple of 16, not of 32
    const std::string act(to_string(a));
    expect_some_reason(d, {"hidden_size (K) = 272", "not a multiple of 32", act + " activation scales"});
    d.hidden_size = 256;
    d.intermediate_size = 48;
    expect_some_reason(d, {"intermediate_size (I) = 48", "not a multiple of 32", act + " activation scales"});
  }
  // FP8 per-token activations have no such rule.
  ExpertsDesc d = base_desc(WeightFormat::fp8_channel, ActFormat::fp8_token);
  d.hidden_size = 272;
  d.intermediate_size = 48;
  EXPECT_TRUE(can_implement(d, Options{}).empty()) << joined(can_implement(d, Options{}));
}

TEST(Legality, ScaleDtype) {
  ExpertsDesc d = base_desc(WeightFormat::int4);
  d.scale_dtype = DType::f32;
  expect_single_reason(d, {"scale_dtype = f32", "int4"});
  d.scale_dtype = DType::e4m3;
  expect_single_reason(d, {"scale_dtype = e4m3", "int4"});
  d = base_desc(WeightFormat::int8);
  d.scale_dtype = DType::u8;
  expect_single_reason(d, {"scale_dtype = u8", "int8"});
  d = base_desc(WeightFormat::mxfp4);
  d.scale_dtype = DType::bf16;
  expect_single_reason(d, {"scale_dtype = bf16", "ue8m0", "mxfp4"});
  d = base_desc(WeightFormat::nvfp4);
  d.scale_dtype = DType::f32;
  expect_single_reason(d, {"scale_dtype = f32", "e4m3", "nvfp4"});
  d = base_desc(WeightFormat::fp8_block);
  d.scale_dtype = DType::bf16;
  expect_single_reason(d, {"scale_dtype = bf16", "f32", "fp8-block"});
}

TEST(Legality, ZeroPointOnlyForInt4) {
  for (WeightFormat w : {WeightFormat::int8, WeightFormat::mxfp4, WeightFormat::fp8_channel}) {
    ExpertsDesc d = base_desc(w);
    d.has_zero_point = true;
    expect_single_reason(d, {"has_zero_point", std::string(to_string(w))});
  }
}

TEST(Legality, NvFp4GlobalScales) {
  ExpertsDesc d = base_desc(WeightFormat::nvfp4);
  d.num_global_scales_w13 = 3;
  expect_single_reason(d, {"num_global_scales_w13 = 3"});
  d.num_global_scales_w13 = 2;
  d.activation.kind = Activation::relu2_no_mul;
  expect_single_reason(d, {"num_global_scales_w13 = 2", "relu2-no-mul"});
}

TEST(Legality, BiasDtype) {
  ExpertsDesc d = base_desc();
  d.act_dtype = DType::f16;
  d.bias_dtype = DType::bf16;
  expect_single_reason(d, {"bias_dtype = bf16", "f16"});
  d.bias_dtype = DType::i32;
  expect_single_reason(d, {"bias_dtype = i32"});
  d.bias_dtype = DType::f16;
  EXPECT_TRUE(can_implement(d, Options{}).empty());
}

TEST(Legality, ActivationParameters) {
  ExpertsDesc d = base_desc();
  d.activation.kind = Activation::silu_no_mul;
  d.interleaved_gate_up = true;
  expect_single_reason(d, {"interleaved_gate_up", "silu-no-mul"});

  d = base_desc();
  d.activation.kind = Activation::gelu;
  d.activation.silu_clamp = 5.0f;
  expect_single_reason(d, {"silu_clamp = 5", "gelu"});

  d = base_desc();
  d.activation.silu_clamp = -1.0f;
  expect_single_reason(d, {"silu_clamp = -1"});
  d.activation.silu_clamp = std::numeric_limits<float>::infinity();
  expect_single_reason(d, {"silu_clamp = inf"});
  d.activation.silu_clamp = std::nanf("");
  expect_some_reason(d, {"silu_clamp = nan"});

  d = base_desc();
  d.activation.kind = Activation::swiglu_oai;
  d.activation.swiglu_limit = 0.0f;
  expect_single_reason(d, {"swiglu_limit = 0"});
  d.activation.swiglu_limit = 7.0f;
  d.activation.swiglu_alpha = std::numeric_limits<float>::infinity();
  expect_single_reason(d, {"swiglu_alpha = inf"});
}

TEST(Legality, F16AccumRules) {
  Options o;
  o.f16_accum = true;
  ExpertsDesc d = base_desc();
  d.act_dtype = DType::bf16;
  expect_single_reason(d, o, {"f16_accum", "act_dtype = bf16"});
  for (ActFormat a : {ActFormat::none, ActFormat::fp8_token, ActFormat::mxfp8}) {
    d = base_desc(a == ActFormat::mxfp8 ? WeightFormat::mxfp4 : WeightFormat::int4, a);
    d.act_dtype = DType::f16;
    EXPECT_TRUE(can_implement(d, o).empty()) << to_string(a) << joined(can_implement(d, o));
  }
  d = base_desc(WeightFormat::mxfp4, ActFormat::mxfp4);
  d.act_dtype = DType::f16;
  expect_single_reason(d, o, {"f16_accum", "act_format = mxfp4"});
}

TEST(Legality, BlockMOption) {
  Options o;
  o.block_m = -16;
  expect_single_reason(base_desc(), o, {"block_m = -16"});
  o.block_m = 2048;
  expect_single_reason(base_desc(), o, {"block_m = 2048"});
  o.block_m = 1024;
  EXPECT_TRUE(can_implement(base_desc(), o).empty());
}

TEST(Legality, ReasonsAccumulate) {
  ExpertsDesc d = base_desc();
  d.top_k = 0;
  d.group_size = 1;  // divides K and I, so only the group rule fires for it
  d.has_zero_point = true;
  d.weight_format = WeightFormat::int8;
  EXPECT_EQ(can_implement(d, Options{}).size(), 3u) << joined(can_implement(d, Options{}));
}

TEST(Legality, ExpertsConstructorThrowsForIllegalDesc) {
  ExpertsDesc d = base_desc(WeightFormat::mxfp4);
  d.hidden_size = 2900;
  try {
    Experts e(d, Options{});
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("2900"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("multiple of 32"));
  }
  Options o;
  o.f16_accum = true;  // bf16 output
  EXPECT_THROW(Experts(base_desc(), o), Error);
  EXPECT_THROW(plan::require_implementable(base_desc(), o), Error);
  EXPECT_NO_THROW(plan::require_implementable(base_desc(), Options{}));
}

TEST(Legality, ExpertsConstructorRejectsCudaBackend) {
  Options o;
  o.backend = Backend::cuda;
  try {
    Experts e(base_desc(), o);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("cuda"));
  }
  o.backend = Backend::auto_select;
  EXPECT_EQ(Experts(base_desc(), o).backend(), Backend::cpu);
  o.backend = Backend::cpu;
  EXPECT_EQ(Experts(base_desc(), o).backend(), Backend::cpu);
}

}  // namespace
}  // namespace moeq
