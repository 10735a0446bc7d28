// The experts step on the GPU against the float64 oracle (CONTRACT §8): the 7 weight formats x
// 3 layouts, representative activations, odd shapes, expert_map with -1, NaN-poisoned
// workspaces (io::verify_on_gpu), batch invariance, the input error word and CUDA-graph replay
// (after Experts::warm_up; tests/gpu_warmup checks warm_up's coverage in a process of its own).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cuda/driver.hpp"
#include "cuda/layer_kernels.hpp"
#include "cuda/moe_gemm.hpp"
#include "io/device_problem.hpp"
#include "io/presets.hpp"
#include "io/problem.hpp"
#include "io/verify.hpp"
#include "plan/workspace.hpp"

namespace moeq {
namespace {

bool have_device() { return cuda::device_count() > 0; }

// Options whose tuning table runs `tile` as both GEMMs' tile (and its block size) at every M.
Options one_tile_everywhere(const cuda::GemmTile& tile) {
  TuningTable t;
  t.entries = {{0, int64_t{1} << 30, tile.block_m, tile.to_string(), tile.to_string()}};
  Options o;
  o.tuning = t;
  return o;
}

ExpertsDesc layer(const char* scheme, Activation act) {
  ExpertsDesc d = io::find_preset("tiny").desc;  // E = 7, top-3, K = 256, I = 128
  io::apply_scheme(scheme, d);
  d.activation.kind = act;
  d.interleaved_gate_up = act == Activation::swiglu_oai;
  return d;
}

TEST(ExpertsGpu, EveryFormatEveryLayoutMatchesOracle) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  int case_index = 0;
  for (const char* scheme : {"mxfp4", "nvfp4", "mxfp8", "fp8-channel", "fp8-block", "int4-g128", "int4-g32-zp", "int8-ch",
                             "int8-g64", "mxfp4:f16", "int4-g128:f16"})
    for (Activation act : {Activation::silu, Activation::swiglu_oai, Activation::relu2_no_mul})
      for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked})
        for (int64_t m : {1, 7, 129}) {
          io::VerifyCase c{layer(scheme, act), layout, m, 1, static_cast<uint64_t>(m)};
          // Every other case reads prepared codes (moeq::prepare_codes), the rest canonical ones:
          // each layout and each M sees both over the schemes and activations.
          c.codes = case_index++ % 2 == 0 ? CodeLayout::prepared : CodeLayout::canonical;
          const io::VerifyResult r = io::verify_on_gpu(c);
          EXPECT_TRUE(r.passed) << c.label() << ": rel " << r.error.rel_err << ", max " << r.error.max_err_fraction
                                << (r.error.finite ? "" : ", non-finite");
        }
}

// The 9 quantized-activation pairs (CONTRACT §5: 7 weight formats x FP8 per token, MXFP4 weights x
// MXFP8 and MXFP4 activations) x 3 layouts: the activations quantized on the GPU exactly as the
// reference quantizes them, then multiplied (cuda::dequantize_activation, FP8 per-token row scales
// in the GEMM's epilogue); bf16 and f16, odd M, and gpt-oss's K = 2880 with bias and expert_map with -1.
TEST(ExpertsGpu, QuantizedActivationPairsMatchOracle) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  int case_index = 0;
  for (const char* scheme : {"mxfp4:fp8-token", "mxfp4:mxfp8", "mxfp4:mxfp4", "nvfp4:fp8-token", "mxfp8:fp8-token",
                             "fp8-channel:fp8-token", "fp8-block:fp8-token", "int4-g128:fp8-token", "int8-ch:fp8-token"})
    for (DType dtype : {DType::bf16, DType::f16})
      for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked})
        for (int64_t m : {1, 7, 129}) {
          // f16 where the 16-bit tests run it too (EveryFormatEveryLayoutMatchesOracle): MXFP4, INT4.
          const std::string name = scheme;
          if (dtype == DType::f16 && name.rfind("mxfp4:", 0) != 0 && name.rfind("int4", 0) != 0) continue;
          ExpertsDesc d = layer(scheme, case_index % 3 == 0 ? Activation::swiglu_oai : Activation::silu);
          d.act_dtype = dtype;
          io::VerifyCase c{d, layout, m, 1, static_cast<uint64_t>(m + 3 * case_index)};
          c.codes = case_index++ % 2 == 0 ? CodeLayout::prepared : CodeLayout::canonical;
          const io::VerifyResult r = io::verify_on_gpu(c);
          EXPECT_TRUE(r.passed) << c.label() << ": rel " << r.error.rel_err << ", max " << r.error.max_err_fraction
                                << (r.error.finite ? "" : ", non-finite");
        }
  ExpertsDesc oss = io::find_preset("gpt-oss-20b").desc;  // K = I = 2880, bias, SwiGLU-OAI interleaved
  oss.num_experts = 8;
  for (const char* scheme : {"mxfp4:mxfp8", "mxfp4:fp8-token"})
    for (Layout layout : {Layout::indexed, Layout::masked}) {
      io::apply_scheme(scheme, oss);
      io::VerifyCase c{oss, layout, 33, 2, 11};
      const io::VerifyResult r = io::verify_on_gpu(c);
      EXPECT_TRUE(r.passed) << c.label() << ": rel " << r.error.rel_err << ", max " << r.error.max_err_fraction;
    }
}

