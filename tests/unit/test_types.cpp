// Enum names and parsers, the supported (weight, activation) pairs and the per-dtype facts.
#include "moeq/types.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <utility>

namespace moeq {
namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string swap_separators(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = c == '-' ? '_' : (c == '_' ? '-' : c);
  return out;
}

// Every value's name parses back to the value, also upper-cased and with '-' <-> '_'.
template <typename Enum, typename Parse>
void expect_round_trip(size_t expected_count, Parse parse) {
  const auto values = all_values<Enum>();
  ASSERT_EQ(values.size(), expected_count);
  std::set<std::string> names;
  for (Enum v : values) {
    const std::string name(to_string(v));
    SCOPED_TRACE(name);
    EXPECT_NE(name, "?");
    EXPECT_FALSE(name.empty());
    names.insert(name);
    ASSERT_TRUE(parse(name).has_value());
    EXPECT_EQ(*parse(name), v);
    ASSERT_TRUE(parse(upper(name)).has_value());
    EXPECT_EQ(*parse(upper(name)), v);
    ASSERT_TRUE(parse(swap_separators(name)).has_value());
    EXPECT_EQ(*parse(swap_separators(name)), v);
    EXPECT_FALSE(parse(name + "x").has_value());
    EXPECT_FALSE(parse(" " + name).has_value());
  }
  EXPECT_EQ(names.size(), values.size()) << "two values share a name";
  EXPECT_FALSE(parse("").has_value());
  EXPECT_FALSE(parse("definitely-not-a-value").has_value());
}

TEST(Types, DTypeRoundTrip) { expect_round_trip<DType>(12, parse_dtype); }
TEST(Types, WeightFormatRoundTrip) { expect_round_trip<WeightFormat>(7, parse_weight_format); }
TEST(Types, ActFormatRoundTrip) { expect_round_trip<ActFormat>(4, parse_act_format); }
TEST(Types, ActivationRoundTrip) { expect_round_trip<Activation>(9, parse_activation); }
TEST(Types, LayoutRoundTrip) { expect_round_trip<Layout>(4, parse_layout); }
TEST(Types, BackendRoundTrip) { expect_round_trip<Backend>(3, parse_backend); }

TEST(Types, SpecificSpellings) {
  EXPECT_EQ(parse_weight_format("FP8_Block"), WeightFormat::fp8_block);
  EXPECT_EQ(parse_weight_format("fp8-channel"), WeightFormat::fp8_channel);
  EXPECT_EQ(parse_activation("SWIGLU_OAI"), Activation::swiglu_oai);
  EXPECT_EQ(parse_activation("Gelu-Tanh-No-Mul"), Activation::gelu_tanh_no_mul);
  EXPECT_EQ(parse_act_format("Fp8_Token"), ActFormat::fp8_token);
  EXPECT_EQ(parse_layout("AUTO"), Layout::auto_select);
  EXPECT_EQ(parse_backend("Cuda"), Backend::cuda);
  // 16-bit activations: "bf16", and also "f16" / "none".
  EXPECT_EQ(parse_act_format("bf16"), ActFormat::none);
  EXPECT_EQ(parse_act_format("f16"), ActFormat::none);
  EXPECT_EQ(parse_act_format("none"), ActFormat::none);
  EXPECT_EQ(to_string(ActFormat::none), "a16");
}

TEST(Types, UnknownStringsGiveNullopt) {
  EXPECT_FALSE(parse_dtype("fp32").has_value());
  EXPECT_FALSE(parse_dtype("int4").has_value());
  EXPECT_FALSE(parse_weight_format("int2").has_value());
  EXPECT_FALSE(parse_weight_format("fp8").has_value());
  EXPECT_FALSE(parse_weight_format("int4-g128").has_value());
  EXPECT_FALSE(parse_act_format("f32").has_value());
  EXPECT_FALSE(parse_act_format("nvfp4").has_value());
  EXPECT_FALSE(parse_act_format("e4m3").has_value());
  EXPECT_FALSE(parse_activation("relu").has_value());
  EXPECT_FALSE(parse_activation("silu_no").has_value());
  EXPECT_FALSE(parse_activation("swigluoai").has_value());
  EXPECT_FALSE(parse_layout("batched").has_value());
  EXPECT_FALSE(parse_backend("gpu").has_value());
  EXPECT_FALSE(parse_backend("cpu ").has_value());
}

TEST(Types, SupportedPairsAreExactlyTheSixteen) {
  using W = WeightFormat;
  using A = ActFormat;
  // CONTRACT §5, in its order: every weight format with 16-bit activations; MXFP4 also with
  // MXFP4, MXFP8 and FP8 per-token; every other format also with FP8 per-token.
  const std::vector<std::pair<W, A>> expected = {
      {W::mxfp4, A::none},       {W::mxfp4, A::mxfp4},      {W::mxfp4, A::mxfp8},
      {W::mxfp4, A::fp8_token},  {W::nvfp4, A::none},       {W::nvfp4, A::fp8_token},
      {W::mxfp8, A::none},       {W::mxfp8, A::fp8_token},  {W::fp8_channel, A::none},
      {W::fp8_channel, A::fp8_token}, {W::fp8_block, A::none}, {W::fp8_block, A::fp8_token},
      {W::int4, A::none},        {W::int4, A::fp8_token},   {W::int8, A::none},
      {W::int8, A::fp8_token}};
  const auto& got = supported_pairs();
  ASSERT_EQ(got.size(), 16u);
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].weight, expected[i].first);
    EXPECT_EQ(got[i].act, expected[i].second);
  }
  // is_supported_pair agrees on the whole 7 x 4 grid.
  int supported = 0;
  for (W w : all_values<W>())
    for (A a : all_values<A>()) {
      const bool in_list = std::find(expected.begin(), expected.end(), std::make_pair(w, a)) != expected.end();
      EXPECT_EQ(is_supported_pair(w, a), in_list) << to_string(w) << " x " << to_string(a);
      supported += is_supported_pair(w, a) ? 1 : 0;
    }
  EXPECT_EQ(supported, 16);
  EXPECT_FALSE(is_supported_pair(W::nvfp4, A::mxfp8));
  EXPECT_FALSE(is_supported_pair(W::nvfp4, A::mxfp4));
  EXPECT_FALSE(is_supported_pair(W::int4, A::mxfp4));
}

