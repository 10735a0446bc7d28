// GEMM tile configs on the host: parsing, legality, shared-memory sizes, the planner's picks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "cuda/layer_kernels.hpp"
#include "cuda/moe_gemm.hpp"
#include "device/moeq_dev/format/e2m1_e4m3.cuh"
#include "device/moeq_dev/format/mma_order.cuh"
#include "reference/formats.hpp"
#include "io/presets.hpp"
#include "plan/tuning.hpp"
#include "moeq/error.hpp"

namespace moeq {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

WeightDesc desc_of(WeightFormat f) {
  WeightDesc w;
  w.format = f;
  w.num_experts = 8;
  w.n = 1536;
  w.k = 2048;
  return w;
}

TEST(GemmTiles, ParseAndPrintRoundTrip) {
  const cuda::GemmTile t = cuda::parse_gemm_tile("32x128/2x4x1/6");
  EXPECT_EQ(t.block_m, 32);
  EXPECT_EQ(t.block_n, 128);
  EXPECT_EQ(t.warps_m, 2);
  EXPECT_EQ(t.warps_n, 4);
  EXPECT_EQ(t.warps_k, 1);
  EXPECT_EQ(t.stages, 6);
  EXPECT_EQ(t.threads(), 256);
  EXPECT_EQ(t.to_string(), "32x128/2x4x1/6");
  const cuda::GemmTile split = cuda::parse_gemm_tile("8x128/1x4x1/4/k2");
  EXPECT_EQ(split.split_k, 2);
  EXPECT_EQ(split.to_string(), "8x128/1x4x1/4/k2");
  EXPECT_EQ(t.split_k, 1);
  EXPECT_EQ(t.min_ctas, 0);
  const cuda::GemmTile capped = cuda::parse_gemm_tile("64x128/1x4x1/4/k2/o3");
  EXPECT_EQ(capped.split_k, 2);
  EXPECT_EQ(capped.min_ctas, 3);
  EXPECT_EQ(capped.to_string(), "64x128/1x4x1/4/k2/o3");
  EXPECT_EQ(cuda::parse_gemm_tile("8x128/1x4x1/4/o6").to_string(), "8x128/1x4x1/4/o6");
  EXPECT_TRUE(cuda::parse_gemm_tile("64x128/1x4x1/4/o2/w").wgmma);
  EXPECT_EQ(cuda::parse_gemm_tile("64x128/1x4x1/4/o2/w").to_string(), "64x128/1x4x1/4/o2/w");
  EXPECT_FALSE(t.wgmma);
  const cuda::GemmTile ws = cuda::parse_gemm_tile("128x256/1x8x1/4/p");
  EXPECT_TRUE(ws.producer && ws.wgmma);
  EXPECT_EQ(ws.threads(), 384);  // two consumer warpgroups and the producer's
  EXPECT_EQ(ws.to_string(), "128x256/1x8x1/4/p");
  EXPECT_FALSE(t.producer);
  const cuda::GemmTile copy_warp = cuda::parse_gemm_tile("8x128/1x4x1/6/p");  // mma.sync below 64 tokens
  EXPECT_TRUE(copy_warp.producer);
  EXPECT_FALSE(copy_warp.wgmma);
  EXPECT_EQ(copy_warp.threads(), 160);  // 4 compute warps and the copy warp
  EXPECT_EQ(copy_warp.to_string(), "8x128/1x4x1/6/p");
  EXPECT_FALSE(cuda::mma_sync_tile_of(copy_warp).producer);
  EXPECT_EQ(cuda::mma_sync_tile_of(copy_warp).to_string(), "8x128/1x4x1/6");
  const cuda::GemmTile direct = cuda::parse_gemm_tile("8x64/1x2x2/4/r");  // codes into registers
  EXPECT_TRUE(direct.direct);
  EXPECT_FALSE(direct.producer || direct.wgmma);
  EXPECT_EQ(direct.threads(), 128);  // no copy warp
  EXPECT_EQ(direct.to_string(), "8x64/1x2x2/4/r");
  EXPECT_EQ(cuda::parse_gemm_tile("8x128/1x4x1/2/o4/r").to_string(), "8x128/1x4x1/2/o4/r");
  EXPECT_FALSE(t.direct);
  for (const char* bad : {"16x128/1x4/4", "16x128", "16x128/1x4x1/4x", "a/b/c", "8x128/1x4x1/4/2", "8x128/1x4x1/4/k",
                          "8x128/1x4x1/4/k2/", "8x128/1x4x1/4/o2/k2", "8x128/1x4x1/4/o2/o2", "8x128/1x4x1/4/x2",
                          "64x128/1x4x1/4/w/o2", "64x128/1x4x1/4/w/w", "64x128/1x4x1/4/w2", "128x256/1x8x1/4/p/w",
                          "128x256/1x8x1/4/w/p", "128x256/1x8x1/4/p2", "8x128/1x4x1/4/p/p", "8x128/1x4x1/2/r/p",
                          "8x128/1x4x1/2/r/o2", "8x128/1x4x1/2/r2", "8x128/1x4x1/2/d", "128x256/1x8x1/4/t",
                          "128x256/1x8x1/4/p/t/s", "128x256/1x8x1/4/p/t/t", "64x128/1x4x1/4/w/t", "8x128/1x4x1/2/r/t",
                          "128x256/1x8x1/4/p/t2"}) {
    try {
      cuda::parse_gemm_tile(bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string("'") + bad + "'"));
    }
  }
}

TEST(GemmTiles, CandidatesAndPlannerTilesAreLegalForEveryFormat) {
  for (WeightFormat f : {WeightFormat::mxfp4, WeightFormat::nvfp4, WeightFormat::mxfp8, WeightFormat::fp8_channel,
                         WeightFormat::fp8_block, WeightFormat::int4, WeightFormat::int8}) {
    const WeightDesc w = desc_of(f);
    for (const auto& t : cuda::gemm_tile_candidates()) {
      const auto reasons = cuda::gemm_tile_reasons(t, w);
      if (t.block_n == 512) {  // MX weights only (WideTilesAreMxProducerTiles); MXFP8's codes fit shallow rings only
        if (f == WeightFormat::mxfp4) EXPECT_TRUE(reasons.empty()) << t.to_string();
        if (f != WeightFormat::mxfp4 && f != WeightFormat::mxfp8) EXPECT_FALSE(reasons.empty()) << t.to_string();
        continue;
      }
      // Direct rings of more than 256 bytes a lane: 4-bit codes only (16 bytes per 16-channel tile and stage, 8-bit 32).
      const bool eight_bit = dtype_bits(weight_format_code_dtype(f)) == 8;
      if (t.direct && eight_bit && t.block_n / t.warps_n / 16 * 32 * t.stages > 256) {
        EXPECT_FALSE(reasons.empty()) << t.to_string();
        continue;
      }
      EXPECT_TRUE(reasons.empty()) << t.to_string();
    }
    for (int bm : {8, 16, 24, 32, 48, 64, 80, 96, 128, 144})
      for (int64_t slots : {int64_t{1}, cuda::kFewRoutedRows, cuda::kFewRoutedRows + 1, int64_t{1} << 20, cuda::kTileForAnyRows})
        for (bool few_ctas : {false, true})
          for (int pick = 0; pick < 4; ++pick) {
            const cuda::GemmTile t = cuda::gemm_tile_for(f, bm, slots, few_ctas, (pick & 1) != 0, (pick & 2) != 0);
            EXPECT_EQ(t.block_m, bm);
            EXPECT_TRUE(cuda::gemm_tile_reasons(t, w).empty()) << t.to_string();
          }
  }
}

TEST(GemmTiles, WideTilesAreMxProducerTiles) {
  // 512 channels: warp-specialized wgmma tiles of 48 or 64 tokens whose copy warps stage the MX scales
  // (a byte per 32 k, two per 64-wide K tile), so MXFP4 / MXFP8 weights with K % 64 == 0 only.
  auto first_reason = [](const char* tile, WeightDesc w) {
    const auto reasons = cuda::gemm_tile_reasons(cuda::parse_gemm_tile(tile), w);
    return reasons.empty() ? std::string() : reasons.front();
  };
  WeightDesc w = desc_of(WeightFormat::mxfp4);
  w.k = 2880;  // gpt-oss-120b: 90 scales a row, so odd rows' pairs sit at byte 2 of their words
  EXPECT_EQ(first_reason("48x512/1x8x1/6/p/s", w), "");
  EXPECT_EQ(first_reason("64x512/1x8x1/4/p/s", w), "");
  EXPECT_EQ(first_reason("48x512/1x8x1/3/p", w), "");
  EXPECT_THAT(first_reason("80x512/1x8x1/4/p/s", w), HasSubstr("up to 64 tokens"));
  EXPECT_THAT(first_reason("8x512/1x8x1/4", w), HasSubstr("512 channels"));
  EXPECT_THAT(first_reason("64x512/1x4x1/4/w", w), HasSubstr("512 channels"));
  w.k = 2848;
  EXPECT_THAT(first_reason("48x512/1x8x1/6/p/s", w), HasSubstr("K = 2848"));
  EXPECT_THAT(first_reason("48x512/1x8x1/6/p/s", desc_of(WeightFormat::int4)), HasSubstr("not int4"));
  EXPECT_THAT(first_reason("48x512/1x8x1/6/p/s", desc_of(WeightFormat::nvfp4)), HasSubstr("not nvfp4"));
  EXPECT_EQ(first_reason("48x512/1x8x1/3/p", desc_of(WeightFormat::mxfp8)), "");
  EXPECT_THAT(first_reason("48x512/1x8x1/6/p/s", desc_of(WeightFormat::mxfp8)), HasSubstr("227 KB"));
}