TEST(ExpertsGpu, OddShapesExpertMapAndBias) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  ExpertsDesc oss = io::find_preset("gpt-oss-20b").desc;  // K = I = 2880 (not a multiple of 64), bias
  oss.num_experts = 8;
  for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked})
    for (int64_t m : {1, 33}) {
      io::VerifyCase c{oss, layout, m, 2, 5};  // two ranks: expert_map with -1
      const io::VerifyResult r = io::verify_on_gpu(c);
      EXPECT_TRUE(r.passed) << c.label() << ": rel " << r.error.rel_err << ", max " << r.error.max_err_fraction;
    }
  for (const char* scheme : {"int4-g128", "fp8-block"})
    for (Layout layout : {Layout::indexed, Layout::contiguous}) {
      io::VerifyCase big{layer(scheme, Activation::gelu), layout, 4096, 1, 9};
      const io::VerifyResult r = io::verify_on_gpu(big);
      EXPECT_TRUE(r.passed) << big.label() << ": rel " << r.error.rel_err;
    }
  io::VerifyCase zero{layer("mxfp4", Activation::silu), Layout::indexed, 0, 1, 1};
  EXPECT_TRUE(io::verify_on_gpu(zero).passed);
}

TEST(ExpertsGpu, BatchInvariantPrefixRowsAreBitIdentical) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  Options o;
  o.batch_invariant = true;
  // NOTE: without batch_invariant these two batches get different block sizes and tiles (8 vs
  // 16 rows, with and without K groups), which sum K in different orders.
  for (const char* scheme : {"int4-g128", "fp8-block", "mxfp4"})
    for (Layout layout : {Layout::indexed, Layout::contiguous}) {
      const ExpertsDesc d = layer(scheme, Activation::silu);
      io::VerifyCase full{d, layout, 129, 1, 77}, prefix{d, layout, 7, 1, 77};  // same seed: same first tokens
      const auto a = io::verify_on_gpu(full, o), b = io::verify_on_gpu(prefix, o);
      EXPECT_TRUE(a.passed && b.passed) << scheme << " " << to_string(layout);
      if (!a.passed || !b.passed) continue;
      EXPECT_EQ(0, std::memcmp(a.output.data(), b.output.data(), b.output.size())) << scheme << " " << to_string(layout);
    }
}

// A tuning table's block sizes and tiles (Options::tuning), tiles the planner does not pick among
// them, in every layout: the results still match the oracle.
TEST(ExpertsGpu, TuningTableTilesMatchOracle) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  TuningTable t;  // tiny: valid_shape_m = 3 M
  t.entries = {{0, 8, 8, "8x64/1x4x1/2/r", "8x128/1x4x1/4/o4/r"},
               {8, 64, 16, "16x64/1x4x1/4", "16x64/1x4x1/6/p"},
               {64, int64_t{1} << 30, 32, "32x128/1x8x1/4", "32x128/1x8x1/4/o3"}};
  Options o;
  o.tuning = t;
  for (const char* scheme : {"mxfp4", "int4-g128", "fp8-block"})
    for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked})
      for (int64_t m : {1, 7, 129}) {
        io::VerifyCase c{layer(scheme, Activation::silu), layout, m, 1, static_cast<uint64_t>(m + 40)};
        const io::VerifyResult r = io::verify_on_gpu(c, o);
        EXPECT_TRUE(r.passed) << c.label() << ": rel " << r.error.rel_err << ", max " << r.error.max_err_fraction;
      }
}

