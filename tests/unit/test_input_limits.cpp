// Inputs at the edges of the API's ranges (sizes that would overflow, enum values that are none of
// their enumerators, strides that wrap, misaligned workspaces, moved-from objects): each a
// moeq::Error naming the argument and its value, never a crash or a wrapped size.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda/moe_gemm.hpp"
#include "io/presets.hpp"
#include "io/problem.hpp"
#include "moeq/error.hpp"
#include "moeq/weights.hpp"
#include "tests/unit/error_test_util.hpp"
#include "tests/unit/experts_test_util.hpp"

namespace moeq {
namespace {

using ::testing::HasSubstr;

using test::error_of;

io::HostProblem small_problem(bool batched) {
  io::GenerateOptions g;
  g.num_tokens = 5;
  g.seed = 11;
  g.batched = batched;
  g.num_threads = 1;
  return io::generate_problem(test::small_desc(WeightFormat::int4, ActFormat::none, Activation::silu), g);
}

TEST(InputLimits, TokenCountsThatWouldOverflowSizesAreNamed) {
  const Experts experts(test::small_desc(WeightFormat::int4, ActFormat::none, Activation::silu), Options{});
  EXPECT_THAT(error_of([&] { experts.workspace_bytes(int64_t{1} << 58); }),
              HasSubstr("workspace_bytes: num_tokens = 288230376151711744 with top_k = 3 routes 2^31 or more rows"));
  EXPECT_THAT(error_of([&] { experts.workspace_bytes(0, int64_t{1} << 54); }),
              HasSubstr("workspace_bytes: batched_tokens_per_expert = 18014398509481984 over E = 7 local experts"));
  EXPECT_THAT(error_of([&] { experts.workspace_bytes(-5); }), HasSubstr("workspace_bytes: num_tokens = -5 is negative"));
  EXPECT_THAT(error_of([&] { experts.workspace_bytes(4, -1); }),
              HasSubstr("batched_tokens_per_expert = -1 is negative"));
  EXPECT_THAT(error_of([&] { experts.explain(-5); }), HasSubstr("explain: num_tokens = -5 is negative"));
  // The largest count that routes fewer than 2^31 rows is planned; one more is refused.
  const int64_t most = ((int64_t{1} << 31) - 1) / 3;
  EXPECT_NO_THROW(experts.workspace_bytes(most));
  EXPECT_THAT(error_of([&] { experts.workspace_bytes(most + 1); }), HasSubstr("routes 2^31 or more rows"));

  io::HostProblem batched = small_problem(true);
  ExpertsInputs in = batched.inputs();
  in.max_tokens_per_expert = int64_t{1} << 61;
  Options masked;
  masked.layout = Layout::masked;
  std::vector<uint8_t> out(1 << 16);
  EXPECT_THAT(error_of([&] {
                Experts(batched.desc, masked).apply(batched.w13->view(), batched.w2->view(), in, {out.data(), 0},
                                                    out.data(), out.data());
              }),
              HasSubstr("apply: max_tokens_per_expert = 2305843009213693952 over E = 7"));
}

TEST(InputLimits, TheProblemGeneratorRefusesTokenCountsPastTheRowLimit) {
  io::GenerateOptions g;
  g.num_tokens = int64_t{1} << 62;
  EXPECT_THAT(error_of([&] {
                io::generate_problem(test::small_desc(WeightFormat::int4, ActFormat::none, Activation::silu), g);
              }),
              HasSubstr("num_tokens = 4611686018427387904 must be >= 0 with fewer than 2^31 routed rows"));
}

TEST(InputLimits, WorkspacesAndStridesOnTheCpuBackend) {
  io::HostProblem p = small_problem(false);
  Options cpu;
  cpu.backend = Backend::cpu;
  const Experts experts(p.desc, cpu);
  const WorkspaceSizes ws = experts.workspace_bytes(p.num_tokens);
  std::vector<uint8_t> ws1(ws.workspace1_bytes + 16), ws2(ws.workspace2_bytes + 16);
  std::vector<uint8_t> out(static_cast<size_t>(dtype_bytes(p.desc.act_dtype, p.output_rows() * p.desc.hidden_size)));
  const auto apply = [&](const ExpertsInputs& in, const ExpertsOutput& o, void* w1, void* w2) {
    return error_of([&] { experts.apply(p.w13->view(), p.w2->view(), in, o, w1, w2); });
  };
  EXPECT_NO_THROW(experts.apply(p.w13->view(), p.w2->view(), p.inputs(), {out.data(), 0}, ws1.data(), ws2.data()));
  EXPECT_THAT(apply(p.inputs(), {out.data(), 0}, ws1.data() + 1, ws2.data()),
              testing::MatchesRegex("workspace1 = 0x[0-9a-f]+ is not aligned to 16 bytes"));
  EXPECT_THAT(apply(p.inputs(), {out.data(), 0}, ws1.data(), ws2.data() + 8), HasSubstr("workspace2 = "));

  ExpertsInputs in = p.inputs();
  in.hidden_row_stride = (int64_t{1} << 62) + 64;
  EXPECT_THAT(apply(in, {out.data(), 0}, ws1.data(), ws2.data()),
              HasSubstr("hidden_row_stride = 4611686018427387968 over 5 rows of 2-byte elements spans 2^63 bytes or more"));
  EXPECT_THAT(apply(p.inputs(), {out.data(), int64_t{1} << 61}, ws1.data(), ws2.data()),
              HasSubstr("output row_stride = 2305843009213693952 over 5 rows"));
}

TEST(InputLimits, CombineBatchedChecksItsOwnArguments) {
  io::HostProblem p = small_problem(true);
  const std::vector<uint8_t> batched_out(p.hidden);  // any [E, T, K] values
  std::vector<uint8_t> out(static_cast<size_t>(dtype_bytes(p.desc.act_dtype, p.num_tokens * p.desc.hidden_size)));
  ExpertsInputs routing = p.inputs();
  routing.hidden = nullptr;  // combine never reads it
  EXPECT_NO_THROW(combine_batched(p.desc, routing, batched_out.data(), {out.data(), 0}));
  EXPECT_THAT(error_of([&] { combine_batched(p.desc, routing, nullptr, {out.data(), 0}); }),
              HasSubstr("combine_batched: batched_out is null"));
  EXPECT_THAT(error_of([&] { combine_batched(p.desc, routing, batched_out.data() + 1, {out.data(), 0}); }),
              HasSubstr("combine_batched: batched_out = "));
  // The hidden rows' stride (apply's padded [E, T, K] input) says nothing about batched_out.
  routing.hidden_row_stride = 4 * p.desc.hidden_size;
  EXPECT_NO_THROW(combine_batched(p.desc, routing, batched_out.data(), {out.data(), 0}));
}

TEST(InputLimits, EnumValuesOutsideTheirEnumeratorsAreNamed) {
  const ExpertsDesc good = test::small_desc(WeightFormat::int4, ActFormat::none, Activation::silu);
  Options options;
  options.layout = static_cast<Layout>(99);
  EXPECT_THAT(error_of([&] { Experts(good, options); }), HasSubstr("layout = 99 is not one of its enum's values"));
  options = Options{};
  options.backend = static_cast<Backend>(99);
  EXPECT_THAT(error_of([&] { Experts(good, options); }), HasSubstr("backend = 99 is not one of its enum's values"));
  ExpertsDesc d = good;
  d.activation.kind = static_cast<Activation>(99);
  EXPECT_THAT(error_of([&] { Experts(d, Options{}); }), HasSubstr("activation = 99 is not one of its enum's values"));
  d = good;
  d.act_dtype = static_cast<DType>(99);
  EXPECT_THAT(error_of([&] { Experts(d, Options{}); }), HasSubstr("act_dtype = 99 is not one of its enum's values"));
  d = good;
  d.weight_format = static_cast<WeightFormat>(99);
  EXPECT_THAT(error_of([&] { Experts(d, Options{}); }), HasSubstr("weight_format = 99 is not one of its enum's values"));

  WeightDesc w = good.w13();
  w.format = static_cast<WeightFormat>(99);
  std::vector<uint8_t> codes(1 << 16), prepared(1 << 16);
  EXPECT_THAT(error_of([&] { prepare_codes_host(w, codes.data(), prepared.data()); }),
              HasSubstr("prepare_codes_host: format = 99 is not a WeightFormat value"));

  io::HostProblem p = small_problem(false);
  ExpertsInputs in = p.inputs();
  in.topk_ids_dtype = static_cast<DType>(99);
  std::vector<uint8_t> ws(1 << 16), out(1 << 16);
  Options cpu;
  cpu.backend = Backend::cpu;
  EXPECT_THAT(error_of([&] {
                Experts(p.desc, cpu).apply(p.w13->view(), p.w2->view(), in, {out.data(), 0}, ws.data(), ws.data());
              }),
              HasSubstr("topk_ids dtype = DType(99) must be i32 or i64"));
}

TEST(InputLimits, AMovedFromExpertsSaysSo) {
  Experts first(test::small_desc(WeightFormat::int4, ActFormat::none, Activation::silu), Options{});
  const Experts second(std::move(first));
  EXPECT_EQ(second.desc().num_experts, 7);
  EXPECT_THAT(error_of([&] { first.workspace_bytes(4); }), HasSubstr("Experts: this object was moved from"));
  EXPECT_THAT(error_of([&] { (void)first.desc(); }), HasSubstr("moved from"));
}

TEST(InputLimits, TuningIntegersPastInt64AreRefused) {
  const std::string text = R"({"entries": [{"min_m": 0, "max_m": 18446744073709551615, "block_m": 8,
                                "gemm1_tile": "8x128/1x4x1/2/r", "gemm2_tile": "8x128/1x4x1/2/r"}]})";
  EXPECT_THAT(error_of([&] { TuningTable::from_json(text); }),
              HasSubstr("entries[0].max_m = 18446744073709551615 is not a 64-bit signed integer"));
}