// Tokens in the MMA's K order (`/t`): warp-specialized wgmma tiles, K in whole 64-k tiles; no permuted
// token tiles in shared memory, 1 KB to align the ring; the twin without `/t` comes along wherever the
// kernels are listed or loaded.
TEST(GemmTiles, MmaOrderTilesAreProducerTilesOfWholeKTiles) {
  const cuda::GemmTile ordered = cuda::parse_gemm_tile("144x256/1x8x1/8/p/t");
  EXPECT_TRUE(ordered.mma_order_tokens && ordered.producer && !ordered.persistent);
  EXPECT_EQ(ordered.to_string(), "144x256/1x8x1/8/p/t");
  const cuda::GemmTile persistent = cuda::parse_gemm_tile("80x256/1x8x1/6/p/s/t");
  EXPECT_TRUE(persistent.mma_order_tokens && persistent.persistent);
  EXPECT_EQ(persistent.to_string(), "80x256/1x8x1/6/p/s/t");
  EXPECT_EQ(cuda::permuting_tile(persistent, desc_of(WeightFormat::mxfp4)).to_string(), "80x256/1x8x1/6/p/s");
  // With 8-bit codes the permuted token tiles leave room for 5 stages.
  EXPECT_EQ(cuda::permuting_tile(persistent, desc_of(WeightFormat::fp8_block)).to_string(), "80x256/1x8x1/5/p/s");
  EXPECT_FALSE(cuda::mma_sync_tile_of(ordered).mma_order_tokens);
  EXPECT_FALSE(cuda::parse_gemm_tile("128x256/1x8x1/4/p").mma_order_tokens);

  const WeightDesc w = desc_of(WeightFormat::int4);
  EXPECT_TRUE(cuda::gemm_tile_reasons(ordered, w).empty());
  // 8 stages fit once the three permuted tiles are gone: ring = stages x (tokens + codes) + 1 KB.
  cuda::GemmTile twin = ordered;
  twin.mma_order_tokens = false;
  EXPECT_FALSE(cuda::gemm_tile_reasons(twin, w).empty());
  const cuda::GemmTile permuting = cuda::permuting_tile(ordered, w);
  EXPECT_TRUE(cuda::gemm_tile_reasons(permuting, w).empty());
  twin.stages = permuting.stages + 1;
  EXPECT_FALSE(cuda::gemm_tile_reasons(twin, w).empty()) << permuting.to_string() << " is not the deepest that fits";
  EXPECT_EQ(cuda::gemm_smem_bytes(ordered, w), 8 * (144 * 128 + 256 * 32) + 1024);
  WeightDesc odd_k = w;
  odd_k.k = 2016;  // 31.5 K tiles
  EXPECT_THAT(cuda::gemm_tile_reasons(ordered, odd_k).front(), HasSubstr("K = 2016"));

  // The order moves 4-byte pairs within each 64-k tile: a permutation, pairs kept, tile by tile.
  std::set<long long> seen;
  for (long long k = 0; k < 192; ++k) {
    const long long to = moeq_dev::mma_order_position(k);
    EXPECT_EQ(to / 64, k / 64) << k;
    EXPECT_EQ(to % 2, k % 2) << k;
    EXPECT_TRUE(seen.insert(to).second) << k;
  }
  // Step s's fragment pair j of lane t (logical k 16 s + 8 j + 2 t) holds physical k 16 t + 4 s + 2 j
  // (kernels/moe_gemm_sync.cuh's K order): e.g. k = 16 + 4 = 20 (t 1, s 1, j 0) sits at 16 + 2 = 18.
  EXPECT_EQ(moeq_dev::mma_order_position(20), 18);
  EXPECT_EQ(moeq_dev::mma_order_position(64 + 6), 64 + 8 + 16 + 0);
  // e4m3 codes: the same 4-byte units moved the same way over 128-k tiles (byte b of the e4m3 row where
  // byte b of the 16-bit row goes), so MMA j (k32) of lane t reads its physical k 32 t + 8 j + 4 h + [0, 4)
  // at bytes 32 j + 16 h + 4 t + [0, 4) of the tile's row.
  std::set<long long> seen_e4m3;
  for (long long k = 0; k < 384; ++k) {
    const long long to = moeq_dev::e4m3_mma_order_position(k);
    EXPECT_EQ(to / 128, k / 128) << k;
    EXPECT_EQ(to % 4, k % 4) << k;
    EXPECT_TRUE(seen_e4m3.insert(to).second) << k;
    EXPECT_EQ(to, 2 * moeq_dev::mma_order_position(k / 2) + k % 2) << k;
  }
  EXPECT_EQ(moeq_dev::e4m3_mma_order_position(32 * 1 + 8 * 2 + 4 * 1 + 3), 32 * 2 + 16 * 1 + 4 * 1 + 3);
  // store_e4m3x8_in_mma_order relies on it: the two 4-code units of an 8-code chunk land 16 bytes apart.
  for (long long e = 0; e < 384; e += 8)
    EXPECT_EQ(moeq_dev::e4m3_mma_order_position(e + 4), moeq_dev::e4m3_mma_order_position(e) + 16) << e;
  // store_pairs_in_mma_order relies on it: the 4 pairs of an 8-element chunk land 8 elements apart.
  for (long long e = 0; e < 192; e += 8)
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(moeq_dev::mma_order_position(e + 2 * i), moeq_dev::mma_order_position(e) + 8 * i) << e << " pair " << i;

  // A table entry's `/t` tile brings its twin, both with their segment builders, and the ordering kernel.
  ExpertsDesc d = io::find_preset("qwen3-30b-a3b").desc;
  io::apply_scheme("int4-g128", d);
  TuningTable t;
  t.entries = {{0, plan::kTuningLastMaxM, 144, "144x256/1x8x1/8/p/t", "144x256/1x8x1/4/p/s/t"}};
  std::set<std::string> sources;
  for (const jit::KernelSpec& spec : cuda::tuned_kernel_specs(d, t)) sources.insert(spec.entry + "\n" + spec.source);
  const cuda::GemmTile table_tile = cuda::parse_gemm_tile("144x256/1x8x1/4/p/s/t");
  // The twin of the persistent 144-row tile holds 3 stages beside its permuted tiles and out tile.
  EXPECT_EQ(cuda::permuting_tile(table_tile, d.w2()).to_string(), "144x256/1x8x1/3/p/s");
  for (const cuda::GemmTile& tile : {table_tile, cuda::permuting_tile(table_tile, d.w2())})
    for (bool segments : {false, true}) {
      const std::string text = tile.to_string();
      const jit::KernelSpec spec =
          // The builder's module is the canonical one whatever the weights (build_segments).
          segments ? cuda::moe_gemm_segments_kernel_spec(d.w2(), d.act_dtype, tile, false, cuda::GemmInput::values)
                   : cuda::moe_gemm_kernel_spec(d.w2(), d.act_dtype, tile, true, cuda::GemmInput::values);
      EXPECT_TRUE(sources.count(spec.entry + "\n" + spec.source)) << text << (segments ? " segments" : "");
    }
  bool ordering_kernel = false;
  for (const jit::KernelSpec& spec : cuda::layer_kernel_specs(d)) ordering_kernel |= spec.entry == "moeq_order_rows_for_mma";
  EXPECT_TRUE(ordering_kernel);
  // Quantized activations keep `/t` on their 16-bit values and on e4m3 codes (the quantizers write both in the
  // order); K off a multiple of 64 runs the twin.
  EXPECT_TRUE(cuda::gemm_plan(d, d.w13(), ordered, 90, true).tile.mma_order_tokens);
  for (const char* scheme : {"int4-g128:mxfp8", "int4-g128:fp8-token", "mxfp4:mxfp4"}) {
    ExpertsDesc q = io::find_preset("qwen3-30b-a3b").desc;
    io::apply_scheme(scheme, q);
    const cuda::GemmPlan plan = cuda::gemm_plan(q, q.w13(), ordered, 90, true);
    EXPECT_TRUE(plan.tile.mma_order_tokens) << scheme;
    EXPECT_NE(plan.input, cuda::GemmInput::row_scaled_e4m3) << scheme;
  }
  ExpertsDesc e4m3 = io::find_preset("qwen3-30b-a3b").desc;
  io::apply_scheme("mxfp4:fp8-token", e4m3);
  const cuda::GemmTile narrow = cuda::parse_gemm_tile("128x128/1x8x1/4/p/t");
  const cuda::GemmPlan e4m3_plan = cuda::gemm_plan(e4m3, e4m3.w13(), narrow, 90, false, true);
  EXPECT_EQ(e4m3_plan.input, cuda::GemmInput::row_scaled_e4m3);
  EXPECT_TRUE(e4m3_plan.tile.mma_order_tokens);
  EXPECT_EQ(e4m3_plan.tile.to_string(), "128x128/1x8x1/4/p/t");
  // A planned persistent 256-channel `/t` tile runs as its persistent 128-channel `/t` tile; without `/t` a
  // persistent tile runs one tile per CTA (the permuting consumers carry no ring state across tiles).
  const cuda::GemmPlan wide_plan =
      cuda::gemm_plan(e4m3, e4m3.w13(), cuda::parse_gemm_tile("128x256/1x8x1/4/p/s/t"), 90, false, true);
  EXPECT_EQ(wide_plan.input, cuda::GemmInput::row_scaled_e4m3);
  EXPECT_EQ(wide_plan.tile.to_string(), "128x128/1x8x1/4/p/s/t");
  EXPECT_TRUE(cuda::gemm_tile_reasons(wide_plan.tile, e4m3.w13()).empty());
  const cuda::GemmPlan permuting_plan =
      cuda::gemm_plan(e4m3, e4m3.w13(), cuda::parse_gemm_tile("128x256/1x8x1/4/p/s"), 90, false, true);
  EXPECT_EQ(permuting_plan.input, cuda::GemmInput::row_scaled_e4m3);
  EXPECT_EQ(permuting_plan.tile.to_string(), "128x128/1x8x1/4/p");
  ExpertsDesc odd = d;
  odd.hidden_size = 2880 + 32;  // GEMM1's K: 45.5 K tiles
  EXPECT_FALSE(cuda::gemm_plan(odd, odd.w13(), ordered, 90, true).tile.mma_order_tokens);
}