// Direct (/r) tiles of 24 and 32 token rows (three and four 8-row MMA columns per warp; 24-row
// blocks are the indexed layout's only non-power-of-two alignment) as both GEMMs' tile: every weight
// format, FP8 per-token activations (e4m3 MMAs on FP8 per-channel weights, the values path on
// MXFP4), both code layouts at each M, the three layouts, M that leaves blocks part full and one that
// fills several blocks per expert; then the planner's own 24-row choice (no table) at M = 40 (tiny:
// ~17 rows per expert).
TEST(ExpertsGpu, DirectTilesOf24And32RowsMatchOracle) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  int case_index = 0;
  for (const char* text : {"24x128/1x4x1/4/r", "24x128/1x4x1/2/r", "32x64/1x4x1/2/r"}) {
    const cuda::GemmTile tile = cuda::parse_gemm_tile(text);
    const Options o = one_tile_everywhere(tile);
    for (const char* scheme : {"mxfp4", "nvfp4", "mxfp8", "fp8-channel", "fp8-block", "int4-g128", "int4-g32-zp",
                               "int8-ch", "int8-g64", "mxfp4:f16", "fp8-channel:fp8-token", "mxfp4:fp8-token"})
      for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked})
        for (int64_t m : {7, 129}) {
          io::VerifyCase c{layer(scheme, Activation::silu), layout, m, 1, static_cast<uint64_t>(m + 60)};
          c.codes = (case_index++ / 2) % 2 == 0 ? CodeLayout::prepared : CodeLayout::canonical;
          const io::VerifyResult r = io::verify_on_gpu(c, o);
          EXPECT_TRUE(r.passed) << text << " " << c.label() << ": rel " << r.error.rel_err << ", max "
                                << r.error.max_err_fraction << (r.error.finite ? "" : ", non-finite");
        }
  }
  for (const char* scheme : {"mxfp4", "int4-g128", "nvfp4"})
    for (Layout layout : {Layout::indexed, Layout::masked})
      for (CodeLayout codes : {CodeLayout::prepared, CodeLayout::canonical}) {
        io::VerifyCase c{layer(scheme, Activation::silu), layout, 40, 1, 71};
        c.codes = codes;
        const io::VerifyResult r = io::verify_on_gpu(c);
        EXPECT_TRUE(r.passed) << "planner " << c.label() << ": rel " << r.error.rel_err;
      }
}

// 80-, 96- and 144-row blocks (the warp-specialized wgmma tile with 80, 96 or 144 token columns: 10, 12
// or 18 token rows per copy thread, a last permute pass of 16, 32 or 16 rows): 256 channels (144: also
// 128) as both GEMMs' tile, 4-bit, 8-bit and FP8 per-token inputs, the three layouts, M = 7 (one part
// block), 129 (~55 rows per expert) and 400 (~171: whole blocks and a part one), both code layouts; then
// the planner's own 80- and 144-row choices (M = 150 and 300: ~64 and ~129 rows per expert).
TEST(ExpertsGpu, WarpSpecializedTilesOf80To144RowsMatchOracle) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  if (cuda::device_sm() < 90) GTEST_SKIP() << "no wgmma on sm_" << cuda::device_sm();
  int case_index = 0;
  for (const char* text : {"144x256/1x8x1/4/p", "144x128/1x8x1/4/p", "80x256/1x8x1/6/p", "96x256/1x8x1/6/p"}) {
    const cuda::GemmTile tile = cuda::parse_gemm_tile(text);
    const Options o = one_tile_everywhere(tile);
    for (const char* scheme : {"mxfp4", "nvfp4", "mxfp8", "fp8-block", "fp8-channel", "int4-g128", "int4-g32-zp",
                               "int8-ch", "mxfp4:f16", "mxfp4:fp8-token"})
      for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked})
        for (int64_t m : {7, 129, 400}) {
          io::VerifyCase c{layer(scheme, Activation::silu), layout, m, 1, static_cast<uint64_t>(m + 90)};
          c.codes = case_index++ % 2 == 0 ? CodeLayout::prepared : CodeLayout::canonical;
          const io::VerifyResult r = io::verify_on_gpu(c, o);
          EXPECT_TRUE(r.passed) << text << " " << c.label() << ": rel " << r.error.rel_err << ", max "
                                << r.error.max_err_fraction << (r.error.finite ? "" : ", non-finite");
        }
  }
  for (const auto& [m, block] : {std::pair<int64_t, int64_t>{150, 80}, {300, 144}})
    for (const char* scheme : {"mxfp4", "int4-g128"}) {
      ASSERT_EQ(plan::choose_block_m(layer(scheme, Activation::silu), m), block) << scheme << " M=" << m;
      for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked}) {
        io::VerifyCase c{layer(scheme, Activation::silu), layout, m, 1, static_cast<uint64_t>(73 + m)};
        const io::VerifyResult r = io::verify_on_gpu(c);
        EXPECT_TRUE(r.passed) << "planner " << c.label() << ": rel " << r.error.rel_err;
      }
    }
}

