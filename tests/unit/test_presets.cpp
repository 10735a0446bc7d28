// Model presets (bench/shapes/*.json, embedded) and scheme strings.
#include "io/presets.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/error_test_util.hpp"

#include <functional>
#include <set>
#include <string>

#include "moeq/error.hpp"

namespace moeq::io {
namespace {

using ::testing::HasSubstr;

using test::error_of;

TEST(Presets, AllSixLoadAndAreLegal) {
  const auto& all = presets();
  ASSERT_EQ(all.size(), 6u);
  std::set<std::string> names;
  for (const auto& p : all) {
    names.insert(p.name);
    EXPECT_FALSE(p.description.empty()) << p.name;
    const auto reasons = can_implement(p.desc, Options{});
    EXPECT_TRUE(reasons.empty()) << p.name << ": " << (reasons.empty() ? "" : reasons[0]);
    EXPECT_EQ(&find_preset(p.name), &p);
  }
  EXPECT_EQ(names, (std::set<std::string>{"qwen3-30b-a3b", "gpt-oss-20b", "gpt-oss-120b", "deepseek-v3",
                                          "mixtral-8x7b", "tiny"}));
}

TEST(Presets, Qwen3) {
  const auto& d = find_preset("qwen3-30b-a3b").desc;
  EXPECT_EQ(d.num_experts, 128);
  EXPECT_EQ(d.top_k, 8);
  EXPECT_EQ(d.hidden_size, 2048);
  EXPECT_EQ(d.intermediate_size, 768);
  EXPECT_EQ(d.activation.kind, Activation::silu);
  EXPECT_EQ(d.weight_format, WeightFormat::int4);
  EXPECT_EQ(d.group_size, 128);
  EXPECT_EQ(d.act_format, ActFormat::none);
  EXPECT_EQ(d.bias_dtype, DType::none);
  EXPECT_FALSE(d.interleaved_gate_up);
}

TEST(Presets, GptOss) {
  for (const char* name : {"gpt-oss-20b", "gpt-oss-120b"}) {
    SCOPED_TRACE(name);
    const auto& p = find_preset(name);
    const auto& d = p.desc;
    EXPECT_EQ(d.num_experts, std::string(name) == "gpt-oss-20b" ? 32 : 128);
    EXPECT_EQ(d.top_k, 4);
    EXPECT_EQ(d.hidden_size, 2880);
    EXPECT_EQ(d.intermediate_size, 2880);
    EXPECT_EQ(d.activation.kind, Activation::swiglu_oai);
    EXPECT_FLOAT_EQ(d.activation.swiglu_alpha, 1.702f);
    EXPECT_FLOAT_EQ(d.activation.swiglu_limit, 7.0f);
    EXPECT_TRUE(d.interleaved_gate_up);
    EXPECT_EQ(d.bias_dtype, DType::f32);
    EXPECT_EQ(d.weight_format, WeightFormat::mxfp4);
    EXPECT_EQ(p.default_scheme, "mxfp4:bf16");
  }
}

TEST(Presets, DeepSeekMixtralTiny) {
  const auto& ds = find_preset("deepseek-v3").desc;
  EXPECT_EQ(ds.num_experts, 256);
  EXPECT_EQ(ds.top_k, 8);
  EXPECT_EQ(ds.hidden_size, 7168);
  EXPECT_EQ(ds.intermediate_size, 2048);
  EXPECT_EQ(ds.weight_format, WeightFormat::fp8_block);

  const auto& mx = find_preset("mixtral-8x7b").desc;
  EXPECT_EQ(mx.num_experts, 8);
  EXPECT_EQ(mx.top_k, 2);
  EXPECT_EQ(mx.hidden_size, 4096);
  EXPECT_EQ(mx.intermediate_size, 14336);

  const auto& tiny = find_preset("tiny").desc;
  EXPECT_EQ(tiny.num_experts, 7);
  EXPECT_EQ(tiny.top_k, 3);
  EXPECT_EQ(tiny.hidden_size, 256);
  EXPECT_EQ(tiny.intermediate_size, 128);
  EXPECT_EQ(tiny.global_experts(), 7);
}

TEST(Presets, UnknownNameListsKnownOnes) {
  const std::string msg = error_of([] { find_preset("llama-moe"); });
  EXPECT_THAT(msg, HasSubstr("llama-moe"));
  for (const auto& p : presets()) EXPECT_THAT(msg, HasSubstr(p.name));
  EXPECT_THROW(find_preset(""), Error);
  EXPECT_THROW(find_preset("TINY"), Error);  // names are exact
}

const char* kGoodPreset = R"({
  "name": "unit", "num_experts": 4, "top_k": 2, "hidden_size": 128, "intermediate_size": 64,
  "activation": "gelu", "default_scheme": "int8-g32:f16", "bias": true, "silu_clamp": 0
})";