TEST(Types, DTypeBitsAndBytes) {
  const std::vector<std::pair<DType, int>> bits = {
      {DType::none, 0}, {DType::bf16, 16}, {DType::f16, 16}, {DType::f32, 32},
      {DType::e4m3, 8}, {DType::e5m2, 8},  {DType::e2m1, 4}, {DType::ue8m0, 8},
      {DType::u4, 4},   {DType::u8, 8},    {DType::i32, 32}, {DType::i64, 64}};
  ASSERT_EQ(bits.size(), all_values<DType>().size());
  for (const auto& [t, b] : bits) EXPECT_EQ(dtype_bits(t), b) << to_string(t);

  EXPECT_EQ(dtype_bytes(DType::bf16, 7), 14);
  EXPECT_EQ(dtype_bytes(DType::f32, 3), 12);
  EXPECT_EQ(dtype_bytes(DType::i64, 5), 40);
  EXPECT_EQ(dtype_bytes(DType::e4m3, 9), 9);
  EXPECT_EQ(dtype_bytes(DType::ue8m0, 1), 1);
  // 4-bit codes round up to whole bytes.
  EXPECT_EQ(dtype_bytes(DType::e2m1, 0), 0);
  EXPECT_EQ(dtype_bytes(DType::e2m1, 1), 1);
  EXPECT_EQ(dtype_bytes(DType::e2m1, 2), 1);
  EXPECT_EQ(dtype_bytes(DType::e2m1, 3), 2);
  EXPECT_EQ(dtype_bytes(DType::u4, 7), 4);
  EXPECT_EQ(dtype_bytes(DType::u4, 8), 4);
  EXPECT_EQ(dtype_bytes(DType::u4, int64_t{1} << 33), int64_t{1} << 32);  // no 32-bit overflow
  EXPECT_EQ(dtype_bytes(DType::none, 10), 0);
}

TEST(Types, IsGatedForAllActivations) {
  const std::vector<std::pair<Activation, bool>> gated = {
      {Activation::silu, true},           {Activation::gelu, true},
      {Activation::gelu_tanh, true},      {Activation::swiglu_oai, true},
      {Activation::swiglu_step, true},    {Activation::silu_no_mul, false},
      {Activation::gelu_no_mul, false},   {Activation::gelu_tanh_no_mul, false},
      {Activation::relu2_no_mul, false}};
  ASSERT_EQ(gated.size(), all_values<Activation>().size());
  for (const auto& [a, g] : gated) EXPECT_EQ(is_gated(a), g) << to_string(a);
}

TEST(Types, FormatFacts) {
  EXPECT_EQ(act_format_bits(ActFormat::none), 16);
  EXPECT_EQ(act_format_bits(ActFormat::fp8_token), 8);
  EXPECT_EQ(act_format_bits(ActFormat::mxfp8), 8);
  EXPECT_EQ(act_format_bits(ActFormat::mxfp4), 4);
  EXPECT_EQ(act_format_code_dtype(ActFormat::none), DType::none);
  EXPECT_EQ(act_format_code_dtype(ActFormat::fp8_token), DType::e4m3);
  EXPECT_EQ(act_format_code_dtype(ActFormat::mxfp8), DType::e4m3);
  EXPECT_EQ(act_format_code_dtype(ActFormat::mxfp4), DType::e2m1);

  EXPECT_EQ(weight_format_fixed_group(WeightFormat::mxfp4), 32);
  EXPECT_EQ(weight_format_fixed_group(WeightFormat::mxfp8), 32);
  EXPECT_EQ(weight_format_fixed_group(WeightFormat::nvfp4), 16);
  EXPECT_EQ(weight_format_fixed_group(WeightFormat::fp8_block), 128);
  EXPECT_EQ(weight_format_fixed_group(WeightFormat::fp8_channel), 0);
  EXPECT_EQ(weight_format_fixed_group(WeightFormat::int4), 0);
  EXPECT_EQ(weight_format_fixed_group(WeightFormat::int8), 0);

  EXPECT_EQ(weight_format_code_dtype(WeightFormat::mxfp4), DType::e2m1);
  EXPECT_EQ(weight_format_code_dtype(WeightFormat::nvfp4), DType::e2m1);
  EXPECT_EQ(weight_format_code_dtype(WeightFormat::mxfp8), DType::e4m3);
  EXPECT_EQ(weight_format_code_dtype(WeightFormat::fp8_channel), DType::e4m3);
  EXPECT_EQ(weight_format_code_dtype(WeightFormat::fp8_block), DType::e4m3);
  EXPECT_EQ(weight_format_code_dtype(WeightFormat::int4), DType::u4);
  EXPECT_EQ(weight_format_code_dtype(WeightFormat::int8), DType::u8);
}

}  // namespace
}  // namespace moeq