// Persistent (/s) warp-specialized tiles as both GEMMs' tile through Experts::apply: 4-bit, 8-bit, f16
// and FP8 per-token (row scales) inputs, the three layouts, both code layouts. (A CTA's many tiles:
// MoeGemmGpu.PersistentTilesEqualOneTilePerCta.)
TEST(ExpertsGpu, PersistentTilesMatchOracle) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  if (cuda::device_sm() < 90) GTEST_SKIP() << "no wgmma on sm_" << cuda::device_sm();
  int case_index = 0;
  for (const char* text : {"80x256/1x8x1/5/p/s", "128x256/1x8x1/3/p/s"}) {
    const Options o = one_tile_everywhere(cuda::parse_gemm_tile(text));
    for (const char* scheme : {"mxfp4", "int4-g128", "fp8-block", "mxfp4:f16", "mxfp4:fp8-token"})
      for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked})
        for (int64_t m : {7, 400}) {
          io::VerifyCase c{layer(scheme, Activation::silu), layout, m, 1, static_cast<uint64_t>(m + 31)};
          c.codes = case_index++ % 2 == 0 ? CodeLayout::prepared : CodeLayout::canonical;
          const io::VerifyResult r = io::verify_on_gpu(c, o);
          EXPECT_TRUE(r.passed) << text << " " << c.label() << ": rel " << r.error.rel_err << ", max "
                                << r.error.max_err_fraction << (r.error.finite ? "" : ", non-finite");
        }
  }
}

// Tokens in the MMA's K order (`/t`): GEMM1's input rewritten by order_rows_for_mma (indexed: into the
// workspace; contiguous: the permuted rows in place) or written so by its quantizer (folded into the routing,
// or alone for the masked layout), GEMM2's by the activation or the activation-quantize; the masked layout's
// 16-bit GEMM1 runs the tile's twin without `/t`. Gated, interleaved and plain activations.
TEST(ExpertsGpu, MmaOrderTilesMatchOracle) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  if (cuda::device_sm() < 90) GTEST_SKIP() << "no wgmma on sm_" << cuda::device_sm();
  int case_index = 0;
  for (const char* text : {"80x256/1x8x1/6/p/s/t", "144x256/1x8x1/4/p/t", "48x512/1x8x1/4/p/t"}) {
    const Options o = one_tile_everywhere(cuda::parse_gemm_tile(text));
    for (const char* scheme : {"mxfp4", "int4-g128", "fp8-block", "mxfp4:f16", "mxfp4:mxfp8", "int4-g128:fp8-token",
                               "mxfp4:mxfp4"})
      for (Activation act : {Activation::silu, Activation::swiglu_oai, Activation::relu2_no_mul})
        for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked})
          for (int64_t m : {7, 400}) {
            const ExpertsDesc d = layer(scheme, act);
            if (!cuda::gemm_tile_reasons(cuda::parse_gemm_tile(text), d.w13()).empty()) continue;  // 512: MX only
            if (act != Activation::silu && (layout == Layout::masked || m == 7)) continue;
            io::VerifyCase c{d, layout, m, 1, static_cast<uint64_t>(m + 64)};
            c.codes = case_index++ % 2 == 0 ? CodeLayout::prepared : CodeLayout::canonical;
            const io::VerifyResult r = io::verify_on_gpu(c, o);
            EXPECT_TRUE(r.passed) << text << " " << c.label() << ": rel " << r.error.rel_err << ", max "
                                  << r.error.max_err_fraction << (r.error.finite ? "" : ", non-finite");
          }
  }
}

// FP8 per-token row scales on the tiles whose epilogue follows a reduction of partial sums: K groups
// in one CTA (/1x4x2) and split K over a cluster (/k2), which the planner does not pick; and on the
// warp-specialized wgmma tiles, whose consumers fetch the block's row scales into shared memory
// before their main loop (128 and 64 rows: odd M leaves padding rows in the last block).
TEST(ExpertsGpu, RowScalesAfterKGroupsAndSplitK) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (const TuningEntry& entry : {TuningEntry{0, int64_t{1} << 30, 16, "16x64/1x4x2/8", "16x64/1x4x1/4/k2"},
                                   TuningEntry{0, int64_t{1} << 30, 128, "128x256/1x8x1/4/p", "128x256/1x8x1/4/p"},
                                   TuningEntry{0, int64_t{1} << 30, 64, "64x256/1x8x1/4/p", "64x128/1x8x1/4/p"}}) {
    TuningTable t;  // tiny: valid_shape_m = 3 M
    t.entries = {entry};
    Options o;
    o.tuning = t;
    for (const char* scheme : {"mxfp4:fp8-token", "int4-g128:fp8-token", "fp8-block:fp8-token"})
      for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked})
        for (int64_t m : {7, 129}) {
          io::VerifyCase c{layer(scheme, Activation::silu), layout, m, 1, static_cast<uint64_t>(m + 60)};
          const io::VerifyResult r = io::verify_on_gpu(c, o);
          EXPECT_TRUE(r.passed) << entry.gemm1_tile << " " << c.label() << ": rel " << r.error.rel_err << ", max "
                                << r.error.max_err_fraction;
        }
  }
}