TEST(Presets, ParseGoodDocument) {
  const Preset p = parse_preset(kGoodPreset, "unit.json");
  EXPECT_EQ(p.name, "unit");
  EXPECT_EQ(p.description, "");
  EXPECT_EQ(p.desc.num_experts, 4);
  EXPECT_EQ(p.desc.activation.kind, Activation::gelu);
  EXPECT_EQ(p.desc.weight_format, WeightFormat::int8);
  EXPECT_EQ(p.desc.group_size, 32);
  EXPECT_EQ(p.desc.act_dtype, DType::f16);
  EXPECT_EQ(p.desc.bias_dtype, DType::f32);
  EXPECT_TRUE(can_implement(p.desc, Options{}).empty());
  // No default_scheme: int4-g128 with bf16 activations.
  const Preset q = parse_preset(R"({"name": "x", "num_experts": 2, "top_k": 1, "hidden_size": 128,
                                    "intermediate_size": 128, "activation": "silu"})", "x.json");
  EXPECT_EQ(q.default_scheme, "int4-g128:bf16");
  EXPECT_EQ(q.desc.weight_format, WeightFormat::int4);
  EXPECT_EQ(q.desc.bias_dtype, DType::none);
}

TEST(Presets, ParseErrorsNameTheField) {
  std::string msg = error_of([] {
    parse_preset(R"({"name": "x", "top_k": 2, "hidden_size": 128, "intermediate_size": 64, "activation": "silu"})",
                 "missing.json");
  });
  EXPECT_THAT(msg, HasSubstr("missing.json"));
  EXPECT_THAT(msg, HasSubstr("'num_experts'"));
  EXPECT_THAT(msg, HasSubstr("missing"));

  msg = error_of([] {
    parse_preset(R"({"name": "x", "num_experts": 4, "top_k": "eight", "hidden_size": 128,
                     "intermediate_size": 64, "activation": "silu"})", "type.json");
  });
  EXPECT_THAT(msg, HasSubstr("'top_k'"));
  EXPECT_THAT(msg, HasSubstr("eight"));
  EXPECT_THAT(msg, HasSubstr("is not a 64-bit signed integer"));
  // Neither truncated nor wrapped: 2.9, 2^64 - 1 and 1e300 are refused, naming the field.
  for (const char* top_k : {"2.9", "18446744073709551615", "1e300"}) {
    msg = error_of([&] {
      parse_preset(std::string(R"({"name": "x", "num_experts": 4, "top_k": )") + top_k +
                       R"(, "hidden_size": 128, "intermediate_size": 64, "activation": "silu"})",
                   "number.json");
    });
    EXPECT_THAT(msg, HasSubstr(std::string("field 'top_k' = ")));
    EXPECT_THAT(msg, HasSubstr("is not a 64-bit signed integer")) << top_k;
  }
  msg = error_of([] {
    parse_preset(R"({"name": "x", "num_experts": 4, "top_k": 2, "hidden_size": 128, "intermediate_size": 64,
                     "activation": "silu", "swiglu_alpha": "fast"})", "float.json");
  });
  EXPECT_THAT(msg, HasSubstr("field 'swiglu_alpha' = \"fast\" has the wrong type"));

  msg = error_of([] {
    parse_preset(R"({"name": "x", "num_experts": 4, "top_k": 2, "hidden_size": 128,
                     "intermediate_size": 64, "activation": "silu", "bias": "yes"})", "bias.json");
  });
  EXPECT_THAT(msg, HasSubstr("'bias'"));

  msg = error_of([] { parse_preset(R"({"name": "x", "num_experts": 4,)", "bad.json"); });
  EXPECT_THAT(msg, HasSubstr("bad.json"));
  EXPECT_THAT(msg, HasSubstr("JSON"));

  msg = error_of([] {
    parse_preset(R"({"name": "x", "num_experts": 4, "top_k": 2, "hidden_size": 128,
                     "intermediate_size": 64, "activation": "swish"})", "act.json");
  });
  EXPECT_THAT(msg, HasSubstr("activation"));
  EXPECT_THAT(msg, HasSubstr("swish"));

  msg = error_of([] {
    parse_preset(R"({"name": "x", "num_experts": 4, "top_k": 2, "hidden_size": 128,
                     "intermediate_size": 64, "activation": "silu", "default_scheme": "int5"})", "s.json");
  });
  EXPECT_THAT(msg, HasSubstr("int5"));
}

