// The host's plan of a step for a CUDA device that need not be present (src/api/step_plan.hpp,
// src/cuda/step_plan.hpp): what Experts::apply launches, Experts::explain and `moeq info -M` print.
#include <gtest/gtest.h>

#include <string>

#include "api/step_plan.hpp"
#include "cuda/gemm_tile.hpp"
#include "io/presets.hpp"
#include "moeq/experts.hpp"
#include "moeq/tuning.hpp"
#include "plan/workspace.hpp"

namespace moeq {
namespace {

cuda::DeviceInfo device(int sm, int num_sms) {
  cuda::DeviceInfo d;
  d.cc_major = sm / 10;
  d.cc_minor = sm % 10;
  d.num_sms = num_sms;
  return d;
}

ExpertsDesc layer(const char* preset, const char* scheme) {
  ExpertsDesc d = io::find_preset(preset).desc;
  io::apply_scheme(scheme, d);
  return d;
}

// One entry over the routed rows (1024, 3072]: Qwen3-30B-A3B (top_k 8) M = 129-384.
TuningTable two_cta_table() {
  TuningTable t;
  t.entries = {{1024, 3072, 24, "24x256/1x8x1/4/o2/p/t", "24x256/1x8x1/4/o2/p/t"}};
  return t;
}

cuda::StepGemmPlans plans_at(const ExpertsDesc& d, const Options& o, const cuda::DeviceInfo& gpu, int64_t M,
                             bool prepared = true) {
  const TuningTable tuning = api::effective_tuning(d, o, &gpu);  // shape.tuned points into it
  const plan::PlanShape shape = api::step_shape(d, o, tuning, &gpu, M, 0, false);
  return cuda::plan_step_gemms(d, shape, prepared, prepared, gpu);
}

// A table's ranges count routed rows (M x top_k), not tokens: the entry above serves M = 129-384 of a top-8
// layer and not M = 128 (1024 rows) or 385.
TEST(StepPlan, TableRangesCountRoutedRows) {
  const ExpertsDesc d = layer("qwen3-30b-a3b", "mxfp4");
  Options o;
  o.tuning = two_cta_table();
  const cuda::DeviceInfo h200 = device(90, 132);
  for (const auto& [M, tuned] : {std::pair<int64_t, bool>{128, false}, {129, true}, {256, true}, {384, true},
                                 {385, false}, {2048, false}}) {
    const plan::PlanShape shape = api::step_shape(d, o, o.tuning, &h200, M, 0, false);
    EXPECT_EQ(shape.tuned != nullptr, tuned) << "M = " << M;
    const cuda::StepGemmPlans plans = cuda::plan_step_gemms(d, shape, true, true, h200);
    EXPECT_EQ(plans.gemm1.tile.to_string() == "24x256/1x8x1/4/o2/p/t", tuned) << "M = " << M;
    EXPECT_EQ(plans.gemm2.tile.to_string() == "24x256/1x8x1/4/o2/p/t", tuned) << "M = " << M;
    if (tuned) EXPECT_EQ(shape.block_m, 24);
  }
}

// Off Hopper a table's warp-specialized wgmma tile runs as its mma.sync stand-in: the 24-row `/p/t` tile as the
// direct tile of its block; the block size stays the table's.
TEST(StepPlan, WgmmaTilesRunTheirStandInsOffHopper) {
  const ExpertsDesc d = layer("qwen3-30b-a3b", "mxfp4");
  Options o;
  o.tuning = two_cta_table();
  for (const int sm : {80, 89}) {
    const cuda::StepGemmPlans plans = plans_at(d, o, device(sm, 108), 256);
    for (const cuda::GemmPlan* p : {&plans.gemm1, &plans.gemm2}) {
      EXPECT_TRUE(p->tile.direct) << "sm_" << sm << ": " << p->tile.to_string();
      EXPECT_FALSE(p->tile.wgmma || p->tile.producer || p->tile.mma_order_tokens) << p->tile.to_string();
      EXPECT_EQ(p->tile.block_m, 24);
      EXPECT_EQ(p->tile.split_k, 1);
    }
  }
}

// The masked layout's 16-bit GEMM1 reads the caller's [E, T, K] slabs as they are: a `/t` tile runs as its
// permuting twin there, and GEMM2 (fed by the activation kernel) keeps the order.
TEST(StepPlan, MaskedGemm1TakesThePermutingTwin) {
  const ExpertsDesc d = layer("qwen3-30b-a3b", "mxfp4");
  Options o;
  o.layout = Layout::masked;
  TuningTable t;
  t.entries = {{0, 1 << 20, 144, "144x256/1x8x1/4/p/t", "144x256/1x8x1/4/p/t"}};
  o.tuning = t;
  const cuda::DeviceInfo h200 = device(90, 132);
  const plan::PlanShape shape = api::step_shape(d, o, t, &h200, 0, 256, true);
  ASSERT_EQ(shape.layout, Layout::masked);
  ASSERT_NE(shape.tuned, nullptr);
  const cuda::StepGemmPlans plans = cuda::plan_step_gemms(d, shape, true, true, h200);
  EXPECT_FALSE(plans.gemm1.tile.mma_order_tokens) << plans.gemm1.tile.to_string();
  EXPECT_TRUE(plans.gemm1.tile.producer && plans.gemm1.tile.wgmma) << plans.gemm1.tile.to_string();
  EXPECT_TRUE(plans.gemm2.tile.mma_order_tokens) << plans.gemm2.tile.to_string();
  // Indexed, the same table keeps `/t` on both.
  o.layout = Layout::indexed;
  const cuda::StepGemmPlans indexed = plans_at(d, o, h200, 1024);
  EXPECT_TRUE(indexed.gemm1.tile.mma_order_tokens && indexed.gemm2.tile.mma_order_tokens);
}

// The few-CTA rule reads the device's SM count: Qwen3 GEMM1 at M = 1 (8 rows, 24 channel blocks of 64: 384 CTAs)
// takes the 32-channel tile of 4 K groups on 132 SMs (fewer than 2.5 CTAs an SM) and not on 64.
TEST(StepPlan, TheSmCountChoosesTheFewCtaTile) {
  const ExpertsDesc d = layer("qwen3-30b-a3b", "int4-g128");
  Options o;
  o.shipped_tuning = false;
  const cuda::StepGemmPlans many = plans_at(d, o, device(90, 132), 1), few = plans_at(d, o, device(90, 64), 1);
  EXPECT_EQ(many.gemm1.tile.block_n, 32) << many.gemm1.tile.to_string();
  EXPECT_EQ(many.gemm1.tile.warps_k, 4) << many.gemm1.tile.to_string();
  EXPECT_GT(few.gemm1.tile.block_n, 32) << few.gemm1.tile.to_string();
}

// FP8 per-token activations: the e4m3 wgmma body only for canonical MXFP4 codes, with Options::fp8_wgmma, on
// sm_90; prepared codes and the other devices take the codes' 16-bit values with row scales.
TEST(StepPlan, E4m3WgmmaOnlyForCanonicalCodesWhenAsked) {
  const ExpertsDesc d = layer("qwen3-30b-a3b", "mxfp4:fp8-token");
  Options o;
  o.block_m = 128;  // a 128-row warp-specialized tile, which the e4m3 body runs 128 channels wide
  o.fp8_wgmma = true;
  const cuda::DeviceInfo h200 = device(90, 132);
  const cuda::StepGemmPlans canonical = plans_at(d, o, h200, 4096, false), prepared = plans_at(d, o, h200, 4096);
  EXPECT_EQ(canonical.gemm1.input, cuda::GemmInput::row_scaled_e4m3) << canonical.gemm1.tile.to_string();
  EXPECT_EQ(canonical.gemm1.tile.block_n, 128);
  EXPECT_EQ(prepared.gemm1.input, cuda::GemmInput::row_scaled_values);
  EXPECT_EQ(plans_at(d, o, device(89, 132), 4096, false).gemm1.input, cuda::GemmInput::row_scaled_values);
  o.fp8_wgmma = false;
  EXPECT_EQ(plans_at(d, o, h200, 4096, false).gemm1.input, cuda::GemmInput::row_scaled_values);
  o.fp8_tensor_cores = false;
  o.fp8_wgmma = true;
  EXPECT_EQ(plans_at(d, o, h200, 4096, false).gemm1.input, cuda::GemmInput::row_scaled_values);
}

// explain's GEMM lines: with a device, each GEMM's tile and what it reads, canonical codes where they differ;
// the CPU backend has none.
TEST(StepPlan, ExplainNamesEachGemmOnADevice) {
  const ExpertsDesc d = layer("qwen3-30b-a3b", "mxfp4:fp8-token");
  Options o;
  o.tuning = two_cta_table();
  const cuda::DeviceInfo h200 = device(90, 132);
  const std::string text = api::explain_step(d, o, o.tuning, Backend::cuda, &h200, 256);
  EXPECT_NE(text.find("for M = 256 (valid_shape_m 2048)"), std::string::npos) << text;
  EXPECT_NE(text.find("on sm_90 (132 SMs), GEMMs from the table:"), std::string::npos) << text;
  EXPECT_NE(text.find("  gemm1 24x256/1x8x1/4/o2/p/t bf16 values of fp8-token, row scales\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("  gemm2 24x256/1x8x1/4/o2/p/t bf16 values of fp8-token, row scales\n"), std::string::npos)
      << text;
  o.fp8_wgmma = true;
  o.tuning.entries = {{0, 1 << 20, 128, "128x256/1x8x1/4/p", "128x256/1x8x1/4/p"}};
  const std::string e4m3 = api::explain_step(d, o, o.tuning, Backend::cuda, &h200, 4096);
  EXPECT_NE(e4m3.find("(canonical codes: 128x128/1x8x1/4/p e4m3 codes, row scales)"), std::string::npos) << e4m3;
  Options cpu;
  cpu.backend = Backend::cpu;
  const std::string on_cpu = Experts(d, cpu).explain(256);
  EXPECT_EQ(on_cpu.find("gemm1 "), std::string::npos) << on_cpu;
  EXPECT_NE(on_cpu.find("backend cpu, layout"), std::string::npos) << on_cpu;
}

}  // namespace
}  // namespace moeq