// e4m3 activations (FP8 per-channel weights x FP8 per-token activations on the direct tiles: the
// codes go into mma.sync m16n8k32 e4m3): every direct tile the planner has for FP8 per channel as
// both GEMMs' tile, both code layouts, the three layouts, odd M, a K and I that end in a part K tile
// (K = 352, I = 96), E = 6 over two ranks (expert_map with -1) and E = 7, bf16 and f16; Qwen3's
// K = 2048 and I = 768 on the first tile (fp32 sums chained over 32 K tiles).
TEST(ExpertsGpu, E4m3ActivationsOnEveryDirectTileMatchOracle) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  ExpertsDesc tiny = layer("fp8-channel:fp8-token", Activation::silu);
  ExpertsDesc odd = tiny;
  odd.num_experts = 6;
  odd.top_k = 2;
  odd.hidden_size = 352;
  odd.intermediate_size = 96;
  ExpertsDesc wide = tiny;
  wide.num_experts = 8;
  wide.top_k = 2;
  wide.hidden_size = 2048;
  wide.intermediate_size = 768;
  int case_index = 0, e4m3_tiles = 0;
  for (const cuda::GemmTile& tile : cuda::planner_tiles(WeightFormat::fp8_channel)) {
    if (!tile.direct) continue;
    if (cuda::gemm_plan(tiny, tiny.w13(), tile, cuda::device_sm(), true).input != cuda::GemmInput::row_scaled_e4m3) continue;
    ++e4m3_tiles;
    const Options o = one_tile_everywhere(tile);
    for (bool is_odd : {false, true})
      for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked})
        for (int64_t m : {1, 7, 33}) {
          ExpertsDesc d = is_odd ? odd : tiny;
          d.act_dtype = case_index % 4 == 3 ? DType::f16 : DType::bf16;
          io::VerifyCase c{d, layout, m, is_odd ? 2 : 1, static_cast<uint64_t>(m + 7 * case_index)};
          c.codes = case_index++ % 2 == 0 ? CodeLayout::prepared : CodeLayout::canonical;
          const io::VerifyResult r = io::verify_on_gpu(c, o);
          EXPECT_TRUE(r.passed) << tile.to_string() << " " << c.label() << ": rel " << r.error.rel_err << ", max "
                                << r.error.max_err_fraction << (r.error.finite ? "" : ", non-finite");
        }
    if (e4m3_tiles > 1) continue;
    // Options::fp8_tensor_cores = false: the same tile on the 16-bit values path.
    Options values = o;
    values.fp8_tensor_cores = false;
    for (Layout layout : {Layout::indexed, Layout::contiguous}) {
      io::VerifyCase c{tiny, layout, 7, 1, 123};
      const io::VerifyResult r = io::verify_on_gpu(c, values);
      EXPECT_TRUE(r.passed) << tile.to_string() << " " << c.label() << " no_fp8_tensor_cores: rel " << r.error.rel_err;
    }
    for (int64_t m : {7, 33}) {
      io::VerifyCase c{wide, Layout::indexed, m, 1, static_cast<uint64_t>(m + 90)};
      c.codes = m == 7 ? CodeLayout::prepared : CodeLayout::canonical;
      const io::VerifyResult r = io::verify_on_gpu(c, o);
      EXPECT_TRUE(r.passed) << tile.to_string() << " " << c.label() << ": rel " << r.error.rel_err << ", max "
                            << r.error.max_err_fraction;
    }
  }
  if (cuda::device_sm() >= 89) EXPECT_GT(e4m3_tiles, 0) << "no direct tile took e4m3 activations";
}

