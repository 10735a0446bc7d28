// An FP8 per-token layer's GEMMs making their own input (GemmInput::quantized_rows): GEMM2 from GEMM1's rows, a
// self-routed GEMM1 from the caller's. Where the host admits them, what the kernel sources say, the shared memory they
// take, and which steps run them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "cuda/gemm_codegen.hpp"
#include "cuda/layer_kernels.hpp"
#include "cuda/moe_gemm.hpp"
#include "io/presets.hpp"
#include "moeq/error.hpp"

namespace moeq {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using cuda::GemmInput;

WeightDesc qwen3_w2(const char* scheme) {
  ExpertsDesc d = io::find_preset("qwen3-30b-a3b").desc;
  io::apply_scheme(scheme, d);
  return d.w2();
}

TEST(GemmQuantizesRows, OnlyDirectTilesWithWholeVectorsAndBoundedStagedRows) {
  WeightDesc w = qwen3_w2("mxfp4:fp8-token");  // K = I = 768
  const cuda::GemmTile direct = cuda::parse_gemm_tile("8x128/1x4x1/4/o4/r");
  EXPECT_TRUE(cuda::gemm_quantizes_rows(direct, w));
  // 8 rows of 768 + 8 values: 12.4 KB past the epilogue's shared memory, and nothing for any other input.
  EXPECT_EQ(cuda::gemm_staged_rows_bytes(direct, w, GemmInput::quantized_rows), 8 * (768 + 8) * 2);
  EXPECT_EQ(cuda::gemm_staged_rows_bytes(direct, w, GemmInput::row_scaled_values), 0);
  EXPECT_EQ(cuda::gemm_smem_bytes(direct, w, GemmInput::quantized_rows),
            cuda::gemm_smem_bytes(direct, w, GemmInput::row_scaled_values) + 8 * (768 + 8) * 2);
  // K off a multiple of 64 stages whole 64-k tiles (zeros past K).
  w.k = 200;
  EXPECT_EQ(cuda::gemm_staged_rows_bytes(direct, w, GemmInput::quantized_rows), 8 * (256 + 8) * 2);
  w.k = 204;  // not whole 16-byte vectors
  EXPECT_FALSE(cuda::gemm_quantizes_rows(direct, w));
  // 16 rows of K = 2048 (DeepSeek-V3's I) stage 66 KB, past kMaxStagedRowsBytes; 8 rows 33 KB.
  w.k = 2048;
  EXPECT_FALSE(cuda::gemm_quantizes_rows(cuda::parse_gemm_tile("16x128/1x4x1/4/r"), w));
  EXPECT_TRUE(cuda::gemm_quantizes_rows(direct, w));
  w.k = 768;
  for (const char* tile : {"24x256/1x8x1/4/o2/p/t", "64x256/1x8x1/8/p", "16x128/1x4x1/4"})
    EXPECT_FALSE(cuda::gemm_quantizes_rows(cuda::parse_gemm_tile(tile), w)) << tile;
}

TEST(GemmQuantizesRows, IsAKernelSourceOfItsOwnNamingTheRowsActivation) {
  const WeightDesc w = qwen3_w2("mxfp4:fp8-token");
  const cuda::GemmTile direct = cuda::parse_gemm_tile("8x128/1x4x1/4/o4/r");
  const std::string plain = cuda::moe_gemm_kernel_spec(w, DType::bf16, direct, true, GemmInput::row_scaled_values).source;
  const std::string rows = cuda::moe_gemm_kernel_spec(w, DType::bf16, direct, true, GemmInput::quantized_rows, false,
                                                      cuda::GemmVariant::plain, {true, Activation::swiglu_oai, true})
                               .source;
  EXPECT_THAT(plain, Not(HasSubstr("kQuantizesRows")));
  EXPECT_THAT(rows, HasSubstr("kQuantizesRows = true"));
  EXPECT_THAT(rows, HasSubstr("kRowsActivation = moeq_dev::ActivationKind::kSwigluOai"));
  EXPECT_THAT(rows, HasSubstr("kRowsInterleaved = true"));
  EXPECT_THAT(rows, HasSubstr("kRowScales = true"));
  EXPECT_THAT(rows, Not(HasSubstr("kEpilogueActivation")));
  // The device's static shared memory check leaves the staged rows out (they are sized by the run-time K).
  EXPECT_THAT(rows, HasSubstr("Shape::kSmemBytes == " +
                              std::to_string(cuda::gemm_smem_bytes(direct, w, GemmInput::row_scaled_values))));
  // A self-routed GEMM1 quantizing the caller's rows: no activation named.
  const std::string gemm1 = cuda::moe_gemm_kernel_spec(w, DType::bf16, direct, true, GemmInput::quantized_rows, false,
                                                       cuda::GemmVariant::self_routed)
                                .source;
  EXPECT_THAT(gemm1, HasSubstr("kQuantizesRows = true"));
  EXPECT_THAT(gemm1, HasSubstr("kSelfRouted = true"));
  EXPECT_THAT(gemm1, Not(HasSubstr("kRowsActivation")));
  // Plain without an activation, self-routed with one, or a tile that cannot stage rows: refused by name.
  EXPECT_THROW(cuda::moe_gemm_kernel_spec(w, DType::bf16, direct, true, GemmInput::quantized_rows), Error);
  EXPECT_THROW(cuda::moe_gemm_kernel_spec(w, DType::bf16, direct, true, GemmInput::quantized_rows, false,
                                          cuda::GemmVariant::self_routed, {true, Activation::silu, false}),
               Error);
  try {
    cuda::moe_gemm_kernel_spec(w, DType::bf16, cuda::parse_gemm_tile("64x256/1x8x1/8/p"), true,
                               GemmInput::quantized_rows, false, cuda::GemmVariant::plain,
                               {true, Activation::silu, false});
    ADD_FAILURE() << "a warp-specialized tile took GemmInput::quantized_rows";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("64x256/1x8x1/8/p"));
  }
}

