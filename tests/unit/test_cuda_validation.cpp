// The host-side checks of the GPU path (src/api/cuda_backend.cpp) need no device: they look at
// pointers, alignment, dtypes and sizes, never at device memory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "api/cuda_backend.hpp"
#include "api/validate.hpp"
#include "cuda/driver.hpp"
#include "moeq/error.hpp"

namespace moeq {
namespace {

using ::testing::HasSubstr;

// Fake device addresses: never dereferenced by the checks.
const void* address(uintptr_t a) { return reinterpret_cast<const void*>(a); }

ExpertsDesc small_layer() {
  ExpertsDesc d;
  d.num_experts = 8;
  d.top_k = 2;
  d.hidden_size = 256;
  d.intermediate_size = 128;
  d.weight_format = WeightFormat::nvfp4;
  d.bias_dtype = DType::f32;
  return d;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

WeightView good_weights() {
  WeightView v;
  v.codes = address(0x10000);
  v.scales = address(0x20000);
  v.global_scales = static_cast<const float*>(address(0x30000));
  v.bias = address(0x40000);
  return v;
}

TEST(CudaValidation, WeightsNeedEveryPointerAligned) {
  const WeightDesc w = small_layer().w13();
  EXPECT_EQ(error_of([&] { api::validate_device_weights(w, good_weights(), "w13"); }), "");
  WeightView v = good_weights();
  v.codes = nullptr;
  EXPECT_THAT(error_of([&] { api::validate_device_weights(w, v, "w13"); }), HasSubstr("w13.codes is null"));
  v = good_weights();
  v.codes = address(0x10008);
  EXPECT_THAT(error_of([&] { api::validate_device_weights(w, v, "w13"); }), HasSubstr("w13.codes is not aligned to 16"));
  v = good_weights();
  v.global_scales = nullptr;
  EXPECT_THAT(error_of([&] { api::validate_device_weights(w, v, "w2"); }), HasSubstr("w2.global_scales is null"));
  v = good_weights();
  v.bias = address(0x40002);
  EXPECT_THAT(error_of([&] { api::validate_device_weights(w, v, "w13"); }), HasSubstr("w13.bias is not aligned to 4"));
  v = good_weights();
  v.code_layout = CodeLayout::prepared;
  EXPECT_EQ(error_of([&] { api::validate_device_weights(w, v, "w13"); }), "");
  v.code_layout = static_cast<CodeLayout>(7);
  EXPECT_THAT(error_of([&] { api::validate_device_weights(w, v, "w13"); }),
              HasSubstr("w13.code_layout = 7 is not canonical or prepared"));
  v = good_weights();
  v.mx_scales_at_most_two = true;  // small_layer is NVFP4: e4m3 scales
  EXPECT_THAT(error_of([&] { api::validate_device_weights(w, v, "w13"); }),
              HasSubstr("w13.mx_scales_at_most_two is set for nvfp4 weights (MX formats only)"));
}

TEST(CudaValidation, ZeroPointsRequiredWhenDeclared) {
  ExpertsDesc d = small_layer();
  d.weight_format = WeightFormat::int4;
  d.has_zero_point = true;
  d.bias_dtype = DType::none;
  WeightView v = good_weights();
  EXPECT_THAT(error_of([&] { api::validate_device_weights(d.w13(), v, "w13"); }), HasSubstr("w13.zero_points is null"));
  v.zero_points = static_cast<const uint8_t*>(address(0x50000));
  EXPECT_EQ(error_of([&] { api::validate_device_weights(d.w13(), v, "w13"); }), "");
}

TEST(CudaValidation, InputsAlignmentStridesAndRowBounds) {
  const ExpertsDesc d = small_layer();
  ExpertsInputs in;
  in.hidden = address(0x1000);
  in.num_tokens = 4;
  in.topk_ids = address(0x2000);
  in.topk_weights = address(0x3000);
  ExpertsOutput out{const_cast<void*>(address(0x4000)), 0};
  EXPECT_EQ(error_of([&] { api::validate_device_inputs(d, Layout::indexed, in, out); }), "");
  ExpertsInputs bad = in;
  bad.hidden = address(0x1008);
  EXPECT_THAT(error_of([&] { api::validate_device_inputs(d, Layout::indexed, bad, out); }), HasSubstr("hidden is not aligned to 16"));
  bad = in;
  bad.hidden_row_stride = 260;
  EXPECT_THAT(error_of([&] { api::validate_device_inputs(d, Layout::indexed, bad, out); }),
              HasSubstr("hidden_row_stride = 260 must be >= K and a multiple of 8"));
  bad = in;
  bad.error_word = static_cast<int32_t*>(const_cast<void*>(address(0x5002)));
  EXPECT_THAT(error_of([&] { api::validate_device_inputs(d, Layout::indexed, bad, out); }),
              HasSubstr("error_word is not aligned to 4 bytes"));
  bad.error_word = static_cast<int32_t*>(const_cast<void*>(address(0x5004)));
  EXPECT_EQ(error_of([&] { api::validate_device_inputs(d, Layout::indexed, bad, out); }), "");
  bad = in;
  bad.topk_ids_dtype = DType::f32;
  EXPECT_THAT(error_of([&] { api::validate_device_inputs(d, Layout::indexed, bad, out); }), HasSubstr("topk_ids dtype = f32"));
  bad = in;
  bad.num_tokens = int64_t{1} << 31;  // 2^32 routed rows with top_k 2
  EXPECT_THAT(error_of([&] { api::validate_device_inputs(d, Layout::indexed, bad, out); }), HasSubstr("routed rows"));
  EXPECT_THAT(error_of([&] { api::validate_device_inputs(d, Layout::masked, in, out); }), HasSubstr("does not fit standard input"));

  ExpertsInputs batched;
  batched.hidden = address(0x1000);
  batched.expert_num_tokens = address(0x5000);
  batched.max_tokens_per_expert = 16;
  EXPECT_EQ(error_of([&] { api::validate_device_inputs(d, Layout::masked, batched, out); }), "");
  batched.expert_num_tokens = address(0x5002);
  EXPECT_THAT(error_of([&] { api::validate_device_inputs(d, Layout::masked, batched, out); }),
              HasSubstr("expert_num_tokens is not aligned to 4"));
}

TEST(CudaValidation, WorkspacesAre16ByteAligned) {
  EXPECT_EQ(error_of([&] { api::validate_workspaces(address(0x1000), address(0x2000)); }), "");
  EXPECT_EQ(error_of([&] { api::validate_workspaces(nullptr, nullptr); }), "");
  EXPECT_THAT(error_of([&] { api::validate_workspaces(address(0x1000), address(0x2004)); }),
              HasSubstr("workspace2 = 0x2004 is not aligned to 16 bytes"));
}

TEST(CudaValidation, InputErrorBitsAreDescribed) {
  EXPECT_EQ(describe_input_errors(0), "");
  EXPECT_THAT(describe_input_errors(kInputErrorBadTopkId), HasSubstr("a topk id is outside [-1, num_global_experts)"));
  EXPECT_THAT(describe_input_errors(kInputErrorBadExpertMap), HasSubstr("expert_map value is outside [-1, num_experts)"));
  EXPECT_THAT(describe_input_errors(kInputErrorBatchedOverflow), HasSubstr("expert_num_tokens value is outside [0, "));
  EXPECT_THAT(describe_input_errors(kInputErrorBadTopkId | kInputErrorBatchedOverflow), HasSubstr("; "));
}

TEST(DiagOmit, KernelNameListsAreTrimmed) {
  EXPECT_EQ(cuda::parse_kernel_names(" moeq_activation_quantize ,,\tmoeq_topk_reduce"),
            (std::vector<std::string>{"moeq_activation_quantize", "moeq_topk_reduce"}));
  EXPECT_TRUE(cuda::parse_kernel_names("").empty());
  EXPECT_TRUE(cuda::parse_kernel_names(" , ").empty());
}

TEST(DiagOmit, ParsesNamesAndLaunchResidues) {
  const auto rules = cuda::parse_diag_omit("moeq_activation,, moeq_moe_gemm@1%2 ");
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].name, "moeq_activation");
  EXPECT_EQ(rules[0].modulus, 1);
  EXPECT_EQ(rules[1].name, "moeq_moe_gemm");
  EXPECT_EQ(rules[1].residue, 1);
  EXPECT_EQ(rules[1].modulus, 2);
  EXPECT_TRUE(cuda::parse_diag_omit("").empty());
}

TEST(DiagOmit, MalformedEntriesNameThemselves) {
  for (const char* bad : {"moeq_moe_gemm@2%2", "moeq_moe_gemm@1", "moeq_moe_gemm@x%2", "moeq_moe_gemm@0%0",
                          "moeq_moe_gemm@%2", "moeq_moe_gemm@0%2junk", "@0%2"}) {
    try {
      cuda::parse_diag_omit(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(bad));
    }
  }
  // A name given twice: the second entry is named.
  EXPECT_THROW(
      {
        try {
          cuda::parse_diag_omit("moeq_x,moeq_x@0%2");
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), ::testing::HasSubstr("'moeq_x@0%2'"));
          throw;
        }
      },
      Error);
}

TEST(EnvInteger, ReadsWholeIntegersInRangeAndNamesTheRest) {
  const char* name = "MOEQ_TEST_ENV_INTEGER";
  unsetenv(name);
  EXPECT_EQ(cuda::env_integer(name, 0, 10, 7), 7);  // unset: the fallback
  setenv(name, "4", 1);
  EXPECT_EQ(cuda::env_integer(name, 0, 10, 7), 4);
  setenv(name, "0", 1);
  EXPECT_EQ(cuda::env_integer(name, 0, 10, 7), 0);  // both bounds are inside
  setenv(name, "10", 1);
  EXPECT_EQ(cuda::env_integer(name, 0, 10, 7), 10);
  setenv(name, "-3", 1);
  EXPECT_EQ(cuda::env_integer(name, -5, 10, 7), -3);
  for (const char* bad : {"", "x", "4x", " 4", "4 ", "+4", "-", "11", "-1", "99999999999999999999999"}) {
    setenv(name, bad, 1);
    try {
      cuda::env_integer(name, 0, 10, 7);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string(name) + " = '" + bad + "'"));
      EXPECT_THAT(e.what(), HasSubstr("[0, 10]"));
    }
  }
  unsetenv(name);
}

}  // namespace
}  // namespace moeq