// e4m3 activations on MXFP4 weights (Options::fp8_wgmma; canonical codes, the warp-specialized wgmma tiles:
// kernels/moe_gemm_ws_e4m3.cuh): each tile shape the e4m3 consumers take (256-channel tiles
// planned run as 128 channels) as both GEMMs' tile, the three layouts, odd M, bf16 and f16; prepared codes on the
// same tiles (the 16-bit values path); Qwen3's K = 2048 and I = 768 (16 and 6 K tiles); and MX
// scales raised by 12 binades in one group of every third row (the fold's widest exact window:
// the other groups decode at shift 0, the subnormal e4m3 code) or by 13 (those K tiles take one
// pass per group), in every K tile or every third. `/t` tiles read the codes the quantizers wrote in
// the e4m3 consumers' K order from the copy ring itself. Persistent ones (`/s/t`) run here with a CTA for
// each of their few output tiles (the tiny layer's 14-20, the wide case's ~100, under 132 SMs): the loop over tiles
// with the ring's state carried on is MoeGemmGpu.E4m3MmaOrderAndPersistentTilesEqualThePermutingTile's (1 and 3 CTAs).
TEST(ExpertsGpu, E4m3ActivationsOnMxfp4WarpSpecializedTilesMatchOracle) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  if (cuda::device_sm() < 90) GTEST_SKIP() << "no wgmma on sm_" << cuda::device_sm();
  const ExpertsDesc tiny = layer("mxfp4:fp8-token", Activation::silu);
  ExpertsDesc wide = tiny;
  wide.num_experts = 8;
  wide.top_k = 2;
  wide.hidden_size = 2048;
  wide.intermediate_size = 768;
  int case_index = 0;
  for (const char* text : {"128x256/1x8x1/4/p", "128x128/1x8x1/6/p", "64x256/1x8x1/8/p", "64x128/1x8x1/4/p",
                           "128x256/1x8x1/4/p/t", "64x128/1x8x1/6/p/t", "128x256/1x8x1/6/p/s/t",
                           "64x128/1x8x1/4/p/s/t"}) {
    const cuda::GemmTile tile = cuda::parse_gemm_tile(text);
    const cuda::GemmPlan plan = cuda::gemm_plan(tiny, tiny.w13(), tile, cuda::device_sm(), false, true);
    ASSERT_EQ(plan.input, cuda::GemmInput::row_scaled_e4m3) << text;
    ASSERT_EQ(plan.tile.mma_order_tokens, tile.mma_order_tokens) << text;
    ASSERT_EQ(plan.tile.persistent, tile.persistent) << text;
    Options o = one_tile_everywhere(tile);
    o.fp8_wgmma = true;
    for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked})
      for (int64_t m : {7, 129}) {
        ExpertsDesc d = tiny;
        d.act_dtype = case_index % 4 == 3 ? DType::f16 : DType::bf16;
        io::VerifyCase c{d, layout, m, case_index % 3 == 2 ? 7 : 1, static_cast<uint64_t>(m + 11 * case_index)};
        c.codes = case_index++ % 5 == 4 ? CodeLayout::prepared : CodeLayout::canonical;
        const io::VerifyResult r = io::verify_on_gpu(c, o);
        EXPECT_TRUE(r.passed) << text << " " << c.label() << ": rel " << r.error.rel_err << ", max "
                              << r.error.max_err_fraction << (r.error.finite ? "" : ", non-finite");
      }
    // {raise, every how many K tiles}: a group's exponent moved in every third row. The e4m3 body folds a row's
    // groups relative to its largest exponent over K, so a raise of 13 lifts that base and makes most of those
    // rows' tiles wide; lowered by 13 (-13), only the tiles holding the lowered group are: every third tile
    // alternates narrow and wide tiles (the first wide: no fragments decoded ahead of it), every second one
    // has a wide tile follow each narrow one.
    for (const auto& [raise, tile_step] : {std::pair{0, 1}, {12, 1}, {13, 1}, {13, 3}, {-13, 3}, {-13, 2}}) {
      io::VerifyCase c{wide, Layout::indexed, 33, 1, static_cast<uint64_t>(raise + tile_step + 20)};
      if (raise != 0)
        c.edit = [raise = raise, tile_step = tile_step](io::HostProblem& p) {
          // Group 4 j + 1 of every third row of w13 (a row's second group of 128-k tile j).
          ref::QuantizedWeights& w = *p.w13;
          const int64_t groups = w.desc.k / 32;
          for (int64_t row = 0; row < w.desc.num_experts * w.desc.n; row += 3)
            for (int64_t g = 1; g < groups; g += 4 * tile_step) {
              uint8_t& s = w.scales[static_cast<size_t>(row * groups + g)];
              s = static_cast<uint8_t>(std::clamp(s + raise, 0, 250));
            }
        };
      const io::VerifyResult r = io::verify_on_gpu(c, o);
      EXPECT_TRUE(r.passed) << text << " " << c.label() << " scales +" << raise << " every " << tile_step
                            << " K tiles: rel " << r.error.rel_err << ", max " << r.error.max_err_fraction
                            << (r.error.finite ? "" : ", non-finite");
    }
  }
}

