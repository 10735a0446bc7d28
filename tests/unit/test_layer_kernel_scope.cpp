// The warm lists narrowed to the weights a caller has (cuda::LayerKernelScope: Experts::warm_up(w13, w2), `moeq compile
// --codes / --mx-word / --scales`, --arch sm_90a): they keep every kernel apply launches for such weights, drop only
// GEMM kernels, and drop many.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "cuda/gemm_codegen.hpp"
#include "cuda/gemm_planner.hpp"
#include "cuda/layer_kernels.hpp"
#include "cuda/moe_gemm.hpp"
#include "io/presets.hpp"

namespace moeq {
namespace {

using cuda::GemmWeightsKind;
using cuda::LayerKernelScope;

ExpertsDesc layer(const char* preset, const char* scheme) {
  ExpertsDesc d = io::find_preset(preset).desc;
  io::apply_scheme(scheme, d);
  return d;
}

std::set<std::string> keys(const std::vector<jit::KernelSpec>& specs) {
  std::set<std::string> out;
  for (const jit::KernelSpec& spec : specs) out.insert(spec.entry + "\n" + spec.source);
  return out;
}

std::string key(const jit::KernelSpec& spec) { return spec.entry + "\n" + spec.source; }

bool is_gemm(const std::string& k) { return k.rfind("moeq_moe_gemm", 0) == 0; }

struct Layer {
  const char* preset;
  const char* scheme;
};
const Layer kLayers[] = {{"qwen3-30b-a3b", "mxfp4"},     {"qwen3-30b-a3b", "int4-g128"},
                         {"qwen3-30b-a3b", "mxfp4:fp8-token"}, {"gpt-oss-120b", "mxfp4"},
                         {"deepseek-v3", "fp8-block"},   {"mixtral-8x7b", "nvfp4"}};

TEST(LayerKernelScope, KeepsEveryKernelApplyLaunchesForSuchWeightsAndDropsOnlyGemms) {
  for (const Layer& l : kLayers) {
    const ExpertsDesc d = layer(l.preset, l.scheme);
    const std::set<std::string> all = keys(cuda::layer_kernel_specs(d));
    // The count baseline leaves the stand-ins out too, so that only the weights' narrowing is measured.
    size_t all_gemms = 0;
    for (const std::string& k : keys(cuda::layer_kernel_specs(d, {}, LayerKernelScope{{}, {}, true})))
      all_gemms += is_gemm(k);
    const bool mx = d.w13().scale_dtype == DType::ue8m0;
    for (bool prepared : {false, true})
      for (bool word : mx ? std::vector<bool>{false, true} : std::vector<bool>{false})
        for (bool unaligned : {false, true}) {
          const GemmWeightsKind kind{prepared, word, unaligned};
          const std::string what = std::string(l.preset) + " " + l.scheme + (prepared ? " prepared" : " canonical") +
                                   (word ? " mx word" : "") + (unaligned ? " unaligned" : "");
          const std::set<std::string> scoped =
              keys(cuda::layer_kernel_specs(d, {}, LayerKernelScope{kind, kind, true}));
          size_t scoped_gemms = 0;
          for (const std::string& k : scoped) {
            scoped_gemms += is_gemm(k);
            EXPECT_TRUE(all.count(k)) << what << ": a kernel the full list lacks";
          }
          for (const std::string& k : all)
            if (!is_gemm(k)) EXPECT_TRUE(scoped.count(k)) << what << ": dropped a kernel that is not a GEMM";
          // One code layout of two, and for MX formats one word of two.
          EXPECT_LT((mx ? 2 : 1) * scoped_gemms, all_gemms) << what;
          if (getenv("SCOPE_COUNTS")) printf("%s: %zu of %zu\n", what.c_str(), scoped_gemms, all_gemms);
          // What apply launches for such weights on an sm_90 device: each planner tile's plan for this code layout,
          // over these scales, with this word, and the segment builder's module (canonical codes, no word, aligned
          // scales: build_segments).
          for (const cuda::GemmTile& tile : cuda::planner_tiles(d.weight_format))
            for (bool gemm1 : {true, false}) {
              const WeightDesc w = gemm1 ? d.w13() : d.w2();
              for (int sm : {0, 90}) {
                const cuda::GemmPlan plan = cuda::gemm_plan(d, w, tile, sm, prepared);
                const cuda::GemmTile runs = unaligned ? cuda::unaligned_scales_tile(plan.tile) : plan.tile;
                EXPECT_TRUE(scoped.count(key(cuda::moe_gemm_kernel_spec(w, d.act_dtype, runs, prepared, plan.input,
                                                                        word))))
                    << what << ": " << runs.to_string() << (gemm1 ? " GEMM1" : " GEMM2");
                EXPECT_TRUE(scoped.count(
                    key(cuda::moe_gemm_segments_kernel_spec(w, d.act_dtype, plan.tile, false, plan.input))))
                    << what << ": segments of " << plan.tile.to_string();
              }
            }
        }
  }
}

// Scales off a 4-byte boundary run a 512-channel tile 256 wide (cuda::tile_for_scales): the scope keeps the one its
// weights run. No planner tile is 512 wide, so the tile comes as an extra one (`moeq compile --tile`).
TEST(LayerKernelScope, ScaleAlignmentPicksTheTileTheWeightsRun) {
  const ExpertsDesc d = layer("gpt-oss-120b", "mxfp4");
  const cuda::GemmTile wide = cuda::parse_gemm_tile("48x512/1x8x1/4/p"), narrow = cuda::unaligned_scales_tile(wide);
  ASSERT_NE(wide.to_string(), narrow.to_string());
  for (bool unaligned : {false, true}) {
    const GemmWeightsKind kind{true, true, unaligned};
    const std::set<std::string> scoped = keys(cuda::layer_kernel_specs(d, {wide}, LayerKernelScope{kind, kind, true}));
    for (bool gemm1 : {true, false}) {
      const WeightDesc w = gemm1 ? d.w13() : d.w2();
      const cuda::GemmPlan plan = cuda::gemm_plan(d, w, wide, 90, true);
      const auto spec = [&](const cuda::GemmTile& t) {
        return key(cuda::moe_gemm_kernel_spec(w, d.act_dtype, t, true, plan.input, true));
      };
      EXPECT_TRUE(scoped.count(spec(unaligned ? narrow : wide))) << (gemm1 ? "GEMM1" : "GEMM2") << unaligned;
      EXPECT_FALSE(scoped.count(spec(unaligned ? wide : narrow))) << (gemm1 ? "GEMM1" : "GEMM2") << unaligned;
    }
  }
}

TEST(LayerKernelScope, AWgmmaDeviceNeedsNoMmaSyncStandIns) {
  const ExpertsDesc d = layer("qwen3-30b-a3b", "mxfp4");
  const std::set<std::string> all = keys(cuda::layer_kernel_specs(d));
  LayerKernelScope scope;
  scope.wgmma_device_only = true;
  const std::set<std::string> wgmma_only = keys(cuda::layer_kernel_specs(d, {}, scope));
  EXPECT_LT(wgmma_only.size(), all.size());
  std::set<std::string> planner;
  for (const cuda::GemmTile& tile : cuda::planner_tiles(d.weight_format)) planner.insert(tile.to_string());
  for (const cuda::GemmTile& tile : cuda::planner_tiles(d.weight_format)) {
    if (!tile.wgmma) continue;
    const cuda::GemmTile stand_in = cuda::mma_sync_tile_of(tile);
    if (planner.count(stand_in.to_string())) continue;
    EXPECT_TRUE(all.count(key(cuda::moe_gemm_kernel_spec(d.w13(), d.act_dtype, stand_in, true))))
        << stand_in.to_string();
    EXPECT_FALSE(wgmma_only.count(key(cuda::moe_gemm_kernel_spec(d.w13(), d.act_dtype, stand_in, true))))
        << stand_in.to_string();
  }
  for (const std::string& k : wgmma_only) EXPECT_TRUE(all.count(k));
}

TEST(LayerKernelScope, WeightsKindIsWhatApplyReadsOfTheView) {
  alignas(16) static const unsigned char scales[8] = {};
  WeightView v;
  v.code_layout = CodeLayout::prepared;
  v.scales = scales;
  v.mx_scales_at_most_two = true;
  GemmWeightsKind kind = GemmWeightsKind::of(v);
  EXPECT_EQ(kind.prepared_codes, true);
  EXPECT_EQ(kind.mx_scales_at_most_two, true);
  EXPECT_EQ(kind.unaligned_scales, false);
  v.code_layout = CodeLayout::canonical;
  v.scales = scales + 1;  // ue8m0 scales may start on any byte (cuda::tile_for_scales)
  v.mx_scales_at_most_two = false;
  kind = GemmWeightsKind::of(v);
  EXPECT_EQ(kind.prepared_codes, false);
  EXPECT_EQ(kind.mx_scales_at_most_two, false);
  EXPECT_EQ(kind.unaligned_scales, true);
  const cuda::GemmTile wide = cuda::parse_gemm_tile("48x512/1x8x1/6/p/t");
  EXPECT_EQ(cuda::tile_for_scales(wide, reinterpret_cast<uintptr_t>(v.scales)).to_string(),
            cuda::unaligned_scales_tile(wide).to_string());
  EXPECT_EQ(GemmWeightsKind::admitted(std::nullopt), (std::vector<bool>{false, true}));
  EXPECT_EQ(GemmWeightsKind::admitted(true), (std::vector<bool>{true}));
}

}  // namespace
}  // namespace moeq