// 16 to 32 tokens on the warp-specialized wgmma body take `/t` (the copy warps' rows in any multiple of 8; the
// permute warps' in multiples of 16 from 48): without it `/p` stays the mma.sync copy-warp tile, and where the
// tokens cannot come in the MMA's order, or there is no wgmma, the block's direct tile (/r) runs.
TEST(GemmTiles, SmallBlocksTakeTheWarpSpecializedBodyWithMmaOrderTokensOnly) {
  const WeightDesc mx = desc_of(WeightFormat::mxfp4), int4 = desc_of(WeightFormat::int4);
  const cuda::GemmTile wide = cuda::parse_gemm_tile("24x512/1x8x1/8/p/t");
  EXPECT_TRUE(wide.producer && wide.wgmma && wide.mma_order_tokens);
  EXPECT_EQ(wide.to_string(), "24x512/1x8x1/8/p/t");
  EXPECT_TRUE(cuda::gemm_tile_reasons(wide, mx).empty());
  EXPECT_FALSE(cuda::gemm_tile_reasons(wide, int4).empty());  // 512 channels: MX weights only
  // Stages of 24 x 128 token bytes, 512 x 32 code bytes and 512 scale words, and the 1 KB of alignment.
  EXPECT_EQ(cuda::gemm_smem_bytes(wide, mx), 8 * (24 * 128 + 512 * 32 + 512 * 4) + 1024);
  for (const char* text : {"16x512/1x8x1/8/p/t", "32x512/1x8x1/8/p/t", "24x512/1x8x1/6/p/s/t"})
    EXPECT_TRUE(cuda::gemm_tile_reasons(cuda::parse_gemm_tile(text), mx).empty()) << text;
  EXPECT_TRUE(cuda::gemm_tile_reasons(cuda::parse_gemm_tile("24x256/1x8x1/8/p/t"), int4).empty());

  const cuda::GemmTile copy_warp = cuda::parse_gemm_tile("32x128/1x8x1/4/p");
  EXPECT_TRUE(copy_warp.producer && !copy_warp.wgmma);
  EXPECT_THAT(cuda::gemm_tile_reasons(cuda::parse_gemm_tile("24x256/1x8x1/8/p"), int4).front(),
              HasSubstr("24-row blocks run direct (/r) or warp-specialized MMA-order (/p/t) tiles only"));

  EXPECT_EQ(cuda::permuting_tile(wide, mx).to_string(), "24x128/1x4x1/4/r");
  EXPECT_EQ(cuda::permuting_tile(cuda::parse_gemm_tile("24x256/1x8x1/8/p/t"), desc_of(WeightFormat::fp8_block)).to_string(),
            "24x128/1x4x1/2/r");
  EXPECT_EQ(cuda::permuting_tile(cuda::parse_gemm_tile("16x512/1x8x1/8/p/t"), mx).to_string(), "16x128/1x4x1/2/r");
  EXPECT_EQ(cuda::mma_sync_tile_of(wide).to_string(), "24x128/1x4x1/2/r");
  for (const WeightDesc& w : {mx, int4, desc_of(WeightFormat::fp8_block)})
    EXPECT_TRUE(cuda::gemm_tile_reasons(cuda::permuting_tile(cuda::parse_gemm_tile("24x256/1x8x1/8/p/t"), w), w).empty());
}

TEST(GemmTiles, TwoCtasAnSmOnSmallWarpSpecializedTiles) {
  const WeightDesc mx = desc_of(WeightFormat::mxfp4), int4 = desc_of(WeightFormat::int4);
  const cuda::GemmTile two = cuda::parse_gemm_tile("24x256/1x8x1/4/o2/p/t");
  EXPECT_EQ(two.min_ctas, 2);
  EXPECT_EQ(two.to_string(), "24x256/1x8x1/4/o2/p/t");
  for (const WeightDesc& w : {mx, int4}) EXPECT_TRUE(cuda::gemm_tile_reasons(two, w).empty()) << cuda::gemm_tile_reasons(two, w).front();
  const std::string source = cuda::moe_gemm_kernel_spec(mx, DType::bf16, two, true).source;
  EXPECT_THAT(source, HasSubstr("kMinCtasPerSm = 2;"));
  // The twin where tokens cannot be ordered is the block's direct tile, whatever the occupancy asked.
  EXPECT_TRUE(cuda::gemm_tile_reasons(cuda::permuting_tile(two, mx), mx).empty());

  EXPECT_THAT(cuda::gemm_tile_reasons(cuda::parse_gemm_tile("24x256/1x8x1/4/o3/p/t"), mx).front(), HasSubstr("no /o but /o2"));
  for (const char* text : {"48x256/1x8x1/4/o2/p/t", "32x256/1x8x1/4/o2/p/t", "24x512/1x8x1/4/o2/p/t", "24x256/1x8x1/4/o2/p/s/t"})
    EXPECT_THAT(cuda::gemm_tile_reasons(cuda::parse_gemm_tile(text), mx).front(),
                HasSubstr("two CTAs an SM (/o2) on warp-specialized (/p) tiles take up to 24 x 256 or 32 x 128")) << text;
  EXPECT_TRUE(cuda::gemm_tile_reasons(cuda::parse_gemm_tile("32x128/1x8x1/8/o2/p/t"), mx).empty());
  // 8 stages of 24 x 128 token bytes and 256 x 32 code bytes, with the 1 KB alignment: 89 KB, two of them fit;
  // 8-bit codes (64 bytes a channel) at 8 stages, 153 KB, do not.
  EXPECT_TRUE(cuda::gemm_tile_reasons(cuda::parse_gemm_tile("24x256/1x8x1/8/o2/p/t"), mx).empty());
  EXPECT_THAT(cuda::gemm_tile_reasons(cuda::parse_gemm_tile("24x256/1x8x1/8/o2/p/t"), desc_of(WeightFormat::fp8_block)).front(),
              HasSubstr("two CTAs an SM (/o2) need at most 113 KB of shared memory each"));
}

TEST(GemmTiles, WideTilesRunNarrowOverUnalignedScales) {
  const cuda::GemmTile wide = cuda::parse_gemm_tile("48x512/1x8x1/4/p");
  EXPECT_EQ(cuda::tile_for_scales(wide, 0x10000).to_string(), "48x512/1x8x1/4/p");
  EXPECT_EQ(cuda::tile_for_scales(wide, 0x10002).to_string(), "48x256/1x8x1/4/p");
  EXPECT_EQ(cuda::tile_for_scales(wide, 0x10001).to_string(), "48x256/1x8x1/4/p");
  const cuda::GemmTile narrow = cuda::parse_gemm_tile("48x256/1x8x1/6/p/s");
  EXPECT_EQ(cuda::tile_for_scales(narrow, 0x10001).to_string(), "48x256/1x8x1/6/p/s");
  // The loaders warm the narrow form with the wide tile: a table entry's 512-channel tile brings its
  // 256-channel kernel along (`moeq compile`, Experts::warm_up).
  ExpertsDesc d = io::find_preset("gpt-oss-120b").desc;
  io::apply_scheme("mxfp4", d);
  TuningTable t;
  t.entries = {{0, plan::kTuningLastMaxM, 48, "48x512/1x8x1/4/p", "48x512/1x8x1/4/p"}};
  std::set<std::string> sources;
  for (const jit::KernelSpec& spec : cuda::tuned_kernel_specs(d, t)) sources.insert(spec.source);
  for (bool prepared : {false, true})
    for (bool folded : {false, true})
      EXPECT_TRUE(sources.count(cuda::moe_gemm_kernel_spec(d.w13(), d.act_dtype, cuda::tile_for_scales(wide, 0x10002),
                                                           prepared, cuda::GemmInput::values, folded)
                                    .source))
          << (prepared ? "prepared" : "canonical") << (folded ? ", folded" : "");
}

TEST(GemmTiles, EveryPlannerTileIsACandidate) {
  // The candidates are what tests/gpu checks against the reference tile by tile.
  std::set<std::string> candidates;
  for (const auto& t : cuda::gemm_tile_candidates()) candidates.insert(t.to_string());
  for (WeightFormat f : all_values<WeightFormat>()) {
    const auto tiles = cuda::planner_tiles(f);
    EXPECT_GE(tiles.size(), 4u);
    for (const auto& t : tiles) EXPECT_TRUE(candidates.count(t.to_string())) << t.to_string();
    for (int bm : {8, 16, 24, 32, 48, 64, 80, 96, 128, 144})
      for (int64_t rows : {int64_t{1}, cuda::kFewRoutedRows + 7, int64_t{100000}})
        for (bool few_ctas : {false, true})
          for (int pick = 0; pick < 4; ++pick) {
            const std::string chosen =
                cuda::gemm_tile_for(f, bm, rows, few_ctas, (pick & 1) != 0, (pick & 2) != 0).to_string();
            EXPECT_TRUE(std::any_of(tiles.begin(), tiles.end(), [&](const cuda::GemmTile& t) { return t.to_string() == chosen; }))
                << chosen;
          }
  }
}

// A GEMM's few-rows tile goes to 32 channels and 4 K groups only where the step's rows leave the
// SMs short of CTAs over that GEMM's channels (H200, 132 SMs: fewer than 330).
TEST(GemmTiles, FewCtasTakeTheNarrowKGroupTile) {
  const int sms = 132;
  EXPECT_TRUE(cuda::gemm_few_ctas(8, 1536, sms));     // Qwen3 M = 1 GEMM1: 8 rows x 24 blocks = 192
  EXPECT_TRUE(cuda::gemm_few_ctas(8, 2048, sms));     // GEMM2: 256
  EXPECT_FALSE(cuda::gemm_few_ctas(16, 1536, sms));   // Qwen3 M = 2 GEMM1: 384
  EXPECT_FALSE(cuda::gemm_few_ctas(4, 5760, sms));    // gpt-oss-120b M = 1 GEMM1: 4 x 90 = 360
  EXPECT_TRUE(cuda::gemm_few_ctas(4, 2880, sms));     // GEMM2: 180
  EXPECT_FALSE(cuda::gemm_few_ctas(8, 4096, sms));    // DeepSeek-V3 M = 1 GEMM1: 512
  EXPECT_FALSE(cuda::gemm_few_ctas(cuda::kFewRoutedRows + 1, 64, sms));  // many rows: never
  EXPECT_EQ(cuda::gemm_tile_for(WeightFormat::int4, 8, 8, true).to_string(), "8x32/1x1x4/4/o4/r");
  EXPECT_EQ(cuda::gemm_tile_for(WeightFormat::mxfp4, 8, 8, true).to_string(), "8x32/1x1x4/2/r");
  EXPECT_EQ(cuda::gemm_tile_for(WeightFormat::int4, 8, 8, false).to_string(), "8x64/1x2x2/2/r");
  EXPECT_EQ(cuda::gemm_tile_for(WeightFormat::fp8_block, 8, cuda::kFewRoutedRows + 1, true).to_string(), "8x128/1x4x1/2/r");
  EXPECT_EQ(cuda::gemm_tile_for(WeightFormat::mxfp4, 16, 8, true).to_string(),
            cuda::gemm_tile_for(WeightFormat::mxfp4, 16, 8, false).to_string());
}

