// Arguments a caller builds by hand, outside what an ExpertsDesc gives (found by an audit of the public API and
// the CLI's files): overlapping workspaces, enum values past their enumerators, WeightDescs whose fields
// disagree with their format, tuning tables of another layer or with fields nobody reads, preset files with
// misspelt fields. Each is a moeq::Error naming the value, never a wrong result.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "io/presets.hpp"
#include "io/problem.hpp"
#include "io/verify.hpp"
#include "moeq/error.hpp"
#include "moeq/tuning.hpp"
#include "moeq/weights.hpp"
#include "plan/legality.hpp"
#include "tests/unit/error_test_util.hpp"
#include "tests/unit/experts_test_util.hpp"

namespace moeq {
namespace {

using ::testing::HasSubstr;
using test::error_of;

io::HostProblem problem_of(const ExpertsDesc& d, int64_t M, bool batched = false) {
  io::GenerateOptions g;
  g.num_tokens = M;
  g.seed = 5;
  g.batched = batched;
  g.num_threads = 1;
  return io::generate_problem(d, g);
}

// One buffer as both workspaces ran and gave an output ~100x off the oracle; now it names both ranges.
TEST(HandBuiltArgs, OverlappingWorkspacesAreRefused) {
  for (const Layout layout : {Layout::indexed, Layout::contiguous}) {
    const io::HostProblem p = problem_of(test::small_desc(WeightFormat::int4, ActFormat::none, Activation::silu), 9);
    Options options;
    options.layout = layout;
    const Experts experts(p.desc, options);
    const WorkspaceSizes ws = experts.workspace_bytes(p.num_tokens);
    ASSERT_GT(ws.workspace1_bytes, 0);
    ASSERT_GT(ws.workspace2_bytes, 0);
    std::vector<uint8_t> one(static_cast<size_t>(ws.workspace1_bytes + ws.workspace2_bytes + 64));
    std::vector<uint8_t> out(static_cast<size_t>(dtype_bytes(p.desc.act_dtype, p.num_tokens * p.desc.hidden_size)), 0xAB);
    const auto apply = [&](void* w1, void* w2) {
      return error_of([&] { experts.apply(p.w13->view(), p.w2->view(), p.inputs(), {out.data(), 0}, w1, w2); });
    };
    EXPECT_THAT(apply(one.data(), one.data()), HasSubstr("overlap; the step needs two separate buffers"));
    // The second starting 16 bytes before the first one ends still overlaps; right at its end does not.
    const int64_t first_end = (ws.workspace1_bytes + 15) / 16 * 16;
    EXPECT_THAT(apply(one.data(), one.data() + first_end - 16), HasSubstr("overlap"));
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0xAB; }));
    EXPECT_NO_THROW(experts.apply(p.w13->view(), p.w2->view(), p.inputs(), {out.data(), 0}, one.data(),
                                  one.data() + first_end));
  }
}

TEST(HandBuiltArgs, EnumsPastTheirEnumeratorsAreNamed) {
  const io::HostProblem p = problem_of(test::small_desc(WeightFormat::int4, ActFormat::none, Activation::silu), 3);
  const Experts experts(p.desc, Options{});
  const WorkspaceSizes ws = experts.workspace_bytes(p.num_tokens);
  std::vector<uint8_t> ws1(ws.workspace1_bytes), ws2(ws.workspace2_bytes), out(1 << 16);
  WeightView w2 = p.w2->view();
  w2.code_layout = static_cast<CodeLayout>(7);
  EXPECT_THAT(error_of([&] { experts.apply(p.w13->view(), w2, p.inputs(), {out.data(), 0}, ws1.data(), ws2.data()); }),
              HasSubstr("w2: code_layout = 7 is neither canonical nor prepared"));

  Options tuned;
  tuned.tuning.layout = static_cast<Layout>(42);
  tuned.tuning.entries.push_back({0, 64, 8, "8x128/1x4x1/4/o4/r", "8x128/1x4x1/4/o4/r"});
  EXPECT_THAT(can_implement(p.desc, tuned), testing::Contains(HasSubstr("tuning: layout = 42 is not a Layout")));
}

