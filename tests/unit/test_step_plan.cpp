// The host's plan of a step for a CUDA device that need not be present (src/api/step_plan.hpp,
// src/cuda/step_plan.hpp): what Experts::apply launches, Experts::explain and `moeq info -M` print.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "api/step_plan.hpp"
#include "cuda/layer_kernels.hpp"
#include "cuda/gemm_tile.hpp"
#include "io/presets.hpp"
#include "moeq/experts.hpp"
#include "moeq/tuning.hpp"
#include "plan/legality.hpp"
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

// USERS.md 7: no planned kernel may fail on a user's GPU. Every GEMM tile the plan runs (the shipped table's or the
// planner's, as that device runs it, both code layouts, with and without the e4m3 wgmma body, standard and masked
// input) is legal for its weights, fits the device's shared memory and uses only what the architecture has, for
// every preset and odd layer, the main schemes, M (or T) from 1 to 16384, on an A100 (sm_80), an L40S (sm_89, 99 KB
// a block), an H100 PCIe (114 SMs) and an H200.
TEST(StepPlan, EveryPlannedTileRunsOnEachDevice) {
  struct Gpu {
    const char* name;
    int sm, num_sms, max_smem;
  };
  const Gpu gpus[] = {{"A100", 80, 108, 166912}, {"L40S", 89, 142, 101376}, {"H100 PCIe", 90, 114, 232448},
                      {"H200", 90, 132, 232448}};
  std::vector<ExpertsDesc> layers;
  for (const auto& p : io::presets()) layers.push_back(p.desc);
  // The odd sizes of bench/odd-shapes: hidden 704 / 2880 / 2688, intermediate 352 / 704 / 1856, E = 6 / 20 / 12.
  for (const auto& [E, K, I] : {std::tuple{6, 704, 352}, std::tuple{20, 2880, 704}, std::tuple{12, 2688, 1856}}) {
    ExpertsDesc d = io::find_preset("qwen3-30b-a3b").desc;
    d.num_experts = E;
    d.hidden_size = K;
    d.intermediate_size = I;
    d.top_k = 4;
    layers.push_back(d);
  }
  int checked = 0;
  for (ExpertsDesc base : layers) {
    for (const char* scheme : {"int4-g128", "int4-g64-zp:fp8-token", "mxfp4", "mxfp4:fp8-token", "mxfp4:mxfp4", "nvfp4",
                               "mxfp8:mxfp8", "fp8-channel:fp8-token", "fp8-block", "int8-ch"}) {
      ExpertsDesc d = base;
      io::apply_scheme(scheme, d);
      for (const bool fp8_wgmma : {false, true}) {
        Options o;
        o.fp8_wgmma = fp8_wgmma;
        if (!can_implement(d, o).empty() || !plan::cuda_kernel_reasons(d, o).empty()) continue;
        for (const Gpu& gpu : gpus) {
          cuda::DeviceInfo info = device(gpu.sm, gpu.num_sms);
          info.max_smem_per_block_optin = gpu.max_smem;
          const TuningTable tuning = api::effective_tuning(d, o, &info);
          // Standard input at M tokens, and masked input of T = M rows per expert.
          for (const int64_t M : {1, 3, 16, 64, 129, 256, 512, 1024, 2048, 4096, 16384}) {
            for (const bool masked : {false, true}) {
              if (masked && M > 1024) continue;  // E x T rows stay below 2^31 and the test quick
              const plan::PlanShape shape = api::step_shape(d, o, tuning, &info, masked ? 0 : M, masked ? M : 0, masked);
              for (const bool prepared : {false, true}) {
                const cuda::StepGemmPlans plans = cuda::plan_step_gemms(d, shape, prepared, prepared, info);
                for (const auto& [plan, w, gemm1] :
                     {std::tuple{plans.gemm1, d.w13(), true}, std::tuple{plans.gemm2, d.w2(), false}}) {
                  const std::string where = std::string(gpu.name) + " " + d.to_string() + (masked ? " T = " : " M = ") +
                                            std::to_string(M) + (gemm1 ? " gemm1 " : " gemm2 ") + plan.tile.to_string();
                  const auto reasons = cuda::gemm_tile_reasons(plan.tile, w);
                  EXPECT_TRUE(reasons.empty()) << where << ": " << reasons.front();
                  EXPECT_LE(cuda::gemm_smem_bytes(plan.tile, w, plan.input) + cuda::gemm_static_smem_bytes(plan.tile, plan.input),
                            gpu.max_smem)
                      << where;
                  // What the architecture has: wgmma, setmaxnreg, bulk copies and clusters from sm_90, e4m3 MMAs
                  // from sm_89.
                  if (gpu.sm < 90)
                    EXPECT_TRUE(!plan.tile.wgmma && !plan.tile.producer && plan.tile.split_k == 1) << where;
                  if (gpu.sm < 89) EXPECT_NE(plan.input, cuda::GemmInput::row_scaled_e4m3) << where;
                  // The masked layout's 16-bit GEMM1 reads the caller's slabs as they are.
                  if (masked && gemm1 && d.act_format == ActFormat::none)
                    EXPECT_FALSE(plan.tile.mma_order_tokens) << where;
                  ++checked;
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 10000);
}

// GEMM1's activation epilogue in whole steps (cuda::step_fuses_activation over the step's own plan and workspaces):
// the shipped tables' warp-specialized GEMM1s of gpt-oss-120b (interleaved SwiGLU-OAI) and Qwen3-30B-A3B ([gate | up]
// SiLU) take it at M = 640-2048 in the indexed layout, where a `/t` GEMM1 reads mma_ordered_hidden, which lies
// clear of activation_output. Not where GEMM2 reads another token order, not with quantized activations, and an
// 8-row direct GEMM1 only up to kActivationEpilogueMaxRows rows and where it keeps its CTAs an SM.
TEST(StepPlan, WarpSpecializedGemm1TakesTheActivationEpilogue) {
  const cuda::DeviceInfo h100 = device(90, 132);
  const auto never = [] {
    ADD_FAILURE() << "keeps_occupancy asked for a warp-specialized GEMM1";
    return false;
  };
  for (const char* preset : {"gpt-oss-120b", "qwen3-30b-a3b"})
    for (int64_t M : {640, 1024, 2048}) {
      SCOPED_TRACE(std::string(preset) + " M = " + std::to_string(M));
      const ExpertsDesc d = layer(preset, "mxfp4");
      const Options o;
      const TuningTable tuning = api::effective_tuning(d, o, &h100);
      const plan::PlanShape shape = api::step_shape(d, o, tuning, &h100, M, 0, false);
      ASSERT_EQ(shape.layout, Layout::indexed);
      const cuda::StepGemmPlans plans = cuda::plan_step_gemms(d, shape, true, true, h100);
      ASSERT_TRUE(plans.gemm1.tile.producer) << plans.gemm1.tile.to_string();
      const plan::WorkspacePlan ws = plan::plan_workspaces(d, shape);
      bool overlaps_a = false;  // GEMM1's A: mma_ordered_hidden (`/t`), else the caller's rows
      if (plans.gemm1.tile.mma_order_tokens) {
        const plan::BufferPlacement &a = ws.get("mma_ordered_hidden"), &act = ws.get("activation_output");
        overlaps_a = a.workspace == act.workspace && a.offset_bytes < act.offset_bytes + act.bytes &&
                     act.offset_bytes < a.offset_bytes + a.bytes;
      }
      EXPECT_FALSE(overlaps_a);
      const int64_t rows = M * d.top_k;
      EXPECT_TRUE(cuda::step_fuses_activation(d, plans.gemm1.tile, plans.gemm1.input, plans.gemm2.tile, rows,
                                              overlaps_a, never));
      EXPECT_TRUE(cuda::step_fuses_activation(d, plans.gemm1.tile, plans.gemm1.input, plans.gemm2.tile, rows,
                                              overlaps_a, never, 0));  // the direct tiles' limit is not theirs
      cuda::GemmTile other_order = plans.gemm2.tile;
      other_order.mma_order_tokens = !other_order.mma_order_tokens;
      EXPECT_FALSE(cuda::step_fuses_activation(d, plans.gemm1.tile, plans.gemm1.input, other_order, rows, overlaps_a,
                                               never));
      EXPECT_FALSE(cuda::step_fuses_activation(d, plans.gemm1.tile, plans.gemm1.input, plans.gemm2.tile, rows, true,
                                               never));
      ExpertsDesc quantized = d;
      io::apply_scheme("mxfp4:fp8-token", quantized);
      EXPECT_FALSE(cuda::step_fuses_activation(quantized, plans.gemm1.tile, cuda::GemmInput::row_scaled_values,
                                               plans.gemm2.tile, rows, false, never));
    }
  const ExpertsDesc d = layer("gpt-oss-120b", "mxfp4");
  const cuda::GemmTile direct = cuda::parse_gemm_tile("8x64/1x2x2/4/r");
  constexpr int64_t kLimit = cuda::kActivationEpilogueMaxRows;
  EXPECT_GE(kLimit, 1280);  // every direct row of the shipped sm_90 tables (session 58)
  EXPECT_TRUE(cuda::step_fuses_activation(d, direct, cuda::GemmInput::values, direct, kLimit, false, [] { return true; }));
  EXPECT_FALSE(cuda::step_fuses_activation(d, direct, cuda::GemmInput::values, direct, 16, false, [] { return false; }));
  EXPECT_FALSE(
      cuda::step_fuses_activation(d, direct, cuda::GemmInput::values, direct, kLimit + 1, false, [] { return true; }));
  // MOEQ_FUSED_ACTIVATION_MAX_ROWS moves the direct tiles' limit (apply passes it); warp-specialized tiles have none.
  EXPECT_TRUE(cuda::step_fuses_activation(d, direct, cuda::GemmInput::values, direct, 512, false, [] { return true; }, 512));
  EXPECT_FALSE(cuda::step_fuses_activation(d, direct, cuda::GemmInput::values, direct, 513, false, [] { return true; }, 512));
  EXPECT_FALSE(cuda::step_fuses_activation(d, direct, cuda::GemmInput::values, direct, 1, false, [] { return true; }, 0));
}

}  // namespace
}  // namespace moeq