// The few-rows tile's ring: 8 deep for MXFP4 and INT4 codes over long K groups at up to 2 CTAs per SM, else the default
// (gemm_few_ctas_ring's PERF: whole steps, session 49; the 6-deep ring showed no clear step gain, nor NVFP4's 8).
TEST(GemmTiles, FewCtasRingFollowsKGroupsAndCtasPerSm) {
  const int sms = 132;
  using cuda::gemm_few_ctas_ring;
  const WeightFormat mxfp4 = WeightFormat::mxfp4, int4 = WeightFormat::int4;
  EXPECT_EQ(gemm_few_ctas_ring(mxfp4, 2, 2, 8, 4096, 14336, sms), 8);  // Mixtral M = 1 GEMM2: 256 CTAs, 56 tiles
  EXPECT_EQ(gemm_few_ctas_ring(mxfp4, 4, 2, 8, 4096, 14336, sms), 0);  // M = 2: ~3.5 experts, 3.4 CTAs per SM
  EXPECT_EQ(gemm_few_ctas_ring(int4, 2, 2, 8, 4096, 14336, sms), 8);
  EXPECT_EQ(gemm_few_ctas_ring(mxfp4, 4, 4, 128, 2880, 2880, sms), 0);  // gpt-oss-120b M = 1 GEMM2: 11 tiles
  EXPECT_EQ(gemm_few_ctas_ring(mxfp4, 8, 8, 128, 1536, 2048, sms), 0);  // Qwen3 M = 1 GEMM1: 8 tiles
  EXPECT_EQ(gemm_few_ctas_ring(WeightFormat::nvfp4, 2, 2, 8, 4096, 14336, sms), 0);  // no step gain measured
  EXPECT_EQ(gemm_few_ctas_ring(WeightFormat::fp8_block, 2, 2, 8, 4096, 14336, sms), 0);  // 8-bit: 32-byte stages
  EXPECT_EQ(gemm_few_ctas_ring(mxfp4, 8, 8, 256, 4096, 7168, sms), 0);   // not few CTAs (DeepSeek-V3 GEMM1)
  EXPECT_EQ(gemm_few_ctas_ring(mxfp4, 2, 2, 8, 4096, 14336, 64), 0);      // 64 SMs: 4 CTAs per SM, too many for 8
  EXPECT_EQ(cuda::gemm_tile_for(mxfp4, 8, 2, true, false, true, 8).to_string(), "8x32/1x1x4/8/r");
  EXPECT_EQ(cuda::gemm_tile_for(mxfp4, 8, 4, true, false, true, 0).to_string(), "8x32/1x1x4/2/r");
  EXPECT_EQ(cuda::gemm_tile_for(int4, 8, 2, true, false, false, 8).to_string(), "8x32/1x1x4/8/r");
  EXPECT_EQ(cuda::gemm_tile_for(int4, 8, 4, true, false, false, 0).to_string(), "8x32/1x1x4/4/o4/r");
  EXPECT_EQ(cuda::gemm_tile_for(WeightFormat::fp8_block, 8, 2, true, false, false, 8).to_string(), "8x32/1x1x4/2/r");
  EXPECT_EQ(cuda::gemm_tile_for(mxfp4, 8, 2, false, false, true, 8).to_string(), "8x64/1x2x2/2/r");  // not few CTAs
}

// Uniform routing of top_k distinct experts per token: the expected experts hit.
TEST(GemmTiles, ExpectedRowBlocks) {
  EXPECT_NEAR(cuda::expected_row_blocks(128, 8, 128), 128.0 * (1.0 - std::pow(120.0 / 128.0, 16.0)), 1e-9);  // 82.4
  EXPECT_NEAR(cuda::expected_row_blocks(8, 8, 128), 8.0, 1e-9);        // one token: its 8 experts
  EXPECT_NEAR(cuda::expected_row_blocks(4096, 8, 8), 512.0, 1e-9);     // few experts: at least rows / 8
  EXPECT_NEAR(cuda::expected_row_blocks(64, 1, 1), 8.0, 1e-9);         // one expert: the rows / 8 floor
  EXPECT_NEAR(cuda::expected_row_blocks(8, 16, 4), 4.0, 1e-9);         // top_k past E is clamped to E
  EXPECT_EQ(cuda::gemm_waves(660.0, 5, 132), 1);
  EXPECT_EQ(cuda::gemm_waves(661.0, 5, 132), 2);
  EXPECT_EQ(cuda::gemm_waves(0.0, 5, 132), 0);
}

// Many routed rows (H200, 132 SMs): INT4 takes its 2-deep tile (5 CTAs per SM) where that runs one
// wave and the 4-deep one (4 per SM) more; MXFP4 with bf16 activations its 64-channel tile (3 per SM)
// where that runs fewer waves than the 32-channel one (5 per SM), up to kMxfp4AltMaxWaves of the latter.
TEST(GemmTiles, AlternativeTileWhereItRunsFewerWaves) {
  const int sms = 132;
  using cuda::gemm_alt_fewer_waves;
  const WeightFormat int4 = WeightFormat::int4, mxfp4 = WeightFormat::mxfp4;
  // Qwen3-30B-A3B (E = 128, top_k 8): GEMM1 n = 1536 (12 blocks of 128), GEMM2 n = 2048 (16).
  EXPECT_FALSE(gemm_alt_fewer_waves(int4, DType::bf16, 48, 8, 128, 1536, sms));   // M = 6: ~41 x 12 = ~493, one wave of either
  EXPECT_TRUE(gemm_alt_fewer_waves(int4, DType::bf16, 64, 8, 128, 1536, sms));    // M = 8: ~52 x 12 = ~621: 1 against 2
  EXPECT_TRUE(gemm_alt_fewer_waves(int4, DType::bf16, 48, 8, 128, 2048, sms));    // M = 6 GEMM2: ~658: 1 against 2
  EXPECT_FALSE(gemm_alt_fewer_waves(int4, DType::bf16, 128, 8, 128, 1536, sms));  // M = 16: ~989: 2 against 2
  EXPECT_FALSE(gemm_alt_fewer_waves(int4, DType::bf16, 96, 8, 128, 2048, sms));   // M = 12 GEMM2: ~1100: 2 against 3, not one
  EXPECT_FALSE(gemm_alt_fewer_waves(int4, DType::bf16, 4096, 8, 8, 1536, sms));   // few experts: 512 blocks x 12
  EXPECT_FALSE(gemm_alt_fewer_waves(int4, DType::bf16, 512, 8, 128, 1536, sms));  // M = 64: ~1511: 3 against 3
  EXPECT_FALSE(gemm_alt_fewer_waves(mxfp4, DType::bf16, 128, 8, 128, 1536, sms)); // M = 16: ~989 / ~494: 2 against 2
  EXPECT_TRUE(gemm_alt_fewer_waves(mxfp4, DType::bf16, 256, 8, 128, 1536, sms));  // M = 32: ~1340 / ~670: 3 against 2
  EXPECT_TRUE(gemm_alt_fewer_waves(mxfp4, DType::bf16, 512, 8, 128, 2048, sms));  // M = 64 GEMM2: ~2015 / ~1007: 4 against 3
  // gpt-oss-120b (top_k 4) GEMM1 n = 5760 (45 blocks of 128, 23 of 256).
  EXPECT_TRUE(gemm_alt_fewer_waves(mxfp4, DType::bf16, 64, 4, 128, 5760, sms));   // M = 16: ~51 x 45: 4 against 3
  EXPECT_FALSE(gemm_alt_fewer_waves(mxfp4, DType::bf16, 128, 4, 128, 5760, sms)); // M = 32: ~82 x 45: 6 waves, past the cap
  EXPECT_FALSE(gemm_alt_fewer_waves(WeightFormat::fp8_block, DType::bf16, 64, 8, 128, 1536, sms));  // no alternative
  EXPECT_FALSE(gemm_alt_fewer_waves(mxfp4, DType::f16, 256, 8, 128, 1536, sms));  // f16: 2 CTAs per SM, not timed
  EXPECT_TRUE(gemm_alt_fewer_waves(int4, DType::f16, 64, 8, 128, 1536, sms));
  EXPECT_EQ(cuda::gemm_tile_for(int4, 8, 128, false, false).to_string(), "8x128/1x4x1/4/o4/r");
  EXPECT_EQ(cuda::gemm_tile_for(int4, 8, 64, false, true).to_string(), "8x128/1x4x1/2/r");
  EXPECT_EQ(cuda::gemm_tile_for(int4, 8, cuda::kTileForAnyRows).to_string(), "8x128/1x4x1/4/o4/r");
  EXPECT_EQ(cuda::gemm_tile_for(mxfp4, 8, 128, false, false).to_string(), "8x128/1x4x1/2/r");
  EXPECT_EQ(cuda::gemm_tile_for(mxfp4, 8, 256, false, true).to_string(), "8x256/1x4x1/2/r");
  EXPECT_EQ(cuda::gemm_tile_for(mxfp4, 8, cuda::kTileForAnyRows).to_string(), "8x128/1x4x1/2/r");
  EXPECT_EQ(cuda::gemm_tile_for(WeightFormat::fp8_block, 8, 128, false, true).to_string(), "8x128/1x4x1/2/r");
}

// MXFP4 with bf16 activations takes the 4-deep tile (scales per pass of 2 K tiles) wherever K is
// whole passes, ahead of the fewer-waves alternative; other formats and f16 activations keep theirs.
TEST(GemmTiles, MxPassScalesTakeTheFourDeepTile) {
  const WeightFormat mxfp4 = WeightFormat::mxfp4;
  EXPECT_TRUE(cuda::gemm_mx_pass_scales(mxfp4, DType::bf16, 2048));   // Qwen3-30B-A3B GEMM1
  EXPECT_TRUE(cuda::gemm_mx_pass_scales(mxfp4, DType::bf16, 768));    // its GEMM2
  EXPECT_FALSE(cuda::gemm_mx_pass_scales(mxfp4, DType::bf16, 2880));  // gpt-oss-120b: 22.5 passes
  EXPECT_FALSE(cuda::gemm_mx_pass_scales(mxfp4, DType::f16, 2048));
  EXPECT_FALSE(cuda::gemm_mx_pass_scales(WeightFormat::mxfp8, DType::bf16, 2048));
  EXPECT_FALSE(cuda::gemm_mx_pass_scales(WeightFormat::int4, DType::bf16, 2048));
  EXPECT_EQ(cuda::gemm_tile_for(mxfp4, 8, 128, false, false, true).to_string(), "8x128/1x4x1/4/o4/r");
  EXPECT_EQ(cuda::gemm_tile_for(mxfp4, 8, 256, false, true, true).to_string(), "8x128/1x4x1/4/o4/r");
  EXPECT_EQ(cuda::gemm_tile_for(mxfp4, 8, 8, true, false, true).to_string(), "8x32/1x1x4/2/r");  // few rows: 2-deep
  // 24-row blocks: the 4-deep direct tile for 4-bit codes; 16-row ones direct for MXFP4, not INT4 (session 25).
  EXPECT_EQ(cuda::gemm_tile_for(mxfp4, 24, 2048).to_string(), "24x128/1x4x1/4/r");
  EXPECT_EQ(cuda::gemm_tile_for(WeightFormat::int4, 24, 2048).to_string(), "24x128/1x4x1/4/r");
  EXPECT_EQ(cuda::gemm_tile_for(mxfp4, 16, 2048).to_string(), "16x128/1x4x1/2/r");
  EXPECT_EQ(cuda::gemm_tile_for(WeightFormat::int4, 16, 2048).to_string(), "16x128/1x4x1/4");
  EXPECT_EQ(cuda::gemm_tile_for(mxfp4, 16, 256, false, false, true).to_string(),
            cuda::gemm_tile_for(mxfp4, 16, 256, false, false, false).to_string());
  EXPECT_EQ(cuda::gemm_tile_for(WeightFormat::int4, 8, 128, false, false, true).to_string(), "8x128/1x4x1/4/o4/r");
}