// Under a layout that refuses the input kind, workspace_bytes and explain refuse it too (apply always did).
TEST(HandBuiltArgs, PlanningRefusesWhatApplyRefuses) {
  const ExpertsDesc d = test::small_desc(WeightFormat::int4, ActFormat::none, Activation::silu);
  Options indexed;
  indexed.layout = Layout::indexed;
  EXPECT_THAT(error_of([&] { Experts(d, indexed).workspace_bytes(0, 4); }),
              HasSubstr("workspace_bytes: layout = indexed cannot take batched input (T = 4)"));
  Options masked;
  masked.layout = Layout::masked;
  EXPECT_THAT(error_of([&] { Experts(d, masked).explain(16); }), HasSubstr("explain: layout = masked plans batched input"));
  EXPECT_NO_THROW(Experts(d, Options{}).workspace_bytes(0, 4));
  EXPECT_THAT(error_of([&] { Experts(d, Options{}).layout_for(-5, false); }), HasSubstr("layout_for: num_tokens = -5 is negative"));
}

// validate_weights counted an MX desc with group_size 0 as one scale per row, so a NaN scale past the first went
// unread; the WeightDesc is now checked against its format first.
TEST(HandBuiltArgs, WeightDescsAreCheckedAgainstTheirFormat) {
  WeightDesc w;
  w.format = WeightFormat::mxfp4;
  w.num_experts = 1;
  w.n = 4;
  w.k = 64;
  w.scale_dtype = DType::ue8m0;
  std::vector<uint8_t> codes(1 << 10, 0), scales(8, 127);
  scales[7] = 255;
  WeightView v;
  v.codes = codes.data();
  v.scales = scales.data();
  EXPECT_THAT(error_of([&] { validate_weights(w, v, "w13"); }), HasSubstr("w13: the WeightDesc's group_size = 0 must be 32"));
  w.group_size = 32;
  EXPECT_THAT(error_of([&] { validate_weights(w, v, "w13"); }), HasSubstr("w13.scales[7] = 255 is the ue8m0 NaN code"));
  w.num_experts = -1;
  EXPECT_THAT(error_of([&] { validate_weights(w, v, "w2"); }), HasSubstr("num_experts = -1 is outside [1, 65536]"));
  w.num_experts = 1;
  w.format = static_cast<WeightFormat>(50);
  EXPECT_THAT(error_of([&] { validate_weights(w, v, "w2"); }), HasSubstr("format = 50 is not one of its enum's values"));
  w.format = WeightFormat::int4;
  w.group_size = 64;
  w.scale_dtype = DType::none;
  EXPECT_THAT(error_of([&] { validate_weights(w, v, "w2"); }), HasSubstr("scale_dtype = none is not bf16, f16 or f32 for int4"));

  // Sizes that would overflow int64 (E 2^20 x n 2^30 x k 2^30 wrapped to 0 bytes).
  WeightDesc huge;
  huge.format = WeightFormat::int8;
  huge.num_experts = 1 << 20;
  huge.n = huge.k = int64_t{1} << 30;
  EXPECT_THAT(error_of([&] { prepared_code_bytes(huge); }), HasSubstr("prepared_code_bytes: num_experts = 1048576 is outside [1, 65536]"));
  huge.format = WeightFormat::mxfp4;
  EXPECT_THAT(error_of([&] { mx_scales_at_most_two_host(huge, scales.data()); }), HasSubstr("mx_scales_at_most_two_host: the desc has E = 1048576"));
  // The largest legal gated layer's w13 has n = 2 I = 2^21 rows: within the bounds.
  ExpertsDesc widest = test::small_desc(WeightFormat::int8, ActFormat::none, Activation::silu);
  widest.intermediate_size = int64_t{1} << 20;
  EXPECT_TRUE(can_implement(widest, Options{}).empty());
  EXPECT_TRUE(plan::weight_desc_reasons(widest.w13()).empty()) << plan::weight_desc_reasons(widest.w13()).front();
}