// Runs `p` once on the GPU in `layout` with an error word (zeroed first unless `word` is given)
// and returns the word.
int32_t error_word_after_apply(const io::HostProblem& p, Layout layout, cuda::DeviceBuffer* word = nullptr) {
  Options o;
  o.backend = Backend::cuda;
  o.layout = layout;
  const Experts experts(p.desc, o);
  io::DeviceProblem dev = io::upload_problem(p);
  const auto ws = p.is_batched() ? experts.workspace_bytes(0, p.max_tokens_per_expert) : experts.workspace_bytes(p.num_tokens);
  cuda::DeviceBuffer ws1(std::max<int64_t>(ws.workspace1_bytes, 1)), ws2(std::max<int64_t>(ws.workspace2_bytes, 1));
  cuda::DeviceBuffer out(static_cast<size_t>(p.output_rows() * p.desc.hidden_size * 2));
  cuda::DeviceBuffer own_word(4);
  if (word == nullptr) {
    own_word.fill_bytes(0);
    word = &own_word;
  }
  auto ptr = [](const cuda::DeviceBuffer& b) { return reinterpret_cast<void*>(static_cast<uintptr_t>(b.ptr())); };
  ExpertsInputs inputs = dev.inputs;
  inputs.error_word = static_cast<int32_t*>(ptr(*word));
  cuda::Stream stream;
  experts.apply(dev.w13, dev.w2, inputs, {ptr(out), 0}, ptr(ws1), ptr(ws2), stream.get());
  stream.synchronize();
  int32_t bits = 0;
  word->download(&bits, sizeof(bits));
  return bits;
}

TEST(ExpertsGpu, BadRoutingValuesSetTheCallersErrorWord) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const ExpertsDesc d = layer("mxfp4", Activation::silu);
  for (Layout layout : {Layout::indexed, Layout::contiguous}) {
    io::GenerateOptions g;
    g.num_tokens = 16;
    io::HostProblem p = io::generate_problem(d, g);
    EXPECT_EQ(error_word_after_apply(p, layout), 0) << to_string(layout) << ": valid routing";
    int32_t* ids = reinterpret_cast<int32_t*>(p.topk_ids.data());
    ids[5] = static_cast<int32_t>(d.global_experts());  // one past the last global expert
    cuda::DeviceBuffer word(4);
    word.fill_bytes(0);
    EXPECT_EQ(error_word_after_apply(p, layout, &word), kInputErrorBadTopkId) << to_string(layout);
    // An expert_map value past the local experts, on an id the batch uses; the word keeps the
    // first call's bit (apply never clears the caller's word).
    ids[5] = 0;
    p.expert_map.assign(static_cast<size_t>(d.global_experts()), 0);
    for (int32_t e = 0; e < static_cast<int32_t>(d.global_experts()); ++e) p.expert_map[e] = e;
    p.expert_map[0] = static_cast<int32_t>(d.num_experts);
    EXPECT_EQ(error_word_after_apply(p, layout, &word), kInputErrorBadTopkId | kInputErrorBadExpertMap) << to_string(layout);
    const std::string words = describe_input_errors(kInputErrorBadTopkId | kInputErrorBadExpertMap);
    EXPECT_NE(words.find("topk id"), std::string::npos) << words;
    EXPECT_NE(words.find("expert_map"), std::string::npos) << words;
  }
  {  // M = 1: 3 slots take the fused align kernel; int64 ids
    io::GenerateOptions g;
    g.num_tokens = 1;
    io::HostProblem p = io::generate_problem(d, g);
    std::vector<int64_t> wide(p.topk_ids.size() / 4);
    for (size_t i = 0; i < wide.size(); ++i) wide[i] = reinterpret_cast<const int32_t*>(p.topk_ids.data())[i];
    wide[1] = -2;
    p.topk_ids.assign(reinterpret_cast<const uint8_t*>(wide.data()), reinterpret_cast<const uint8_t*>(wide.data() + wide.size()));
    p.topk_ids_dtype = DType::i64;
    EXPECT_EQ(error_word_after_apply(p, Layout::indexed), kInputErrorBadTopkId) << "M = 1, int64 id -2";
  }
  io::GenerateOptions g;
  g.num_tokens = 16;
  g.batched = true;
  io::HostProblem batched = io::generate_problem(d, g);
  EXPECT_EQ(error_word_after_apply(batched, Layout::masked), 0) << "masked: valid counts";
  batched.expert_num_tokens[2] = static_cast<int32_t>(batched.max_tokens_per_expert + 1);
  EXPECT_EQ(error_word_after_apply(batched, Layout::masked), kInputErrorBatchedOverflow) << "masked: a count above T";
  batched.expert_num_tokens[2] = -1;
  EXPECT_EQ(error_word_after_apply(batched, Layout::masked), kInputErrorBatchedOverflow) << "masked: a negative count";
}