TEST(GemmTiles, IllegalTilesSayWhy) {
  const WeightDesc w = desc_of(WeightFormat::int4);
  auto reasons = [&](const char* text) {
    std::string all;
    for (const auto& r : cuda::gemm_tile_reasons(cuda::parse_gemm_tile(text), w)) all += r + "; ";
    return all;
  };
  EXPECT_THAT(reasons("40x128/1x4x1/4"), HasSubstr("block_m must be 8, 16, 24, 32, 48, 64, 80, 96, 128 or 144"));
  // 48 rows: warp-specialized wgmma consumers (as from 64), not the mma.sync copy-warp tile (up to 32).
  EXPECT_TRUE(cuda::parse_gemm_tile("48x256/1x8x1/8/p").wgmma);
  EXPECT_EQ(reasons("48x256/1x8x1/8/p"), "");
  EXPECT_EQ(cuda::mma_sync_tile_of(cuda::parse_gemm_tile("48x256/1x8x1/6/p/s")).to_string(), "48x128/1x4x1/4");
  EXPECT_THAT(reasons("24x128/1x4x1/4"), HasSubstr("24-row blocks run direct (/r) or warp-specialized MMA-order (/p/t) tiles only"));
  EXPECT_EQ(reasons("24x128/1x4x1/2/r"), "");
  EXPECT_THAT(reasons("128x128/1x4x1/4/w"), HasSubstr("wgmma tiles are 64 x"));
  for (const char* bad_ws : {"128x64/1x8x1/4/p", "128x256/1x4x1/4/p", "128x256/1x8x1/2/p",
                             "128x256/1x8x1/4/o1/p"})
    EXPECT_THAT(reasons(bad_ws), HasSubstr("warp-specialized (/p) tiles are")) << bad_ws;
  for (const char* bad_copy_warp : {"8x128/1x4x2/4/p", "16x128/1x4x1/4/k2/p", "32x128/2x4x1/4/p"})
    EXPECT_THAT(reasons(bad_copy_warp), HasSubstr("warp-specialized mma.sync (/p) tiles have")) << bad_copy_warp;
  EXPECT_EQ(reasons("8x128/1x4x1/4/p"), "");
  for (const char* bad_direct : {"64x128/1x4x1/2/r", "24x128/2x4x1/2/r", "8x128/1x4x1/3/r", "8x128/1x4x1/10/r", "8x128/1x4x1/2/k2/r"})
    EXPECT_THAT(reasons(bad_direct), HasSubstr("direct (/r) tiles have")) << bad_direct;
  EXPECT_EQ(reasons("8x64/1x2x2/2/r"), "");  // the ring is per lane: 2 stages with 2 K groups are fine
  // The register ring: at most 256 bytes of codes per lane (INT4 here: 16 per 16-channel tile and stage).
  EXPECT_EQ(reasons("8x256/1x2x1/2/r"), "");                   // 8 tiles x 16 x 2 = 256
  EXPECT_THAT(reasons("8x256/1x2x1/4/r"), HasSubstr("register ring holds 512 bytes"));
  EXPECT_THAT(reasons("16x256/1x1x1/8/r"), HasSubstr("register ring holds 2048 bytes"));
  EXPECT_EQ(reasons("32x256/1x8x1/4/p"), "");
  EXPECT_THAT(reasons("16x96/1x4x1/4"), HasSubstr("block_n must be 32, 64, 128, 256 or 512"));
  EXPECT_THAT(reasons("16x64/4x1x1/4"), HasSubstr("block_m is not a multiple of 8 x warps_m"));
  EXPECT_THAT(reasons("16x64/1x8x1/4"), HasSubstr("block_n is not a multiple of 16 x warps_n"));
  EXPECT_THAT(reasons("16x64/1x4x3/6"), HasSubstr("warps_k must be 1, 2 or 4"));
  EXPECT_THAT(reasons("16x64/1x4x3/6"), Not(HasSubstr("stages must be a multiple")));  // one reason for one fault
  EXPECT_THAT(reasons("64x128/1x4x1/1/w"), HasSubstr("stages must be a multiple of warps_k, at least twice it"));
  EXPECT_THAT(reasons("16x64/1x4x4/4"), HasSubstr("stages must be a multiple of warps_k, at least twice it"));
  EXPECT_THAT(reasons("16x64/1x4x1/17"), HasSubstr("stages must be 2 to 16"));
  EXPECT_THAT(reasons("16x64/1x4x1/9"), HasSubstr("ring steps) must be at most 8"));
  EXPECT_THAT(reasons("16x64/1x4x1/4/k3"), HasSubstr("split_k must be 1, 2 or 4"));
  EXPECT_EQ(reasons("8x32/1x1x4/16/k4"), "");
  EXPECT_THAT(reasons("64x128/1x8x1/4/o9"), HasSubstr("min_ctas must be 0 to 16, with at most 2048 threads per SM"));
  EXPECT_THAT(reasons("32x128/1x4x1/4/w"), HasSubstr("wgmma tiles are 64 x (64, 128 or 256)"));
  EXPECT_THAT(reasons("64x128/1x8x1/4/w"), HasSubstr("wgmma tiles are 64 x (64, 128 or 256)"));
  EXPECT_EQ(reasons("8x32/1x2x4/16"), "");
  // Zero warps are refused before any size is computed (they used to divide by zero).
  EXPECT_THAT(reasons("16x64/0x4x1/4"), HasSubstr("needs 1 to 16 warps"));
  EXPECT_THAT(reasons("16x64/1x4x0/4"), HasSubstr("needs 1 to 16 warps"));
  // NOTE: the 227 KB check is a guard: the largest legal tile, 64x256/1x4x4/8, needs 225 KB
  // (three K groups' 128 accumulators per thread plus the output tile, plus 528 B static).
  EXPECT_EQ(reasons("64x256/1x4x4/8"), "");
}

TEST(GemmTiles, SharedMemoryCoversTheRingAndTheEpilogue) {
  const WeightDesc w4 = desc_of(WeightFormat::int4), w8 = desc_of(WeightFormat::fp8_block);
  // Ring: stages x (A rows of 64 bf16 + 16 B padding, codes of 64 k per channel).
  EXPECT_EQ(cuda::gemm_smem_bytes(cuda::parse_gemm_tile("16x64/1x4x1/4"), w4), 4 * (16 * 144 + 64 * 32));
  EXPECT_EQ(cuda::gemm_smem_bytes(cuda::parse_gemm_tile("16x64/1x4x2/8"), w8), 8 * (16 * 144 + 64 * 64));
  // The ring of a K-grouped tile (8 stages = two ring steps of 4 tiles) is smaller than its epilogue: the reduction of 3 groups'
  // accumulators plus the output tile.
  const cuda::GemmTile t = cuda::parse_gemm_tile("64x256/1x4x4/8");
  const int64_t acc = (64 / 8) * (256 / 4 / 16) * 4;
  EXPECT_GE(cuda::gemm_smem_bytes(t, w4), (t.threads() - t.threads() / 4) * acc * 4 + 64 * (256 * 2 + 16));
  // Direct loads: no ring in shared memory, only the epilogue (K groups' sums and the output tile).
  EXPECT_EQ(cuda::gemm_smem_bytes(cuda::parse_gemm_tile("8x128/1x4x1/2/r"), w8), 8 * (128 * 2 + 16));
  EXPECT_EQ(cuda::gemm_smem_bytes(cuda::parse_gemm_tile("8x64/1x2x2/4/r"), w4), 64 * (2 * 4) * 4 + 8 * (64 * 2 + 16));
  // Split K: the other ranks' sums (K group 0's accumulators, 16 bytes per MMA tile and thread)
  // fit too.
  const cuda::GemmTile split = cuda::parse_gemm_tile("8x32/1x1x4/16/k4");
  EXPECT_GE(cuda::gemm_smem_bytes(split, w4), 32 * (1 * 2 * 4) * 4);
  // Static shared memory bounds what ptxas gave the kernels (sm_90a, session 64): the e4m3 `/t` tiles' scan slots
  // (a base per channel, the wide-tile bits and an mbarrier per row buffer) count only with e4m3 input.
  const auto e4m3_static = [](const char* text) {
    return cuda::gemm_static_smem_bytes(cuda::parse_gemm_tile(text), cuda::GemmInput::row_scaled_e4m3);
  };
  EXPECT_GE(e4m3_static("128x128/1x8x1/4/p/t"), 2816);
  EXPECT_GE(e4m3_static("128x128/1x8x1/6/p/s/t"), 4096);
  EXPECT_GE(e4m3_static("64x128/1x8x1/6/p/s/t"), 2304);
  EXPECT_GE(e4m3_static("128x128/1x8x1/4/p"), 2816);
  const cuda::GemmTile persistent_t = cuda::parse_gemm_tile("128x128/1x8x1/6/p/s/t");
  EXPECT_EQ(cuda::gemm_static_smem_bytes(persistent_t, cuda::GemmInput::row_scaled_e4m3) -
                cuda::gemm_static_smem_bytes(persistent_t, cuda::GemmInput::row_scaled_values),
            2 * (128 + 32 + 8));
}

// `moeq compile --tile candidates` takes the candidates legal for both GEMMs: a 16-bit INT4 layer has no 512-channel
// tile (MX weights only), an MXFP4 one keeps them; a K off a multiple of 64 drops the `/t` tiles.
TEST(GemmTiles, LayerTilesLegalForBothGemms) {
  const std::vector<cuda::GemmTile> all = cuda::gemm_tile_candidates();
  const auto count_wide = [](const std::vector<cuda::GemmTile>& tiles) {
    return std::count_if(tiles.begin(), tiles.end(), [](const cuda::GemmTile& t) { return t.block_n == 512; });
  };
  ASSERT_GT(count_wide(all), 0);
  ExpertsDesc mx = io::find_preset("qwen3-30b-a3b").desc;
  io::apply_scheme("mxfp4", mx);
  EXPECT_EQ(cuda::layer_tiles_legal_for(mx, all).size(), all.size());  // every candidate fits Qwen3's MXFP4 layer
  ExpertsDesc int4 = io::find_preset("qwen3-30b-a3b").desc;
  io::apply_scheme("int4-g128", int4);
  const std::vector<cuda::GemmTile> legal = cuda::layer_tiles_legal_for(int4, all);
  EXPECT_EQ(count_wide(legal), 0);
  EXPECT_EQ(legal.size(), all.size() - static_cast<size_t>(count_wide(all)));
  ExpertsDesc odd = mx;
  odd.hidden_size = 2048 + 32;  // GEMM1's K off a multiple of 64
  const std::vector<cuda::GemmTile> odd_legal = cuda::layer_tiles_legal_for(odd, all);
  EXPECT_FALSE(odd_legal.empty());
  for (const cuda::GemmTile& tile : odd_legal) {
    EXPECT_FALSE(tile.mma_order_tokens) << tile.to_string();
    EXPECT_TRUE(cuda::gemm_tile_reasons(tile, odd.w13()).empty() && cuda::gemm_tile_reasons(tile, odd.w2()).empty())
        << tile.to_string();
  }
}