// A table `moeq tune` wrote for one layer, handed to another, planned that layer with tiles timed on other shapes.
TEST(HandBuiltArgs, TuningTablesOfAnotherLayerAreRefused) {
  const ExpertsDesc bf16 = test::small_desc(WeightFormat::mxfp4, ActFormat::none, Activation::silu);
  ExpertsDesc fp8 = bf16;
  fp8.act_format = ActFormat::fp8_token;
  ExpertsDesc other = bf16;
  other.hidden_size *= 2;
  Options options;
  options.tuning.key = bf16.tuning_key();
  options.tuning.entries.push_back({0, 64, 8, "8x128/1x4x1/4/o4/r", "8x128/1x4x1/4/o4/r"});
  EXPECT_TRUE(can_implement(bf16, options).empty());
  EXPECT_TRUE(can_implement(fp8, options).empty()) << "quantized activations take their weights' 16-bit table";
  EXPECT_THAT(can_implement(other, options), testing::Contains(HasSubstr("it was tuned for another layer")));
  options.tuning.key.clear();  // no key: the caller's word
  EXPECT_TRUE(can_implement(other, options).empty());
}

TEST(HandBuiltArgs, MisspeltFieldsInFilesAreRefused) {
  const std::string entry = R"({"min_m": 0, "max_m": 8, "block_m": 8, "gemm1_tile": "8x128/1x4x1/4/o4/r", "gemm2_tile": "8x128/1x4x1/4/o4/r")";
  EXPECT_NO_THROW(TuningTable::from_json(R"({"arch": "sm_90", "entries": [)" + entry + "}]}"));
  EXPECT_THAT(error_of([&] { TuningTable::from_json(R"({"arch": "sm_90", "layuot": "indexed", "entries": []})"); }),
              HasSubstr("field 'layuot' is unknown"));
  EXPECT_THAT(error_of([&] { TuningTable::from_json(R"({"entries": [)" + entry + R"(, "gemm3_tile": "x"}]})"); }),
              HasSubstr("entries[0]: field 'gemm3_tile' is unknown"));
  const std::string preset = R"({"name": "x", "num_experts": 8, "top_k": 2, "hidden_size": 256, "intermediate_size": 128,
                                 "activation": "swiglu-oai")";
  EXPECT_NO_THROW(io::parse_preset(preset + R"(, "swiglu_limit": 7})", "p.json"));
  EXPECT_THAT(error_of([&] { io::parse_preset(preset + R"(, "swiglu_limt": 7})", "p.json"); }),
              HasSubstr("p.json: field 'swiglu_limt' is unknown"));
  EXPECT_THAT(error_of([&] { io::parse_preset("[]", "p.json"); }), HasSubstr("p.json: the document is not a JSON object"));
  EXPECT_THAT(error_of([&] { io::parse_preset(preset + R"(, "": 1})", "p.json"); }), HasSubstr("field '' is unknown"));
  const std::string long_key(300, 'k');
  EXPECT_THAT(error_of([&] { io::parse_preset(preset + ", \"" + long_key + "\": 1}", "p.json"); }),
              HasSubstr("field '" + std::string(60, 'k') + "...' is unknown"));
  EXPECT_THAT(error_of([&] { io::parse_preset(preset + ", \"" + long_key + "\": 1, \"" + long_key + "\": 2}", "p.json"); }),
              HasSubstr("field '" + std::string(60, 'k') + "...' appears twice"));
  EXPECT_THAT(error_of([&] { io::parse_preset(preset + R"(, "default_scheme": "int4:xyz"})", "p.json"); }),
              HasSubstr("p.json: field 'default_scheme': "));
  EXPECT_THAT(error_of([&] { TuningTable::load(testing::TempDir()); }), HasSubstr("is a directory, not a JSON file"));
}

// `moeq run --check` on inputs holding a NaN: the NaN the oracle computes too is a match; one it does not is not.
TEST(HandBuiltArgs, OracleComparisonMatchesSpecialValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> got_values{1.0f, nan, 2.0f};
  std::vector<uint8_t> got(got_values.size() * 4);
  std::memcpy(got.data(), got_values.data(), got.size());
  const auto all_rows = [](int64_t) { return true; };
  const io::OracleComparison same = io::compare(DType::f32, got, {1.0, std::nan(""), 2.0}, 3, all_rows);
  EXPECT_TRUE(same.finite);
  EXPECT_TRUE(same.within_contract(ActFormat::none));
  EXPECT_DOUBLE_EQ(same.exact_fraction, 1.0);
  const io::OracleComparison differs = io::compare(DType::f32, got, {1.0, 3.0, 2.0}, 3, all_rows);
  EXPECT_FALSE(differs.finite);
  EXPECT_FALSE(differs.within_contract(ActFormat::none));
}

}  // namespace
}  // namespace moeq