ExpertsDesc applied(const std::string& scheme) {
  ExpertsDesc d;
  apply_scheme(scheme, d);
  return d;
}

TEST(PresetsScheme, ParsesWeightAndActivationParts) {
  ExpertsDesc d = applied("int4-g64-zp:fp8-token");
  EXPECT_EQ(d.weight_format, WeightFormat::int4);
  EXPECT_EQ(d.group_size, 64);
  EXPECT_TRUE(d.has_zero_point);
  EXPECT_EQ(d.act_format, ActFormat::fp8_token);
  EXPECT_EQ(d.act_dtype, DType::bf16);

  d = applied("int8-ch");
  EXPECT_EQ(d.weight_format, WeightFormat::int8);
  EXPECT_EQ(d.group_size, 0);
  EXPECT_FALSE(d.has_zero_point);
  EXPECT_EQ(d.act_format, ActFormat::none);

  d = applied("mxfp4:mxfp4");
  EXPECT_EQ(d.weight_format, WeightFormat::mxfp4);
  EXPECT_EQ(d.act_format, ActFormat::mxfp4);

  d = applied("nvfp4:f16");
  EXPECT_EQ(d.weight_format, WeightFormat::nvfp4);
  EXPECT_EQ(d.act_format, ActFormat::none);
  EXPECT_EQ(d.act_dtype, DType::f16);

  d = applied("nvfp4:F16");  // case-insensitive like every other name
  EXPECT_EQ(d.act_format, ActFormat::none);
  EXPECT_EQ(d.act_dtype, DType::f16);

  d = applied("fp8-channel:mxfp8");
  EXPECT_EQ(d.weight_format, WeightFormat::fp8_channel);
  EXPECT_EQ(d.act_format, ActFormat::mxfp8);

  // Applying a scheme replaces the previous quantization choices.
  d = applied("int4-g32-zp:fp8-token");
  apply_scheme("fp8-block:bf16", d);
  EXPECT_EQ(d.weight_format, WeightFormat::fp8_block);
  EXPECT_FALSE(d.has_zero_point);
  EXPECT_EQ(d.act_format, ActFormat::none);
  d.act_dtype = DType::f16;
  apply_scheme("int8-g128", d);  // no activation part: 16-bit, act_dtype kept
  EXPECT_EQ(d.act_format, ActFormat::none);
  EXPECT_EQ(d.act_dtype, DType::f16);
  EXPECT_EQ(d.group_size, 128);
}

TEST(PresetsScheme, RejectsMalformed) {
  for (const char* bad : {"int4-g", "foo", "int4:bar", "a:b:c", "", ":bf16", "int4-g64x", "int4-g+64",
                          "int4-gx", "int4-zq", "mxfp4-zp", "int4-g64:", "nvfp4:int8"}) {
    SCOPED_TRACE(bad);
    ExpertsDesc d;
    const std::string msg = error_of([&] { apply_scheme(bad, d); });
    std::string quoted(1, '\'');  // built stepwise: GCC 12 warns (-Wrestrict) on "'" + s
    quoted.append(bad).push_back('\'');
    EXPECT_THAT(msg, HasSubstr(quoted));
  }
}

TEST(PresetsScheme, SchemeStringRoundTrips) {
  for (const char* s : {"int4-g128:bf16", "int4-g64-zp:fp8-token", "int4-ch-zp:f16", "int8-ch:bf16",
                        "int8-g32:fp8-token", "mxfp4:mxfp4", "mxfp4:mxfp8", "mxfp4:fp8-token", "nvfp4:f16",
                        "mxfp8:bf16", "fp8-channel:fp8-token", "fp8-block:bf16"}) {
    SCOPED_TRACE(s);
    const ExpertsDesc d = applied(s);
    EXPECT_EQ(scheme_string(d), s);
    const ExpertsDesc e = applied(scheme_string(d));
    EXPECT_EQ(e.weight_format, d.weight_format);
    EXPECT_EQ(e.act_format, d.act_format);
    EXPECT_EQ(e.act_dtype, d.act_dtype);
    EXPECT_EQ(e.has_zero_point, d.has_zero_point);
    if (d.weight_format == WeightFormat::int4 || d.weight_format == WeightFormat::int8) {
      EXPECT_EQ(e.group_size, d.group_size);
    }
  }
  // Every preset's desc gives back its default scheme.
  for (const auto& p : presets()) EXPECT_EQ(scheme_string(p.desc), p.default_scheme) << p.name;
  // A scheme without an activation part comes back in canonical form.
  EXPECT_EQ(scheme_string(applied("int8-g64")), "int8-g64:bf16");
}

}  // namespace
}  // namespace moeq::io