// Experts::warm_up and `moeq compile` load layer_kernel_specs: every tile the planner can pick
// for the layer (any block size and row count, batch-invariant included) must be there, for
// both GEMMs, both code layouts and, for MX weights, with and without the folded scales; a bad
// extra tile is refused by name.
TEST(GemmTiles, LayerKernelsCoverEveryPlannerPick) {
  for (const char* scheme : {"int4-g128", "mxfp4", "fp8-block", "nvfp4", "int8-ch", "mxfp8:f16"}) {
    ExpertsDesc d = io::find_preset("qwen3-30b-a3b").desc;
    io::apply_scheme(scheme, d);
    std::set<std::string> sources;
    for (const jit::KernelSpec& spec : cuda::layer_kernel_specs(d)) sources.insert(spec.source);
    for (int block_m : {8, 16, 24, 32, 48, 64, 80, 96, 128, 144})
      for (int64_t rows : {int64_t{1}, cuda::kFewRoutedRows, cuda::kFewRoutedRows + 1, int64_t{100000}, cuda::kTileForAnyRows})
        for (int pick = 0; pick < 8; ++pick) {
          const cuda::GemmTile tile =
              cuda::gemm_tile_for(d.weight_format, block_m, rows, (pick & 1) != 0, (pick & 2) != 0, (pick & 4) != 0);
          for (bool gemm1 : {true, false})
            for (bool prepared : {false, true}) {
              const WeightDesc w = gemm1 ? d.w13() : d.w2();
              EXPECT_TRUE(sources.count(cuda::moe_gemm_kernel_spec(w, d.act_dtype, tile, prepared).source))
                  << scheme << " tile " << tile.to_string() << (prepared ? " prepared" : "");
              // The folded kernel of weights given with mx_scales_at_most_two (the same source where it does not fold).
              EXPECT_TRUE(sources.count(
                  cuda::moe_gemm_kernel_spec(w, d.act_dtype, tile, prepared, cuda::GemmInput::values, true).source))
                  << scheme << " tile " << tile.to_string() << (prepared ? " prepared" : "") << ", MX scales at most 2";
              EXPECT_TRUE(sources.count(cuda::moe_gemm_segments_kernel_spec(w, d.act_dtype, tile).source))
                  << scheme << " segments of tile " << tile.to_string();
              // GEMM1's self-routed kernel and, where the layer admits it, its activation epilogue, plain and
              // self-routed (apply launches them at the smallest M).
              if (!gemm1 || d.act_format != ActFormat::none) continue;
              if (cuda::gemm_self_routes(tile, cuda::GemmInput::values))
                EXPECT_TRUE(sources.count(cuda::moe_gemm_kernel_spec(w, d.act_dtype, tile, prepared,
                                                                     cuda::GemmInput::values, false,
                                                                     cuda::GemmVariant::self_routed)
                                              .source))
                    << scheme << " self-routed tile " << tile.to_string() << (prepared ? " prepared" : "");
              const cuda::EpilogueActivation activation{true, d.activation.kind, d.interleaved_gate_up};
              if (cuda::gemm_fuses_activation(tile, cuda::GemmInput::values, activation))
                for (cuda::GemmVariant variant : {cuda::GemmVariant::plain, cuda::GemmVariant::self_routed})
                  if (variant == cuda::GemmVariant::plain || cuda::gemm_self_routes(tile, cuda::GemmInput::values))
                    EXPECT_TRUE(sources.count(cuda::moe_gemm_kernel_spec(w, d.act_dtype, tile, prepared,
                                                                         cuda::GemmInput::values, false, variant,
                                                                         activation)
                                                  .source))
                        << scheme << " activation-epilogue tile " << tile.to_string() << (prepared ? " prepared" : "")
                        << (variant == cuda::GemmVariant::self_routed ? " self-routed" : "");
            }
        }
  }
  ExpertsDesc d = io::find_preset("qwen3-30b-a3b").desc;
  try {
    cuda::layer_kernel_specs(d, {cuda::parse_gemm_tile("64x128/1x4x1/4/w"), cuda::parse_gemm_tile("40x128/1x4x1/4")});
    ADD_FAILURE() << "an illegal extra tile was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("40x128/1x4x1/4"));
  }
}

// The launch path finds loaded GEMM functions by gemm_config_key instead of the generated text:
// over every format, activation dtype, INT scale variant, candidate and planner tile, both code
// layouts and both entries, equal keys must mean equal texts and different texts different keys.
TEST(GemmTiles, ConfigKeyIdentifiesTheGeneratedSource) {
  std::vector<cuda::GemmTile> tiles = cuda::gemm_tile_candidates();
  for (const char* text : {"48x256/1x8x1/6/p/t", "80x256/1x8x1/6/p/s/t", "144x256/1x8x1/4/p/t"})
    tiles.push_back(cuda::parse_gemm_tile(text));
  std::map<uint64_t, std::string> text_of_key;
  std::map<std::string, uint64_t> key_of_text;
  size_t configs = 0;
  for (WeightFormat f : all_values<WeightFormat>()) {
    for (const cuda::GemmTile& t : cuda::planner_tiles(f)) tiles.push_back(t);
    const bool is_int = f == WeightFormat::int4 || f == WeightFormat::int8;
    for (DType act : {DType::bf16, DType::f16})
      for (DType scale : {DType::bf16, DType::f16, DType::f32})
        for (bool zero_points : {false, true}) {
          WeightDesc w = desc_of(f);
          w.scale_dtype = is_int ? scale : DType::none;
          w.has_zero_point = is_int && zero_points;
          for (const cuda::GemmTile& tile : tiles) {
            if (!cuda::gemm_tile_reasons(tile, w).empty()) continue;
            for (bool prepared : {false, true})
              for (bool segments : {false, true})
                for (cuda::GemmInput input : {cuda::GemmInput::values, cuda::GemmInput::row_scaled_values,
                                              cuda::GemmInput::row_scaled_e4m3})
                  for (bool mx_fold : {false, true}) {
                if (input == cuda::GemmInput::row_scaled_e4m3 && !cuda::gemm_takes_e4m3(w, tile, 90, prepared)) continue;
                if (mx_fold && segments) continue;  // the segment builder takes no such word
                const jit::KernelSpec spec = segments ? cuda::moe_gemm_segments_kernel_spec(w, act, tile, prepared, input)
                                                      : cuda::moe_gemm_kernel_spec(w, act, tile, prepared, input, mx_fold);
                const std::string text = spec.entry + "\n" + spec.source;
                const uint64_t key = cuda::gemm_config_key(w, act, tile, prepared, segments, input, mx_fold);
                // The word changes the kernel only where gemm_folds_mx_scales says so.
                const bool folds = mx_fold && cuda::gemm_folds_mx_scales(w, act, tile, prepared, input);
                EXPECT_EQ(text.find("kMxScalesAtMostTwo = true") != std::string::npos, folds) << tile.to_string();
                ++configs;
                const auto [k, new_key] = text_of_key.emplace(key, text);
                EXPECT_TRUE(new_key || k->second == text) << "key " << key << " names two sources, one of tile "
                                                          << tile.to_string();
                const auto [t, new_text] = key_of_text.emplace(text, key);
                EXPECT_TRUE(new_text || t->second == key) << "one source under two keys, tile " << tile.to_string();
              }
          }
        }
  }
  EXPECT_GT(configs, 1000u);
  EXPECT_EQ(text_of_key.size(), key_of_text.size());
}

// A bias changes a GEMM's source by one line (Cfg::kBias: its epilogue loads every channel's bias before using any), so
// the kernels of weights without one keep the source, and the cache entries, they had; moe_gemm keys the two apart
// beside gemm_config_key, which has no bit for it.
TEST(GemmTiles, BiasNamesOneLineOfTheSource) {
  const std::string line = "  static constexpr bool kBias = true;\n";
  int checked = 0;
  for (WeightFormat f : {WeightFormat::mxfp4, WeightFormat::int4, WeightFormat::fp8_channel, WeightFormat::nvfp4})
    for (const char* text : {"8x64/1x4x1/2/r", "32x512/1x8x1/8/p/t", "128x256/1x8x1/4/p", "64x128/2x2x1/4"}) {
      const cuda::GemmTile tile = cuda::parse_gemm_tile(text);
      WeightDesc plain = desc_of(f);
      if (f == WeightFormat::int4) plain.scale_dtype = DType::bf16;
      if (!cuda::gemm_tile_reasons(tile, plain).empty()) continue;
      for (bool segments : {false, true}) {
        auto source = [&](const WeightDesc& w) {
          return segments ? cuda::moe_gemm_segments_kernel_spec(w, DType::bf16, tile).source
                          : cuda::moe_gemm_kernel_spec(w, DType::bf16, tile).source;
        };
        const std::string without = source(plain);
        EXPECT_EQ(without.find("kBias"), std::string::npos) << text;
        for (DType bias : {DType::f32, DType::bf16, DType::f16}) {
          WeightDesc w = plain;
          w.bias_dtype = bias;
          std::string with = source(w);
          const size_t at = with.find(line);
          ASSERT_NE(at, std::string::npos) << text << " " << to_string(bias);
          EXPECT_EQ(with.erase(at, line.size()), without) << text;
          EXPECT_EQ(cuda::gemm_config_key(w, DType::bf16, tile, false, segments),
                    cuda::gemm_config_key(plain, DType::bf16, tile, false, segments));
          ++checked;
        }
      }
    }
  EXPECT_GE(checked, 4 * 2 * 3);
}