// A captured step replays with new routing and hidden states: 16-bit activations, and FP8 per-token
// ones (their quantizers captured too) in the indexed and contiguous layouts.
TEST(ExpertsGpu, GraphCaptureReplaysWithNewRouting) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  struct Case {
    const char* scheme;
    Layout layout;
  };
  for (const Case& k : {Case{"mxfp4", Layout::indexed}, Case{"mxfp4:fp8-token", Layout::indexed},
                        Case{"mxfp4:fp8-token", Layout::contiguous}}) {
    SCOPED_TRACE(std::string(k.scheme) + " " + std::string(to_string(k.layout)));
    const ExpertsDesc d = layer(k.scheme, Activation::silu);
    io::GenerateOptions g;
    g.num_tokens = 64;
    const io::HostProblem p1 = io::generate_problem(d, g);
    g.seed = 1;
    const io::HostProblem p2 = io::generate_problem(d, g);
    Options o;
    o.backend = Backend::cuda;
    o.layout = k.layout;
    const Experts experts(p1.desc, o);
    io::DeviceProblem dev = io::upload_problem(p1);
    const auto ws = experts.workspace_bytes(64);
    cuda::DeviceBuffer ws1(ws.workspace1_bytes), ws2(ws.workspace2_bytes), out(64 * d.hidden_size * 2);
    auto ptr = [](const cuda::DeviceBuffer& b) { return reinterpret_cast<void*>(static_cast<uintptr_t>(b.ptr())); };
    cuda::Stream stream;
    // No compile or load may happen during capture: warm_up loads every kernel of the layer.
    experts.warm_up();
    const auto& drv = cuda::driver();
    cuda::CUgraph graph = nullptr;
    cuda::CUgraphExec exec = nullptr;
    cuda::check(drv.cuStreamBeginCapture_v2(stream.get(), 0), "begin capture");
    experts.apply(dev.w13, dev.w2, dev.inputs, {ptr(out), 0}, ptr(ws1), ptr(ws2), stream.get());
    cuda::check(drv.cuStreamEndCapture(stream.get(), &graph), "end capture");
    cuda::check(drv.cuGraphInstantiateWithFlags(&exec, graph, 0), "instantiate");

    std::vector<uint8_t> replayed(out.num_bytes()), direct(out.num_bytes()), first;
    cuda::DeviceBuffer out_direct(out.num_bytes());
    for (const io::HostProblem* p : {&p1, &p2}) {
      // New routing, router weights and hidden states, written where the graph reads them.
      cuda::check(drv.cuMemcpyHtoD_v2(reinterpret_cast<uintptr_t>(dev.inputs.topk_ids), p->topk_ids.data(), p->topk_ids.size()), "ids");
      cuda::check(drv.cuMemcpyHtoD_v2(reinterpret_cast<uintptr_t>(dev.inputs.topk_weights), p->topk_weights.data(), p->topk_weights.size()), "w");
      cuda::check(drv.cuMemcpyHtoD_v2(reinterpret_cast<uintptr_t>(dev.inputs.hidden), p->hidden.data(), p->hidden.size()), "x");
      // NOTE: pageable uploads may return before the bytes land, and `stream` does not wait for them.
      cuda::check(drv.cuCtxSynchronize(), "cuCtxSynchronize");
      out.fill_bytes(0xFF);
      cuda::check(drv.cuGraphLaunch(exec, stream.get()), "launch");
      stream.synchronize();
      out.download(replayed.data(), replayed.size());
      // The same inputs through a direct call must give the same bytes.
      experts.apply(dev.w13, dev.w2, dev.inputs, {ptr(out_direct), 0}, ptr(ws1), ptr(ws2), stream.get());
      stream.synchronize();
      out_direct.download(direct.data(), direct.size());
      EXPECT_EQ(replayed, direct) << (p == &p1 ? "first" : "second") << " routing";
      if (first.empty()) first = replayed;
      else EXPECT_NE(first, replayed) << "the replay did not follow the new routing";
    }
    drv.cuGraphExecDestroy(exec);
    drv.cuGraphDestroy(graph);
  }
}

}  // namespace
}  // namespace moeq