// Found by fuzzing (session 41): each a clear error where there was a stack overflow, an internal error, a signed
// overflow that let a tile through, or a terabyte allocation.
TEST(InputLimits, FuzzedFilesAndTilesAreRefusedByName) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THAT(error_of([&] {
                io::parse_preset(R"({"name": "x", "num_experts": )" + deep +
                                     R"(, "top_k": 2, "hidden_size": 128, "intermediate_size": 64, "activation": "silu"})",
                                 "deep.json");
              }),
              HasSubstr("field 'num_experts' = an array of 1 items is not a 64-bit signed integer"));
  EXPECT_THAT(error_of([&] {
                TuningTable::from_json(R"({"entries": [{"min_m": )" + deep +
                                       R"(, "max_m": 8, "block_m": 8, "gemm1_tile": "a", "gemm2_tile": "b"}]})");
              }),
              HasSubstr("min_m = an array of 1 items"));
  EXPECT_THAT(error_of([] {
                TuningTable::from_json(R"({"entries": [{"min_m": 0, "max_m": 1e400, "block_m": 8, "gemm1_tile": "a",
                                           "gemm2_tile": "b"}]})");
              }),
              HasSubstr("tuning table: not JSON"));
  // A repeated key is an error in every file moeq reads (nlohmann would keep one of the values silently).
  EXPECT_THAT(error_of([] {
                TuningTable::from_json(R"({"entries": [{"min_m": 0, "max_m": 8, "max_m": 16, "block_m": 8,
                                           "gemm1_tile": "a", "gemm2_tile": "b"}]})");
              }),
              HasSubstr("tuning table: field 'max_m' appears twice in one object"));
  EXPECT_THAT(error_of([] {
                io::parse_preset(R"({"name": "x", "num_experts": 4, "top_k": 2, "top_k": 3, "hidden_size": 128,
                                     "intermediate_size": 64, "activation": "silu"})",
                                 "twice.json");
              }),
              HasSubstr("twice.json: field 'top_k' appears twice in one object"));

  WeightDesc w;
  w.format = WeightFormat::mxfp4;
  w.num_experts = 8;
  w.n = 1536;
  w.k = 2048;
  for (const char* text : {"8x128/2147483647x1x1/4", "8x128/1x2147483647x1/4", "8x1073741824/1x1x1/4"})
    EXPECT_FALSE(cuda::gemm_tile_reasons(cuda::parse_gemm_tile(text), w).empty()) << text;

  ExpertsDesc huge = test::small_desc(WeightFormat::int4, ActFormat::none, Activation::silu);
  huge.num_experts = 1;
  huge.top_k = 1;
  huge.hidden_size = 1 << 20;
  huge.intermediate_size = 1 << 20;
  io::GenerateOptions g;
  g.num_tokens = 3;
  EXPECT_THAT(error_of([&] { io::generate_problem(huge, g); }), HasSubstr("GiB of host memory (w13 "));
}

}  // namespace
}  // namespace moeq