// Which kernels take the MX scales word (cuda::gemm_folds_mx_scales), written out against the
// kernels' own rules: the warp-specialized body (moe_gemm_ws_consumers.cuh) with either code layout, the
// voting mma.sync and direct tiles (kVoteFold: prepared codes, no wgmma) only with prepared codes;
// never f16 activations, e4m3 input, MXFP8 or NVFP4 (no e2m1 x 2^126 multiply), nor the wgmma tile
// without a producer (it has no vote and no folded ring).
TEST(GemmTiles, MxScalesWordReachesOnlyTheFoldingKernels) {
  using cuda::GemmInput;
  struct Case {
    WeightFormat format;
    DType act;
    const char* tile;
    bool prepared;
    GemmInput input;
    bool folds;
  };
  const Case cases[] = {
      {WeightFormat::mxfp4, DType::bf16, "48x256/1x8x1/6/p", false, GemmInput::values, true},
      {WeightFormat::mxfp4, DType::bf16, "48x256/1x8x1/6/p", true, GemmInput::values, true},
      {WeightFormat::mxfp4, DType::bf16, "80x256/1x8x1/5/p/s", true, GemmInput::row_scaled_values, true},
      {WeightFormat::mxfp4, DType::bf16, "128x128/1x8x1/4/p", false, GemmInput::row_scaled_e4m3, false},
      {WeightFormat::mxfp4, DType::bf16, "64x128/1x4x1/4/w", true, GemmInput::values, false},
      {WeightFormat::mxfp4, DType::bf16, "16x128/1x4x1/4", true, GemmInput::values, true},
      {WeightFormat::mxfp4, DType::bf16, "16x128/1x4x1/4", false, GemmInput::values, false},
      {WeightFormat::mxfp4, DType::bf16, "8x128/1x4x1/4/r", true, GemmInput::values, true},
      {WeightFormat::mxfp4, DType::bf16, "8x128/1x4x1/4/r", false, GemmInput::values, false},
      {WeightFormat::mxfp4, DType::f16, "48x256/1x8x1/6/p", true, GemmInput::values, false},
      {WeightFormat::mxfp8, DType::bf16, "48x256/1x8x1/6/p", true, GemmInput::values, false},
      {WeightFormat::nvfp4, DType::bf16, "8x128/1x4x1/4/r", true, GemmInput::values, false},
  };
  for (const Case& c : cases) {
    const WeightDesc w = desc_of(c.format);
    const cuda::GemmTile tile = cuda::parse_gemm_tile(c.tile);
    const std::string where = std::string(to_string(c.format)) + " " + std::string(to_string(c.act)) + " " + c.tile +
                              (c.prepared ? " prepared" : " canonical") + " input " + std::to_string(int(c.input));
    if (c.input == GemmInput::row_scaled_e4m3) ASSERT_TRUE(cuda::gemm_takes_e4m3(w, tile, 90, c.prepared)) << where;
    EXPECT_EQ(cuda::gemm_folds_mx_scales(w, c.act, tile, c.prepared, c.input), c.folds) << where;
    const std::string source = cuda::moe_gemm_kernel_spec(w, c.act, tile, c.prepared, c.input, true).source;
    EXPECT_EQ(source.find("kMxScalesAtMostTwo = true") != std::string::npos, c.folds) << where;
    EXPECT_NE(cuda::moe_gemm_kernel_spec(w, c.act, tile, c.prepared, c.input, false).source.find(
                  "kMxScalesAtMostTwo = false"),
              std::string::npos)
        << where;
  }
}

// The self-routed GEMM1 is a kernel of its own (MoeGemmCfg::kSelfRouted), so the others keep their code: the word is
// in no other source, and only 8-row direct tiles over 16-bit A take it (else an error naming the tile).
TEST(GemmTiles, SelfRoutedGemm1IsAKernelOfItsOwn) {
  using cuda::GemmInput;
  const WeightDesc w = desc_of(WeightFormat::mxfp4);
  const auto tile = [](const char* text) { return cuda::parse_gemm_tile(text); };
  EXPECT_TRUE(cuda::gemm_self_routes(tile("8x32/1x1x4/8/r"), GemmInput::values));
  EXPECT_TRUE(cuda::gemm_self_routes(tile("8x128/1x4x1/4/o4/r"), GemmInput::values));
  EXPECT_FALSE(cuda::gemm_self_routes(tile("8x128/1x4x1/4/o4/r"), GemmInput::row_scaled_values));
  EXPECT_FALSE(cuda::gemm_self_routes(tile("16x128/1x4x1/2/r"), GemmInput::values));
  EXPECT_FALSE(cuda::gemm_self_routes(tile("8x128/1x4x1/4"), GemmInput::values));
  const cuda::GemmTile direct = tile("8x32/1x1x4/2/r");
  const std::string plain = cuda::moe_gemm_kernel_spec(w, DType::bf16, direct, true).source;
  const std::string self = cuda::moe_gemm_kernel_spec(w, DType::bf16, direct, true, GemmInput::values, false, cuda::GemmVariant::self_routed).source;
  EXPECT_EQ(plain.find("kSelfRouted"), std::string::npos);
  EXPECT_NE(self.find("kSelfRouted = true"), std::string::npos);
  EXPECT_NE(plain, self);
  for (const char* text : {"16x128/1x4x1/2/r", "8x128/1x4x1/4"}) {
    try {
      cuda::moe_gemm_kernel_spec(w, DType::bf16, tile(text), true, GemmInput::values, false, cuda::GemmVariant::self_routed);
      ADD_FAILURE() << "self-routed " << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(text));
    }
  }
  EXPECT_THROW(cuda::moe_gemm_kernel_spec(w, DType::bf16, direct, true, GemmInput::row_scaled_values, false,
                                          cuda::GemmVariant::self_routed),
               Error);
}

// GEMM1 with the activation in its epilogue (MoeGemmCfg::kEpilogueActivation) is a kernel of its own, plain or
// self-routed, on 8-row direct tiles of block_n a multiple of 32 over 16-bit A; the kind and the interleaved rows are in
// its source; anything else is refused by name. Only a 16-bit layer's GEMM1 asks for it (layer_gemm_variants).
TEST(GemmTiles, ActivationEpilogueIsAGemm1KernelOfItsOwn) {
  using cuda::EpilogueActivation;
  using cuda::GemmInput;
  using cuda::GemmVariant;
  const WeightDesc w = desc_of(WeightFormat::mxfp4);
  const auto tile = [](const char* text) { return cuda::parse_gemm_tile(text); };
  const EpilogueActivation halves{true, Activation::silu, false}, pairs{true, Activation::swiglu_oai, true},
      non_gated{true, Activation::relu2_no_mul, false};
  EXPECT_TRUE(cuda::gemm_fuses_activation(tile("8x32/1x1x4/8/r"), GemmInput::values, halves));
  EXPECT_TRUE(cuda::gemm_fuses_activation(tile("8x64/1x2x2/4/r"), GemmInput::values, pairs));
  EXPECT_FALSE(cuda::gemm_fuses_activation(tile("8x128/1x4x1/4/o4/r"), GemmInput::row_scaled_values, halves));
  EXPECT_FALSE(cuda::gemm_fuses_activation(tile("16x128/1x4x1/2/r"), GemmInput::values, halves));
  EXPECT_FALSE(cuda::gemm_fuses_activation(tile("8x128/1x4x1/4"), GemmInput::values, pairs));
  // Warp-specialized wgmma tiles: every kind and row layout ([gate | up] rows load paired), over 16-bit A only.
  for (const char* text : {"24x256/1x8x1/4/o2/p/t", "48x512/1x8x1/6/p/t", "80x256/1x8x1/6/p/s/t", "128x256/1x8x1/4/p"}) {
    EXPECT_TRUE(cuda::gemm_fuses_activation(tile(text), GemmInput::values, pairs)) << text;
    EXPECT_TRUE(cuda::gemm_fuses_activation(tile(text), GemmInput::values, non_gated)) << text;
    EXPECT_TRUE(cuda::gemm_fuses_activation(tile(text), GemmInput::values, halves)) << text;
    EXPECT_FALSE(cuda::gemm_fuses_activation(tile(text), GemmInput::row_scaled_values, pairs)) << text;
  }
  EXPECT_FALSE(cuda::gemm_fuses_activation(tile("16x128/1x4x1/8/p"), GemmInput::values, pairs));  // mma.sync copy warps
  const std::string ws_pairs = cuda::moe_gemm_kernel_spec(w, DType::bf16, tile("48x512/1x8x1/6/p/t"), true,
                                                          GemmInput::values, false, GemmVariant::plain, pairs)
                                   .source;
  EXPECT_NE(ws_pairs.find("kEpilogueActivation = moeq_dev::ActivationKind::kSwigluOai"), std::string::npos);
  EXPECT_NE(ws_pairs.find("kMmaOrderTokens = true"), std::string::npos);
  EXPECT_NE(cuda::moe_gemm_kernel_spec(w, DType::bf16, tile("48x512/1x8x1/6/p/t"), true, GemmInput::values, false,
                                       GemmVariant::plain, halves)
                .source,
            ws_pairs);
  try {
    cuda::moe_gemm_kernel_spec(w, DType::bf16, tile("48x512/1x8x1/6/p/t"), true, GemmInput::row_scaled_values, false,
                               GemmVariant::plain, halves);
    ADD_FAILURE() << "an activation epilogue over quantized A on 48x512/1x8x1/6/p/t was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("48x512/1x8x1/6/p/t"));
  }
  const cuda::GemmTile direct = tile("8x32/1x1x4/2/r");
  const std::string plain = cuda::moe_gemm_kernel_spec(w, DType::bf16, direct, true).source;
  EXPECT_EQ(plain.find("kEpilogueActivation"), std::string::npos);
  const auto source = [&](GemmVariant variant, EpilogueActivation activation) {
    return cuda::moe_gemm_kernel_spec(w, DType::bf16, direct, true, GemmInput::values, false, variant, activation).source;
  };
  const std::string silu = source(GemmVariant::plain, {true, Activation::silu, false});
  EXPECT_NE(silu.find("kEpilogueActivation = moeq_dev::ActivationKind::kSilu"), std::string::npos);
  EXPECT_NE(silu.find("kEpilogueInterleaved = false"), std::string::npos);
  EXPECT_NE(source(GemmVariant::plain, {true, Activation::silu, true}), silu);
  EXPECT_NE(source(GemmVariant::plain, {true, Activation::gelu, false}), silu);
  const std::string self = source(GemmVariant::self_routed, {true, Activation::swiglu_oai, true});
  EXPECT_NE(self.find("kSelfRouted = true"), std::string::npos);
  EXPECT_NE(self.find("kSwigluOai"), std::string::npos);
  try {
    cuda::moe_gemm_kernel_spec(w, DType::bf16, tile("16x128/1x4x1/2/r"), true, GemmInput::values, false,
                               GemmVariant::plain, {true, Activation::silu, false});
    ADD_FAILURE() << "an activation epilogue on 16x128/1x4x1/2/r was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("16x128/1x4x1/2/r"));
  }
  EXPECT_THROW(source(GemmVariant::plain, {true, Activation::relu2_no_mul, true}), Error);
  EXPECT_THROW(cuda::moe_gemm_kernel_spec(w, DType::bf16, direct, true, GemmInput::row_scaled_values, false,
                                          GemmVariant::plain, {true, Activation::silu, false}),
               Error);
  ExpertsDesc d = io::find_preset("gpt-oss-120b").desc;
  io::apply_scheme("mxfp4", d);
  const cuda::GemmVariantUse gemm1 = cuda::layer_gemm_variants(d, true), gemm2 = cuda::layer_gemm_variants(d, false);
  EXPECT_TRUE(gemm1.self_route && gemm1.activation.on);
  EXPECT_EQ(gemm1.activation.kind, d.activation.kind);
  EXPECT_EQ(gemm1.activation.interleaved, d.interleaved_gate_up);
  EXPECT_TRUE(!gemm2.self_route && !gemm2.activation.on);
  io::apply_scheme("mxfp4:fp8-token", d);
  const cuda::GemmVariantUse quantized = cuda::layer_gemm_variants(d, true);
  EXPECT_FALSE(quantized.self_route || quantized.activation.on);
  // An I the epilogue cannot split into whole 16-channel halves: no epilogue kernels (apply never fuses there).
  ExpertsDesc odd = io::find_preset("qwen3-30b-a3b").desc;
  odd.intermediate_size = 760;
  EXPECT_FALSE(cuda::activation_epilogue_fits(odd));
  EXPECT_FALSE(cuda::layer_gemm_variants(odd, true).activation.on);
  EXPECT_TRUE(cuda::layer_gemm_variants(odd, true).self_route);
  odd.intermediate_size = 768;
  EXPECT_TRUE(cuda::activation_epilogue_fits(odd));
}