TEST(GemmQuantizesRows, OnlyFp8PerTokenLayersWarmAndRunThem) {
  ExpertsDesc d = io::find_preset("qwen3-30b-a3b").desc;
  io::apply_scheme("mxfp4:fp8-token", d);
  // GEMM2's quantizing kernels are warmed only where apply's bound lets it launch them (kQuantizingGemm2MaxRows, or
  // env MOEQ_GEMM2_QUANTIZES_MAX_ROWS).
  EXPECT_FALSE(cuda::layer_gemm_variants(d, false, 0).rows_activation.on);
  EXPECT_EQ(cuda::layer_gemm_variants(d, false).rows_activation.on, cuda::quantizing_gemm2_max_rows() > 0);
  const cuda::GemmVariantUse gemm2 = cuda::layer_gemm_variants(d, false, 128), gemm1 = cuda::layer_gemm_variants(d, true);
  EXPECT_TRUE(gemm2.rows_activation.on && !gemm2.quantized_self_route && !gemm2.self_route);
  EXPECT_EQ(gemm2.rows_activation.kind, d.activation.kind);
  EXPECT_TRUE(gemm1.quantized_self_route && !gemm1.rows_activation.on && !gemm1.self_route);
  const WeightDesc w2 = d.w2();
  const cuda::GemmTile direct = cuda::parse_gemm_tile("8x128/1x4x1/4/o4/r");
  const auto variants = cuda::gemm_extra_variants(direct, w2, GemmInput::row_scaled_values, gemm2);
  ASSERT_EQ(variants.size(), 1u);
  EXPECT_TRUE(variants[0].quantized_rows && variants[0].activation.on);
  EXPECT_TRUE(cuda::gemm_extra_variants(direct, w2, GemmInput::row_scaled_e4m3, gemm2).empty());
  EXPECT_TRUE(cuda::step_quantizes_rows(d, w2, direct, GemmInput::row_scaled_values, 16, 16));
  EXPECT_FALSE(cuda::step_quantizes_rows(d, w2, direct, GemmInput::row_scaled_values, 17, 16));
  EXPECT_FALSE(cuda::step_quantizes_rows(d, w2, direct, GemmInput::row_scaled_values, 1, 0));
  EXPECT_FALSE(cuda::step_quantizes_rows(d, w2, direct, GemmInput::row_scaled_e4m3, 16, 16));
  EXPECT_FALSE(cuda::step_quantizes_rows(d, w2, cuda::parse_gemm_tile("24x256/1x8x1/4/o2/p/t"),
                                         GemmInput::row_scaled_values, 16, 16));
  // GEMM1 (K = 2048: 32.9 KB of staged rows on 8 rows): the self-routed kernel quantizing the caller's rows, on
  // 8-row direct tiles only.
  const WeightDesc w13 = d.w13();
  const auto gemm1_variants = cuda::gemm_extra_variants(direct, w13, GemmInput::row_scaled_values, gemm1);
  ASSERT_EQ(gemm1_variants.size(), 1u);
  EXPECT_TRUE(gemm1_variants[0].quantized_rows && gemm1_variants[0].variant == cuda::GemmVariant::self_routed &&
              !gemm1_variants[0].activation.on);
  EXPECT_TRUE(cuda::gemm_extra_variants(cuda::parse_gemm_tile("16x128/1x4x1/4/r"), w13, GemmInput::row_scaled_values,
                                        gemm1)
                  .empty());
  // MXFP8 activations and 16-bit ones keep their kernels.
  for (const char* scheme : {"mxfp4:mxfp8", "mxfp4"}) {
    ExpertsDesc other = io::find_preset("qwen3-30b-a3b").desc;
    io::apply_scheme(scheme, other);
    EXPECT_FALSE(cuda::layer_gemm_variants(other, false, 128).rows_activation.on) << scheme;
    EXPECT_FALSE(cuda::layer_gemm_variants(other, true).quantized_self_route) << scheme;
    EXPECT_FALSE(cuda::step_quantizes_rows(other, other.w2(), direct, GemmInput::row_scaled_values, 16, 16)) << scheme;
  }
}

}  // namespace
}  // namespace moeq