// The register occupancy apply compares before running GEMM1's activation epilogue
// (activation_epilogue_keeps_occupancy): the register file is allocated per warp in 256-register units. The pairs
// are session 52's ptxas counts (sm_90a, 65536 registers an SM).
TEST(GemmTiles, CtasPerSmForRegistersCountsWholeWarpAllocations) {
  EXPECT_EQ(cuda::ctas_per_sm_for_registers(56, 128, 65536), 9);   // gpt-oss-120b 8x64/1x4x1/2/r, plain
  EXPECT_EQ(cuda::ctas_per_sm_for_registers(62, 128, 65536), 8);   // ... with the epilogue
  EXPECT_EQ(cuda::ctas_per_sm_for_registers(128, 256, 65536), 2);  // Mixtral-8x7B 8x256/1x8x1/4/r, plain
  EXPECT_EQ(cuda::ctas_per_sm_for_registers(145, 256, 65536), 1);  // ... with the epilogue
  EXPECT_EQ(cuda::ctas_per_sm_for_registers(121, 128, 65536), 4);  // 121 rounds up to 128 a thread
  EXPECT_EQ(cuda::ctas_per_sm_for_registers(255, 384, 65536), 0);  // does not fit at all
  EXPECT_EQ(cuda::ctas_per_sm_for_registers(32, 100, 65536), 16);  // a part warp takes a whole warp's registers
}

// Which tile and A operand each GEMM of a layer plans (cuda::gemm_plan): e4m3 codes only for FP8
// per-token activations with FP8 per-channel weights on a direct tile (sm_89+) or canonical MXFP4
// codes on a warp-specialized tile (sm_90+, K % 128 == 0; 128 channels), else the
// codes' 16-bit values (row-scaled), and plain activations without an activation format.
TEST(GemmTiles, GemmPlanTakesE4m3OnlyWhereAnE4m3BodyRuns) {
  ExpertsDesc d = io::find_preset("qwen3-30b-a3b").desc;
  io::apply_scheme("fp8-channel:fp8-token", d);
  cuda::GemmTile direct, other;
  bool found_direct = false, found_other = false;
  for (const cuda::GemmTile& t : cuda::planner_tiles(WeightFormat::fp8_channel)) {
    if (t.direct && !found_direct) direct = t, found_direct = true;
    if (!t.direct && !t.producer && !found_other) other = t, found_other = true;
  }
  ASSERT_TRUE(found_direct && found_other);
  const auto input = [](const ExpertsDesc& desc, const cuda::GemmTile& tile, int sm, bool prepared = true) {
    return cuda::gemm_plan(desc, desc.w13(), tile, sm, prepared, true).input;
  };
  EXPECT_EQ(input(d, direct, 90), cuda::GemmInput::row_scaled_e4m3);
  EXPECT_EQ(input(d, direct, 89), cuda::GemmInput::row_scaled_e4m3);
  EXPECT_EQ(input(d, direct, 86), cuda::GemmInput::row_scaled_values);
  EXPECT_EQ(input(d, other, 90), cuda::GemmInput::row_scaled_values);
  EXPECT_EQ(cuda::gemm_plan(d, d.w13(), direct, 90, true).tile.to_string(), direct.to_string());
  ExpertsDesc mx = d;
  io::apply_scheme("mxfp4:fp8-token", mx);
  EXPECT_EQ(input(mx, direct, 90), cuda::GemmInput::row_scaled_values);
  // MXFP4 on the warp-specialized tiles: canonical codes, sm_90, K % 128 == 0 (Qwen3: K = 2048, I = 768).
  const cuda::GemmTile ws = cuda::parse_gemm_tile("128x256/1x8x1/4/p"), ws64 = cuda::parse_gemm_tile("64x256/1x8x1/8/p");
  const cuda::GemmPlan plan = cuda::gemm_plan(mx, mx.w13(), ws, 90, false, true);
  EXPECT_EQ(plan.input, cuda::GemmInput::row_scaled_e4m3);
  EXPECT_EQ(plan.tile.to_string(), "128x128/1x8x1/4/p");
  EXPECT_EQ(cuda::gemm_plan(mx, mx.w2(), ws64, 90, false, true).tile.to_string(), "64x128/1x8x1/8/p");
  EXPECT_EQ(cuda::gemm_plan(mx, mx.w2(), ws64, 90, false, true).input, cuda::GemmInput::row_scaled_e4m3);
  // Options::fp8_wgmma off (the default): the values path on the planned tile.
  EXPECT_EQ(cuda::gemm_plan(mx, mx.w13(), ws, 90, false).input, cuda::GemmInput::row_scaled_values);
  EXPECT_EQ(cuda::gemm_plan(mx, mx.w13(), ws, 90, false).tile.to_string(), ws.to_string());
  EXPECT_EQ(cuda::gemm_plan(d, d.w13(), direct, 90, true).input, cuda::GemmInput::row_scaled_e4m3);
  EXPECT_EQ(input(mx, ws, 90, true), cuda::GemmInput::row_scaled_values);   // prepared codes
  EXPECT_EQ(input(mx, ws, 89, false), cuda::GemmInput::row_scaled_values);  // no wgmma
  EXPECT_EQ(cuda::gemm_plan(mx, mx.w13(), ws, 89, false, true).tile.to_string(), ws.to_string());
  // A 16-bit-legal tile whose e4m3 ring (twice the codes per stage) exceeds 227 KB: the values path.
  const cuda::GemmTile deep = cuda::parse_gemm_tile("128x128/1x8x1/8/p");
  ASSERT_TRUE(cuda::gemm_tile_reasons(deep, mx.w13()).empty());
  EXPECT_EQ(input(mx, deep, 90, false), cuda::GemmInput::row_scaled_values);
  EXPECT_EQ(input(mx, cuda::parse_gemm_tile("128x128/1x8x1/6/p"), 90, false), cuda::GemmInput::row_scaled_e4m3);
  // An odd ring fits but is refused: the e4m3 consumers' two fragment sets alternate over the unrolled stages.
  EXPECT_EQ(input(mx, cuda::parse_gemm_tile("128x128/1x8x1/7/p"), 90, false), cuda::GemmInput::row_scaled_values);
  ExpertsDesc odd_k = mx;
  odd_k.hidden_size = 2880;  // gpt-oss: K % 128 != 0
  EXPECT_EQ(input(odd_k, ws, 90, false), cuda::GemmInput::row_scaled_values);
  ExpertsDesc plain = d;
  io::apply_scheme("fp8-channel", plain);
  EXPECT_EQ(input(plain, direct, 90), cuda::GemmInput::values);
  // Options::fp8_tensor_cores = false plans with sm 0 (src/api/cuda_backend.cpp): no e4m3 GEMM.
  EXPECT_EQ(input(d, direct, 0), cuda::GemmInput::row_scaled_values);
  Options no_fp8;
  no_fp8.fp8_tensor_cores = false;
  EXPECT_THAT(no_fp8.to_string(), HasSubstr("no_fp8_tensor_cores"));
  EXPECT_THAT(Options{}.to_string(), Not(HasSubstr("fp8_tensor_cores")));
  Options wgmma;
  wgmma.fp8_wgmma = true;
  EXPECT_THAT(wgmma.to_string(), HasSubstr("fp8_wgmma"));
  EXPECT_THAT(Options{}.to_string(), Not(HasSubstr("fp8_wgmma")));
  // Both FP8 per-token forms of an e4m3 tile are compiled (the device decides at run time).
  EXPECT_EQ(cuda::gemm_plans(d, d.w13(), direct, true).size(), 2u);
  EXPECT_EQ(cuda::gemm_plans(d, d.w13(), other, true).size(), 1u);
  EXPECT_EQ(cuda::gemm_plans(mx, mx.w13(), ws, false).size(), 2u);
  EXPECT_EQ(cuda::gemm_plans(mx, mx.w13(), ws, true).size(), 1u);
  for (const auto& [w, tile, prepared] : {std::tuple{d.w13(), other, true}, std::tuple{mx.w13(), ws, false},
                                          std::tuple{mx.w13(), plan.tile, true}}) {
    try {
      cuda::moe_gemm_kernel_spec(w, DType::bf16, tile, prepared, cuda::GemmInput::row_scaled_e4m3);
      ADD_FAILURE() << "an e4m3 GEMM was generated for " << tile.to_string() << (prepared ? " prepared" : "");
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(tile.to_string()));
    }
  }
}

// The e2m1 -> e4m3 table of the MXFP4 x FP8 body (format/e2m1_e4m3.cuh): every code at every
// shift d in [0, 12] is the exact e2m1 value times 2^(d - 6).
TEST(GemmTiles, E2m1ToE4m3TableIsExact) {
  for (int d = 0; d <= moeq_dev::kE2m1E4m3MaxShift; ++d) {
    const moeq_dev::E2m1E4m3Table table = moeq_dev::e2m1_e4m3_table(d);
    for (unsigned code = 0; code < 16; ++code) {
      const double want = static_cast<double>(ref::e2m1_to_f32(static_cast<uint8_t>(code))) * std::ldexp(1.0, d - 6);
      const uint8_t byte = static_cast<uint8_t>(moeq_dev::e2m1_e4m3_byte(code, table));
      EXPECT_EQ(static_cast<double>(ref::e4m3_to_f32(byte)), want) << "code " << code << " d " << d;
      if (code == 8) EXPECT_EQ(byte, 0x80) << "-0 keeps its sign";
    }
  }
}

}  // namespace
}  // namespace moeq
